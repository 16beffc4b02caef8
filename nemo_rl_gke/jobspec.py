"""Jobs as data: load `jobs/NAME.yaml`, check Hydra overrides, apply NeMo RL v0.5.0's rules, and build the
final override list. Pure: no processes, no environment, no network.

The job file's structured fields (topology, batch, steps, dataset) become Hydra overrides; the file's own
`overrides:` come next and `--set` ones last (a later override of the same key replaces the earlier one in
place). Validation reads the effective values back from that final list, so `--set cluster.num_nodes=3` is
checked exactly like a job file asking for 3 nodes, and so is `--set 'cluster={num_nodes:3}'` (Hydra's mapping
form). It also checks every override's key against NeMo RL v0.5.0's recipe chain when the recipe is one we
know (data/nemo_rl_v0.5.0_keys.yaml, the recipes' key paths: key=value needs the key, +key=value must not
have it), and that `steps` fits in `epochs` (an epoch is floor(train rows / prompts per step) steps,
and a run ends at the end of its epochs).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from .settings import REPO_ROOT, ConfigError

JOBS_DIR = REPO_ROOT / "jobs"

# Where things live inside the pods (the Lustre volume is mounted at /data on the head and every worker).
DATA = "/data"
RUNS_DIR = f"{DATA}/runs"
# One Hugging Face cache on /data for the pods (the chart's HF_HOME) and the driver alike: NeMo RL copies the
# driver's environment to every worker, so a second path would only split the cache.
HF_HOME = f"{DATA}/huggingface"
DATASETS = {
    # name -> (directory on /data, train file, validation file, input key, output key)
    "gsm8k": (f"{DATA}/datasets/gsm8k", "train.jsonl", "test.jsonl", "question", "answer"),
}
# Rows of each prepared train split (GSM8K config main, train: 7473). NeMo RL's dataloader drops the last
# partial batch, so an epoch is floor(rows / prompts per step) steps (FACTS §7).
TRAIN_ROWS = {"gsm8k": 7473}
# NeMo RL v0.5.0's GRPO recipes we know: their key paths and the few defaults our rules read (FACTS §7).
KEYS_FILE = Path(__file__).resolve().parent / "data" / "nemo_rl_v0.5.0_keys.yaml"
CADENCE_LIMIT_SECONDS = 30 * 60

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_RUN_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
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
# Settings of ours that ride on --set but never reach NeMo RL.
JOB_SETTINGS = ("max_restarts",)


class JobError(ConfigError):
    """A job that must not run: every broken rule, one line each (exit 2 before anything runs)."""

    def __init__(self, problems: list[str], *, subject: str = "job"):
        self.problems = list(problems)
        self.key, self.value, self.fix = subject, None, "; ".join(self.problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        Exception.__init__(self, f"{subject} refused before anything ran:\n{lines}")


@dataclass(frozen=True)
class Override:
    prefix: str  # "", "+" or "++"
    key: str
    value: str
    text: str  # verbatim, as given

    @property
    def bare_key(self) -> str:
        return self.key.split("@", 1)[0]


@dataclass(frozen=True)
class JobSpec:
    name: str
    description: str
    entry_point: str
    recipe: str
    model_name: str
    attention_heads: int
    kv_heads: int
    context_parallel: bool
    dataset: str
    num_nodes: int
    gpus_per_node: int
    colocated: bool
    inference_nodes: int
    inference_gpus_per_node: int
    vllm_tp: int
    policy_tp: int
    prompts_per_step: int
    generations_per_prompt: int
    train_global_batch_size: int
    steps: int
    overrides: tuple[str, ...] = field(default=())
    path: str = ""
    epochs: int = 1
    gated: bool = False
    max_restarts: int = 3
    step_seconds: float | None = None

    @property
    def licence_url(self) -> str:
        return f"https://huggingface.co/{self.model_name}"


# ---- loading ------------------------------------------------------------------------------------------
def available(jobs_dir: Path = JOBS_DIR) -> list[str]:
    return sorted(p.stem for p in Path(jobs_dir).glob("*.yaml"))


def load(name: str, jobs_dir: Path = JOBS_DIR) -> JobSpec:
    """Read jobs/NAME.yaml into a JobSpec, or raise ConfigError naming the file, the field and the fix."""
    import yaml

    jobs_dir = Path(jobs_dir)
    if not _NAME.match(name or ""):
        known = ", ".join(available(jobs_dir))
        raise ConfigError("NAME", name, f"a job name is a file stem in {jobs_dir}: {known}.")
    path = jobs_dir / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(available(jobs_dir)) or "(none)"
        raise ConfigError("NAME", name, f"no {path.name} in {jobs_dir}; known jobs: {known}. Adding a job is "
                                        f"adding a file there.")
    try:
        raw = yaml.safe_load(path.read_bytes().decode("utf-8")) or {}
    except UnicodeDecodeError as exc:
        raise ConfigError(path.name, "", f"not UTF-8 text (byte {exc.start}): save the file as UTF-8.") from None
    except yaml.YAMLError as exc:
        raise ConfigError(path.name, "", f"not valid YAML: {exc}") from None
    return from_dict(name, raw, source=str(path))


def from_dict(name: str, raw: dict, *, source: str = "") -> JobSpec:
    where = Path(source).name if source else f"{name}.yaml"
    if not isinstance(raw, dict):
        raise ConfigError(where, raw, "the job file must be a mapping (see jobs/gemma3-gsm8k.yaml).")
    known = {"description", "entry_point", "recipe", "model", "dataset", "topology", "batch", "steps",
             "epochs", "max_restarts", "step_seconds", "overrides"}
    unknown = sorted(set(raw) - known)
    if unknown:
        allowed = ", ".join(sorted(known))
        raise ConfigError(f"{where}: {unknown[0]}", raw[unknown[0]], f"unknown field; allowed: {allowed}.")

    def section(key: str) -> dict:
        value = raw.get(key)
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: {key}", value,
                              f"`{key}:` must be a mapping (see jobs/gemma3-gsm8k.yaml).")
        return value

    def text(mapping: dict, key: str, label: str) -> str:
        value = mapping.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: {label}", value, "must be a non-empty string.")
        return value.strip()

    def whole(mapping: dict, key: str, label: str, minimum: int = 1, default: int | None = None) -> int:
        value = mapping.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"{where}: {label}", value, f"must be a whole number >= {minimum}.")
        return value

    def flag(mapping: dict, key: str, label: str, default: bool | None = None) -> bool:
        value = mapping.get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {label}", value, "must be true or false.")
        return value

    model, topology, batch = section("model"), section("topology"), section("batch")
    dataset = text(raw, "dataset", "dataset")
    if dataset not in DATASETS:
        raise ConfigError(f"{where}: dataset", dataset, f"known datasets: {', '.join(DATASETS)}.")
    extra = raw.get("overrides") or []
    if not isinstance(extra, list) or not all(isinstance(o, str) for o in extra):
        raise ConfigError(f"{where}: overrides", extra,
                          "must be a list of Hydra override strings (key=value).")
    for text_ in extra:
        parse_override(text_, where=f"{where}: overrides")
    gpus = whole(topology, "gpus_per_node", "topology.gpus_per_node")
    entry_point = text(raw, "entry_point", "entry_point")
    recipe = text(raw, "recipe", "recipe")
    for label, value in (("entry_point", entry_point), ("recipe", recipe)):
        if value.startswith("/") or ".." in value.split("/"):
            raise ConfigError(f"{where}: {label}", value,
                              "must be a path relative to /opt/nemo-rl inside the image.")
    return JobSpec(
        name=name,
        description=str(raw.get("description") or "").strip(),
        entry_point=entry_point,
        recipe=recipe,
        model_name=text(model, "name", "model.name"),
        attention_heads=whole(model, "attention_heads", "model.attention_heads"),
        kv_heads=whole(model, "kv_heads", "model.kv_heads"),
        context_parallel=flag(model, "context_parallel", "model.context_parallel"),
        dataset=dataset,
        num_nodes=whole(topology, "num_nodes", "topology.num_nodes"),
        gpus_per_node=gpus,
        colocated=flag(topology, "colocated", "topology.colocated"),
        inference_nodes=whole(topology, "inference_nodes", "topology.inference_nodes", minimum=0, default=0),
        inference_gpus_per_node=whole(topology, "inference_gpus_per_node", "topology.inference_gpus_per_node",
                                      default=gpus),
        vllm_tp=whole(topology, "vllm_tp", "topology.vllm_tp"),
        policy_tp=whole(topology, "policy_tp", "topology.policy_tp"),
        prompts_per_step=whole(batch, "prompts_per_step", "batch.prompts_per_step"),
        generations_per_prompt=whole(batch, "generations_per_prompt", "batch.generations_per_prompt"),
        train_global_batch_size=whole(batch, "train_global_batch_size", "batch.train_global_batch_size"),
        steps=whole(raw, "steps", "steps"),
        overrides=tuple(extra),
        path=source,
        epochs=whole(raw, "epochs", "epochs", default=1),
        gated=flag(model, "gated", "model.gated", default=False),
        max_restarts=whole(raw, "max_restarts", "max_restarts", minimum=0, default=3),
        step_seconds=_seconds(raw.get("step_seconds"), f"{where}: step_seconds"),
    )


def _seconds(value: object, label: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 86400:
        raise ConfigError(label, value, "seconds per training step, a number between 0 and 86400 (or leave it out).")
    return float(value)


# ---- overrides ----------------------------------------------------------------------------------------
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
            values[key] = _unquote(o.value)
            continue
        try:
            parsed = parse_hydra_value(o.value)
        except ValueError as exc:
            raise ConfigError("--set", o.text, f"cannot read this Hydra value ({exc}), and {governs[0]} must be "
                                          f"checked before the run starts: write it as {governs[0]}=VALUE.") from None
        if isinstance(parsed, dict):
            for leaf, value in _flatten(key, parsed):
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


def _flatten(prefix: str, mapping: dict) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for name, value in mapping.items():
        key = f"{prefix}.{name}"
        out += _flatten(key, value) if isinstance(value, dict) else [(key, value)]
    return out


def parse_hydra_value(text: str) -> object:
    """A Hydra override value: {k: v, ...}, [a, b], quoted or bare primitives (kept as text). Raises ValueError."""
    text = text.strip()
    value, end = _hydra_value(text, 0)
    if text[end:].strip():
        raise ValueError(f"unexpected {text[end:].strip()[:20]!r}")
    return value


def _hydra_value(text: str, i: int) -> tuple[object, int]:
    i = _skip(text, i)
    if i < len(text) and text[i] in "{[":
        closing, is_dict = ("}", True) if text[i] == "{" else ("]", False)
        items: dict[str, object] | list[object] = {} if is_dict else []
        i = _skip(text, i + 1)
        if i < len(text) and text[i] == closing:
            return items, i + 1
        while True:
            if is_dict:
                colon = text.find(":", i)
                if colon < 0:
                    raise ValueError("a mapping entry needs key: value")
                name = text[i:colon].strip()
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
                    raise ValueError(f"bad key {name!r}")
                value, i = _hydra_value(text, colon + 1)
                items[name] = value  # type: ignore[index]
            else:
                value, i = _hydra_value(text, i)
                items.append(value)  # type: ignore[union-attr]
            i = _skip(text, i)
            if i < len(text) and text[i] == ",":
                i = _skip(text, i + 1)
                continue
            if i < len(text) and text[i] == closing:
                return items, i + 1
            raise ValueError(f"missing {closing!r}")
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


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def run_dir(run_id: str) -> str:
    return f"{RUNS_DIR}/{run_id}"


def base_overrides(spec: JobSpec, run_id: str) -> list[str]:
    """The job file's structured fields as Hydra overrides (before its own `overrides:` and --set)."""
    directory, train, val, input_key, output_key = DATASETS[spec.dataset]
    out = [
        f"{NUM_NODES}={spec.num_nodes}",
        f"{GPUS_PER_NODE}={spec.gpus_per_node}",
        f"policy.model_name={spec.model_name}",
        # Recipes pin their own tokenizer (the Gemma 8n8g one: gemma-3-27b-it): it follows the model here.
        f"policy.tokenizer.name={spec.model_name}",
        f"{MAX_STEPS}={spec.steps}",
        f"{MAX_EPOCHS}={spec.epochs}",
        f"{PROMPTS}={spec.prompts_per_step}",
        f"{GENERATIONS}={spec.generations_per_prompt}",
        f"{GLOBAL_BATCH}={spec.train_global_batch_size}",
        f"{COLOCATED}={spec.colocated}",
    ]
    if not spec.colocated:
        out += [f"{INFER_NODES}={spec.inference_nodes if spec.num_nodes > 1 else 1}",
                f"{INFER_GPUS}={spec.gpus_per_node if spec.num_nodes > 1 else spec.inference_gpus_per_node}"]
    out += [
        f"{VLLM_TP}={spec.vllm_tp}",
        f"{POLICY_TP}={spec.policy_tp}",
        # grpo_math_1B's own default, restored: some recipes pin a number that no longer fits their TP.
        "policy.make_sequence_length_divisible_by=${policy.dtensor_cfg.tensor_parallel_size}",
        # GSM8K prepared on /data as JSONL with the final answer only: the verifier then sees real answers.
        "data.dataset_name=ResponseDataset",
        f"+data.train_data_path={directory}/{train}",
        f"+data.val_data_path={directory}/{val}",
        f"+data.input_key={input_key}",
        f"+data.output_key={output_key}",
        f"{CHECKPOINT_DIR}={run_dir(run_id)}/checkpoints",
        f"{LOG_DIR}={run_dir(run_id)}/logs",
        f"logger.wandb.name={run_id}",
    ]
    return out


