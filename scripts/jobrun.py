"""Read (and stop) GRPO runs from their run directories on /data. Runs inside the Ray head pod: job.status,
job.list, job.checkpoints, job.metrics and job.stop embed this file in the script they pipe there.

    python3 - ACTION [RUN_ID]      ACTION: list | status | resolve | checkpoints | log | stop | raylogs

Prints JSON (log: the driver log as is). An empty RUN_ID means the latest submitted run. Standard library
only: it must run on any Python 3 the image has.

A run directory /data/runs/<id>/ holds: job, command, overrides, checkpoint_dir, submitted (epoch seconds),
pid (the supervisor, leader of the driver's process group), driver.log, phase, restarts.json (one entry per
restart: reason, resumed_from_step), failure.json (why it ended failed: class infrastructure or job),
exit_code (at the end), stopped (when job.stop ended it). States: running, succeeded, failed (with exit
code), stopped, lost (pid gone, no code).

raylogs: Ray's session logs that the pods shipped to /data/ray-logs/<pod>/ (they outlive the pods): the files
with errors, newest first, and the tail of each.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

ROOT = os.environ.get("NRG_POD_ROOT", "")
RUNS = Path(f"{ROOT}/data/runs")
STEP_LINE = re.compile(rb"Step (\d+)/(\d+)")  # on the log's bytes: positions are file offsets
EPOCH_LINE = re.compile(rb"=+ Epoch (\d+)/(\d+) =+")
RAY_LOGS = Path(f"{ROOT}/data/ray-logs")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def pod_path(path: str) -> Path:
    """A path as the pod sees it (/data/...) -> where it is here (the same in a real pod)."""
    return Path(f"{ROOT}{path}") if path.startswith("/") else Path(path)


def alive(run: Path) -> int | None:
    """The launcher's pid if it is still running, else None."""
    text = _read(run / "pid")
    if not text or not text.isdigit():
        return None
    pid = int(text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():
        try:
            if str(run) not in cmdline.read_bytes().decode(errors="replace"):
                return None  # the pid was reused by something else
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                return None
        except OSError:
            return None
    return pid


def state_of(run: Path) -> tuple[str, int | None]:
    code = _read(run / "exit_code")
    if alive(run):
        return "running", None
    if (run / "stopped").exists():
        return "stopped", int(code) if code and code.lstrip("-").isdigit() else None
    if code is not None and code.lstrip("-").isdigit():
        return ("succeeded" if int(code) == 0 else "failed"), int(code)
    return "lost", None


def checkpoints(run: Path) -> list[dict]:
    directory = _read(run / "checkpoint_dir")
    if not directory:
        return []
    base = pod_path(directory)
    out = []
    for entry in base.glob("step_*") if base.is_dir() else []:
        if not entry.is_dir() or not entry.name[5:].isdigit():
            continue
        info_text = _read(entry / "training_info.json")
        try:
            info = json.loads(info_text) if info_text else {}
        except ValueError:
            info = {}
        out.append({"step": int(entry.name[5:]), "path": f"{directory.rstrip('/')}/{entry.name}",
                    "training_info": info})
    return sorted(out, key=lambda c: c["step"])


TAIL_BYTES = 262144  # the driver log's last 256 KiB hold its last step line
EPOCH_SCAN_BYTES = 64 * 1024 * 1024  # how far back the epoch's header is looked for (an epoch's log, at most)


def _epoch_before(handle, end: int, limit: int) -> list[tuple[bytes, bytes]]:
    """The `Epoch e/E` headers in the driver log before byte `end`, read backwards a window at a time until one
    is found (an epoch of GSM8K is hundreds of steps; the real driver logs kilobytes per step, with the workers'
    lines Ray forwards, so its header is far behind the last 256 KiB), at most EPOCH_SCAN_BYTES back. Each
    window reaches 256 bytes past its end, for a header cut there, but never to `limit` (the last step line)."""
    stop = max(0, end - EPOCH_SCAN_BYTES)
    while end > stop:
        start = max(stop, end - TAIL_BYTES)
        handle.seek(start)
        found = EPOCH_LINE.findall(handle.read(min(end + 256, limit) - start))
        if found:
            return found
        end = start
    return []


def last_step(run: Path) -> tuple[int | None, int | None]:
    """(step, of) from the driver log's last `Step N/M` (and `Epoch e/E`) lines, counted across epochs: in
    epoch e the printed step restarts at 1, so the run's step is (e - 1) x M + N (the last step from the last
    256 KiB, its epoch's header from as far back as it is)."""
    log = run / "driver.log"
    try:
        with open(log, "rb") as handle:
            start = max(0, log.stat().st_size - TAIL_BYTES)
            handle.seek(start)
            tail = handle.read()
            found = list(STEP_LINE.finditer(tail))
            if not found:
                return None, None
            at = found[-1].start()
            epochs = EPOCH_LINE.findall(tail[:at]) or (_epoch_before(handle, start, start + at) if start else [])
    except OSError:
        return None, None
    step, per_epoch = int(found[-1][1]), int(found[-1][2])
    if epochs:
        epoch, of_epochs = int(epochs[-1][0]), int(epochs[-1][1])
        total = of_epochs * per_epoch
        for line in (_read(run / "overrides") or "").splitlines():
            if line.lstrip("+").startswith("grpo.max_num_steps=") and line.split("=", 1)[1].strip().isdigit():
                total = min(total, int(line.split("=", 1)[1]))
        return (epoch - 1) * per_epoch + step, total
    return step, per_epoch


def _json(path: Path, default):
    text = _read(path)
    try:
        return json.loads(text) if text else default
    except ValueError:
        return default


def describe(run: Path) -> dict:
    state, code = state_of(run)
    step, of = last_step(run)
    ckpts = checkpoints(run)
    submitted = _read(run / "submitted")
    restarts = _json(run / "restarts.json", [])
    failure = _json(run / "failure.json", None) if state == "failed" else None
    config = _json(run / "supervisor.json", {})
    return {
        "id": run.name, "job": _read(run / "job"), "state": state, "exit_code": code,
        "pid": int(_read(run / "pid") or 0) or None, "step": step, "max_steps": of,
        "latest_checkpoint": ckpts[-1]["step"] if ckpts else None,
        "submitted": float(submitted) if submitted else None,
        "run_dir": f"/data/runs/{run.name}", "checkpoint_dir": _read(run / "checkpoint_dir"),
        "phase": _read(run / "phase") if state == "running" else None,
        "restarts": len(restarts), "max_restarts": config.get("max_restarts"), "restart_history": restarts,
        "failure": failure,
    }


def ray_logs(run: Path | None, lines: int = 20) -> dict:
    """Error files under /data/ray-logs (every pod, gone or not), newest first, with their last lines."""
    since = float(_read(run / "submitted") or 0) if run else 0.0
    out = []
    if RAY_LOGS.is_dir():
        for path in RAY_LOGS.glob("*/**/*"):
            try:
                info = path.stat()
            except OSError:
                continue
            if not path.is_file() or info.st_size == 0 or info.st_mtime < since:
                continue
            if not (path.suffix == ".err" or path.name.startswith(("python-core-worker", "raylet.out"))):
                continue
            text = path.read_bytes()[-65536:].decode(errors="replace")
            errors = [ln for ln in text.splitlines() if re.search(r"Error|Traceback|\bE \d|FATAL|Exception", ln)]
            if path.suffix != ".err" and not errors:
                continue
            relative = path.relative_to(RAY_LOGS)
            out.append({"pod": relative.parts[0], "path": f"/data/ray-logs/{relative}", "mtime": info.st_mtime,
                        "tail": text.splitlines()[-lines:]})
    out.sort(key=lambda f: f["mtime"], reverse=True)
    return {"where": "/data/ray-logs/<pod>/", "files": out[:10], "run": run.name if run else None}


def all_runs() -> list[Path]:
    if not RUNS.is_dir():
        return []
    runs = [p for p in RUNS.iterdir() if p.is_dir() and (p / "job").exists()]

    def submitted(p: Path) -> float:
        text = _read(p / "submitted")
        try:
            return float(text) if text else p.stat().st_mtime
        except ValueError:
            return p.stat().st_mtime

    return sorted(runs, key=submitted)


def resolve(run_id: str) -> Path:
    if run_id:
        run = RUNS / run_id
        if not (run / "job").exists():
            raise LookupError(f"no run {run_id!r} in /data/runs (see `invoke job.list`)")
        return run
    runs = all_runs()
    if not runs:
        raise LookupError("no runs yet in /data/runs (start one with `invoke job.submit NAME`)")
    return runs[-1]


def _group_alive(pgid: int) -> bool:
    """Any live (non-zombie) process left in the group? Zombies count as gone: nobody may reap them."""
    proc = Path("/proc")
    if proc.is_dir():
        for stat in proc.glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop(run: Path, grace: float) -> dict:
    """SIGTERM the driver's whole process group, SIGKILL what is left after `grace` seconds, confirm."""
    pid = alive(run)
    if pid is None:
        state, code = state_of(run)
        return {"id": run.name, "stopped": False, "state": state, "exit_code": code,
                "message": f"run {run.name} is not running ({state})"}
    pgid = os.getpgid(pid)
    if pgid == os.getpgrp():
        raise RuntimeError(f"refusing to signal our own process group {pgid}")
    (run / "stopped").write_text(f"{time.time():.0f}\n")
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    killed = False
    if _group_alive(pgid):
        os.killpg(pgid, signal.SIGKILL)
        killed = True
        deadline = time.monotonic() + 10
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
    gone = not _group_alive(pgid)
    return {"id": run.name, "stopped": gone, "pgid": pgid, "sigkill": killed, "state": state_of(run)[0],
            "message": f"run {run.name}: process group {pgid} " + ("is gone" if gone else "is STILL ALIVE")}


def main(argv: list[str]) -> int:
    action = argv[0] if argv else "list"
    run_id = argv[1] if len(argv) > 1 else ""
    try:
        if action == "list":
            print(json.dumps([describe(r) for r in all_runs()]))
        elif action == "status":
            print(json.dumps(describe(resolve(run_id))))
        elif action == "resolve":
            print(resolve(run_id).name)
        elif action == "checkpoints":
            run = resolve(run_id)
            print(json.dumps({"id": run.name, "checkpoint_dir": _read(run / "checkpoint_dir"),
                              "checkpoints": checkpoints(run)}))
        elif action == "log":
            sys.stdout.write((resolve(run_id) / "driver.log").read_text(errors="replace"))
        elif action == "raylogs":
            print(json.dumps(ray_logs(resolve(run_id) if (run_id or all_runs()) else None)))
        elif action == "stop":
            result = stop(resolve(run_id), float(os.environ.get("NRG_STOP_GRACE_SECONDS", "30")))
            print(json.dumps(result))
            return 0 if result["stopped"] or result.get("state") != "running" else 1
        else:
            print(f"unknown action {action!r}", file=sys.stderr)
            return 2
    except LookupError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
