"""What the job tasks show: a run as text (job.status, job.list's table) and as the --json document, the latest
run for the top-level `status`, and --plot's file checked before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..resources import head_pod
from ..settings import Settings

if TYPE_CHECKING:
    from ..runner import Runner


def runs_rows(runs: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    from datetime import UTC, datetime

    rows: list[tuple[str, ...]] = []
    for run in runs:
        submitted = run.get("submitted")
        when = datetime.fromtimestamp(submitted, UTC).strftime("%Y-%m-%d %H:%M") if submitted else "-"
        latest = run.get("latest_checkpoint")
        rows.append((run["id"], run.get("job") or "-", state_text(run), step_text(run),
                     "-" if latest is None else str(latest), str(run.get("restarts") or 0), when))
    return rows


def state_text(run: dict[str, Any]) -> str:
    if run["state"] == "failed":
        return f"failed (exit code {run['exit_code']})"
    return str(run["state"])


def status_lines(run: dict[str, Any]) -> list[str]:
    """job.status's text: state, step, checkpoint, restarts and why it failed; every figure is in `run`."""
    lines = [f"run {run['id']} ({run.get('job')}): {state_text(run)}"]
    if run.get("phase") and run["phase"] not in ("running", "ended"):
        lines.append(f"  now: {run['phase']}")
    lines.append(f"  step: {step_text(run)}, latest checkpoint: "
                 f"{run['latest_checkpoint'] if run.get('latest_checkpoint') is not None else '-'}")
    most = run.get("max_restarts")
    lines.append(f"  restarts: {run.get('restarts') or 0}" + (f" (at most {most})" if most is not None else ""))
    for restart in run.get("restart_history") or []:
        lines.append(f"    {restart['restart']}: resumed from step {restart.get('resumed_from_step', 0)} after "
                     f"{restart.get('reason')}")
    failure = run.get("failure")
    if failure:
        kind = "the job's own error, not retried" if failure.get("class") == "job" else "infrastructure"
        lines.append(f"  failed because: {failure.get('reason')} ({kind}"
                     + (f"; {failure['gave_up']}" if failure.get("gave_up") else "") + ")")
    lines.append(f"  run dir: {run['run_dir']}, checkpoints: {run.get('checkpoint_dir') or '-'}")
    return lines


def step_text(run: dict[str, Any]) -> str:
    if run.get("step") is None:
        return "-"
    return f"{run['step']}/{run['max_steps']}" if run.get("max_steps") else str(run["step"])


RUN_FIELDS = ("id", "job", "state", "exit_code", "phase", "step", "max_steps", "latest_checkpoint", "restarts",
              "max_restarts", "restart_history", "failure", "submitted", "run_dir", "checkpoint_dir")


def run_document(run: dict[str, Any]) -> dict[str, Any]:
    """One run for --json: the documented fields, in a fixed order (missing ones null); `submitted` as ISO-8601."""
    from datetime import UTC, datetime

    out = {name: run.get(name) for name in RUN_FIELDS}
    if isinstance(out["submitted"], int | float):
        out["submitted"] = datetime.fromtimestamp(out["submitted"], UTC).isoformat().replace("+00:00", "Z")
    out["restart_history"] = out["restart_history"] or []
    out["restarts"] = out["restarts"] or 0
    return out


def plot_path(plot: str | bool) -> Path:
    """--plot's file, checked before anything runs: a .png in a directory that exists and can be written."""
    import os
    from pathlib import Path

    from ..settings import ConfigError

    path = Path("metrics-latest.png") if plot is True else Path(str(plot))
    if path.is_dir():
        raise ConfigError("--plot", str(plot), f"{path} is a directory: give a file, e.g. {path / 'metrics.png'}.")
    if path.suffix.lower() != ".png":
        raise ConfigError("--plot", str(plot), "the plot is a PNG: give a file name ending in .png.")
    parent = path.parent
    if not parent.is_dir():
        raise ConfigError("--plot", str(plot), f"the directory {parent} does not exist: create it or pick another.")
    if not os.access(parent, os.W_OK):
        raise ConfigError("--plot", str(plot), f"the directory {parent} is not writable.")
    return path


def latest_run(r: Runner, s: Settings) -> dict[str, Any] | None:
    """The latest run as `run_document` shapes it; None on a dry run or when there is no run (or no head). A
    command that failed (kubectl could not list or reach the pods) is raised, as latest_summary does: that is no
    answer, not "no run" (status --json said null, which a script reads as no job)."""
    import json

    from .. import jobscript
    from ..tools import CommandFailed, ToolError

    if r.dry:
        return None
    try:
        result = head_pod.ask(r, s, jobscript.reader_script("status", ""))
    except CommandFailed:
        raise
    except ToolError:
        return None
    return run_document(json.loads(result.stdout))


def latest_summary(r: Runner, s: Settings) -> list[str]:
    """One line for the top-level `status`: the latest run's state and step. No run, or no head to ask: none,
    and why; a command that failed (kubectl could not list or reach the pods) is raised: that is no answer."""
    import json

    from .. import jobscript
    from ..tools import CommandFailed, ToolError

    if r.dry:
        return []
    try:
        result = head_pod.ask(r, s, jobscript.reader_script("status", ""))
    except CommandFailed:
        raise
    except ToolError as exc:
        return [f"latest job: none ({str(exc).splitlines()[0]})"]
    run = json.loads(result.stdout)
    return [f"latest job: {run['id']} ({run.get('job')}): {state_text(run)}, step {step_text(run)}"]
