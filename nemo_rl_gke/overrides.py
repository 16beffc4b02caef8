"""Hydra overrides (pure): parse one (key=value, +key=value, ++key=value), merge layers of them, read a
Hydra value ({k: v}, [a, b], quoted or bare), and the effective values of the NeMo RL keys our rules read.

The keys are NeMo RL v0.5.0's (FACTS §7); jobrules.py holds the rules over them, jobspec.py the job files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .settings import ConfigError

# Hydra override: optional + or ++, a dotted key (with optional @package), '=', any value on one line.
_OVERRIDE = re.compile(r"^(?P<prefix>\+\+|\+)?(?P<key>[A-Za-z_][A-Za-z0-9_-]*(?:[./][A-Za-z0-9_-]+)*"
                       r"(?:@[A-Za-z0-9_.-]+)?)=(?P<value>.*)$", re.DOTALL)

# Effective keys validation reads, and their NeMo RL defaults when nothing sets them.
NUM_NODES = "cluster.num_nodes"
GPUS_PER_NODE = "cluster.gpus_per_node"
COLOCATED = "policy.generation.colocated.enabled"
INFER_NODES = "policy.generation.colocated.resources.num_nodes"
INFER_GPUS = "policy.generation.colocated.resources.gpus_per_node"
VLLM_TP = "policy.generation.vllm_cfg.tensor_parallel_size"
VLLM_PP = "policy.generation.vllm_cfg.pipeline_parallel_size"
POLICY_TP = "policy.dtensor_cfg.tensor_parallel_size"
POLICY_CP = "policy.dtensor_cfg.context_parallel_size"
PROMPTS = "grpo.num_prompts_per_step"
GENERATIONS = "grpo.num_generations_per_prompt"
GLOBAL_BATCH = "policy.train_global_batch_size"
MAX_STEPS = "grpo.max_num_steps"
MAX_EPOCHS = "grpo.max_num_epochs"
SAVE_PERIOD = "checkpointing.save_period"
TRAIN_DATA = "data.train_data_path"
CHECKPOINT_DIR = "checkpointing.checkpoint_dir"
LOG_DIR = "logger.log_dir"
WANDB_ENABLED = "logger.wandb_enabled"
DEFAULTS = {VLLM_PP: "1", POLICY_CP: "1", MAX_EPOCHS: "1"}
# Keys validation reads: a dict- or list-valued override of one of them (or of a parent) is parsed here.
GOVERNED = (NUM_NODES, GPUS_PER_NODE, COLOCATED, INFER_NODES, INFER_GPUS, VLLM_TP, VLLM_PP, POLICY_TP, POLICY_CP,
            PROMPTS, GENERATIONS, GLOBAL_BATCH, MAX_STEPS, MAX_EPOCHS, SAVE_PERIOD)

# A Hydra value as parse_hydra_value reads it: primitives stay text.
HydraValue = str | list["HydraValue"] | dict[str, "HydraValue"]


@dataclass(frozen=True)
class Override:
    prefix: str  # "", "+" or "++"
    key: str
    value: str
    text: str  # verbatim, as given

    @property
    def bare_key(self) -> str:
        return self.key.split("@", 1)[0]


def parse_override(text: str, *, where: str = "--set") -> Override:
    """One Hydra override: key=value, +key=value or ++key=value; anything else is a usage error."""
    if "\n" in text or "\r" in text or "\0" in text:
        raise ConfigError(where, text.replace("\n", "\\n"),
                          "an override is one line: no newline or NUL in it.")
    match = _OVERRIDE.match(text)
    if not match:
        raise ConfigError(where, text, "use the Hydra forms key=value (change an existing key), +key=value "
                                       "(add a new key) or ++key=value (add or change); keys are dotted "
                                       "names like grpo.max_num_steps.")
    return Override(match["prefix"] or "", match["key"], match["value"], text)


def merge(*layers: list[str] | tuple[str, ...]) -> list[str]:
    """Later overrides of the same key replace earlier ones in place; the text stays verbatim."""
    out: list[str] = []
    position: dict[str, int] = {}
    for layer in layers:
        for text in layer:
            key = parse_override(text).bare_key
            if key in position:
                out[position[key]] = text
            else:
                position[key] = len(out)
                out.append(text)
    return out


def effective(overrides: list[str]) -> dict[str, str]:
    """bare key -> value as the final override list sets it (over NeMo RL defaults we rely on).

    A dict value (`cluster={num_nodes:4,gpus_per_node:8}`) sets its leaves the way Hydra merges it, so a key
    validation governs is read the same whichever form set it; a governed key that cannot be read that way
    (a list, a scalar over a whole section, Hydra syntax we cannot parse) is a ConfigError."""
    values = dict(DEFAULTS)
    for text in overrides:
        o = parse_override(text)
        key = o.bare_key
        governs = [g for g in GOVERNED if g == key or g.startswith(key + ".")]
        if not governs:
            values[key] = unquote(o.value)
            continue
        try:
            parsed = parse_hydra_value(o.value)
        except ValueError as exc:
            raise ConfigError("--set", o.text, f"cannot read this Hydra value ({exc}), and {governs[0]} must be "
                                          f"checked before the run starts: write it as {governs[0]}=VALUE.") from None
        if isinstance(parsed, dict):
            for leaf, value in flatten(key, parsed):
                deeper = next((g for g in GOVERNED if leaf.startswith(g + ".")), None)
                if deeper:
                    raise ConfigError("--set", o.text, f"{deeper} is validated and must be a single value, "
                                                       f"not a mapping.")
                if isinstance(value, list | dict):
                    raise ConfigError("--set", o.text, f"{leaf} is validated and must be a single value, not "
                                                  f"{'a list' if isinstance(value, list) else 'a mapping'}.")
                values[leaf] = value
        elif isinstance(parsed, list) or key != governs[0]:
            raise ConfigError("--set", o.text, f"{key} holds {', '.join(governs)}: give "
                                          f"{'a mapping {...}' if key != governs[0] else 'one value'}, or set "
                                          f"{governs[0]}=VALUE.")
        else:
            values[key] = parsed
    return values


def flatten(prefix: str, mapping: dict[str, HydraValue]) -> list[tuple[str, HydraValue]]:
    """A Hydra mapping's leaves as (dotted key, value), in order."""
    out: list[tuple[str, HydraValue]] = []
    for name, value in mapping.items():
        key = f"{prefix}.{name}"
        out += flatten(key, value) if isinstance(value, dict) else [(key, value)]
    return out


