"""The only place that starts processes.

Every external command is an argv list handed to `sh` (never a shell string). The runner owns the
cross-cutting behaviour: Invoke's `--dry` (print, run nothing, assume nothing exists), redaction of
secrets everywhere it prints, retries of transient cloud errors with backoff, one clear error for a
failure, timing of every call, parallel fan-out, and progress for long waits.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

# Errors worth another try: quota-per-minute and rate limits, 429/5xx, and GCE's "another operation is
# running on this resource". Anything else (bad flag, permission, not found) fails at once.
TRANSIENT = re.compile(
    r"code=(429|500|502|503|504)\b|HTTP Error (429|500|502|503|504)|\b(429|503) (Too Many Requests|Service Unavailable)"
    r"|rateLimitExceeded|RATE_LIMIT_EXCEEDED|Rate limit|resourceNotReady|try again later"
    r"|operation .{0,80} (is )?(already )?in progress|currently (being )?(updated|modified|in use by another operation)"
    r"|TLS handshake timeout|connection reset by peer|i/o timeout|the server is currently unable",
    re.IGNORECASE,
)
ALREADY_EXISTS = re.compile(r"already exists|alreadyExists|AlreadyExists", re.IGNORECASE)
NOT_FOUND = re.compile(r"not found|notFound|NotFound|was not found|does not exist|404", re.IGNORECASE)

INSTALL_HINTS = {
    "gcloud": "install the Google Cloud CLI: https://cloud.google.com/sdk/docs/install",
    "kubectl": "run `gcloud components install kubectl` or install kubectl from your package manager",
    "helm": "install helm 3.14 or later: https://helm.sh/docs/intro/install/ (or run `python scripts/fetch_helm.py`)",
    "gke-gcloud-auth-plugin": "run `gcloud components install gke-gcloud-auth-plugin`",
}


class ToolError(Exception):
    """An external command failed; exit_code is the tool's own."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code or 1


class MissingTool(ToolError):
    def __init__(self, tool: str):
        hint = INSTALL_HINTS.get(tool, f"install {tool} and put it on PATH")
        super().__init__(f"{tool} is not on PATH: {hint}.", 127)
        self.tool = tool


@dataclass
class Result:
    argv: list[str]
    exit_code: int
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def already_exists(self) -> bool:
        return self.exit_code != 0 and bool(ALREADY_EXISTS.search(self.stderr))

    @property
    def not_found(self) -> bool:
        return self.exit_code != 0 and bool(NOT_FOUND.search(self.stderr))


@dataclass
class CallRecord:
    argv: str
    exit_code: int
    seconds: float
    attempts: int


