"""manifests/ templates -> YAML text and objects (pure).

Templates use `${NAME}` placeholders. Rendering is strict: an unknown or missing variable raises,
so a manifest can never be applied with a placeholder left in it (the tutorial's network mapping was).
"""

from __future__ import annotations

import re
from string import Template
from typing import Any

from . import names
from .settings import REPO_ROOT, Settings

MANIFESTS = REPO_ROOT / "manifests"
_LEFTOVER = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")


class RenderError(ValueError):
    pass


def render_text(template: str, values: dict[str, object], *, source: str = "template") -> str:
    try:
        text = Template(template).substitute({k: str(v) for k, v in values.items()})
    except KeyError as exc:
        raise RenderError(f"{source}: no value for ${{{exc.args[0]}}}") from None
    except ValueError as exc:
        raise RenderError(f"{source}: {exc}") from None
    leftover = _LEFTOVER.search(text)
    if leftover:
        raise RenderError(f"{source}: unsubstituted {leftover.group(0)}")
    return text


# @{NAME} only: bash's own $VAR, ${VAR} and "$@" pass through untouched. (IGNORECASE: as string.Template,
# whose flags these are, would match it.)
_SCRIPT_PLACEHOLDER = re.compile(r"@\{([A-Z][A-Z0-9_]*)\}", re.IGNORECASE)
_SCRIPT_LEFTOVER = re.compile(r"@\{[A-Za-z_][A-Za-z0-9_]*\}")


def render_script(template: str, values: dict[str, str], *, source: str = "script template") -> str:
    """A shell script template: @{NAME} placeholders, every one given (values are inserted as they are, so
    the caller quotes them), none left over and no value unused."""
    missing = sorted(set(_SCRIPT_LEFTOVER.findall(template)) - {f"@{{{k}}}" for k in values})
    if missing:
        raise RenderError(f"{source}: no value for {missing[0]}")
    unused = sorted(k for k in values if f"@{{{k}}}" not in template)
    if unused:
        raise RenderError(f"{source}: {unused[0]} is not in the template")
    text = _SCRIPT_PLACEHOLDER.sub(lambda match: values[match.group(1)], template)
    leftover = _SCRIPT_LEFTOVER.search(text)
    if leftover and not any(leftover.group(0) in v for v in values.values()):
        raise RenderError(f"{source}: unsubstituted {leftover.group(0)}")
    return text


def render_file(name: str, values: dict[str, object]) -> str:
    path = MANIFESTS / name
    return render_text(path.read_text(), values, source=f"manifests/{name}")


# A plain scalar that Go's YAML parser (helm's and kubectl's: sigs.k8s.io/yaml, YAML 1.1 rules) may read as a
# number, a boolean or null, where PyYAML's writer sees a string it need not quote: "0123456789012345" (a float
# to Go), "123456789012e123", "y", "on". Such strings are written quoted; quoting more than Go needs is harmless.
_GO_NOT_A_STRING = re.compile(r"[-+]?[.0-9].*|y|yes|n|no|on|off|true|false|null|~|", re.IGNORECASE | re.DOTALL)


def go_yaml(doc: Any) -> str:
    """doc as YAML (keys in their order) that helm and kubectl read back with the same types: every string
    they could take for a number, a boolean or null is quoted (PyYAML quotes only what it would misread)."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
        quoted = _GO_NOT_A_STRING.fullmatch(data) and "\n" not in data
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="'" if quoted else None)

    Dumper.add_representer(str, text)
    return yaml.dump(doc, Dumper=Dumper, sort_keys=False)


def load_all(text: str) -> list[dict[str, Any]]:
    import yaml

    return [doc for doc in yaml.safe_load_all(text) if doc]


def network_mapping(s: Settings) -> str:
    return render_file("network-mapping.yaml", {"GVNIC_NETWORK_PREFIX": s.GVNIC_NETWORK_PREFIX,
                                                "RDMA_NETWORK_PREFIX": s.RDMA_NETWORK_PREFIX})


NETWORK_MAPPING_NAMES = ["gvnic-1"] + [f"rdma-{n}" for n in range(names.RDMA_SUBNETS)]
