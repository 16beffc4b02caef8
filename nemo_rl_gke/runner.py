"""The Runner: every external command goes through it, as an argv list handed to its one process seam
(`tools.Tools`; the default, `tools.Processes`, starts it with `sh`, never a shell string). Tests may hand
the Runner another seam (the fake cloud in-process).
The runner owns the cross-cutting behaviour: Invoke's `--dry` (print, run nothing, assume nothing exists),
redaction of secrets everywhere it prints, retries of transient cloud errors with backoff, one clear error
for a failure, timing of every call, parallel fan-out, progress for long waits, and stopping them on Ctrl-C.
"""

from __future__ import annotations

import functools
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import IO, Any, TypeVar

from .tools import READER_GONE, CommandFailed, Processes, ToolError, Tools, background, ending, in_background
from .waits import WaitDisplay, Waiting, showing

# Errors worth another try: per-minute quotas and rate limits, 429/5xx, and "another operation is running on
# this resource" (GCE's resourceNotReady, GKE's "Operation ... is currently upgrading cluster X. Please wait and
# try again once it is done.", Kubernetes' 409 "the object has been modified", helm's "another operation ... is
# in progress"). Anything else (bad flag, permission, not found, a quota on resources) fails at once.
TRANSIENT = re.compile(
    r"code=(429|500|502|503|504)\b|HTTP Error (429|500|502|503|504)|\b(429|503) (Too Many Requests|Service Unavailable)"
    r"|rateLimitExceeded|RATE_LIMIT_EXCEEDED|Rate limit|limit '[^']*per minute[^']*'"
    r"|resourceNotReady|resource '[^']*' is not ready"
    r"|try again later|try again once it('s| is) done|the object has been modified"
    r"|operation .{0,80} (is )?(already )?in progress|currently (being )?(updated|modified|in use by another operation)"
    r"|currently being created, deleted, updated or repaired|running incompatible operation"
    r"|TLS handshake timeout|connection reset by peer|i/o timeout|the server is currently unable"
    # client-go's words for a 500 and a 504 of the API server (kubectl and helm alike), and etcd's own
    r"|has prevented the request from succeeding|unable to return a response in the time allotted"
    r"|etcdserver: (request timed out|leader changed)"
    # gcloud's own words for a 5xx: compute's "Could not fetch resource: - The service is currently unavailable."
    # and "Internal error. Please try again", apitools' "HttpError accessing <URL>: response: <{'status': '503'"
    r"|service is currently unavailable|Internal error\. Please try again|backendError"
    r"|'status': '?(429|500|502|503|504)\b",
    re.IGNORECASE,
)
# client-go's discovery warnings (klog lines from memcache.go): printed by every kubectl call while an aggregated
# API (metrics.k8s.io) is down on a cluster with legacy discovery, whatever the command's own outcome. Their
# "the server is currently unable to handle the request" says nothing about the command: not a reason to retry it.
DISCOVERY_NOISE = re.compile(r"^[EWI]\d{4} [\d:.]+\s+\d+ memcache\.go:\d+\] .*$\n?", re.MULTILINE)


def transient(stderr: str) -> bool:
    """The command's own failure is one that a retry may cure (TRANSIENT), discovery warnings aside."""
    return bool(TRANSIENT.search(DISCOVERY_NOISE.sub("", stderr)))


ALREADY_EXISTS = re.compile(r"already exists|alreadyExists|AlreadyExists", re.IGNORECASE)
# A 404 only as an HTTP status (GKE's "code=404", apitools' 'status': 404): a bare "404" was also a project's,
# a cluster's or a token file's name (ml-404-prod), and NotFound also the tail of an exception's name
# (FileNotFoundError). A missing kubectl context says "not found" too: for a teardown of the whole cluster its
# objects go with it; the layer teardowns that leave the cluster (clean.ray, clean.storage, ray.delete,
# storage.delete) fetch it first.
NOT_FOUND = re.compile(r"not found|(?<![a-z])notfound|does not exist|code=404\b|'status': '?404\b|\bHTTP ?404\b",
                       re.IGNORECASE)