@dataclass
class Runner:
    dry: bool = False
    secrets: tuple[str, ...] = ()
    out: IO[str] = field(default_factory=lambda: sys.stdout)
    err: IO[str] = field(default_factory=lambda: sys.stderr)
    verbose: bool = False
    attempts: int = 5
    backoff_seconds: float = field(default_factory=lambda: float(os.environ.get("NRG_RETRY_BASE_SECONDS", "2")))
    poll_seconds: float = field(default_factory=lambda: float(os.environ.get("NRG_POLL_SECONDS", "10")))
    sleep: Callable[[float], None] = time.sleep
    calls: list[CallRecord] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # ---- printing ------------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        for secret in sorted(self.secrets, key=len, reverse=True):
            if secret:
                text = text.replace(secret, "***")
        return text

    def say(self, text: str, *, err: bool = False) -> None:
        """Print a line (redacted, atomic across threads)."""
        stream = self.err if err else self.out
        with self._lock:
            print(self.redact(text), file=stream, flush=True)

    def show_command(self, argv: Sequence[str], *, stdin: str | None = None, stdin_label: str | None = None,
                     show_stdin: bool = False) -> None:
        line = "$ " + shlex.join(argv)
        if stdin is not None and show_stdin:
            line += " <<'EOF'\n" + stdin.rstrip("\n") + "\nEOF"
        elif stdin is not None:
            line += f"  # stdin: {stdin_label or 'generated input'}"
        self.say(line, err=not self.dry)

    # ---- running -------------------------------------------------------------------------------
    def run(self, argv: Sequence[str], *, stdin: str | None = None, stdin_label: str | None = None,
            show_stdin: bool = False, ok_codes: Iterable[int] = (0,), accept: re.Pattern[str] | None = None,
            dry_stdout: str = "", echo: bool = True, retry: bool = True, timeout: float | None = None) -> Result:
        """Run a command that changes something (or whose output we need even in a dry run).

        accept: a pattern of stderr that counts as success (ALREADY_EXISTS for creates, NOT_FOUND for deletes).
        In a dry run the command is printed and not run; the result carries dry_stdout.
        """
        argv = [str(a) for a in argv]
        if echo or self.dry:
            self.show_command(argv, stdin=stdin, stdin_label=stdin_label, show_stdin=show_stdin)
        if self.dry:
            return Result(argv, 0, dry_stdout)
        result = self._execute(argv, stdin=stdin, retry=retry, timeout=timeout)
        if result.exit_code in tuple(ok_codes):
            return result
        if accept is not None and accept.search(result.stderr):
            return result
        raise self.failure(result)

    def query(self, argv: Sequence[str], *, ok_codes: Iterable[int] = (0, 1), timeout: float | None = 120,
              stdin: str | None = None) -> Result | None:
        """A read-only question (does X exist? what is its state?). A dry run assumes nothing exists: None.

        Exit codes outside ok_codes raise; within them the caller reads exit_code/stdout/stderr.
        stdin: input for the question (e.g. a read-only script piped into `kubectl exec -i`).
        """
        if self.dry:
            return None
        argv = [str(a) for a in argv]
        if self.verbose:
            self.say("? " + shlex.join(argv), err=True)
        result = self._execute(argv, stdin=stdin, retry=True, timeout=timeout)
        if result.exit_code in tuple(ok_codes):
            return result
        raise self.failure(result)

    def exists(self, argv: Sequence[str]) -> bool:
        """True if a describe/get exits 0, False if it says 'not found'; any other failure raises."""
        result = self.query(argv)
        if result is None:
            return False
        if result.ok:
            return True
        if result.not_found:
            return False
        raise self.failure(result)

    def stream(self, argv: Sequence[str], *, stdin: str | None = None) -> int:
        """Run in the foreground, output straight to the terminal (logs --follow, port-forward).

        Ctrl-C stops the local command only; returns its exit code (130 on Ctrl-C).
        """
        import sh

        argv = [str(a) for a in argv]
        self.show_command(argv, stdin=stdin, stdin_label="generated input")
        if self.dry:
            return 0
        command = self._command(argv[0])
        try:
            proc = command(*argv[1:], _in=stdin, _out=self._stream_line, _err=self._stream_err_line,
                           _ok_code=list(range(256)), _bg=True, _bg_exc=False, _return_cmd=True)
            proc.wait()
            return proc.exit_code
        except KeyboardInterrupt:
            try:
                proc.terminate()
            except Exception:  # noqa: BLE001 - already gone
                pass
            return 130
        except sh.ErrorReturnCode as exc:  # pragma: no cover - _ok_code covers all codes
            return exc.exit_code

    def _stream_line(self, line: str) -> None:
        with self._lock:
            self.out.write(self.redact(line))
            self.out.flush()

    def _stream_err_line(self, line: str) -> None:
        with self._lock:
            self.err.write(self.redact(line))
            self.err.flush()

    def _command(self, tool: str) -> Any:
        import sh

        try:
            # Resolved at call time so a fake tool first on PATH is the one that runs.
            return sh.Command(tool)
        except sh.CommandNotFound:
            raise MissingTool(tool) from None

    def _execute(self, argv: list[str], *, stdin: str | None, retry: bool, timeout: float | None) -> Result:
        import sh

        command = self._command(argv[0])
        attempts = self.attempts if retry else 1
        started = time.monotonic()
        for attempt in range(1, attempts + 1):
            try:
                proc = command(*argv[1:], _in=stdin, _ok_code=list(range(256)), _return_cmd=True, _tty_out=False,
                               _timeout=timeout, _env=dict(os.environ))
                result = Result(argv, proc.exit_code, _text(proc.stdout), _text(proc.stderr))
            except sh.TimeoutException:
                result = Result(argv, 124, "", f"timed out after {timeout:.0f} s")
            result.attempts = attempt
            if result.ok or attempt == attempts or not TRANSIENT.search(result.stderr):
                break
            delay = self.backoff_seconds * (2 ** (attempt - 1))
            self.say(f"  transient error from {argv[0]} (attempt {attempt}/{attempts}), retrying in {delay:.0f} s: "
                     f"{_last_lines(result.stderr, 1)}", err=True)
            self.sleep(delay)
        result.seconds = time.monotonic() - started
        with self._lock:
            self.calls.append(CallRecord(self.redact(shlex.join(argv)), result.exit_code, result.seconds,
                                         result.attempts))
        return result

    def failure(self, result: Result) -> ToolError:
        tail = _last_lines(result.stderr or result.stdout, 6)
        message = f"{result.argv[0]} failed with exit code {result.exit_code}: {shlex.join(result.argv)}"
        if result.attempts > 1:
            message += f" (after {result.attempts} attempts)"
        if tail:
            message += "\n" + "\n".join("  " + line for line in tail.splitlines())
        return ToolError(self.redact(message), result.exit_code)

    # ---- concurrency and progress ----------------------------------------------------------------
    def parallel(self, thunks: Sequence[Callable[[], Any]], max_workers: int = 16) -> list[Any]:
        """Run independent calls at once (sequentially in a dry run, so the plan prints in a stable order).

        Every thunk runs to completion; the first exception is raised after all have finished.
        """
        if self.dry or len(thunks) <= 1:
            return [t() for t in thunks]
        with ThreadPoolExecutor(max_workers=min(max_workers, len(thunks))) as pool:
            futures = [pool.submit(t) for t in thunks]
            errors = [f.exception() for f in futures]
        for error in errors:
            if error is not None:
                raise error
        return [f.result() for f in futures]

    @contextmanager
    def waiting(self, label: str):
        """Show a long wait: a rich spinner with elapsed time on a terminal, start/end lines otherwise."""
        if self.dry:
            yield
            return
        started = time.monotonic()
        if _isatty(self.err):
            from rich.console import Console

            console = Console(file=self.err)
            with console.status(f"{label}…") as status:
                stop = threading.Event()

                def tick() -> None:
                    while not stop.wait(1.0):
                        status.update(f"{label}… {time.monotonic() - started:.0f} s")

                ticker = threading.Thread(target=tick, daemon=True)
                ticker.start()
                try:
                    yield
                finally:
                    stop.set()
        else:
            self.say(f"… {label}", err=True)
            yield
        self.say(f"✓ {label} ({time.monotonic() - started:.1f} s)", err=True)

    def poll(self, label: str, check: Callable[[], bool], *, timeout: float, interval: float | None = None) -> bool:
        """Call check() until it returns True or timeout seconds pass. In a dry run: True at once."""
        if self.dry:
            return True
        deadline = time.monotonic() + timeout
        with self.waiting(label):
            while True:
                if check():
                    return True
                if time.monotonic() >= deadline:
                    return False
                self.sleep(self.poll_seconds if interval is None else interval)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return data


def _last_lines(text: str, count: int) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-count:])
