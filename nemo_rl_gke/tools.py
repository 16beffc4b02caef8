"""The one process seam: the only code that starts processes. `Tools` is what the Runner hands each argv to;
`Processes`, the real one, starts it with `sh` (never a shell string), the executable resolved at call time
(PATH, then this checkout's .tools/bin). Tests hand the Runner another `Tools` (the fake cloud in-process).
ToolError is how a failed command reaches the tasks."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

INSTALL_HINTS = {
    "gcloud": "install the Google Cloud CLI: https://cloud.google.com/sdk/docs/install",
    "kubectl": "run `gcloud components install kubectl` or install kubectl from your package manager",
    "helm": "install helm 3.14 or later: https://helm.sh/docs/intro/install/ (or run `python scripts/fetch_helm.py`)",
    "gke-gcloud-auth-plugin": "run `gcloud components install gke-gcloud-auth-plugin`",
}


# What a tool reads from its environment that would change how we read its answers, or which cluster it talks
# to, set (a value) or taken out (None) for each of its runs, whatever the user's shell or configuration says.
# gcloud: an environment variable outranks `gcloud config set`. We read its output, which
# core/user_output_enabled=false drops (every --format=json list then read as empty: `down` took the cluster,
# Lustre and the VPCs for gone); its warnings, which core/verbosity=error drops ("List results may be
# incomplete"); and its messages as the text "ERROR: (gcloud.…) …", which core/show_structured_logs turns into
# JSON, core/console_log_format=detailed starts with a time, and core/print_handled_tracebacks follows with a
# crash report; core/log_http writes response bodies among them. kubectl and helm get the same settings for the
# gcloud that the gke-gcloud-auth-plugin runs (`gcloud config config-helper --format=json`, to fetch a token).
# helm (pkg/cli/environment.go): HELM_KUBEAPISERVER and its kind outrank the --kube-context we name, and would
# send the release to another server or as another user; HELM_DRIVER keeps releases where another machine's
# helm does not look; HELM_DEBUG ends every error with a Go stack trace, which hid helm's own words (we show and
# read a failure's last lines). kubectl (1.34+) applies the `defaults` of the user's kuberc to every command: one for
# `delete --interactive` made each of our deletes ask, read no answer, print "deletion is cancelled" and exit 0,
# deleting nothing; a `namespace`, `cluster` or `dry-run` default changes where or whether a call acts.
# KUBERC=off turns kuberc off for our calls (its credential-plugin allowlist too: our context runs the
# gke-gcloud-auth-plugin that `gcloud container clusters get-credentials` wrote into it).
GCLOUD_PRINTS: dict[str, str | None] = {
    "CLOUDSDK_CORE_USER_OUTPUT_ENABLED": "true", "CLOUDSDK_CORE_VERBOSITY": "warning",
    "CLOUDSDK_CORE_SHOW_STRUCTURED_LOGS": "never", "CLOUDSDK_CORE_CONSOLE_LOG_FORMAT": "standard",
    "CLOUDSDK_CORE_PRINT_HANDLED_TRACEBACKS": "false", "CLOUDSDK_CORE_LOG_HTTP": "false"}
# What `gcloud container clusters get-credentials` writes into the kubeconfig: with USE_GKE_GCLOUD_AUTH_PLUGIN=False
# the removed `auth-provider: gcp` (every kubectl and helm call then fails: "The gcp auth plugin has been
# removed"), with container/use_client_certificate a client certificate most clusters do not issue.
TOOL_ENVIRONMENT: dict[str, dict[str, str | None]] = {
    "gcloud": {**GCLOUD_PRINTS, "USE_GKE_GCLOUD_AUTH_PLUGIN": None,
               "CLOUDSDK_CONTAINER_USE_CLIENT_CERTIFICATE": "false"},
    "kubectl": {**GCLOUD_PRINTS, "KUBERC": "off"},
    "helm": {**GCLOUD_PRINTS, **dict.fromkeys(("HELM_KUBEAPISERVER", "HELM_KUBETOKEN", "HELM_KUBEASUSER",
                                               "HELM_KUBEASGROUPS", "HELM_KUBECAFILE", "HELM_KUBETLS_SERVER_NAME",
                                               "HELM_KUBEINSECURE_SKIP_TLS_VERIFY", "HELM_DRIVER", "HELM_DEBUG"))},
}


def tool_environment(tool: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment `tool` (argv[0]) runs with: environ, with TOOL_ENVIRONMENT's settings for it."""
    env = dict(environ)
    for name, value in TOOL_ENVIRONMENT.get(Path(tool).name, {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


# Tools fetched for this checkout (`python scripts/fetch_helm.py` puts helm here): searched after PATH.
PROJECT_TOOLS = Path(__file__).resolve().parents[1] / ".tools" / "bin"


class Ended(KeyboardInterrupt):
    """SIGTERM or SIGHUP reached the run (tasks/context.ended_like_ctrl_c): it ends the way Ctrl-C ends it."""


class ToolError(Exception):
    """An external command failed; exit_code is the tool's own."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code or 1


class CommandFailed(ToolError):
    """A command that ran and failed (Runner.failure): the message names it, then the tool's last lines; said is
    all the tool said on stderr (redacted). stopped: this run ended it (its why in said), the tool answered
    nothing: exit 1, and never an answer such as "not found"."""

    def __init__(self, message: str, exit_code: int, *, said: str = "", stopped: bool = False):
        super().__init__(message, exit_code)
        self.said = said
        self.stopped = stopped


class MissingTool(ToolError):
    def __init__(self, tool: str):
        hint = INSTALL_HINTS.get(tool, f"install {tool} and put it on PATH")
        super().__init__(f"{tool} is not on PATH: {hint}.", 127)
        self.tool = tool


def find_tool(tool: str) -> str:
    """The executable for tool, resolved now: PATH first, then this checkout's .tools/bin. MissingTool if neither."""
    if os.sep in tool:
        return tool
    search = os.pathsep.join(p for p in (os.environ.get("PATH", ""), str(PROJECT_TOOLS)) if p)
    found = shutil.which(tool, path=search)
    if found is None:
        raise MissingTool(tool)
    return found


@dataclass
class Ran:
    """What the seam reports for one finished command."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    signal: int = 0  # the signal that ended it from outside (the OOM killer, a kill, Ctrl-C); 0: none
    stopped: bool = False  # `end` ended it (exit ENDED, why on stderr): not the tool's own 143


class Tools(Protocol):
    """The one process seam: run a command to the end, or stream its output lines as they come."""

    def run(self, argv: list[str], *, stdin: str | None, timeout: float | None) -> Ran: ...

    def stream(self, argv: list[str], *, stdin: str | None, out: Callable[[str], bool | None],
               err: Callable[[str], None]) -> int:
        """out returns True once nobody reads the output any more: the command is ended, READER_GONE."""
        ...

    def end(self, matches: Callable[[list[str]], bool], why: str, *, launched_before: float) -> int:
        """End the running commands (`run`) whose argv matches and that were launched before that time
        (time.monotonic()); each answers Ran(ENDED, "", why). How many were running."""
        ...


class Processes:
    """The real seam: each command is a process started with `sh`, the executable resolved at call time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[int, tuple[list[str], float, Any]] = {}  # id -> argv, launched, process
        self._ended: dict[int, str] = {}  # id -> why `end` ended it
        self._streaming: dict[int, Any] = {}  # id -> a streaming process (for end_every_tool)
        self._ends: list[tuple[Callable[[list[str]], bool], str, float]] = []
        _SEAMS.append(weakref.ref(self, _forget_seam))  # one step: no lock needed

    def run(self, argv: list[str], *, stdin: str | None, timeout: float | None) -> Ran:
        """The timeout is our own timer, not sh's `_timeout`: given one, sh notices the end of the process only
        at its next 0.1 s tick, so every command with a timeout took up to 0.1 s longer than it ran."""
        import sh

        launched = time.monotonic()
        key: int | None = None
        timer: _Deadline | None = None
        proc: Any = None
        try:
            with deferring():  # a signal's raise held meanwhile comes at its end, inside this try
                proc = _start(argv, _in=stdin, _tty_out=False)
                key = self._register(argv, launched, proc)
            timer = _Deadline(proc, timeout)
            proc.wait()
        except sh.SignalException:
            if timer is not None and timer.fired:
                return Ran(124, "", f"timed out after {timeout:.0f} s")
            with self._lock:
                why = self._ended.get(key) if key is not None else None
            if why is None:  # killed from outside (the OOM killer, a kill): the shell's 128 + signal
                return Ran(_signalled(proc), _text(proc.stdout), _signal_line(proc, _text(proc.stderr)),
                           signal=abs(int(proc.exit_code)))
            return Ran(ENDED, "", why, stopped=True)
        except KeyboardInterrupt:  # no one waits for it now: end it (a Ctrl-C held over its start, at the
            if proc is not None:  # block's end, came before it was in the terminal's group, and never reached it)
                _terminate(proc)  # and see it gone (briefly: a tool's own Ctrl-C ending), not outlive invoke
                with suppress(Exception):
                    proc.wait(timeout=2)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            if key is not None:
                with self._lock:
                    self._running.pop(key, None)
                    self._ended.pop(key, None)
        return Ran(proc.exit_code, _text(proc.stdout), _text(proc.stderr))

    def end(self, matches: Callable[[list[str]], bool], why: str, *, launched_before: float) -> int:
        with self._lock:
            self._ends.append((matches, why, launched_before))
            doomed = [key for key, (argv, launched, _) in self._running.items()
                      if launched < launched_before and matches(argv)]
            for key in doomed:
                self._ended[key] = why
            procs = [self._running[key][2] for key in doomed]
        for proc in procs:
            _terminate(proc)
        return len(procs)

    def _register(self, argv: list[str], launched: float, proc: Any) -> int:
        """Track a running command; one an `end` already covers (launched before it, registered after its
        scan) is ended at once."""
        key = id(proc)
        with self._lock:
            self._running[key] = (argv, launched, proc)
            why = next((w for m, w, before in self._ends if launched < before and m(argv)), None)
            why = why or (_EVERY[0] if _EVERY else None)  # after end_every_tool's look (it was set before)
            if why is not None:
                self._ended[key] = why
        if why is not None:
            _terminate(proc)
        return key

    def stream(self, argv: list[str], *, stdin: str | None, out: Callable[[str], bool | None],
               err: Callable[[str], None]) -> int:
        """Ctrl-C stops the local command only: 130. Its reader gone (out says so): ended, READER_GONE."""
        import sh

        gone = threading.Event()
        started: list[Any] = []

        def line(text: str) -> bool | None:
            if not out(text):
                return None
            gone.set()
            if started:
                _terminate(started[0])
            return True  # sh: no more lines to this callback

        proc: Any = None
        try:
            with deferring():  # a signal's raise held meanwhile comes at its end, inside this try
                proc = _start(argv, _in=stdin, _out=line, _err=err)
                started.append(proc)
                with self._lock:
                    self._streaming[id(proc)] = proc
                if gone.is_set() or _EVERY:  # its first line came before the append; or the run is being ended
                    _terminate(proc)
            proc.wait()
        except sh.SignalException:
            if not gone.is_set():  # killed from outside: the shell's 128 + signal, said on stderr
                err(_signal_line(proc, ""))
                return _signalled(proc)
        except KeyboardInterrupt as stop:
            if proc is not None:
                _terminate(proc)
            if isinstance(stop, Ended) or _EVERY:  # SIGTERM, SIGHUP: the whole run ends, not only this command
                raise
            CTRL_C.clear()  # taken here: the run goes on, and its next Ctrl-C is a first one
            return 130
        finally:
            if proc is not None:
                with self._lock:
                    self._streaming.pop(id(proc), None)
        return READER_GONE if gone.is_set() else int(proc.exit_code)


# Every seam of this process, and why end_every_tool ended them all (set once: what starts later ends at once).
_SEAMS: list[weakref.ref[Processes]] = []
_EVERY: list[str] = []
# The Ctrl-Cs of this run since the last one a stream took (tasks/context.ended_like_ctrl_c counts them): the
# second, while the first's ending is under way, is said (AGAIN: by the live board if one is drawing, which
# would draw over a line written under it) and not raised, so it cannot cut that ending short.
CTRL_C: list[int] = []
AGAIN = ("interrupted again: still stopping what was under way (and letting go of the lock, if this task holds it); "
         "Ctrl-C once more leaves at once (the lock may then stay until it expires).")
# How deep this thread is in `deferring` blocks, and what a signal's handler held meanwhile: the handler runs in
# the main thread, so only the main thread's own outermost block raises it.
_deferring = threading.local()


def _forget_seam(ref: weakref.ref[Processes]) -> None:
    try:
        _SEAMS.remove(ref)
    except ValueError:  # not there (a test replaced the list)
        pass


def ending() -> bool:
    """Whether end_every_tool has ended this process's commands (its run is ending)."""
    return bool(_EVERY)


def raise_unless_deferred(stop: BaseException) -> None:
    """For a signal's handler, which runs in the main thread: raise stop now, or, inside a `deferring` block of
    that thread, at the block's end. Raised between a command's fork and its registration it would leave a
    process no one knows of, or land in a fork hook that ignores it (logging's); in the lease's take or release,
    a lease held for 3 hours."""
    if getattr(_deferring, "depth", 0):
        _deferring.held = stop
        return
    raise stop


def holding() -> bool:
    """Whether a signal's raise waits for the end of this thread's `deferring` block (and will replace any error
    the block ends with: say that error before, if it matters)."""
    return getattr(_deferring, "held", None) is not None


@contextmanager
def deferring() -> Iterator[None]:
    """A step a signal's raise must not cut in two (a command's fork and its registration; the lease's take and
    its record, its release): the raise the handler held meanwhile comes at the end of the outermost block, in
    place of the block's own exception if it has one (the run is ending either way). Re-entrant."""
    _deferring.depth = getattr(_deferring, "depth", 0) + 1
    try:
        yield
    finally:
        _deferring.depth -= 1
        if not _deferring.depth:
            held, _deferring.held = getattr(_deferring, "held", None), None
            if held is not None:
                raise held


def end_every_tool(why: str) -> None:
    """End every command this process runs (SIGTERM), and any that starts from now on: for a signal's handler
    (tasks/context.py), which runs between two steps of the main thread, maybe while it holds a seam's lock, so
    this takes none. A command that registers after this look finds _EVERY set (_register reads it after adding
    itself), so none is missed."""
    if not _EVERY:
        _EVERY.append(why)
    for proc in _every_command(why):
        _terminate(proc)


def _every_command(why: str) -> list[Any]:
    """The commands every seam of this process runs or streams now, each `run` one noted as ended for why (its
    answer: Ran(ENDED, "", why)). No lock taken: copies made in one step each (a signal's handler calls it)."""
    procs = []
    for ref in list(_SEAMS):
        seam = ref()
        if seam is None:
            continue
        for key, (_, _, proc) in list(seam._running.items()):
            seam._ended.setdefault(key, why)
            procs.append(proc)
        procs.extend(list(seam._streaming.values()))
    return procs


def end_every_tool_and_wait(why: str, within: float = 5.0) -> None:
    """Once a run a signal came to has unwound (tasks/context.ended_like_ctrl_c): end what it still runs in
    threads no one joined on the way out (a teardown's early lists, a watch beside a poll, a context check) and
    wait up to `within` seconds for each to exit, so nothing invoke started outlives it: one such thread may
    start a command meanwhile, so each look takes what runs then. What a thread starts after the last look (a
    fork in flight as the run leaves) is not waited for."""
    ended: dict[int, Any] = {}  # held, so no new command gets the id of one that ended
    deadline = time.monotonic() + within
    while True:
        procs = _every_command(why)
        for proc in procs:
            if id(proc) not in ended:
                ended[id(proc)] = proc
                _terminate(proc)
        if not any(_alive(proc) for proc in procs) or time.monotonic() >= deadline:
            return
        time.sleep(0.01)


def _alive(proc: Any) -> bool:
    """Not reaped yet: the thread that waits for the command sets its exit code once it has reaped it."""
    try:
        return proc.process.exit_code is None
    except AttributeError:  # not an sh command
        return False


# What a command ended by `Processes.end` answers (128 + SIGTERM, as a shell reports it), with why on stderr.
ENDED = 143

# What a stream returns when the reader of our output went away (`| head`): not an exit code (those are 0-255, 128 +
# the signal for a killed one), so a command that really exits 141 (SIGPIPE in its own pipe) is not taken for it.
# Runner.stream turns it into 0: the work did what was asked.
READER_GONE = -141


def _signalled(proc: Any) -> int:
    """A process a signal ended: 128 + the signal, as a shell reports it (sh gives minus the signal)."""
    return 128 + abs(int(proc.exit_code))


def killed_by(number: int) -> str:
    """How stderr says a signal ended a command ("killed by SIGINT"): the one wording, for whoever reads it."""
    try:
        return f"killed by {signal.Signals(number).name}"
    except ValueError:
        return f"killed by signal {number}"


def _signal_line(proc: Any, stderr: str) -> str:
    import os

    tool = os.path.basename(str(proc.cmd[0])) if proc.cmd else "the command"
    return f"{stderr.rstrip()}\n{tool}: {killed_by(abs(int(proc.exit_code)))}\n".lstrip("\n")


def _terminate(proc: Any) -> None:
    """SIGTERM to one command, with no lock and no logging on the way (sh's terminate logs; end_every_tool runs
    in a signal's handler). Not once sh has reaped it (its pid may be another process's by now)."""
    try:
        if proc.process.exit_code is None:
            os.kill(proc.pid, signal.SIGTERM)
    except (OSError, AttributeError):  # ended already; not ours any more; not an sh command
        pass


# How much lower a background command runs (`nice`): at start-up gcloud is CPU-bound for most of a second, so
# when a dozen start at once the one a critical chain waits for would otherwise get a dozenth of the CPU.
BACKGROUND_NICE = 10
_priority = threading.local()


def in_background() -> bool:
    """Whether this thread's commands start in the background now (`background`)."""
    return bool(getattr(_priority, "low", False))


@contextmanager
def background(on: bool = True) -> Iterator[None]:
    """Commands this thread starts meanwhile run at a lower CPU priority (BACKGROUND_NICE): work off the
    critical path (graph.apply/destroy decide which) leaves the CPU to the chain everything waits on."""
    before = getattr(_priority, "low", False)
    _priority.low = on
    try:
        yield
    finally:
        _priority.low = before


def _start(argv: list[str], **io: Any) -> Any:
    """argv started with sh in the background (never a shell string): every exit code is an answer, the
    caller waits. The executable is resolved now; the environment is this process's, as it is now, with the
    tool's TOOL_ENVIRONMENT."""
    import sh

    command = sh.Command(find_tool(argv[0]))
    # Ctrl-C on a terminal reaches the whole foreground group, so also a child between sh's fork and its exec,
    # while it still runs our Python: there it printed a stray "Exception ignored ... KeyboardInterrupt"
    # traceback. SIGINT stays blocked across the fork; the child restores what exec would give the tool (the
    # default action, or ignored if we ignore it) and then takes a pending SIGINT as the tool would: it dies.
    # So do SIGTERM and SIGHUP, which our handler takes while a task runs (tasks/context.ended_like_ctrl_c): in
    # the child it would end the parent's commands, from a copy of its tables. SIGTERM gets exec's disposition;
    # SIGHUP sh's for a background command (ignored, set before this hook: a closed terminal does not end the
    # tools by itself, our handler of its hangup ends them), so a pending one is dropped at the unblock.
    restored = (signal.SIGINT, signal.SIGTERM)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {*restored, signal.SIGHUP})
    ignored = {number for number in restored if signal.getsignal(number) == signal.SIG_IGN}

    def as_exec_would() -> None:
        for number in restored:
            if number not in ignored:
                signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    try:
        proc = command(*argv[1:], _ok_code=list(range(256)), _bg=True, _bg_exc=False, _return_cmd=True,
                       _env=tool_environment(argv[0], os.environ), _preexec_fn=as_exec_would, **io)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    if in_background():
        # Set from here, not in the child before exec (not safe with threads): microseconds after the fork,
        # long before the tool's own start-up ends. Lowering one's own child's priority needs no privilege.
        try:
            os.setpriority(os.PRIO_PROCESS, proc.pid, min(19, os.getpriority(os.PRIO_PROCESS, 0) + BACKGROUND_NICE))
        except OSError:  # ended already
            pass
    return proc


class _Deadline:
    """Kills a running sh command (SIGKILL, as sh's own `_timeout` does) once timeout seconds have passed."""

    def __init__(self, proc: Any, timeout: float | None):
        self.fired = False
        self._proc = proc
        self._timer = threading.Timer(timeout, self._fire) if timeout is not None else None
        if self._timer is not None:
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        try:
            self._proc.kill()
        except OSError:  # ended meanwhile
            pass

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return data
