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

from . import jobspec

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
NEMO_RL_DIR = "/opt/nemo-rl"
HEAD_CONTAINER = "ray-head"

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
        values = jobspec.effective(list(self.overrides))
        return int(values.get(jobspec.NUM_NODES, "1")) * int(values.get(jobspec.GPUS_PER_NODE, "8"))

    def supervisor_config(self) -> dict:
        from .resources.ray_steps import GPU_QUERY

        return {"max_restarts": self.max_restarts, "gpus_needed": self.gpus_needed,
                "checkpoint_dir": self.checkpoint_dir, "backoff_seconds": BACKOFF_SECONDS,
                "backoff_max_seconds": BACKOFF_MAX_SECONDS, "gpu_wait_seconds": GPU_WAIT_SECONDS,
                "poll_seconds": POLL_SECONDS, "keep_env": KEEP_ENV, "service_link": SERVICE_LINK,
                "gpu_query": GPU_QUERY}

    @property
    def checkpoint_dir(self) -> str:
        return jobspec.effective(list(self.overrides)).get(jobspec.CHECKPOINT_DIR,
                                                            f"{jobspec.run_dir(self.run_id)}/checkpoints")

    @property
    def wandb_chosen(self) -> bool:
        """Did the job or --set decide logger.wandb_enabled? Otherwise the pod decides (WANDB_API_KEY set)."""
        return jobspec.WANDB_ENABLED in jobspec.effective(list(self.overrides))

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
    """The whole submission, as one bash script (see the module docstring)."""
    directory, train, val, _, _ = jobspec.DATASETS[sub.dataset]
    run_dir = jobspec.run_dir(sub.run_id)
    overrides = "\n".join(sub.overrides)
    wandb = "" if sub.wandb_chosen else """\
# W&B logging follows whether the pod has a W&B key (from the Secret); its value is never read here.
if [[ -n "${WANDB_API_KEY:-}" ]]; then
  echo 'logger.wandb_enabled=True' >> "$RUN/overrides"
else
  echo 'logger.wandb_enabled=False' >> "$RUN/overrides"
fi
"""
    access = "" if not sub.gated_model else f"""\
# {sub.gated_model} is gated: check that the pods' HF_TOKEN may download it before anything starts.
{heredoc('"$RUN/check_access.py"', _script_source("check_access.py"), "NRG_CHECK_ACCESS_EOF")}\
uv run python "$RUN/check_access.py" {_q(sub.gated_model)} < /dev/null
"""
    return PREAMBLE + f"""\
main() {{
RUN_ID={_q(sub.run_id)}
JOB={_q(sub.job)}
RUN="$ROOT"{_q(run_dir)}
DATASET="$ROOT"{_q(directory)}
export HF_HOME="$ROOT"{_q(jobspec.HF_HOME)}

if [[ ! -d "$ROOT/data" ]]; then
  echo "error: no /data in the head pod: is lustre-pvc mounted? (see invoke storage.status)" >&2
  exit 1
fi
cd "$ROOT"{_q(NEMO_RL_DIR)}
for file in {_q(sub.entry_point)} {_q(sub.recipe)}; do
  if [[ ! -f "$file" ]]; then
    echo "error: $file is not in this image's NeMo RL (the image's version is kept; nothing is pulled)" >&2
    exit 1
  fi
done

created=no
[[ -d "$RUN" ]] || created=yes
mkdir -p "$RUN" "$HF_HOME" "$DATASET"
# A check that fails leaves no half-made run behind (only a directory this submission created is removed).
started=no
forget_failed_submission() {{
  if [[ $started == no ]]; then
    rm -f "$RUN/overrides.new"
    if [[ $created == yes && ! -e "$RUN/job" ]]; then rm -rf -- "$RUN"; fi
  fi
}}
trap forget_failed_submission EXIT
resumed=no
if [[ -e "$RUN/job" ]]; then
  if [[ "$(cat "$RUN/job")" != "$JOB" ]]; then
    echo "error: run $RUN_ID belongs to job $(cat "$RUN/job"), not $JOB" >&2
    exit 2
  fi
  if [[ -s "$RUN/pid" ]] && kill -0 "$(cat "$RUN/pid")" 2>/dev/null && [[ ! -e "$RUN/exit_code" ]]; then
    echo "error: run $RUN_ID is still running (pid $(cat "$RUN/pid")); invoke job.stop $RUN_ID first" >&2
    exit 2
  fi
  resumed=yes
fi

# GSM8K (config main) as JSONL with the final answer only, prepared once per /data.
if [[ ! -s "$DATASET/"{_q(train)} || ! -s "$DATASET/"{_q(val)} ]]; then
  echo "preparing GSM8K (config main) in {directory}"
{heredoc('"$DATASET/prepare_gsm8k.py"', _script_source("prepare_gsm8k.py"), "NRG_PREPARE_EOF")}\
  uv run python "$DATASET/prepare_gsm8k.py" --out "$DATASET" < /dev/null
fi

# Fail in seconds, not minutes into the run: NeMo RL's own loader on the recipe chain and the overrides.
{heredoc('"$RUN/check_config.py"', _script_source("check_config.py"), "NRG_CHECK_CONFIG_EOF")}\
{heredoc('"$RUN/overrides.new"', overrides, "NRG_OVERRIDES_EOF")}\
uv run python "$RUN/check_config.py" {_q(sub.recipe)} "$RUN/overrides.new" < /dev/null
{access}\
# The run directory: what runs, verbatim, and where its state goes.
rm -f "$RUN/exit_code" "$RUN/stopped" "$RUN/pid" "$RUN/failure.json" "$RUN/phase"
mv "$RUN/overrides.new" "$RUN/overrides"
printf '%s\\n' "$JOB" > "$RUN/job"
printf '%s\\n' {_q(sub.entry_point)} > "$RUN/entry_point"
printf '%s\\n' {_q(sub.recipe)} > "$RUN/recipe"
printf '%s\\n' {_q(sub.checkpoint_dir)} > "$RUN/checkpoint_dir"
{wandb}\
{heredoc('"$RUN/supervisor.json"', json.dumps(sub.supervisor_config(), indent=1), "NRG_SUPERVISOR_JSON_EOF")}\
{heredoc('"$RUN/supervisor.py"', _script_source("supervisor.py"), "NRG_SUPERVISOR_EOF")}\
date +%s > "$RUN/submitted"
date -u +%Y-%m-%dT%H:%M:%SZ >> "$RUN/submissions"
if [[ $resumed == yes ]]; then
  echo "=== nemo-rl-gke: resubmitted; NeMo RL resumes from the latest step_N in the checkpoint dir ===" \\
    >> "$RUN/driver.log"
fi

# Detached: own session and process group, no terminal, stdin from /dev/null; survives the exec client.
setsid nohup python3 "$RUN/supervisor.py" "$RUN" > /dev/null 2>&1 < /dev/null &
for _ in $(seq 1 200); do
  [[ -s "$RUN/pid" ]] && break
  sleep 0.05
done
if [[ ! -s "$RUN/pid" ]]; then
  echo "error: the driver did not start; see {run_dir}/driver.log" >&2
  exit 1
fi
started=yes
echo "started run $RUN_ID (pid $(cat "$RUN/pid"), resumed: $resumed)"
echo "run dir: {run_dir}"
echo "run id: $RUN_ID"
}}
main < /dev/null
"""


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