def final_overrides(spec: JobSpec, run_id: str, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Job fields, then the job file's overrides, then --set ones: what reaches NeMo RL, verbatim."""
    for text in extra:
        parse_override(text)
    return merge(base_overrides(spec, run_id), spec.overrides, list(extra))


def check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id or ""):
        raise ConfigError("--id", run_id, "a run id has 1-63 lowercase letters, digits, '.', '_' or '-', "
                                          "starting with a letter or digit (e.g. gemma3-gsm8k-1).")
    return run_id


def new_run_id(name: str, stamp: str) -> str:
    """<job>-<UTC timestamp>, e.g. gemma3-gsm8k-20260101-120000 (stamp is given: this module is pure)."""
    return check_run_id(f"{name}-{stamp}"[:63])


# ---- NeMo RL v0.5.0 rules -----------------------------------------------------------------------------
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


# ---- the recipe chain's keys (offline) --------------------------------------------------------------------
def _known_recipes() -> dict:
    import yaml

    try:
        facts = yaml.safe_load(KEYS_FILE.read_text())
        return {"recipes": list(facts["recipes"]), "values": dict(facts["values"]), "paths": list(facts["paths"])}
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
        return {"recipes": [], "values": {}, "paths": []}


def recipe_config(recipe: str) -> dict | None:
    """The key tree of a recipe we know (leaves None, or the default our rules read; None for any other
    recipe: the pod checks it)."""
    known = _known_recipes()
    if recipe not in known["recipes"]:
        return None
    tree: dict = {}
    for line in known["paths"]:
        path, _, empty = str(line).partition(" ")
        *parents, leaf = path.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = {} if empty == "{}" else None
    for key, value in (known["values"].get(recipe) or {}).items():
        *parents, leaf = str(key).split(".")
        node = tree
        for part in parents:
            node = node[part]
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
                    for leaf, _ in _flatten(o.bare_key, parsed):
                        if recipe_default(recipe, leaf) is None and not _has_key(config, leaf):
                            p.append(f"{text}: {recipe} has no key {leaf}; Hydra would refuse the merge "
                                     f"(\"Could not override '{o.bare_key}'\").")
            if o.prefix == "+":
                p.append(f"{text}: {o.bare_key} already exists in {recipe}; Hydra refuses '+' on it "
                         f"('Could not append to config'). Use {o.bare_key}=... (or ++{o.bare_key}=...).")
    return p