# kubectl or helm could not get credentials from the kubeconfig's exec plugin (client-go: "getting credentials:
# exec: executable gke-gcloud-auth-plugin not found" and "It looks like you are trying to use a client-go
# credential plugin that is not installed"; or the plugin failed). Never an answer about the object: its "not
# found" is the plugin's, so nothing counts as absent or deleted on it.
NO_CREDENTIALS = re.compile(r"getting credentials: |credential plugin that is not installed", re.IGNORECASE)
# Words of a tool that could not ask, whatever "not found" they hold: no credentials (above; gcloud's "Failed to
# load credential file: [...]. File ... was not found." for a credential_file_override that is gone, "There was
# a problem refreshing auth tokens for account X: ('invalid_grant: ... account not found')" for a deleted key,
# "Failed to impersonate [sa] ... Not found", or only "Gaia id not found", for a service account that is gone),
# an endpoint that is no API (an api_endpoint_overrides left pointing elsewhere answers "The requested URL ...
# was not found on this server", or an HTML page), or gcloud's own crash.
NOT_AN_ANSWER = re.compile(NO_CREDENTIALS.pattern + r"|Failed to load credential file|refreshing (your current )?auth "
                           r"tokens|Failed to impersonate|Gaia id not found|was not found on this server"
                           r"|<html|<!doctype|gcloud crashed", re.IGNORECASE)
# Exit codes from 126 up are the shell's or a signal's (126 not executable, 127 not found, 128 + N), never the
# tool's answer: /usr/bin/gcloud's "exec: /old/python3: not found" under a stale CLOUDSDK_PYTHON exits 127.
TOOL_ANSWERS = range(1, 126)


def says_not_found(text: str) -> bool:
    """The tool's words say that what it was asked about does not exist (not that it could not ask)."""
    return bool(NOT_FOUND.search(text)) and not NOT_AN_ANSWER.search(text)


def failed_not_found(exc: ToolError) -> bool:
    """A command failed saying that what it was asked about does not exist: its own words and exit code only,
    never the argv the message starts with (a --project=ml-404-prod)."""
    return (isinstance(exc, CommandFailed) and not exc.stopped and exc.exit_code in TOOL_ANSWERS
            and says_not_found(exc.said))


# This machine has no kubeconfig context for the cluster: kubectl "context was not found for specified context"
# (get, delete, exec without --namespace) or "error: context \"X\" does not exist" (with --namespace, and apply
# and wait always; kubectl 1.27-1.33), helm "Kubernetes cluster unreachable:
# context \"X\" does not exist". A failure says how to fetch it.
NO_CONTEXT = re.compile(r"context was not found for specified context|context \"[^\"]*\" does not exist",
                        re.IGNORECASE)

# `kubectl delete --timeout=…` that ended before the object went: a finalizer still holds it.
HELD = re.compile(r"timed out waiting for the condition on (\S+)")

# gcloud's multi-scope lists (`compute networks subnets list`, `compute addresses list`) exit 0 with what they
# got, and only warn, when a request of theirs failed (a 503, a rate limit): their list is then incomplete. So does
# `container clusters list` when GKE answers without some locations (its missingZones): "WARNING: The following
# zones did not respond: us-central1. List results may be incomplete."
INCOMPLETE_LIST = re.compile(r"Some requests did not succeed|List results may be incomplete")


# The longest the runner sleeps in one go while waiting, so Ctrl-C and progress stay prompt.
WAIT_SLICE_SECONDS = 0.5
# The longest the main thread waits on workers in one go: see settled.
MAIN_SLICE_SECONDS = 0.2
T = TypeVar("T")


def settled(futures: Iterable[Future[Any]], *, first: bool = False) -> set[Future[Any]]:
    """The futures done once all are (first: once one is), waited for in slices. The kernel may hand a signal
    sent to invoke (`kill`, a CI's cancel: SIGTERM, SIGINT) to a worker thread; Python then runs its handler in
    the main thread, but only once that thread runs again: in concurrent.futures' untimed wait it slept on
    until a worker finished (a cluster's delete: 15 s here, minutes in GKE), the tools went on, and the run
    said "deleted". A slice's end lets the handler run. Not concurrent.futures.wait 5 times a second: it takes
    every future's lock in turn, and a handler's raise between two could leave one held (a worker then blocks
    in set_result, and the pool's shutdown with it). Each future's end is put on a SimpleQueue, which a signal
    can interrupt safely."""
    import queue

    pending, ended = list(futures), queue.SimpleQueue[Future[Any]]()
    for future in pending:
        future.add_done_callback(ended.put)  # in the worker that ends it; at once if it has ended
    done: set[Future[Any]] = set()
    while len(done) < len(pending) and not (done and first):
        try:
            done.add(ended.get(timeout=MAIN_SLICE_SECONDS))
        except queue.Empty:
            continue
        while not ended.empty():  # what ended meanwhile, as wait's FIRST_COMPLETED gives it
            done.add(ended.get_nowait())
    return done


