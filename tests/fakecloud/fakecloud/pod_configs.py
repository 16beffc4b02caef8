"""The NeMo RL recipe files of the fake pod (/opt/nemo-rl/examples/configs), written when a pod's root is seeded.

Stand-ins, not NeMo RL's files: each recipe has v0.5.0's key paths (the list in nemo_rl_gke/data/
nemo_rl_v0.5.0_keys.yaml, checked against the real loader: FACTS §7) and its `defaults:` chain (8n4g over 8n8g
over grpo_math_1B), and a value only where the stand-in trainer reads one; every other key is null. So the
pod's loader refuses `key=value` on a missing key and `+key=value` on an existing one as Hydra does, and the
trainer runs with the recipe's real step, epoch, validation and checkpoint settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

KEYS_FILE = Path(__file__).resolve().parents[3] / "nemo_rl_gke" / "data" / "nemo_rl_v0.5.0_keys.yaml"
BASE = "grpo_math_1B.yaml"
GEMMA_8N8G = "recipes/llm/grpo-gemma3-27b-it-8n8g-fsdp2tp8-actckpt-long.yaml"
GEMMA_8N4G = "recipes/llm/grpo-gemma3-27b-it-8n4g-fsdp2tp4-actckpt-long.yaml"
# What the stand-in trainer reads, with v0.5.0's values (FACTS §7).
BASE_VALUES: dict[str, Any] = {
    "grpo.max_num_steps": 1000000, "grpo.max_num_epochs": 1, "grpo.num_prompts_per_step": 32,
    "grpo.val_period": 10, "grpo.use_dynamic_sampling": False, "grpo.max_val_samples": 256,
    "checkpointing.enabled": True, "checkpointing.checkpoint_dir": "results/grpo", "checkpointing.save_period": 10,
    "checkpointing.metric_name": "val:accuracy", "checkpointing.keep_top_k": 3, "logger.log_dir": "logs",
    "policy.dtensor_cfg.tensor_parallel_size": 1,
    "policy.make_sequence_length_divisible_by": "${policy.dtensor_cfg.tensor_parallel_size}",
}
# (file, parent relative to the file, values over the parent's)
CHAIN: list[tuple[str, str | None, dict[str, Any]]] = [
    (BASE, None, BASE_VALUES),
    (GEMMA_8N8G, "../../" + BASE, {"grpo.num_prompts_per_step": 64, "grpo.max_num_steps": 20,
                                   "policy.dtensor_cfg.tensor_parallel_size": 8,
                                   "policy.make_sequence_length_divisible_by": 8}),
    (GEMMA_8N4G, "./" + Path(GEMMA_8N8G).name, {"policy.dtensor_cfg.tensor_parallel_size": 4,
                                                "policy.make_sequence_length_divisible_by": 4}),
]


def _tree(paths: list[str], values: dict[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for line in paths:
        path, _, empty = line.partition(" ")
        *parents, leaf = path.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = {} if empty == "{}" else None
    return _with(tree, values)


def _with(tree: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    for key, value in values.items():
        *parents, leaf = key.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def write(configs_dir: Path) -> None:
    """Write the three recipes under configs_dir (…/examples/configs)."""
    import yaml  # only when a pod's root is seeded: every kubectl call imports this module

    paths = [str(p) for p in yaml.safe_load(KEYS_FILE.read_text())["paths"]]
    for name, parent, values in CHAIN:
        body = _tree(paths, values) if parent is None else {"defaults": parent, **_with({}, values)}
        target = configs_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(body, sort_keys=False))
