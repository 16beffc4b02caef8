"""The bash scripts piped into the Ray head pod (`kubectl exec -i HEAD --container=ray-head -- bash`). Pure.

The submission script runs with `set -euo pipefail` and never with xtrace; it holds no secret (the pod has
HF_TOKEN and WANDB_API_KEY from the Secret, through envFrom) and never `git pull`s or `sed`s NeMo RL: the
image's v0.5.0 is what runs. Before anything starts it checks, in seconds, what would otherwise fail minutes
into a run: the overrides against the recipe chain with NeMo RL's own loader (scripts/check_config.py), and
access to a gated model with huggingface_hub's auth_check (scripts/check_access.py). It prepares GSM8K once on
/data, writes the run directory, starts the run's supervisor (scripts/supervisor.py) in its own session
(setsid + nohup, stdin from /dev/null) so it survives the exec client, and returns the run id. The
supervisor runs the NeMo RL driver, output to the driver log, and resumes it after a lost node.

The driver's environment is kept small: NeMo RL v0.5.0 copies the driver's whole os.environ into every Ray
worker's runtime_env (visible in the Ray dashboard). The supervisor drops every variable that is not on
KEEP_ENV: Kubernetes service links, KUBERAY_* and the like go; what the image (NEMO_RL_*, NRL_*, UV_*), Ray,
CUDA, Hugging Face and W&B need stays. HF_TOKEN and WANDB_API_KEY stay too: the driver itself downloads the
tokenizer and logs to W&B, and the workers already hold both from the same Secret.

Paths: in the real pod the data root is /data and the working directory /opt/nemo-rl. The fake cloud's exec
sets NRG_POD_ROOT to a directory standing for the pod's `/`; nothing else differs. Overrides keep the pod
paths (/data/...) verbatim.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from . import jobspec, overrides, podpaths

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
NEMO_RL_DIR = "/opt/nemo-rl"

# Exported variables the driver keeps (a regex over names, for bash's =~); everything else is unset.
KEEP_ENV = (r"^(PATH|HOME|USER|HOSTNAME|LANG|LANGUAGE|LC_[A-Z]+|TZ|TMPDIR|SHELL|TERM|VIRTUAL_ENV"
            r"|PYTHON[A-Z_]*|LD_LIBRARY_PATH|UV_[A-Z0-9_]+|RAY_[A-Z0-9_]+|NRL_[A-Z0-9_]+|NEMO_RL_[A-Z0-9_]+|HF_[A-Z0-9_]+"
            r"|HUGGING_FACE_[A-Z0-9_]+|WANDB_[A-Z0-9_]+|CUDA_[A-Z0-9_]+|NVIDIA_[A-Z0-9_]+|NCCL_[A-Z0-9_]+"
            r"|TORCH_[A-Z0-9_]+|VLLM_[A-Z0-9_]+|TRITON_[A-Z0-9_]+|NRG_[A-Z0-9_]+)$")
# Kubernetes service links (<SVC>_SERVICE_HOST, <SVC>_PORT_8265_TCP...), whatever the service is called; a
# bare <SVC>_PORT is a link when its value is a URL (tcp://...).
SERVICE_LINK = r"_SERVICE_(HOST|PORT)(_[A-Z0-9_]+)?$|_PORT_[0-9]+_(TCP|UDP|SCTP)(_[A-Z]+)?$"
# Between restarts: 30 s, doubling, at most 5 min; then up to 30 min for GKE to give a node back.
BACKOFF_SECONDS, BACKOFF_MAX_SECONDS, GPU_WAIT_SECONDS, POLL_SECONDS = 30, 300, 1800, 10
# While a driver runs, Ray's GPUs are sampled this often: a node lost and replaced before the driver gives up
# (NCCL times out after 10 min) still counts as the infrastructure's failure.
WATCH_SECONDS = 60


class SupervisorConfig(TypedDict):
    """supervisor.json in the run directory: what scripts/supervisor.py reads."""

    max_restarts: int
    gpus_needed: int
    checkpoint_dir: str
    backoff_seconds: int
    backoff_max_seconds: int
    gpu_wait_seconds: int
    poll_seconds: int
    watch_seconds: int
    keep_env: str  # a regex over variable names
    service_link: str  # a regex over variable names
    gpu_query: str  # Python run in the head pod: Ray's GPUs, as JSON


@dataclass(frozen=True)
class Submission:
    run_id: str
    job: str
    entry_point: str
    recipe: str
    overrides: tuple[str, ...]
    dataset: str = "gsm8k"
    max_restarts: int = 3
    gated_model: str = ""  # the model's repo id when it is gated: the pod checks access before starting

    @property
    def gpus_needed(self) -> int:
        values = overrides.effective(list(self.overrides))
        return int(values.get(overrides.NUM_NODES, "1")) * int(values.get(overrides.GPUS_PER_NODE, "8"))

    def supervisor_config(self) -> SupervisorConfig:
        from .resources.ray_steps import GPU_QUERY

        return {"max_restarts": self.max_restarts, "gpus_needed": self.gpus_needed,
                "checkpoint_dir": self.checkpoint_dir, "backoff_seconds": BACKOFF_SECONDS,
                "backoff_max_seconds": BACKOFF_MAX_SECONDS, "gpu_wait_seconds": GPU_WAIT_SECONDS,
                "poll_seconds": POLL_SECONDS, "watch_seconds": WATCH_SECONDS, "keep_env": KEEP_ENV,
                "service_link": SERVICE_LINK, "gpu_query": GPU_QUERY}

    @property
    def checkpoint_dir(self) -> str:
        return overrides.effective(list(self.overrides)).get(overrides.CHECKPOINT_DIR,
                                                            f"{podpaths.run_dir(self.run_id)}/checkpoints")

    @property
    def wandb_chosen(self) -> bool:
        """Did the job or --set decide logger.wandb_enabled? Otherwise the pod decides (WANDB_API_KEY set)."""
        return overrides.WANDB_ENABLED in overrides.effective(list(self.overrides))

    def command(self) -> list[str]:
        """The driver's command line (logger.wandb_enabled is appended in the pod when not chosen here)."""
        return ["uv", "run", "python", self.entry_point, "--config", self.recipe, *self.overrides]


