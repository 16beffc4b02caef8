"""Drive the real task code against the fake cloud, fake tools first on PATH.

`FakeCloud.invoke` runs `invoke` in-process by default (tests/support/inprocess.py: the Runner's seam calls the
fake cloud's handlers without starting a process; fast). `FakeCloud(root, processes=True)`, or
`invoke(..., process=True)`, runs `python -m invoke` in a subprocess with bin/gcloud, bin/kubectl, bin/helm as
real processes: for what needs them (secrets in real argv, detached jobs and process groups, interrupts, locks
between two runs, the real gcloud and helm). Both see the same handlers, state directory and calls log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FAKE_BIN = REPO / "tests" / "fakecloud" / "bin"
sys.path.insert(0, str(REPO / "tests" / "fakecloud"))

# Where the processes a test starts (invoke, the fake tools) keep their bytecode, shared by the whole run and the
# next one, as an installed package and gcloud have theirs: a machine that sets PYTHONDONTWRITEBYTECODE (this one
# and its CI do) would otherwise compile the fake tools and our package in every process, ~25 ms each. In the
# user's own cache, not a fixed /tmp path another user of the machine could create first and fill.
PYCACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nemo-rl-gke" / "tests-pycache"

TEST_HF_TOKEN = "hf_PLANTEDsecretVALUE1234"
TEST_WANDB_KEY = "wandbPLANTEDsecretVALUE5678"


def read_env_example() -> dict[str, str]:
    values = {}
    for line in (REPO / ".env.example").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key] = value
    return values


def example_settings() -> Any:
    """The validated Settings of .env.example (what a test builds commands and names from)."""
    from nemo_rl_gke.settings import Settings, coerce, validate

    values = {k: v for k, v in read_env_example().items() if k in Settings.__dataclass_fields__}
    return validate(Settings(**coerce(values)))


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


# The Runner's settings for tests: no pause between polls, no backoff between retries. They reach the Runner
# through Invoke's config (its `runner` section), never through an environment variable the Runner reads.
TEST_RUNNER_OPTIONS: dict[str, Any] = {"poll_seconds": 0, "backoff_seconds": 0}


@dataclass
class FakeCloud:
    """A working directory with a .env, and a fake cloud state directory."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)
    processes: bool = False  # True: every invoke is a real `python -m invoke` subprocess
    # Over TEST_RUNNER_OPTIONS, for every run of this cloud (e.g. {"poll_seconds": 0.2}); invoke(runner=...) per run.
    runner_options: dict[str, Any] = field(default_factory=dict)

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def workdir(self) -> Path:
        return self.root / "work"

    def write_env(self, **values: str) -> None:
        merged = {**read_env_example(), "HF_TOKEN": TEST_HF_TOKEN, "WANDB_API_KEY": TEST_WANDB_KEY, **values}
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / ".env").write_text("".join(f"{k}={v}\n" for k, v in merged.items()))

    def runner_config(self, runner: dict[str, Any] | None = None) -> Path:
        """An Invoke runtime config file with the runner section (for `invoke` subprocesses)."""
        import hashlib

        import yaml

        options = {**TEST_RUNNER_OPTIONS, **self.runner_options, **(runner or {})}
        text = yaml.safe_dump({"runner": options})
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"invoke-runner-{hashlib.sha1(text.encode()).hexdigest()[:8]}.yaml"
        path.write_text(text)
        return path

    def process_env(self, **extra: str) -> dict[str, str]:
        """The environment of an `invoke` run on this cloud (also for tests that start `invoke` themselves):
        fake tools first on PATH, the state directory, a private HOME, and Invoke's runtime config file
        (INVOKE_RUNTIME_CONFIG, Invoke's own variable) with the runner section, and doctor's fake web probes."""
        # Nor the tester's own settings of the tools (CLOUDSDK_AUTH_ACCESS_TOKEN, HELM_*, KUBERC): a test sets them.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKECLOUD_", "ENV_FILE", "INVOKE_",
                                                                        "CLOUDSDK_", "HELM_", "KUBERC", "KUBECTL_"))}
        for key in read_env_example():
            env.pop(key, None)
        # Nor the tester's kubeconfig or cache directory: the run's are under its private HOME (a KUBECONFIG let
        # through had the fake write its contexts into the tester's, and an XDG_CACHE_HOME had two workers' runs
        # share one lock file).
        for key in ("KUBECONFIG", "XDG_CACHE_HOME", "PYTHONDONTWRITEBYTECODE"):
            env.pop(key, None)
        env.setdefault("PYTHONPYCACHEPREFIX", str(PYCACHE))
        env.update({
            "PATH": f"{FAKE_BIN}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "FAKECLOUD_STATE": str(self.state_dir),
            "INVOKE_RUNTIME_CONFIG": str(self.runner_config()),
            "HOME": str(self.root / "home"),
            # The fake cloud has no internet either: doctor's web and credential probes answer from its state.
            "NRG_DOCTOR_PROBES": "fakecloud.doctor_probes:probes",
            "PYTHONPATH": os.pathsep.join(p for p in (str(REPO / "tests" / "fakecloud"), env.get("PYTHONPATH"))
                                          if p),
            **self.env,
            **extra,
        })
        # Every changing task takes the lease in the bucket: the fake cloud has a Cloud Storage of its own,
        # unless the test gives one (STORAGE_EMULATOR_HOST="" means none: the real endpoint's rules, as doctor's).
        if "STORAGE_EMULATOR_HOST" not in env:
            env["STORAGE_EMULATOR_HOST"] = self._storage()
        elif not env["STORAGE_EMULATOR_HOST"]:
            del env["STORAGE_EMULATOR_HOST"]
        return env

    def _storage(self) -> str:
        """The fake cloud's Cloud Storage, when the test gave none: a GCS emulator of its own (started on first
        use, in memory, owned by the fake project's number; a daemon thread, so it ends with the test process)."""
        if getattr(self, "_emulator_host", None) is None:
            from gcp_storage_emulator.server import create_server

            from fakecloud.handlers.gcloud_projects import project_number
            from fakecloud.storage import honour_generation_preconditions
            from support.gcs_emulator import start_on_a_port_of_its_own, stop_in_background

            honour_generation_preconditions()  # as running_emulator does: else a second create takes the lease
            server = create_server("127.0.0.1", 0, in_memory=True,
                                   project_number=project_number(read_env_example()["PROJECT_ID"]))
            server._api.daemon = True  # its serve_forever thread must not keep a pytest run from exiting
            port = start_on_a_port_of_its_own(server)
            self._emulator_host = f"http://127.0.0.1:{port}"
            # Stopped once this cloud is gone: a run's hundreds of emulators held as many loopback ports (and
            # threads) to its end, which made every race on a port found free likelier.
            weakref.finalize(self, stop_in_background, server)
        return str(self._emulator_host)

    def invoke(self, *args: str, input: str | None = None, timeout: float = 300, process: bool | None = None,
               runner: dict[str, Any] | None = None, **extra_env: str) -> Done:
        """`invoke ARGS` in the working directory: in-process unless process=True (or FakeCloud.processes).

        runner: Runner options for this run over the cloud's (e.g. {"poll_seconds": 0.2})."""
        from support import inprocess

        env = self.process_env(**extra_env)
        options = {**TEST_RUNNER_OPTIONS, **self.runner_options, **(runner or {})}
        if not (self.processes if process is None else process):
            env.pop("INVOKE_RUNTIME_CONFIG", None)
            code, out, err, _ = inprocess.invoke(list(args), cwd=self.workdir, env=env, input=input, timeout=timeout,
                                                 runner=options)
            return Done(code, out, err)
        if runner:
            env["INVOKE_RUNTIME_CONFIG"] = str(self.runner_config(runner))
        argv = [sys.executable, "-m", "invoke", "--search-root", str(REPO), *args]
        proc = subprocess.run(argv, cwd=self.workdir, env=env, capture_output=True, text=True, input=input,
                              timeout=timeout)
        return Done(proc.returncode, proc.stdout, proc.stderr)

    def start(self, *args: str, env: dict[str, str] | None = None, **popen: Any) -> subprocess.Popen[Any]:
        """`invoke ARGS` as a real process in the working directory, left running for the caller to read, signal
        and wait for (env: default process_env()). SIGINT reaches it as a terminal's Ctrl-C would, however the
        suite was started: a suite started in the background (`.ci/run &`) hands its children SIGINT ignored, and
        a Python started so never turns it into KeyboardInterrupt. So do SIGTERM and SIGHUP (a suite run under
        `nohup` ignores the hangup, and invoke keeps an ignored signal ignored)."""
        return subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args],
                                cwd=self.workdir, env=env if env is not None else self.process_env(),
                                preexec_fn=signals_as_a_terminal_gives_them, **popen)

    def calls(self) -> list[dict[str, Any]]:
        """The calls logged so far; a last line still being written (another process appends) is left out."""
        path = self.state_dir / "calls.jsonl"
        if not path.exists():
            return []
        text = path.read_text()
        return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines() if line.strip()]

    def mutating_calls(self, since: int = 0) -> list[dict[str, Any]]:
        return [c for c in self.calls()[since:] if c["mutating"]]

    def resources(self) -> dict[str, dict[str, Any]]:
        """The fake cloud's state without bookkeeping (call counters, timestamps), for equality checks."""
        path = self.state_dir / "resources.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        return {kind: {key: _strip(obj) for key, obj in items.items()}
                for kind, items in data.items() if not kind.startswith("_") and items}