def parse_hydra_value(text: str) -> HydraValue:
    """A Hydra override value: {k: v, ...}, [a, b], quoted or bare primitives (kept as text). Raises ValueError."""
    text = text.strip()
    value, end = _hydra_value(text, 0)
    if text[end:].strip():
        raise ValueError(f"unexpected {text[end:].strip()[:20]!r}")
    return value


def _hydra_value(text: str, i: int) -> tuple[HydraValue, int]:
    i = _skip(text, i)
    if i < len(text) and text[i] in "{[":
        return _hydra_collection(text, i)
    if i < len(text) and text[i] in "'\"":
        end = text.find(text[i], i + 1)
        if end < 0:
            raise ValueError("unterminated quote")
        return text[i + 1:end], end + 1
    start = i
    while i < len(text) and text[i] not in ",]}":
        if text[i] in "{[":
            raise ValueError(f"unexpected {text[i]!r}")
        i += 1
    return text[start:i].strip(), i


def _hydra_collection(text: str, i: int) -> tuple[HydraValue, int]:
    """{k: v, ...} or [a, b, ...] starting at text[i]."""
    closing, is_dict = ("}", True) if text[i] == "{" else ("]", False)
    mapping: dict[str, HydraValue] = {}
    items: list[HydraValue] = []
    i = _skip(text, i + 1)
    if i < len(text) and text[i] == closing:
        return (mapping if is_dict else items), i + 1
    while True:
        if is_dict:
            colon = text.find(":", i)
            if colon < 0:
                raise ValueError("a mapping entry needs key: value")
            name = text[i:colon].strip()
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
                raise ValueError(f"bad key {name!r}")
            value, i = _hydra_value(text, colon + 1)
            mapping[name] = value
        else:
            value, i = _hydra_value(text, i)
            items.append(value)
        i = _skip(text, i)
        if i < len(text) and text[i] == ",":
            i = _skip(text, i + 1)
            continue
        if i < len(text) and text[i] == closing:
            return (mapping if is_dict else items), i + 1
        raise ValueError(f"missing {closing!r}")


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def unquote(value: str) -> str:
    """A bare Hydra value without its surrounding quotes, if any."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value