def _q(text: str) -> str:
    return shlex.quote(text)


def heredoc(path_expr: str, body: str, tag: str) -> str:
    """`cat > PATH <<'TAG'` with a quoted delimiter (no expansion at all) that does not occur in the body."""
    lines = body.splitlines()
    while tag in lines:
        tag += "_"
    text = body if body.endswith("\n") or not body else body + "\n"
    return f"cat > {path_expr} <<'{tag}'\n{text}{tag}\n"


def _script_source(name: str) -> str:
    return (SCRIPTS / name).read_text()


STRICT = """\
# nemo-rl-gke: piped into the Ray head pod. Holds no secret; never traced.
set -euo pipefail
set +x
"""
PREAMBLE = STRICT + 'ROOT="${NRG_POD_ROOT:-}"\n'


def submit_script(sub: Submission) -> str:
    """The whole submission, as one bash script: scripts/submit.sh.tmpl with this run's values (quoted)."""
    from .render import render_script

    directory, train, val, _, _ = podpaths.DATASETS[sub.dataset]
    wandb = "" if sub.wandb_chosen else """\
# W&B logging follows whether the pod has a W&B key (from the Secret); its value is never read here.
if [[ -n "${WANDB_API_KEY:-}" ]]; then
  echo 'logger.wandb_enabled=True' >> "$RUN/overrides"
else
  echo 'logger.wandb_enabled=False' >> "$RUN/overrides"
fi"""
    access = "" if not sub.gated_model else (
        f"# {sub.gated_model} is gated: check that the pods' HF_TOKEN may download it before anything starts.\n"
        + heredoc('"$RUN/check_access.py"', _script_source("check_access.py"), "NRG_CHECK_ACCESS_EOF")
        + f'uv run python "$RUN/check_access.py" {_q(sub.gated_model)} < /dev/null')
    values = {
        "RUN_ID": _q(sub.run_id), "JOB": _q(sub.job), "RUN_DIR": _q(podpaths.run_dir(sub.run_id)),
        "DATASET_DIR": _q(directory), "HF_HOME": _q(podpaths.HF_HOME), "NEMO_RL_DIR": _q(NEMO_RL_DIR),
        "ENTRY_POINT": _q(sub.entry_point), "RECIPE": _q(sub.recipe), "TRAIN_FILE": _q(train),
        "VAL_FILE": _q(val), "CHECKPOINT_DIR": _q(sub.checkpoint_dir),
        "WRITE_PREPARE": heredoc('"$DATASET/prepare_gsm8k.py"', _script_source("prepare_gsm8k.py"),
                                 "NRG_PREPARE_EOF").rstrip("\n"),
        "WRITE_CHECK_CONFIG": heredoc('"$RUN/check_config.py"', _script_source("check_config.py"),
                                      "NRG_CHECK_CONFIG_EOF").rstrip("\n"),
        "WRITE_OVERRIDES": heredoc('"$RUN/overrides.new"', "\n".join(sub.overrides), "NRG_OVERRIDES_EOF").rstrip("\n"),
        "CHECK_ACCESS": access, "WANDB": wandb,
        "WRITE_SUPERVISOR_JSON": heredoc('"$RUN/supervisor.json"', json.dumps(sub.supervisor_config(), indent=1),
                                         "NRG_SUPERVISOR_JSON_EOF").rstrip("\n"),
        "WRITE_SUPERVISOR": heredoc('"$RUN/supervisor.py"', _script_source("supervisor.py"),
                                    "NRG_SUPERVISOR_EOF").rstrip("\n"),
    }
    return render_script(_script_source("submit.sh.tmpl"), values, source="scripts/submit.sh.tmpl")


