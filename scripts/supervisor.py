"""The supervisor of one GRPO run, inside the Ray head pod: it owns the NeMo RL driver and resumes it after the
infrastructure fails under it (a Spot node taken back), never after the job's own errors.

    python3 supervisor.py RUN_DIR        (started by job.submit with setsid: leader of the run's process group)

The head runs on the CPU pool, which is not Spot, so this process outlives the GPU workers. Each attempt runs
the command in RUN_DIR (entry_point, recipe, overrides) with a small environment (NeMo RL copies the driver's
whole environment to every Ray worker), appending to RUN_DIR/driver.log. When the driver exits non-zero:

- classify(): infrastructure (Ray shows fewer GPUs than the job needs, or the log tail has Ray's node-loss
  lines) or the job's own (config error, exception in user code, out of memory, bad data);
- infrastructure, fewer than max_restarts restarts so far: back off, wait until Ray shows the GPUs again
  (KubeRay recreates the worker when GKE gives a node back), print `resuming run ... from step N after ...` and
  relaunch the same command. NeMo RL resumes from the highest step_N in the run's checkpoint_dir by itself;
- otherwise the run ends: exit_code, and failure.json with the class and the reason.

job.stop writes RUN_DIR/stopped and SIGTERMs the group: a stopped run is never restarted.
Files written: pid, command, driver.log, phase, restarts.json, failure.json, exit_code. Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = os.environ.get("NRG_POD_ROOT", "")
TAIL_BYTES = 65536

# Ray 2.49 / NeMo RL v0.5.0 lines that mean a node (or Ray itself) went away under the job.
INFRA_PATTERNS = [
    r"The actor died because its node has died",
    r"the actor's node was (?:terminated|preempted)",
    r"has been marked dead because the detector has missed too many heartbeats",
    r"ray\.exceptions\.NodeDiedError",
    r"have been lost due to node failure",
    r"The actor is temporarily unavailable",
    r"ray\.exceptions\.LocalRayletDiedError",
    r"Failed to connect to GCS within",
    r"Raylet is terminated",
]
# Symptoms that follow a node loss but also have causes of the job's own: infrastructure only with a shortfall.
SECONDARY_PATTERNS = [
    r"Watchdog caught collective operation timeout",
    r"Not enough GPUs available",
    r"Timed out waiting for placement groups",
]
JOB_PATTERNS = [
    (r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError", "out of GPU memory"),
    (r"Failed to parse Hydra overrides|OverridesError", "a config override NeMo RL refuses"),
    (r"died because of an error raised in its creation task", "an actor failed to start (its __init__ raised)"),
    (r"RayTaskError\((\w+)\)", "an exception in the job's code"),
]
_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Interrupt)\b(?:\(\w+\))?:?.*$")


def classify(code: int, tail: str, gpus: float | None, needed: int,
             shortfall_during: float | None = None) -> tuple[str, str]:
    """('infrastructure' | 'job', reason) for a driver that exited with `code` (pure). `gpus` is what Ray shows
    now; `shortfall_during` the fewest GPUs Ray showed while the attempt ran, if ever fewer than `needed` (a
    node lost and already replaced by the time the driver gave up, e.g. after a 10-minute NCCL timeout)."""
    if gpus is not None and gpus < needed:
        return "infrastructure", f"Ray sees {gpus:g} of the {needed} GPUs the job needs (a GPU node is gone)"
    if shortfall_during is not None:
        return "infrastructure", (f"Ray showed {shortfall_during:g} of the {needed} GPUs the job needs while it ran "
                                  f"(a GPU node was lost)")
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    for pattern in INFRA_PATTERNS:
        for line in lines:
            if re.search(pattern, line):
                return "infrastructure", f"a Ray node was lost ({line[:160]})"
    for pattern, what in JOB_PATTERNS:
        for line in lines:
            if re.search(pattern, line):
                return "job", f"{what}: {line[:160]}"
    if gpus is None:
        for pattern in SECONDARY_PATTERNS:
            for line in lines:
                if re.search(pattern, line):
                    return "infrastructure", f"Ray could not be asked for its GPUs, and: {line[:160]}"
    last = next((line for line in reversed(lines) if _EXCEPTION_LINE.match(line)), None)
    if last:
        return "job", f"the driver failed: {last[:160]}"
    return "job", f"the driver exited with code {code}"


def pod_path(path: str) -> Path:
    return Path(f"{ROOT}{path}") if path.startswith("/") else Path(path)


def latest_step(checkpoint_dir: str) -> int | None:
    """The step NeMo RL resumes from: the highest step_N (tmp_step_N and old_step_N do not count)."""
    base = pod_path(checkpoint_dir)
    steps = [int(p.name[5:]) for p in base.glob("step_*") if re.fullmatch(r"step_\d+", p.name)] if base.is_dir() else []
    return max(steps) if steps else None


def backoff(restarts_so_far: int, base: float, most: float) -> float:
    return min(most, base * (2 ** restarts_so_far))


class Supervisor:
    def __init__(self, run: Path):
        self.run = run
        self.config = json.loads((run / "supervisor.json").read_text())
        self.stopping = False
        self.driver: subprocess.Popen | None = None
        self.fewest_gpus: float | None = None
        knobs = {"backoff_seconds": "NRG_SUPERVISOR_BACKOFF_SECONDS", "poll_seconds": "NRG_SUPERVISOR_POLL_SECONDS",
                 "gpu_wait_seconds": "NRG_SUPERVISOR_GPU_WAIT_SECONDS",
                 "watch_seconds": "NRG_SUPERVISOR_WATCH_SECONDS"}
        for key, env in knobs.items():
            if os.environ.get(env):
                self.config[key] = float(os.environ[env])

    # ---- files -----------------------------------------------------------------------------------------
    def write(self, name: str, text: str) -> None:
        tmp = self.run / f".{name}.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.run / name)

    def log(self, line: str) -> None:
        with open(self.run / "driver.log", "a") as handle:
            handle.write(f"=== nemo-rl-gke: {line} ===\n")

    def phase(self, text: str) -> None:
        self.write("phase", text + "\n")

    # ---- the driver --------------------------------------------------------------------------------------
    def command(self) -> list[str]:
        overrides = [line for line in (self.run / "overrides").read_text().splitlines() if line]
        entry = (self.run / "entry_point").read_text().strip()
        recipe = (self.run / "recipe").read_text().strip()
        return ["uv", "run", "python", entry, "--config", recipe, *overrides]

    def environment(self) -> dict[str, str]:
        keep, links = re.compile(self.config["keep_env"]), re.compile(self.config["service_link"])
        return {name: value for name, value in os.environ.items()
                if keep.search(name) and not links.search(name)
                and not (name.endswith("_PORT") and "://" in value)}

    def attempt(self, cmd: list[str]) -> int:
        self.fewest_gpus = None
        with open(self.run / "driver.log", "ab") as log:
            self.driver = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                           env=self.environment())
        watcher = threading.Thread(target=self.watch, args=(self.driver,), daemon=True)
        watcher.start()
        while True:
            try:
                return self.driver.wait()
            except InterruptedError:
                continue

    def watch(self, driver: subprocess.Popen) -> None:
        """While the driver runs, ask Ray now and then for its GPUs and remember the fewest seen below need."""
        period = float(self.config.get("watch_seconds", 60))
        needed = int(self.config["gpus_needed"])
        while True:
            deadline = time.monotonic() + period
            while time.monotonic() < deadline:
                if driver.poll() is not None:
                    return
                time.sleep(min(0.2, period))
            seen = self.gpus()
            if driver.poll() is not None:
                return
            if seen is not None and seen < needed:
                self.fewest_gpus = seen if self.fewest_gpus is None else min(self.fewest_gpus, seen)

    def gpus(self) -> float | None:
        """What Ray in this pod reports (None when it cannot be asked)."""
        try:
            done = subprocess.run(["python", "-c", self.config["gpu_query"]], capture_output=True, text=True,
                                  timeout=120, env=self.environment(), stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return None
        for line in reversed(done.stdout.strip().splitlines()):
            if line.startswith("{"):
                try:
                    return float(json.loads(line)["gpus"])
                except (ValueError, KeyError):
                    return None
        return None

    def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < deadline:
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    # ---- the loop ----------------------------------------------------------------------------------------
    def on_signal(self, signum: int, _frame: object) -> None:
        self.stopping = True
        if self.driver is not None and self.driver.poll() is None:
            try:
                self.driver.send_signal(signum)
            except ProcessLookupError:
                pass

    def stopped(self) -> bool:
        return self.stopping or (self.run / "stopped").exists()

    def finish(self, code: int, failure: dict | None = None) -> int:
        if failure is not None:
            self.write("failure.json", json.dumps(failure) + "\n")
        self.phase("ended")
        self.write("exit_code", f"{code}\n")
        return code

    def tail_since(self, offset: int) -> str:
        log = self.run / "driver.log"
        with open(log, "rb") as handle:
            handle.seek(max(offset, log.stat().st_size - TAIL_BYTES))
            return handle.read().decode(errors="replace")

    def main(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self.on_signal)
        self.write("pid", f"{os.getpid()}\n")
        cmd = self.command()
        self.write("command", " ".join(_quote(a) for a in cmd) + "\n")
        name, needed = self.run.name, int(self.config["gpus_needed"])
        most, restarts = int(self.config["max_restarts"]), []
        self.write("restarts.json", "[]\n")
        self.log(f"run {name} started {_now()}")
        while True:
            self.phase("running")
            offset = (self.run / "driver.log").stat().st_size
            code = self.attempt(cmd)
            self.log(f"run {name} ended with exit code {code}")
            if code == 0 or self.stopped():
                return self.finish(code)
            self.phase("classifying the failure")
            kind, reason = classify(code, self.tail_since(offset), self.gpus(), needed, self.fewest_gpus)
            if kind == "job":
                self.log(f"run {name} failed: {reason} (the job's own error: not retried)")
                return self.finish(code, {"class": "job", "reason": reason, "exit_code": code,
                                          "restarts": len(restarts)})
            if len(restarts) >= most:
                self.log(f"run {name} failed: {reason}; max_restarts={most} reached, not restarting")
                return self.finish(code, {"class": "infrastructure", "reason": reason, "exit_code": code,
                                          "restarts": len(restarts), "gave_up": f"max_restarts={most} reached"})
            delay = backoff(len(restarts), float(self.config["backoff_seconds"]),
                            float(self.config["backoff_max_seconds"]))
            self.log(f"run {name}: {reason}; restart {len(restarts) + 1} of at most {most} in {delay:g}s, once "
                     f"Ray sees {needed} GPUs")
            self.phase(f"backing off {delay:g}s before restart {len(restarts) + 1}")
            self.sleep(delay)
            if self.stopped():
                return self.finish(code)
            self.phase(f"waiting for Ray to see {needed} GPUs")
            deadline = time.monotonic() + float(self.config["gpu_wait_seconds"])
            while not self.stopped():
                seen = self.gpus()
                if seen is not None and seen >= needed:
                    break
                if time.monotonic() > deadline:
                    why = (f"Ray saw {'no answer' if seen is None else f'{seen:g} GPUs'} for "
                           f"{self.config['gpu_wait_seconds']:g}s after {reason}")
                    self.log(f"run {name} failed: {why}")
                    return self.finish(code, {"class": "infrastructure", "reason": why, "exit_code": code,
                                              "restarts": len(restarts), "gave_up": "the GPUs did not come back"})
                self.sleep(float(self.config["poll_seconds"]))
            if self.stopped():
                return self.finish(code)
            step = latest_step(self.config["checkpoint_dir"])
            restarts.append({"restart": len(restarts) + 1, "reason": reason, "exit_code": code,
                             "resumed_from_step": step or 0, "at": time.time()})
            self.write("restarts.json", json.dumps(restarts) + "\n")
            where = f"from step {step}" if step else "from step 0 (no checkpoint yet)"
            self.log(f"resuming run {name} {where} after {reason} (restart {len(restarts)} of {most})")


def _quote(text: str) -> str:
    return text if re.fullmatch(r"[\w@%+=:,./-]+", text) else "'" + text.replace("'", "'\"'\"'") + "'"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


if __name__ == "__main__":
    sys.exit(Supervisor(Path(sys.argv[1])).main())
