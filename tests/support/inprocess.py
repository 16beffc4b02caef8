"""The fake cloud in-process: `invoke` run inside the test process, the Runner handed a seam that calls the
fake cloud's handlers (tests/fakecloud/fakecloud) directly instead of starting bin/gcloud, bin/kubectl, bin/helm.

Same handlers, same state directory, same calls log, same injected faults as the subprocess path; only the
process start is gone (each fake call was a new Python process: ~0.1-0.3 s, hundreds per `up`). What still needs a
real process gets one: `kubectl exec … -- bash` (the job script: detached jobs, process groups, signals) and any
tool that is not the fake's (gke-gcloud-auth-plugin, a stub a test puts first on PATH, the real helm that
`helm template` calls).

Each run looks like a fresh `python -m invoke`: the environment is exactly the one given, the working directory
is the given one, stdin/stdout/stderr are pipes-like buffers (no terminal), and the project's modules are
imported afresh (module state from an earlier run or test cannot leak in) and put back afterwards. The seam
reaches the Runner explicitly: Invoke's config `runner.tools` (tasks/context.runner passes the `runner` section
to Runner.options), no environment variable.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FAKE_BIN = REPO / "tests" / "fakecloud" / "bin"
if str(FAKE_BIN.parent) not in sys.path:  # the fakecloud package, as bin/gcloud finds it
    sys.path.insert(0, str(FAKE_BIN.parent))
FAKE_TOOLS = ("gcloud", "kubectl", "helm")
# Modules a fresh `python -m invoke` would import anew: the project's and the Invoke collection.
PROJECT_MODULES = ("nemo_rl_gke", "tasks")


class _Pipe(io.StringIO):
    """A captured stream that looks like a pipe: text, UTF-8, not a terminal."""

    encoding = "utf-8"  # type: ignore[assignment]

    def isatty(self) -> bool:
        return False


def needs_process(tool: str, argv: list[str]) -> bool:
    """`kubectl exec … -- bash` runs the job script in a real shell (it detaches drivers and sends signals);
    `kubectl port-forward` listens until a signal ends it."""
    if tool == "kubectl" and "port-forward" in argv:
        return True
    if tool != "kubectl" or "exec" not in argv or "--" not in argv:
        return False
    command = argv[argv.index("--") + 1:]
    return bool(command) and command[0].rsplit("/", 1)[-1] == "bash"


class TimedOut(Exception):
    """The in-process run outlived its timeout: every later fake call raises this."""


@dataclass
class FakeTools:
    """The Runner's process seam (tools.Tools) over the fake cloud's handlers.

    A command whose executable resolves (PATH, then .tools/bin, as the real seam does) to the fake's bin/ is
    dispatched in-process; anything else, and `kubectl exec … -- bash`, runs as a real process."""

    deadline: float = float("inf")
    in_process_calls: int = 0
    process_calls: int = 0

    def __copy__(self) -> FakeTools:  # Invoke copies config values; the seam is one object
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FakeTools:
        return self

    def _in_process(self, argv: list[str]) -> bool:
        from nemo_rl_gke.tools import find_tool

        if time.monotonic() > self.deadline:
            raise TimedOut(f"in-process invoke ran past its timeout; stopped at: {' '.join(argv[:6])}")
        path = Path(find_tool(argv[0]))
        tool = path.name
        return path.parent == FAKE_BIN and tool in FAKE_TOOLS and not needs_process(tool, argv[1:])

    def run(self, argv: list[str], *, stdin: str | None, timeout: float | None) -> Any:
        from fakecloud.main import dispatch
        from nemo_rl_gke.tools import Processes, Ran, tool_environment

        if not self._in_process(argv):
            self.process_calls += 1
            return Processes().run(argv, stdin=stdin, timeout=timeout)
        self.in_process_calls += 1
        out, err = _Pipe(), _Pipe()
        code = dispatch(Path(argv[0]).name, argv[1:], stdin=stdin or "", stdout=out, stderr=err,
                        environ=tool_environment(argv[0], os.environ))
        return Ran(code, out.getvalue(), err.getvalue())

    def end(self, matches: Callable[[list[str]], bool], why: str, *, launched_before: float) -> int:
        """Nothing to end: a handler runs to its end in-process (a stale context's dial timeout is tested with
        real processes, FakeCloud.invoke(process=True))."""
        return 0

    def stream(self, argv: list[str], *, stdin: str | None, out: Callable[[str], None],
               err: Callable[[str], None]) -> int:
        from nemo_rl_gke.tools import Processes

        if not self._in_process(argv):
            self.process_calls += 1
            return Processes().stream(argv, stdin=stdin, out=out, err=err)
        ran = self.run(argv, stdin=stdin, timeout=None)
        for line in ran.stdout.splitlines(keepends=True):
            out(line)
        for line in ran.stderr.splitlines(keepends=True):
            err(line)
        return ran.exit_code


# One in-process run at a time per test process: it swaps process-wide things (environment, cwd, streams).
_ONE_AT_A_TIME = threading.Lock()


@contextmanager
def _like_a_fresh_process(cwd: Path, env: Mapping[str, str], stdin: str) -> Iterator[tuple[_Pipe, _Pipe]]:
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_path, saved_argv = list(sys.path), list(sys.argv)
    saved_modules = {name: module for name, module in sys.modules.items() if _ours(name)}
    for name in saved_modules:
        del sys.modules[name]
    out, err = _Pipe(), _Pipe()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.stdin, sys.stdout, sys.stderr = _Pipe(stdin), out, err
    try:
        yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.path[:], sys.argv[:] = saved_path, saved_argv
        for name in [n for n in sys.modules if _ours(n)]:
            del sys.modules[name]
        sys.modules.update(saved_modules)


def _ours(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in PROJECT_MODULES)


@contextmanager
def _the_invoke_program(runner_section: dict[str, Any]) -> Iterator[Any]:
    """invoke.main.program, the very object `python -m invoke` and the `invoke` command run (tasks.py adjusts
    it: usage errors exit 2), its Config given the runner section for this run and given back afterwards."""
    from invoke import Config
    from invoke.main import program

    class FakeCloudConfig(program.config_class):  # type: ignore[name-defined,misc]
        @staticmethod
        def global_defaults() -> dict[str, Any]:
            defaults = Config.global_defaults()
            defaults["runner"] = dict(runner_section)
            return defaults

    saved = program.config_class
    program.config_class = FakeCloudConfig
    try:
        yield program
    finally:
        program.config_class = saved


def invoke(args: list[str], *, cwd: Path, env: Mapping[str, str], input: str | None = None, timeout: float = 300,
           runner: Mapping[str, Any] | None = None) -> tuple[int, str, str, FakeTools]:
    """`python -m invoke --search-root REPO *args` in this process: (exit code, stdout, stderr, the seam).

    runner: the Invoke config's runner section (poll_seconds, backoff_seconds, ...); `tools` is the seam."""
    tools = FakeTools(deadline=time.monotonic() + timeout)
    section = {**(runner or {}), "tools": tools}
    with _ONE_AT_A_TIME, _like_a_fresh_process(cwd, env, input or "") as (out, err):
        from fakecloud.main import load_handlers

        load_handlers()
        try:
            with _the_invoke_program(section) as program:
                program.run(["invoke", "--search-root", str(REPO), *args])
            code = 0
        except SystemExit as stop:
            code = _exit_code(stop, err)
        except TimedOut:
            code = 124
        except BaseException:  # noqa: BLE001 - what an uncaught exception does to `python -m invoke`
            traceback.print_exc(file=err)
            code = 1
    if code == 124 or time.monotonic() > tools.deadline:
        raise subprocess.TimeoutExpired(["invoke", *args], timeout, out.getvalue(), err.getvalue())
    return code, out.getvalue(), err.getvalue(), tools


def _exit_code(stop: SystemExit, err: _Pipe) -> int:
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code
    err.write(f"{stop.code}\n")  # sys.exit("message"): Python prints it and exits 1
    return 1