def _jobrun_function() -> str:
    # A function around the heredoc, so that no heredoc ever sits inside $(...).
    source = _script_source("jobrun.py")
    return "jobrun() {\n  python3 - \"$@\" <<'NRG_JOBRUN_EOF'\n" + source + "NRG_JOBRUN_EOF\n}\n"


def reader_script(action: str, run_id: str = "", *, stop_grace_seconds: float = 30) -> str:
    """A read-only question (list/status/resolve/checkpoints/log/raylogs) or stop, answered by scripts/jobrun.py."""
    assert action in ("list", "status", "resolve", "checkpoints", "log", "stop", "raylogs"), action
    if run_id:
        jobspec.check_run_id(run_id)
    grace = f"export NRG_STOP_GRACE_SECONDS={stop_grace_seconds:g}\n" if action == "stop" else ""
    return STRICT + grace + _jobrun_function() + f"jobrun {_q(action)} {_q(run_id)} < /dev/null\n"


def logs_script(run_id: str = "", *, follow: bool = False, lines: int = 200) -> str:
    """The driver log's tail; with follow, until the driver exits (Ctrl-C stops only the client)."""
    if run_id:
        jobspec.check_run_id(run_id)
    body = f"""\
RUN_ID="$(jobrun resolve {_q(run_id)} < /dev/null)"
RUN="$ROOT/data/runs/$RUN_ID"
touch "$RUN/driver.log"
"""
    if follow:
        body += f"""\
pid="$(cat "$RUN/pid" 2>/dev/null || true)"
if [[ -n "$pid" && ! -e "$RUN/exit_code" ]] && kill -0 "$pid" 2>/dev/null; then
  exec tail --lines={lines} --follow=name --retry --pid="$pid" "$RUN/driver.log" < /dev/null
fi
"""
    body += f'exec tail --lines={lines} "$RUN/driver.log" < /dev/null\n'
    return PREAMBLE + _jobrun_function() + body


def sample_scripts() -> dict[str, str]:
    """Every kind of script this module generates, for a sample run of jobs/gemma3-gsm8k.yaml (its gated model
    checked, and not): what shellcheck reads in `nox -s lint` and in the tests."""
    spec = jobspec.load("gemma3-gsm8k")
    overrides = tuple(jobspec.final_overrides(spec, "r"))
    plain = Submission("r", spec.name, spec.entry_point, spec.recipe, overrides)
    gated = Submission("r", spec.name, spec.entry_point, spec.recipe, overrides, gated_model=spec.model_name)
    scripts = {"submit": submit_script(gated), "submit-ungated": submit_script(plain),
               "logs": logs_script("r", follow=True), "logs-latest": logs_script()}
    scripts.update({action: reader_script(action, "r") for action in ("list", "status", "stop", "raylogs")})
    return scripts
