"""Strict schema checks for rendered manifests, shared by every manifest test.

- `validate_crd(obj, crd_file)`: a custom object against its CRD's openAPIV3Schema, made strict: wherever a
  schema lists `properties` without `x-kubernetes-preserve-unknown-fields`, any other key is an error (the API
  server would silently prune it, which is how a misplaced field, like annotations outside
  `template.metadata`, disappears without a word).
- `validate_builtin(obj)`: a built-in kind with kubernetes-validate, strict (unknown fields are errors).
- `crd_path(name)`: the CRD file under `$NRG_CRD_DIR`, or a pytest skip saying how to get it.

Errors list every violation with its JSON path, so one run shows all that is wrong.
"""

from __future__ import annotations

import copy
import functools
import os
from pathlib import Path
from typing import Any

KUBERNETES_VERSION = "1.31"


class SchemaError(AssertionError):
    """A rendered object does not match its schema."""


def crd_dir() -> Path | None:
    value = os.environ.get("NRG_CRD_DIR")
    return Path(value) if value else None


def crd_path(file_name: str) -> Path:
    """`$NRG_CRD_DIR/<file_name>`; skips the calling test with the reason when it is not there."""
    import pytest

    folder = crd_dir()
    if folder is None:
        pytest.skip("NRG_CRD_DIR is unset: point it at the folder with the pinned CRD schemas "
                    "(shared/crds; CI and `nox` set it)")
    path = folder / file_name
    if not path.is_file():
        pytest.skip(f"NRG_CRD_DIR={folder} has no {file_name}")
    return path


def make_strict(schema: Any) -> Any:
    """A copy of an OpenAPI v3 schema where objects with `properties` reject unknown keys."""
    schema = copy.deepcopy(schema)
    _strictify(schema)
    return schema


def _strictify(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _strictify(item)
        return
    if not isinstance(node, dict):
        return
    if ("properties" in node and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        node["additionalProperties"] = False
    for key in ("properties", "patternProperties", "definitions"):
        for child in (node.get(key) or {}).values():
            _strictify(child)
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict | list):
            _strictify(node[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if isinstance(node.get(key), list):
            _strictify(node[key])


@functools.lru_cache(maxsize=16)
def _load_crd(path: str) -> dict[str, Any]:
    import yaml

    with open(path, encoding="utf-8") as handle:
        # CSafeLoader: the RayCluster CRD is 850 KB and the pure-Python loader takes seconds.
        return yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@functools.lru_cache(maxsize=32)
def _validator(path: str, version: str) -> Any:
    import jsonschema

    crd = _load_crd(path)
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            schema = make_strict(entry["schema"]["openAPIV3Schema"])
            return jsonschema.Draft7Validator(schema)
    known = [entry["name"] for entry in crd["spec"]["versions"]]
    raise SchemaError(f"{path} has no version {version} (it has {known})")


def _where(error: Any) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)


def validate_crd(obj: dict[str, Any], crd_file: str | os.PathLike[str]) -> None:
    """Raise SchemaError listing every violation of the CRD's strict schema (group and kind included)."""
    crd = _load_crd(str(crd_file))
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    api_version = str(obj.get("apiVersion", ""))
    wanted_group, _, version = api_version.rpartition("/")
    problems = []
    if wanted_group != group:
        problems.append(f"$.apiVersion: {api_version!r} is not in group {group}")
    if obj.get("kind") != kind:
        problems.append(f"$.kind: {obj.get('kind')!r} is not {kind}")
    if not problems:
        validator = _validator(str(crd_file), version)
        errors = sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
        problems = [f"{_where(e)}: {e.message}" for e in errors]
    if problems:
        name = (obj.get("metadata") or {}).get("name", "?")
        listing = "\n  ".join(problems)
        raise SchemaError(f"{kind} {name} does not match {Path(crd_file).name} (strict):\n  {listing}")


def validate_builtin(obj: dict[str, Any], version: str = KUBERNETES_VERSION) -> None:
    """Raise SchemaError if a built-in object does not match Kubernetes `version`'s schema (strict)."""
    import kubernetes_validate

    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.SchemaNotFoundError as exc:
        raise SchemaError(f"no Kubernetes {version} schema for {obj.get('apiVersion')} {obj.get('kind')}: "
                          f"{exc.message} (custom kinds go through validate_crd)") from None
    except kubernetes_validate.ValidationError as exc:
        name = (obj.get("metadata") or {}).get("name", "?")
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.path)
        raise SchemaError(f"{obj.get('kind')} {name} does not match Kubernetes {version} (strict): "
                          f"{path}: {exc.message}") from None