def leave_gpu_pool_provisioning(cloud: FakeCloud) -> None:
    """The GPU pool as an interrupted `up` leaves it: deleted, then created again by a gcloud that is killed
    (Ctrl-C) once GKE has the pool; GKE goes on creating it, so it stays PROVISIONING (10 minutes at scale 1)."""
    env = read_env_example()
    where = [f"--cluster={env['CLUSTER_NAME']}", f"--location={env['CONTROL_PLANE_LOCATION']}",
             f"--project={env['PROJECT_ID']}"]
    gone = subprocess.run(["gcloud", "container", "node-pools", "delete", "gpu-pool", *where, "--quiet"],
                          env=cloud.process_env(), cwd=cloud.workdir, capture_output=True, text=True, timeout=60)
    assert gone.returncode == 0, gone.stderr
    _create_again_and_interrupt(cloud, "node-pools", "nodepool")


def leave_cluster_provisioning(cloud: FakeCloud, **env: str) -> None:
    """The cluster as an interrupted `up` leaves it after a delete: created again by a gcloud that is killed once
    GKE has the cluster; GKE goes on, so it stays PROVISIONING, with no endpoint yet (7 minutes at scale 1). env:
    the gcloud's (e.g. another machine's HOME)."""
    _create_again_and_interrupt(cloud, "clusters", "cluster", **env)


