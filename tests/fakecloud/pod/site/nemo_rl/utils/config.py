"""Stand-in for NeMo RL v0.5.0's nemo_rl/utils/config.py (hydra-core and omegaconf are not in the fake pod).

load_config: a recipe and its `defaults:` parents merged, later over earlier, as the real one does.
parse_hydra_overrides: Hydra's rules in struct mode with Hydra 1.3.2's messages (checked against the real
loader with hydra-core 1.3.2 and omegaconf 2.3.0), wrapped in OverridesError as the real one wraps them:
`key=value` only changes a key that exists, `+key=value` only adds a new one, `++key=value` does either; a dict
value `{a: 1}` merges into the existing mapping. Values stay text (enough for the fake).
"""

from __future__ import annotations

from pathlib import Path

import yaml


class OverridesError(Exception):
    """Custom exception for Hydra override parsing errors."""


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_config_with_inheritance(config_path, base_dir=None) -> dict:
    config_path = Path(config_path)
    base_dir = Path(base_dir) if base_dir is not None else config_path.parent
    config = yaml.safe_load(config_path.read_text()) or {}
    defaults = config.pop("defaults", None)
    if defaults is None:
        return config
    merged: dict = {}
    for default in [defaults] if isinstance(defaults, str) else defaults:
        parent = Path(default) if str(default).startswith("/") else base_dir / str(default)
        merged = _merge(merged, load_config_with_inheritance(parent, base_dir))
    return _merge(merged, config)


def load_config(config_path) -> dict:
    return load_config_with_inheritance(config_path)


def _value(text: str):
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        out = {}
        for item in filter(None, (part.strip() for part in text[1:-1].split(","))):
            key, _, value = item.partition(":")
            out[key.strip()] = _value(value)
        return out
    return text


def _apply(cfg: dict, line: str) -> None:
    prefix = "++" if line.startswith("++") else "+" if line.startswith("+") else ""
    key, sep, value = line[len(prefix):].partition("=")
    if not sep or not key:
        raise ValueError(f"Error parsing override '{line}'\nmissing EQUAL at '<EOF>'")
    key = key.split("@", 1)[0]
    parts = key.split(".")
    node = cfg
    for part in parts[:-1]:
        if part not in node or not isinstance(node[part], dict):
            if prefix and (part not in node or node[part] is None):
                node[part] = {}
            else:
                raise ValueError(f"Could not override '{key}'.\nTo append to your config use +{line}")
        node = node[part]
    leaf = parts[-1]
    exists = leaf in node
    if prefix == "" and not exists:
        raise ValueError(f"Could not override '{key}'.\nTo append to your config use +{line}")
    if prefix == "+" and exists:
        raise ValueError(f"Could not append to config. An item is already at '{key}'.\nEither remove + prefix: "
                         f"'{line[1:]}'\nOr add a second + to add or override '{key}': '+{line}'")
    parsed = _value(value)
    if isinstance(parsed, dict) and isinstance(node.get(leaf), dict):
        for name in parsed:
            if name not in node[leaf] and prefix == "":
                raise ValueError(f"Could not override '{key}'.\nTo append to your config use +{line}")
        node[leaf] = _merge(node[leaf], parsed)
    else:
        node[leaf] = parsed


def parse_hydra_overrides(cfg: dict, overrides: list[str]) -> dict:
    try:
        for line in overrides:
            _apply(cfg, line)
        return cfg
    except Exception as e:
        raise OverridesError(f"Failed to parse Hydra overrides: {str(e)}") from e