class Interrupted(KeyboardInterrupt):
    """Ctrl-C reached the runner: waits stop and no new command starts."""


# A read-only task's dry run asks nothing: it shows the questions it would ask first under this line, then says
# that nothing was asked (tasks.context.dry_read). Never a state it did not read.
DRY_QUESTIONS = "# dry run: would ask first (read-only):"

RUNNER_OPTIONS = ("tools", "poll_seconds", "backoff_seconds", "attempts", "wait_display")
MAX_WAIT_SECONDS = 3600
# The backoff doubles from backoff_seconds: 10 tries wait 2 s, 4 s, ... 512 s (17 minutes) between them.
MAX_ATTEMPTS = 10


@dataclass
class Result:
    argv: list[str]
    exit_code: int
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    attempts: int = 1
    stopped: bool = False  # ended by this run (end_calls: a stale context), why on stderr; not by a signal from outside

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def already_exists(self) -> bool:
        return self.exit_code != 0 and bool(ALREADY_EXISTS.search(self.stderr))

    @property
    def not_found(self) -> bool:
        return self.exit_code in TOOL_ANSWERS and says_not_found(self.stderr)

    @property
    def complete(self) -> bool:
        """Succeeded with the whole answer: not a gcloud list that exited 0 after a failed request of its own."""
        return self.ok and not INCOMPLETE_LIST.search(self.stderr)


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
    backoff_seconds: float = 2.0  # first retry after 2 s, then 4, 8, 16
    poll_seconds: float = 10.0
    # Waits (retry backoff, poll intervals). None: wait on the Ctrl-C event, so an interrupt ends the wait at once.
    sleep: Callable[[float], None] | None = None
    tools: Tools = field(default_factory=Processes)
    wait_display: WaitDisplay | None = None
    # Read-only overviews (status, plan): a question kubectl or helm could not ask for want of this machine's
    # kubeconfig context fails (the answer is unknown), instead of its "not found" reading as absent. Teardowns
    # keep reading it as absent: what is in a cluster goes with it (the layer teardowns fetch the context first).
    no_context_is_unknown: bool = False
    calls: list[CallRecord] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _interrupted: threading.Event = field(default_factory=threading.Event, repr=False)
    # Inside sharing(): the read-only questions asked once for all their askers (argv -> its answer to come).
    _shared: dict[tuple[str, ...], Future[Result] | None] = field(default_factory=dict, repr=False)

    @staticmethod
    def options(section: Mapping[str, Any] | None) -> dict[str, Any]:
        """Runner keyword arguments from the Invoke config's `runner` section (invoke.yaml, -f FILE).

        Known keys only: tools (the process seam), poll_seconds, backoff_seconds, attempts, wait_display. A value
        YAML gives as a string, a boolean or out of range stops the task (exit 2) before any call: attempts=0 ran
        no command and raised a traceback at the first one, poll_seconds='fast' at the first wait."""
        if not section:
            return {}
        from .settings import ConfigError

        unknown = sorted(set(section) - set(RUNNER_OPTIONS))
        if unknown:
            raise ConfigError(f"runner.{unknown[0]}", section[unknown[0]],
                              f"the Invoke config's runner section knows only {', '.join(RUNNER_OPTIONS)}")
        for key in ("poll_seconds", "backoff_seconds"):
            value = section.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_WAIT_SECONDS:
                raise ConfigError(f"runner.{key}", value, f"give a number of seconds from 0 to {MAX_WAIT_SECONDS} "
                                                          f"in the Invoke config (invoke.yaml), e.g. {key}: 10")
        attempts = section.get("attempts", 1)
        if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= MAX_ATTEMPTS:
            raise ConfigError("runner.attempts", attempts, f"give a whole number of tries from 1 to {MAX_ATTEMPTS} "
                                                           "in the Invoke config (invoke.yaml), e.g. attempts: 5")
        return {key: section[key] for key in RUNNER_OPTIONS if key in section}

    # ---- Ctrl-C ----------------------------------------------------------------------------------
    def interrupt(self) -> None:
        """Stop every wait now and start no new command (Ctrl-C reached a thread that waits on workers)."""
        self._interrupted.set()

    def interrupted_within(self, seconds: float) -> bool:
        """Ctrl-C reached this run (interrupt() was called), or reaches it within seconds; or SIGTERM/SIGHUP."""
        return ending() or self._interrupted.wait(seconds) or ending()

    def _check_interrupted(self) -> None:
        if self._interrupted.is_set() or ending():  # Ctrl-C; SIGTERM or SIGHUP (even if its raise got lost)
            raise Interrupted()

    def wait_for(self, seconds: float) -> None:
        """Sleep, but end at once on interrupt() (raising Interrupted)."""
        if self.sleep is not None:
            self.sleep(seconds)
        else:  # in slices: SIGTERM whose raise was lost sets no event, only tools.ending()
            until = time.monotonic() + seconds
            while not self._interrupted.is_set() and not ending() and (left := until - time.monotonic()) > 0:
                self._interrupted.wait(min(left, WAIT_SLICE_SECONDS))
        self._check_interrupted()

    @contextmanager
    def pool(self, max_workers: int) -> Iterator[ThreadPoolExecutor]:
        """A thread pool whose workers stop waiting when the thread that owns it gets Ctrl-C.

        Without it a KeyboardInterrupt in the owner waits in the pool's shutdown for every worker's poll
        (Lustre: up to an hour); with it the workers' waits end at once and queued work never starts."""
        pool = ThreadPoolExecutor(max_workers=max_workers)
        try:
            yield pool
        except KeyboardInterrupt:
            self.interrupt()
            # A Ctrl-C to invoke alone (`kill -INT`, a supervisor's stop) never reached the commands the workers
            # run: the shutdown waited for each to finish (a cluster delete: minutes). They are ended (a terminal's
            # Ctrl-C ended them already); what each asked of the cloud goes on there, as it would have.
            self.end_calls(lambda _argv: True, "interrupted: invoke got Ctrl-C")
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        finally:
            pool.shutdown(wait=True)

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
            # One write per line: print() writes the text and the newline separately, and another thread writing
            # to the same stream (the board's listener) could land between them.
            stream.write(self.redact(text) + "\n")
            stream.flush()

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
        if accept is not None and result.exit_code in TOOL_ANSWERS and self._accepts(accept, result.stderr):
            return result
        raise self.failure(result)

    @staticmethod
    def _accepts(accept: re.Pattern[str], stderr: str) -> bool:
        """accept matches the tool's words, and not only by a "not found" that is no answer (NOT_AN_ANSWER):
        a wait that also accepts busy or transient words (a GKE delete's) still takes those from an HTML 502."""
        if not accept.search(stderr) or NO_CREDENTIALS.search(stderr):
            return False
        return not NOT_AN_ANSWER.search(stderr) or bool(accept.search(NOT_FOUND.sub("", stderr)))

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
        result = self._answer(argv, stdin=stdin, timeout=timeout)
        if self.no_context_is_unknown and result.exit_code and NO_CONTEXT.search(result.stderr or ""):
            raise self.failure(result)
        if result.exit_code in tuple(ok_codes):
            return result
        raise self.failure(result)

    @contextmanager
    def sharing(self, *questions: Sequence[str]) -> Iterator[None]:
        """Within the block, each of these read-only questions is asked once, however many parts of the task
        ask it at the same time or later: the others wait for its answer (`status` reads Ray's pods for the
        Ray part and for the latest run's)."""
        keys = [tuple(str(a) for a in argv) for argv in questions]
        with self._lock:
            for key in keys:
                self._shared[key] = None
        try:
            yield
        finally:
            with self._lock:
                for key in keys:
                    self._shared.pop(key, None)

    def _answer(self, argv: list[str], *, stdin: str | None, timeout: float | None) -> Result:
        key = tuple(argv)
        theirs: Future[Result] | None = None
        mine: Future[Result] | None = None
        with self._lock:
            if stdin is None and key in self._shared:
                theirs = self._shared[key]
                if theirs is None:
                    mine = self._shared[key] = Future()
        while theirs is not None:  # another part asked it first: its answer (or Ctrl-C, Interrupted)
            try:
                return theirs.result(timeout=0.5)
            except TimeoutError:
                self._check_interrupted()
        try:
            result = self._execute(argv, stdin=stdin, retry=True, timeout=timeout)
        except BaseException as exc:
            if mine is not None:
                mine.set_exception(exc)
            raise
        if mine is not None:
            mine.set_result(result)
        return result

    def end_calls(self, matches: Callable[[list[str]], bool], why: str) -> int:
        """End the commands running now (launched before this call) whose argv matches: each answers exit
        ENDED with why as its stderr, and is not retried. How many were running."""
        return self.tools.end(matches, why, launched_before=time.monotonic())

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

        Ctrl-C stops the local command only; returns its exit code (130 on Ctrl-C). When the reader of our output
        went away (`| head`), the command, which only made output, is ended and this returns 0: a normal end.
        Every line is redacted.
        """
        argv = [str(a) for a in argv]
        self.show_command(argv, stdin=stdin, stdin_label="generated input")
        if self.dry:
            return 0
        self._check_interrupted()
        code = self.tools.stream(argv, stdin=stdin, out=self._stream_line, err=self._stream_err_line)
        return 0 if code == READER_GONE else code

    def _stream_line(self, line: str) -> bool:
        """Print a streamed line; True once nobody reads the output any more (the stream then ends)."""
        with self._lock:
            self.out.write(self.redact(line))
            self.out.flush()
        return bool(getattr(self.out, "reader_gone", False))

    def _stream_err_line(self, line: str) -> None:
        with self._lock:
            self.err.write(self.redact(line))
            self.err.flush()

    def _execute(self, argv: list[str], *, stdin: str | None, retry: bool, timeout: float | None) -> Result:
        attempts = self.attempts if retry else 1
        started = time.monotonic()
        for attempt in range(1, attempts + 1):
            self._check_interrupted()
            ran = self.tools.run(argv, stdin=stdin, timeout=timeout)
            result = Result(argv, ran.exit_code, ran.stdout, ran.stderr, attempts=attempt, stopped=ran.stopped)
            # A command a signal ended from outside is not retried, whatever its partial output said before it
            # died (the OOM killer would only kill it again).
            if result.ok or attempt == attempts or ran.signal or not transient(result.stderr):
                break
            delay = self.backoff_seconds * (2 ** (attempt - 1))
            self.say(f"  transient error from {argv[0]} (attempt {attempt}/{attempts}), retrying in {delay:.0f} s: "
                     f"{last_lines(result.stderr, 1)}", err=True)
            self.wait_for(delay)
        result.seconds = time.monotonic() - started
        with self._lock:
            self.calls.append(CallRecord(self.redact(shlex.join(argv)), result.exit_code, result.seconds,
                                         result.attempts))
        return result

    def failure(self, result: Result) -> ToolError:
        tail = last_lines(result.stderr or result.stdout, 6)
        # A call this run stopped did not fail, nor did a signal end the run (128 + 15 would say so): exit 1.
        how = "was stopped" if result.stopped else f"failed with exit code {result.exit_code}"
        message = f"{result.argv[0]} {how}: {shlex.join(result.argv)}"
        if result.attempts > 1:
            message += f" (after {result.attempts} attempts)"
        if tail:
            message += "\n" + "\n".join("  " + line for line in tail.splitlines())
        if NO_CREDENTIALS.search(result.stderr or ""):
            message += ("\nit could not get credentials for the cluster: install gke-gcloud-auth-plugin (`gcloud "
                        "components install gke-gcloud-auth-plugin`, or your OS's package of it) and log in "
                        "(`gcloud auth login`); `invoke doctor` checks both")
        if NO_CONTEXT.search(result.stderr or ""):
            message += ("\nthis machine has no kubectl context for the cluster: `invoke cluster.credentials` fetches "
                        "it (`invoke up` if the cluster is gone)")
        held = HELD.search(result.stderr or "") if "delete" in result.argv else None
        if held:
            what = held.group(1)
            where = [a for a in result.argv if a.startswith(("--context=", "--namespace="))]
            if what.startswith("pods/"):  # a pod whose node is gone or stuck stays Terminating, finalizers or not
                ask = shlex.join(["kubectl", *where, "describe", what])
                message += f"\n{what} is still shutting down: its node may be gone or stuck (`{ask}` says)"
            else:
                ask = shlex.join(["kubectl", *where, "get", what, "--output=jsonpath={.metadata.finalizers}"])
                message += f"\n{what} is marked for deletion but something holds it: its finalizers say what (`{ask}`)"
                if what.startswith("persistentvolumeclaims/"):
                    message += "; a claim is held while a pod mounts it"
        return CommandFailed(self.redact(message), 1 if result.stopped else result.exit_code,
                             said=self.redact(result.stderr or ""), stopped=result.stopped)

    # ---- concurrency and progress ----------------------------------------------------------------
    def parallel(self, thunks: Sequence[Callable[[], T]], max_workers: int = 16) -> list[T]:
        """Run independent calls at once (sequentially in a dry run, so the plan prints in a stable order).

        Every thunk runs to completion; the first exception is raised after all have finished. The calls run
        in the background (`tools.background`) if this thread's run there.
        """
        if self.dry or len(thunks) <= 1:
            return [t() for t in thunks]
        low = in_background()

        def at_our_priority(thunk: Callable[[], T]) -> T:
            with background(low):
                return thunk()

        with self.pool(min(max_workers, len(thunks))) as pool:
            futures = [pool.submit(at_our_priority, t) for t in thunks]
            settled(futures)
            errors = [f.exception() for f in futures]
        for error in errors:
            if error is not None:
                raise error
        return [f.result() for f in futures]

    def waiting(self, label: str) -> AbstractContextManager[Waiting]:
        """Show a long wait (waits.showing): through wait_display when set (the live board), else a rich spinner
        on a terminal, else start/end lines. Yields a Waiting: tick() while waiting; set outcome (say, "timed
        out after 60 s") when the wait ends without what it waited for, so it ends with ✗ and that, not ✓."""
        return showing(label, dry=self.dry, display=self.wait_display, err=self.err,
                       say=functools.partial(self.say, err=True))

    def poll(self, label: str, check: Callable[[], bool], *, timeout: float, interval: float | None = None,
             wake: threading.Event | None = None) -> bool:
        """Call check() until it returns True or timeout seconds pass. In a dry run: True at once.

        Waits in slices of at most WAIT_SLICE_SECONDS, so the display ticks and interrupt() (Ctrl-C) ends the
        wait at once with Interrupted. A timeout ends the wait with ✗ "timed out after N s", never ✓.
        wake: set by whoever learns first that check() would now say yes: the pause ends then, not later."""
        if self.dry:
            return True
        deadline = time.monotonic() + timeout
        with self.waiting(label) as wait:
            while True:
                self._check_interrupted()
                if check():
                    return True
                if time.monotonic() >= deadline:
                    wait.outcome = f"timed out after {timeout:.0f} s"
                    return False
                pause = self.poll_seconds if interval is None else interval
                if self.sleep is not None:
                    self.wait_for(pause)
                    wait.tick()
                    continue
                until = min(time.monotonic() + pause, deadline)
                while True:
                    slice_ = max(0.0, min(WAIT_SLICE_SECONDS, until - time.monotonic()))
                    if wake is None:
                        self.wait_for(slice_)
                        woken = False
                    else:
                        woken = wake.wait(slice_)
                        if woken:
                            wake.clear()  # this answer is used: the next pause waits for a new one
                        self.wait_for(0.0)  # Ctrl-C ends the wait here too
                    wait.tick()
                    if woken or time.monotonic() >= until:
                        break


def last_lines(text: str, count: int) -> str:
    """A tool's last count non-blank lines (its own words on why it failed)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-count:])