def _create_again_and_interrupt(cloud: FakeCloud, group: str, kind: str, **env: str) -> None:
    """Run the run's `gcloud container GROUP create` again at scale 1 and kill it once GKE has the object (kind in
    the fake's state): GKE goes on creating it, PROVISIONING."""
    import time

    (create,) = {tuple(c["argv"]) for c in cloud.calls() if c["tool"] == "gcloud"
                 and c["argv"][:3] == ["container", group, "create"]}
    creating = subprocess.Popen(["gcloud", *create], env=cloud.process_env(FAKECLOUD_TIME_SCALE="1", **env),
                                cwd=cloud.workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not cloud.resources().get(kind) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        creating.kill()
        creating.wait()
    assert next(iter(cloud.resources()[kind].values()))["status"] == "PROVISIONING"


@contextmanager
def gke_ends_creates_once(cloud: FakeCloud, met: Callable[[list[dict[str, Any]]], bool]) -> Iterator[None]:
    """GKE's creates of an interrupted run (PROVISIONING for minutes, `leave_gpu_pool_provisioning`) end when the
    test says so, not at a time a loaded machine may reach first or long after: once met(the calls logged since)
    is true (the call that found one PROVISIONING and made the run wait), a watcher thread ends them (their
    operation's end, `_ready_at`, is now: RUNNING, or ERROR with FAKECLOUD_GKE_CREATE_ERROR)."""
    stop, fired = threading.Event(), threading.Event()
    start = len(cloud.calls())

    def watch() -> None:
        while not stop.wait(0.02):
            try:
                calls = cloud.calls()[start:]
            except ValueError:  # a line a fake tool is writing right now: read again
                continue
            if met(calls):
                end_gke_creates(cloud)
                fired.set()
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
    assert fired.is_set(), "the run never met GKE's create as the test expected (its condition never held)"


def end_gke_creates(cloud: FakeCloud) -> None:
    """GKE's creates still going (PROVISIONING) end now: RUNNING, or ERROR with FAKECLOUD_GKE_CREATE_ERROR."""
    import time

    from fakecloud import core

    with core.State(cloud.state_dir).locked() as data:
        for kind in ("cluster", "nodepool"):
            for obj in data.get(kind, {}).values():
                if obj.get("status") == "PROVISIONING":
                    obj["_ready_at"] = time.time()


def lustre_runs(cloud: FakeCloud) -> Path:
    """/data/runs of the one Lustre instance, as the fake keeps it."""
    (root,) = (cloud.state_dir / "lustre").iterdir()
    return root / "runs"


def plant_run(cloud: FakeCloud, run: str, *, running: bool = False, size: int = 2048) -> None:
    """A finished run (pid and exit code) with one checkpoint of `size` bytes; `running`: a live pid and no exit
    code."""
    step = lustre_runs(cloud) / run / "step_10"
    step.mkdir(parents=True)
    (step / "model.pt").write_bytes(b"w" * size)
    (step.parent / "driver.log").write_text("step 10\n")
    (step.parent / "pid").write_text(f"{os.getpid()}\n")
    if not running:
        (step.parent / "exit_code").write_text("0\n")


def in_a_terminal(cloud: FakeCloud, argv: list[str], answer: str | list[str],
                  before_answer: Callable[[], None] | None = None) -> tuple[int, str, float]:
    """`invoke ARGV` on a pseudo-terminal (a real process, as a user's), answering its [y/N] questions in turn
    (answer: the first's, or a list; "^C" is Ctrl-C, SIGINT to the process; before the last one,
    before_answer(): what happens while the user reads it). Returns (exit code, everything it printed,
    time.time() when the last answer was typed)."""
    import pty
    import select
    import signal
    import time

    main, child = pty.openpty()
    proc = cloud.start(*argv, stdin=child, stdout=child, stderr=child, close_fds=True)
    os.close(child)
    answers = [answer] if isinstance(answer, str) else list(answer)
    printed, answered, given, deadline = b"", 0.0, 0, time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(main, 4096)
                except OSError:  # the child closed the terminal: it has ended
                    break
                if not chunk:
                    break
                printed += chunk
            if answers and printed.count(b"[y/N]") > given:
                if before_answer is not None and len(answers) == 1:
                    before_answer()
                answered, given, typed = time.time(), given + 1, answers.pop(0)
                if typed == "^C":
                    # Once it reads the terminal: between input()'s prompt and its read a SIGINT is noted, not
                    # acted on, and the read then blocks for good (a user's Ctrl-C comes later than that).
                    waited = time.monotonic() + 10
                    while not _reading_the_terminal(proc.pid) and time.monotonic() < waited:
                        time.sleep(0.01)
                    proc.send_signal(signal.SIGINT)
                else:
                    os.write(main, typed.encode() + b"\n")
            if proc.poll() is not None and not ready:
                break
        return proc.wait(timeout=60), printed.decode(errors="replace"), answered
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()


def press_ctrl_c(wait: float) -> None:
    """A real Ctrl-C to this process, then `wait` seconds in which its handler runs (in the main thread)."""
    import signal
    import time

    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(wait)


def signals_as_a_terminal_gives_them() -> None:
    """In a test's child before exec: SIGINT, SIGTERM and SIGHUP at their default, whatever the suite ignores."""
    import signal

    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)


