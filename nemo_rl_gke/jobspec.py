"""Jobs as data: load `jobs/NAME.yaml` into a JobSpec, build the final override list, and validate it. Pure: no
processes, no environment, no network.

The job file's structured fields (topology, batch, steps, dataset) become Hydra overrides; the file's own
`overrides:` come next and `--set` ones last (a later override of the same key replaces the earlier one in
place). Validation reads the effective values back from that final list, so `--set cluster.num_nodes=3` is
checked exactly like a job file asking for 3 nodes, and so is `--set 'cluster={num_nodes:3}'` (Hydra's mapping
form). It also checks every override's key against NeMo RL v0.5.0's recipe chain when the recipe is one we
know (data/nemo_rl_v0.5.0_keys.yaml, the recipes' key paths: key=value needs the key, +key=value must not
have it), and that `steps` fits in `epochs` (an epoch is floor(train rows / prompts per step) steps,
and a run ends at the end of its epochs). The Hydra syntax lives in overrides.py, the rules in jobrules.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .jobrules import cluster_problems, key_problems, rule_problems
from .overrides import (
    CHECKPOINT_DIR,
    COLOCATED,
    GENERATIONS,
    GLOBAL_BATCH,
    GPUS_PER_NODE,
    INFER_GPUS,
    INFER_NODES,
    LOG_DIR,
    MAX_EPOCHS,
    MAX_STEPS,
    NUM_NODES,
    POLICY_TP,
    PROMPTS,
    VLLM_TP,
    effective,
    merge,
    parse_override,
)
from .podpaths import DATASETS, run_dir
from .settings import REPO_ROOT, ConfigError

JOBS_DIR = REPO_ROOT / "jobs"

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_RUN_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
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


def from_dict(name: str, raw: object, *, source: str = "") -> JobSpec:
    """A job file's mapping as a JobSpec, or ConfigError naming the file, the field and the fix."""
    where = Path(source).name if source else f"{name}.yaml"
    if not isinstance(raw, dict):
        raise ConfigError(where, raw, "the job file must be a mapping (see jobs/gemma3-gsm8k.yaml).")
    known = {"description", "entry_point", "recipe", "model", "dataset", "topology", "batch", "steps",
             "epochs", "max_restarts", "step_seconds", "overrides"}
    unknown = sorted(set(raw) - known)
    if unknown:
        allowed = ", ".join(sorted(known))
        raise ConfigError(f"{where}: {unknown[0]}", raw[unknown[0]], f"unknown field; allowed: {allowed}.")
    read = _Fields(where)
    model, topology, batch = read.section(raw, "model"), read.section(raw, "topology"), read.section(raw, "batch")
    dataset = read.text(raw, "dataset", "dataset")
    if dataset not in DATASETS:
        raise ConfigError(f"{where}: dataset", dataset, f"known datasets: {', '.join(DATASETS)}.")
    extra = _extra_overrides(raw, where)
    gpus = read.whole(topology, "gpus_per_node", "topology.gpus_per_node")
    entry_point, recipe = _paths_in_image(read, raw)
    return JobSpec(
        name=name,
        description=str(raw.get("description") or "").strip(),
        entry_point=entry_point,
        recipe=recipe,
        model_name=read.text(model, "name", "model.name"),
        attention_heads=read.whole(model, "attention_heads", "model.attention_heads"),
        kv_heads=read.whole(model, "kv_heads", "model.kv_heads"),
        context_parallel=read.flag(model, "context_parallel", "model.context_parallel"),
        dataset=dataset,
        num_nodes=read.whole(topology, "num_nodes", "topology.num_nodes"),
        gpus_per_node=gpus,
        colocated=read.flag(topology, "colocated", "topology.colocated"),
        inference_nodes=read.whole(topology, "inference_nodes", "topology.inference_nodes", minimum=0, default=0),
        inference_gpus_per_node=read.whole(topology, "inference_gpus_per_node", "topology.inference_gpus_per_node",
                                           default=gpus),
        vllm_tp=read.whole(topology, "vllm_tp", "topology.vllm_tp"),
        policy_tp=read.whole(topology, "policy_tp", "topology.policy_tp"),
        prompts_per_step=read.whole(batch, "prompts_per_step", "batch.prompts_per_step"),
        generations_per_prompt=read.whole(batch, "generations_per_prompt", "batch.generations_per_prompt"),
        train_global_batch_size=read.whole(batch, "train_global_batch_size", "batch.train_global_batch_size"),
        steps=read.whole(raw, "steps", "steps"),
        overrides=tuple(extra),
        path=source,
        epochs=read.whole(raw, "epochs", "epochs", default=1),
        gated=read.flag(model, "gated", "model.gated", default=False),
        max_restarts=read.whole(raw, "max_restarts", "max_restarts", minimum=0, default=3),
        step_seconds=_seconds(raw.get("step_seconds"), f"{where}: step_seconds"),
    )


