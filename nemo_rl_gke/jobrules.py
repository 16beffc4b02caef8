"""NeMo RL v0.5.0's rules for a job (pure): topology and batch sizes, steps against epochs, the job against the
deployed Ray cluster, how much a preemption costs at the checkpoint cadence, and the recipe chain's keys.

Each rule reads the effective values of the final override list (overrides.effective) and returns one message
per broken rule, naming the numbers; jobspec.validate turns them into one JobError. The recipes' key paths and
the few defaults the rules read ship as data/nemo_rl_v0.5.0_keys.yaml (FACTS §7).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from .overrides import (
    COLOCATED,
    GENERATIONS,
    GLOBAL_BATCH,
    GPUS_PER_NODE,
    INFER_GPUS,
    INFER_NODES,
    MAX_EPOCHS,
    MAX_STEPS,
    NUM_NODES,
    POLICY_CP,
    POLICY_TP,
    PROMPTS,
    SAVE_PERIOD,
    TRAIN_DATA,
    VLLM_PP,
    VLLM_TP,
    flatten,
    parse_hydra_value,
    parse_override,
)
from .podpaths import DATASETS, TRAIN_ROWS

if TYPE_CHECKING:
    from .jobspec import JobSpec

# NeMo RL v0.5.0's GRPO recipes we know: their key paths and the few defaults our rules read (FACTS §7).
KEYS_FILE = Path(__file__).resolve().parent / "data" / "nemo_rl_v0.5.0_keys.yaml"
CADENCE_LIMIT_SECONDS = 30 * 60
# A recipe's key tree: mappings down to leaves (None, or the default our rules read).
RecipeTree = dict[str, object]


# ---- topology, batch and epochs -------------------------------------------------------------------------
def _int(values: dict[str, str], key: str, problems: list[str], minimum: int = 1) -> int | None:
    raw = values.get(key)
    if raw is None:
        problems.append(f"{key} is not set; the job must give it.")
        return None
    if not re.fullmatch(r"[0-9]+", raw) or int(raw) < minimum:
        problems.append(f"{key}={raw} must be a whole number >= {minimum}.")
        return None
    return int(raw)


def _bool(values: dict[str, str], key: str, problems: list[str]) -> bool | None:
    raw = values.get(key, "").lower()
    if raw in ("true", "false"):
        return raw == "true"
    problems.append(f"{key}={values.get(key)} must be true or false.")
    return None


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def rule_problems(spec: JobSpec, values: dict[str, str]) -> list[str]:
    """Every NeMo RL v0.5.0 rule the effective values break, one message each, naming the numbers."""
    p: list[str] = []
    nodes, gpus = _int(values, NUM_NODES, p), _int(values, GPUS_PER_NODE, p)
    colocated = _bool(values, COLOCATED, p)
    vllm_tp, vllm_pp = _int(values, VLLM_TP, p), _int(values, VLLM_PP, p)
    tp, cp = _int(values, POLICY_TP, p), _int(values, POLICY_CP, p)
    prompts, gens, gbs = _int(values, PROMPTS, p), _int(values, GENERATIONS, p), _int(values, GLOBAL_BATCH, p)
    steps, epochs = _int(values, MAX_STEPS, p), _int(values, MAX_EPOCHS, p)
    p += _epoch_problems(spec, values, steps, epochs, prompts)
    if None in (nodes, gpus, colocated):
        return p
    assert nodes is not None and gpus is not None
    vllm_world = train_world = nodes * gpus
    vllm_where = train_where = f"{nodes} node(s) x {gpus} GPUs"
    if not colocated:
        infer_nodes = _int(values, INFER_NODES, p, minimum=0) if INFER_NODES in values else 0
        infer_gpus = _int(values, INFER_GPUS, p, minimum=0) if INFER_GPUS in values else 0
        if infer_nodes is None or infer_gpus is None:
            return p
        if nodes > 1:
            if infer_nodes == 0:
                p.append(f"{INFER_NODES}={infer_nodes}: with {COLOCATED}=False and {NUM_NODES}={nodes}, "
                         f"vLLM needs at least 1 node of its own.")
            if infer_gpus != gpus:
                p.append(f"{INFER_GPUS}={infer_gpus} must equal {GPUS_PER_NODE}={gpus} when vLLM runs on "
                         f"whole nodes ({NUM_NODES}={nodes}).")
            train_nodes = nodes - infer_nodes
            if infer_nodes > 0 and train_nodes <= 0:
                p.append(f"{NUM_NODES}={nodes} minus {infer_nodes} inference node(s) leaves {train_nodes} "
                         f"node(s) to train on; give vLLM fewer nodes or the job more.")
            vllm_world, vllm_where = infer_nodes * gpus, f"{infer_nodes} node(s) x {gpus} GPUs"
            left = max(train_nodes, 0)
            train_world, train_where = left * gpus, f"{left} node(s) x {gpus} GPUs"
        else:
            if not 0 < infer_gpus < gpus:
                p.append(f"{INFER_GPUS}={infer_gpus}: on one node vLLM needs between 1 and {gpus - 1} of the "
                         f"{GPUS_PER_NODE}={gpus} GPUs, leaving the rest to train on.")
            vllm_world, vllm_where = infer_gpus, f"{infer_gpus} GPUs"
            train_world, train_where = gpus - infer_gpus, f"{gpus} - {infer_gpus} GPUs"
    if vllm_tp and vllm_pp and vllm_world > 0 and vllm_world % (vllm_tp * vllm_pp):
        p.append(f"vLLM runs on {vllm_where} = {vllm_world} GPUs, not divisible by {VLLM_TP}={vllm_tp} x "
                 f"{VLLM_PP}={vllm_pp} = {vllm_tp * vllm_pp}.")
    # DTensor in v0.5.0 has no pipeline parallelism (no policy.dtensor_cfg.pipeline_parallel_size key).
    if tp and cp and train_world > 0 and train_world % (tp * cp):
        p.append(f"the policy trains on {train_where} = {train_world} GPUs, not divisible by "
                 f"{POLICY_TP}={tp} x {POLICY_CP}={cp} = {tp * cp}.")
    heads, kv = spec.attention_heads, spec.kv_heads
    for key, size in ((VLLM_TP, vllm_tp), (POLICY_TP, tp)):
        if size and (heads % size or kv % size):
            p.append(f"{key}={size} must divide {spec.model_name}'s {heads} attention heads and {kv} KV "
                     f"heads; use one of {_divisors(math.gcd(heads, kv))}.")
    if cp and cp > 1 and not spec.context_parallel:
        p.append(f"{POLICY_CP}={cp}: {spec.model_name} has no context parallelism in NeMo RL v0.5.0; use 1.")
    if prompts and gens and gbs and (prompts * gens) % gbs:
        why = "no optimizer step would ever happen." if prompts * gens < gbs else "the remainder is wasted."
        p.append(f"{PROMPTS}={prompts} x {GENERATIONS}={gens} = {prompts * gens} samples per step is not a "
                 f"multiple of {GLOBAL_BATCH}={gbs}: {why} Use a multiple of {gbs}.")
    return p


def _epoch_problems(spec: JobSpec, values: dict[str, str], steps: int | None, epochs: int | None,
                    prompts: int | None) -> list[str]:
    """A run ends at the end of its epochs whatever max_num_steps says: refuse steps it would never reach."""
    rows = TRAIN_ROWS.get(spec.dataset)
    directory, train, *_ = DATASETS[spec.dataset]
    if not (rows and steps and epochs and prompts) or values.get(TRAIN_DATA) != f"{directory}/{train}":
        return []
    per_epoch = rows // prompts
    most = epochs * per_epoch
    if steps <= most:
        return []
    need = -(-steps // per_epoch) if per_epoch else None
    fix = (f"set epochs: {need} in the job file (--set {MAX_EPOCHS}={need}) or ask for at most {most} steps"
           if need else f"ask for at most {rows} prompts per step")
    return [f"{MAX_STEPS}={steps} but {MAX_EPOCHS}={epochs} x floor({rows} {spec.dataset} train rows / "
            f"{PROMPTS}={prompts}) = {epochs} x {per_epoch} = {most} steps: the run would end at step {most}. "
            f"{fix[0].upper()}{fix[1:]}."]


def cluster_problems(values: dict[str, str], *, gpu_nodes: int, gpus_per_node: int, gpu_name: str,
                     ray_gpus: int | None = None) -> list[str]:
    """The job against the deployed Ray cluster: GPU_NODES workers of gpus_per_node GPUs, and Ray's view."""
    p: list[str] = []
    nodes, gpus = values.get(NUM_NODES, ""), values.get(GPUS_PER_NODE, "")
    if not (nodes.isdigit() and gpus.isdigit()):
        return p
    n, g = int(nodes), int(gpus)
    if n > gpu_nodes:
        p.append(f"{NUM_NODES}={n} but the Ray cluster has GPU_NODES={gpu_nodes} GPU worker(s): ask for at "
                 f"most {gpu_nodes} node(s), or grow it: set GPU_NODES={n} in .env, then `invoke up --resize`.")
    if g > gpus_per_node:
        p.append(f"{GPUS_PER_NODE}={g} but a {gpu_name} node has {gpus_per_node} GPUs.")
    if ray_gpus is not None and n * g > ray_gpus:
        p.append(f"the job needs {NUM_NODES}={n} x {GPUS_PER_NODE}={g} = {n * g} GPUs but Ray's ready "
                 f"workers have {ray_gpus}: NeMo RL's placement groups would time out. "
                 f"Check `invoke ray.status`.")
    return p


def cadence_warning(spec: JobSpec, values: dict[str, str]) -> str | None:
    """How much work one preemption would cost at this checkpointing.save_period, when it is over 30 min."""
    if not spec.step_seconds:
        return None
    raw = values.get(SAVE_PERIOD) or recipe_default(spec.recipe, SAVE_PERIOD) or "10"
    steps_raw = values.get(MAX_STEPS, str(spec.steps))
    if not (raw.isdigit() and steps_raw.isdigit()) or int(raw) < 1:
        return None
    period, steps = int(raw), int(steps_raw)
    lost_steps = min(period, steps)
    lost = lost_steps * spec.step_seconds
    if lost <= CADENCE_LIMIT_SECONDS:
        return None
    better = max(1, int(CADENCE_LIMIT_SECONDS // spec.step_seconds))
    return (f"warning: {SAVE_PERIOD}={period} at about {spec.step_seconds:g} s per step (step_seconds in "
            f"{spec.name}.yaml): a preempted Spot node would cost up to {lost_steps} steps, "
            f"{lost / 60:.0f} min of work. Checkpoint more often: --set {SAVE_PERIOD}={better}.")


# ---- the recipe chain's keys (offline) --------------------------------------------------------------------
class KnownRecipes(TypedDict):
    """data/nemo_rl_v0.5.0_keys.yaml: the recipes we know, their key paths, and the defaults our rules read."""

    recipes: list[str]
    values: dict[str, dict[str, object]]  # recipe -> dotted key -> default
    paths: list[str]  # "a.b.c" (a leaf) or "a.b {}" (an empty mapping)


def _known_recipes() -> KnownRecipes:
    import yaml

    try:
        facts = yaml.safe_load(KEYS_FILE.read_text())
        return {"recipes": list(facts["recipes"]), "values": dict(facts["values"]), "paths": list(facts["paths"])}
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
        return {"recipes": [], "values": {}, "paths": []}


def recipe_config(recipe: str) -> RecipeTree | None:
    """The key tree of a recipe we know (leaves None, or the default our rules read; None for any other
    recipe: the pod checks it)."""
    known = _known_recipes()
    if recipe not in known["recipes"]:
        return None
    tree: RecipeTree = {}
    for line in known["paths"]:
        path, _, empty = str(line).partition(" ")
        *parents, leaf = path.split(".")
        node = tree
        for part in parents:
            child = node.setdefault(part, {})
            assert isinstance(child, dict)  # the paths list parents before their leaves
            node = child
        node[leaf] = {} if empty == "{}" else None
    for key, value in (known["values"].get(recipe) or {}).items():
        *parents, leaf = str(key).split(".")
        node = tree
        for part in parents:
            child = node[part]
            assert isinstance(child, dict)  # a default sits at a leaf of the paths
            node = child
        node[leaf] = value
    return tree


def key_problems(recipe: str, overrides: list[str] | tuple[str, ...]) -> list[str]:
    """Overrides Hydra would refuse against the recipe chain: key=value on a missing key, +key on an existing one."""
    import difflib

    config = recipe_config(recipe)
    if config is None:
        return []
    p: list[str] = []
    for text in overrides:
        o = parse_override(text)
        if o.prefix == "++" or "@" in o.key or "/" in o.key:
            continue
        node: object = config
        parts = o.bare_key.split(".")
        for depth, part in enumerate(parts):
            if not isinstance(node, dict):
                node = None  # under a leaf (null or a value): only Hydra can tell
                break
            if part not in node:
                if o.prefix == "+":
                    node = None
                    break
                where = ".".join(parts[:depth]) or "the top level"
                close = difflib.get_close_matches(part, [str(k) for k in node], n=3)
                hint = (f" Did you mean {', '.join('.'.join([*parts[:depth], c]) for c in close)}?" if close
                        else f" {where} has: {', '.join(sorted(map(str, node)))[:200]}.")
                p.append(f"{text}: NeMo RL v0.5.0's {recipe} (with its parents) has no key {o.bare_key}, so "
                         f"Hydra would stop the run at start (\"Could not override '{o.bare_key}'\").{hint} To add a "
                         f"key the code reads, write +{o.bare_key}=...")
                break
            node = node[part]
        else:
            if o.prefix == "" and isinstance(node, dict) and o.value.strip().startswith("{"):
                try:
                    parsed = parse_hydra_value(o.value)
                except ValueError:
                    parsed = None
                if isinstance(parsed, dict):
                    for leaf, _ in flatten(o.bare_key, parsed):
                        if recipe_default(recipe, leaf) is None and not _has_key(config, leaf):
                            p.append(f"{text}: {recipe} has no key {leaf}; Hydra would refuse the merge "
                                     f"(\"Could not override '{o.bare_key}'\").")
            if o.prefix == "+":
                p.append(f"{text}: {o.bare_key} already exists in {recipe}; Hydra refuses '+' on it "
                         f"('Could not append to config'). Use {o.bare_key}=... (or ++{o.bare_key}=...).")
    return p


def _has_key(config: RecipeTree, key: str) -> bool:
    node: object = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def recipe_default(recipe: str, key: str) -> str | None:
    node: object = recipe_config(recipe)
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return None if isinstance(node, dict | list) or node is None else str(node)