def _has_key(config: dict, key: str) -> bool:
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


def split_job_settings(extra: list[str] | tuple[str, ...]) -> tuple[list[str], dict[str, int]]:
    """`--set max_restarts=N` is ours (the supervisor's), not NeMo RL's: take it out of the overrides."""
    overrides, settings = [], {}
    for text in extra:
        key, sep, value = text.partition("=")
        if sep and key in JOB_SETTINGS:
            if not re.fullmatch(r"[0-9]{1,3}", value.strip()):
                raise ConfigError(f"--set {key}", value, "a whole number from 0 to 999.")
            settings[key] = int(value)
        else:
            overrides.append(text)
    return overrides, settings


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
                 f"most {gpu_nodes} node(s), or grow it (GPU_NODES={n} invoke cluster.create ray.deploy).")
    if g > gpus_per_node:
        p.append(f"{GPUS_PER_NODE}={g} but a {gpu_name} node has {gpus_per_node} GPUs.")
    if ray_gpus is not None and n * g > ray_gpus:
        p.append(f"the job needs {NUM_NODES}={n} x {GPUS_PER_NODE}={g} = {n * g} GPUs but Ray's ready "
                 f"workers have {ray_gpus}: NeMo RL's placement groups would time out. "
                 f"Check `invoke ray.status`.")
    return p


def validate(spec: JobSpec, overrides: list[str], *, gpu_nodes: int, gpus_per_node: int, gpu_name: str,
             ray_gpus: int | None = None) -> dict[str, str]:
    """Raise JobError listing every broken rule; return the effective values otherwise."""
    values = effective(overrides)
    problems = key_problems(spec.recipe, overrides) + rule_problems(spec, values)
    problems += cluster_problems(values, gpu_nodes=gpu_nodes, gpus_per_node=gpus_per_node, gpu_name=gpu_name,
                                 ray_gpus=ray_gpus)
    if problems:
        raise JobError(problems, subject=f"job {spec.name}")
    return values