@dataclass(frozen=True)
class _Fields:
    """Reads one field of a job file, or raises ConfigError naming the file (`where`) and the field."""

    where: str

    def section(self, raw: Mapping[str, object], key: str) -> Mapping[str, object]:
        value = raw.get(key)
        if not isinstance(value, dict):
            raise ConfigError(f"{self.where}: {key}", value,
                              f"`{key}:` must be a mapping (see jobs/gemma3-gsm8k.yaml).")
        return value

    def text(self, mapping: Mapping[str, object], key: str, label: str) -> str:
        value = mapping.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{self.where}: {label}", value, "must be a non-empty string.")
        return value.strip()

    def whole(self, mapping: Mapping[str, object], key: str, label: str, minimum: int = 1,
              default: int | None = None) -> int:
        value = mapping.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"{self.where}: {label}", value, f"must be a whole number >= {minimum}.")
        return value

    def flag(self, mapping: Mapping[str, object], key: str, label: str, default: bool | None = None) -> bool:
        value = mapping.get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(f"{self.where}: {label}", value, "must be true or false.")
        return value


def _extra_overrides(raw: Mapping[str, object], where: str) -> list[str]:
    """The job file's own `overrides:`, each a valid Hydra override."""
    extra = raw.get("overrides") or []
    if not isinstance(extra, list) or not all(isinstance(o, str) for o in extra):
        raise ConfigError(f"{where}: overrides", extra,
                          "must be a list of Hydra override strings (key=value).")
    for text_ in extra:
        parse_override(text_, where=f"{where}: overrides")
    return extra


def _paths_in_image(read: _Fields, raw: Mapping[str, object]) -> tuple[str, str]:
    """entry_point and recipe: paths relative to /opt/nemo-rl inside the image."""
    entry_point = read.text(raw, "entry_point", "entry_point")
    recipe = read.text(raw, "recipe", "recipe")
    for label, value in (("entry_point", entry_point), ("recipe", recipe)):
        if value.startswith("/") or ".." in value.split("/"):
            raise ConfigError(f"{read.where}: {label}", value,
                              "must be a path relative to /opt/nemo-rl inside the image.")
    return entry_point, recipe


def _seconds(value: object, label: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 86400:
        raise ConfigError(label, value, "seconds per training step, a number between 0 and 86400 (or leave it out).")
    return float(value)


# ---- the final override list ----------------------------------------------------------------------------
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


def check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id or ""):
        raise ConfigError("--id", run_id, "a run id has 1-63 lowercase letters, digits, '.', '_' or '-', "
                                          "starting with a letter or digit (e.g. gemma3-gsm8k-1).")
    return run_id


def new_run_id(name: str, stamp: str) -> str:
    """<job>-<UTC timestamp>, e.g. gemma3-gsm8k-20260101-120000 (stamp is given: this module is pure)."""
    return check_run_id(f"{name}-{stamp}"[:63])


# ---- validation ---------------------------------------------------------------------------------------
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