def _stat(pid: int | str) -> list[str]:
    """/proc/PID/stat's fields after the command's name (state, ppid, pgrp, ...); [] for a process gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def running(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's zombie waits for whoever reaps it)."""
    stat = _stat(pid)
    return bool(stat) and stat[0] != "Z"


def live_members(pgid: int) -> list[int]:
    """The running processes of a process group."""
    return [int(p.name) for p in Path("/proc").glob("[0-9]*") if (stat := _stat(p.name))
            and int(stat[2]) == pgid and stat[0] != "Z"]


def children(pid: int, words: str) -> list[int]:
    """The running processes whose parent is pid and whose command line holds words."""
    found = []
    for p in Path("/proc").glob("[0-9]*"):
        stat = _stat(p.name)
        if stat and int(stat[1]) == pid and stat[0] != "Z":
            try:
                if words in (p / "cmdline").read_text().replace("\0", " "):
                    found.append(int(p.name))
            except OSError:
                continue
    return found


def _reading_the_terminal(pid: int) -> bool:
    """Whether a thread of the process sleeps in a terminal read (Linux's wchan; True where /proc lacks it)."""
    try:
        return any((task / "wchan").read_text() in ("wait_woken", "n_tty_read")
                   for task in Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return not Path("/proc").exists()


def on_screen(printed: str, width: int = 80) -> str:
    """What a terminal shows after `printed` (a pseudo-terminal's bytes, decoded: cursor moves and erases
    applied, by pyte), as one line of text with runs of blanks made one space (so wrapped lines read on)."""
    import re

    import pyte

    screen = pyte.Screen(width, 2000)
    pyte.Stream(screen).feed(printed)
    return re.sub(r"\s+", " ", "".join(screen.display))


def follow(stream: Any, until: str = "") -> tuple[list[str], threading.Event, threading.Thread]:
    """A started process's output read as it comes, by a reader thread: (its lines so far, set once a line holds
    `until` (never when ""), the thread, to join once the process has ended)."""
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        for line in stream:
            lines.append(line)
            if until and until in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return lines, seen, reader


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items()
                if not k.startswith("_") and k not in ("creationTimestamp", "createTime", "resourceVersion", "uid")}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj
