"""The command line, through Invoke's public API only (task(klass=), Argument, the running Program's methods and
its `core.unparsed` token list): int flags that exit 2 on a bad value, tasks that chain, `-h`/`--help` on every
task, usage errors that exit 2, and the optional run id given bare (`invoke job.status RUN`).

Kept light: `invoke --list` imports this for every namespace.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from invoke.exceptions import Exit, ParseError
from invoke.parser.argument import Argument
from invoke.parser.context import ParserContext
from invoke.tasks import Task

# A whole number on the command line: ASCII digits (Python's int() would also take other scripts' digits),
# at most 9 of them (no int-string-limit traceback, no absurd sizes), optionally negative.
_WHOLE_NUMBER = re.compile(r"-?[0-9]{1,9}")
_HELP_TOKENS = ("-h", "--help")
RUN_ID_ARG = "id"  # the flag (--id/-i) of every task whose run id may also be given bare


class CheckedArgument(Argument):
    """An int flag (`--port=INT` in the help) whose bad value is a usage error: exit 2, one line, no traceback.

    Invoke casts with int() inside the parser and lets the ValueError escape as a traceback; `Exit` is the
    exception Invoke's Program turns into a message and an exit code."""

    def set_value(self, value: Any, cast: bool = True) -> None:
        if cast and self.kind is int and not isinstance(value, int):
            text = str(value).strip()
            if not _WHOLE_NUMBER.fullmatch(text):
                flag = max(self.names, key=len)  # names: ("head-cpu", "e"); self.name is "head_cpu"
                raise Exit(f"error: --{flag}={shorten(str(value))} is not valid: give a whole number "
                           "(digits 0-9).", code=2)
            value = text
        super().set_value(value, cast=cast)


def shorten(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _declares_int(annotation: Any) -> bool:
    """`nodes: int | None = None` (or `: int`) in a task's signature makes --nodes an INT flag."""
    if annotation is int:
        return True
    if isinstance(annotation, str):
        return annotation.replace(" ", "") in ("int", "int|None", "None|int", "Optional[int]")
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return set(typing.get_args(annotation)) <= {int, type(None)} and int in typing.get_args(annotation)
    return False


class CliTask(Task):  # type: ignore[type-arg]  # invoke.Task is generic only in its stubs' eyes
    """invoke.Task with three fixes, through Invoke's public `task(klass=...)`:

    - equality is the body's identity: every task here is a distinct `guarded` closure over one code object,
      which Invoke's Task.__eq__ (same bare name + same __code__) took for the same task, so
      `invoke net.create storage.create` dropped storage.create. A task named twice still runs once.
    - `-h` is never an automatic short flag (it is Invoke's per-task help: `invoke ray.render -h`).
    - int flags (an int default, or an `int` / `int | None` annotation) are CheckedArguments: `INT` in the
      help, a bad value exits 2.
    - get_arguments can be asked more than once and keeps every flag's help."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Task) and self.body is other.body

    def __hash__(self) -> int:
        return hash(self.body)

    def arg_opts(self, name: str, default: Any, taken_names: set[str]) -> dict[str, Any]:
        opts: dict[str, Any] = super().arg_opts(name, default, set(taken_names) | {"h"})
        return opts

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[Argument]:
        params = inspect.signature(self.body).parameters
        saved = dict(self.help)
        try:
            arguments = super().get_arguments(ignore_unknown_help)
        finally:
            # Invoke's arg_opts pops each flag's help as it goes; restore it so asking twice (the run-id
            # rewrite reads the contexts before Invoke's parser does) still shows every flag's help.
            self.help = saved
        out = []
        for arg in arguments:
            param = params.get(arg.attr_name or arg.name or "")
            if arg.kind is int or (param is not None and _declares_int(param.annotation)):
                arg = CheckedArgument(names=arg.names, kind=int, default=arg.default, help=arg.help,
                                      positional=arg.positional, optional=arg.optional,
                                      incrementable=arg.incrementable, attr_name=arg.attr_name)
            out.append(arg)
        return out


_NEEDS_VALUE = re.compile(r"Flag <\w+: (\w+)[^>]*> needed value and was not given one!")


def usage_message(exc: ParseError) -> str:
    """Invoke's parse error in the user's words: `Flag <CheckedArgument: nodes (n) [int]> needed value…` is
    `--nodes needs a value (--nodes=INT)`; the others (No idea what '--nope' is!) are already plain."""
    text = str(exc)
    match = _NEEDS_VALUE.search(text)
    if match:
        flag = "--" + match.group(1).replace("_", "-").strip("-")
        kind = "INT" if "[int]" in text else "VALUE"
        return f"{flag} needs a value ({flag}={kind})."
    return text


# ---- the bare run id: `job.status RUN` is `job.status --id=RUN` --------------------------------------
def takes_bare_run_id(ctx: ParserContext) -> bool:
    """A task whose only way to name a run is its optional --id (no positional argument to compete with)."""
    arg = ctx.args.get(RUN_ID_ARG)
    return arg is not None and arg.takes_value and not ctx.positional_args


def _value_follows(flag: Argument, token: str) -> bool:
    """After `token` (a flag), is the next token its value? (`--id=x` and `-ix` carry theirs.)"""
    if not flag.takes_value or "=" in token or (not token.startswith("--") and len(token) > 2):
        return False
    return True


def _flag(token: str, ctx: ParserContext | None,
          core_flags: Mapping[str, Argument]) -> tuple[Argument | None, bool]:
    """(the Argument a flag token names or None, whether it is a core flag); the task's own flags first, as
    in Invoke's parser."""
    if not token.startswith("-") or token == "-":
        return None, False
    name = token.split("=", 1)[0] if token.startswith("--") else token[:2]
    if ctx is not None and name in ctx.flags:  # Lexicon: aliases (-i) answer `in` and [], not .get()
        own: Argument = ctx.flags[name]
        return own, False
    if name in core_flags:
        return core_flags[name], True
    return None, False


def bare_run_ids(tokens: Sequence[str], contexts: Iterable[ParserContext],
                 core_flags: Mapping[str, Argument]) -> list[str]:
    """The task tokens with a bare run id rewritten as `--id=TOKEN`, the rest unchanged.

    For a task that takes_bare_run_id: the first bare token after its name (skipping flags and the values of
    flags that take one, the task's own flags first, then Invoke's core flags) that is not a task name and
    comes before any --id. Anything after `--` is left alone. A second bare token stays as it is, and
    Invoke's parser refuses it ("No idea what ..."). Pure over Invoke's public ParserContext/Argument."""
    by_name: dict[str, ParserContext] = {}
    for each in contexts:
        for name in (each.name, *each.aliases):
            if name:
                by_name[name] = each
    out: list[str] = []
    ctx: ParserContext | None = None
    id_given = False
    value_next = False  # the previous token was a flag waiting for its value
    for index, token in enumerate(tokens):
        if token == "--":
            out.extend(tokens[index:])
            break
        flag, core = _flag(token, ctx, core_flags)
        if value_next and flag is None:
            value_next = False
            out.append(token)
            continue
        value_next = False
        if flag is not None:
            if ctx is not None and RUN_ID_ARG in ctx.args and flag is ctx.args[RUN_ID_ARG]:
                id_given = True
            # Invoke's optional-value core flags (--help, --list) never take the next task token.
            value_next = _value_follows(flag, token) and not (core and flag.optional)
            out.append(token)
        elif token in by_name:
            ctx, id_given = by_name[token], False
            out.append(token)
        elif ctx is not None and takes_bare_run_id(ctx) and not id_given and not token.startswith("-"):
            id_given = True
            out.append(f"--{RUN_ID_ARG}={token}")
        else:
            out.append(token)
    return out


class ReaderSafe:
    """sys.stdout or sys.stderr for a reader that may go away (`invoke status | head`, `| grep -m1 'Step 1/'`).

    A write to a pipe nobody reads raises BrokenPipeError wherever it happens (to a closed terminal, EIO): in a
    graph step (the bring-up stopped half done, its lease held), in a followed log's reader thread (the follow
    went on for ever), in Invoke's --list. Here the first such write marks the stream `reader_gone`, points its
    file descriptor at /dev/null (the interpreter's last flush finds nowhere to fail) and drops everything after:
    the work goes on to its end; a command that only makes output ends (`Runner.stream`). Anything else is the
    stream's."""

    def __init__(self, stream: Any):
        self._stream = stream
        self.reader_gone = False
        try:
            self._terminal = bool(stream.isatty())
        except (AttributeError, ValueError, OSError):
            self._terminal = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return int(self._stream.write(text))
            except OSError as exc:
                self._lose_or_raise(exc)
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except OSError as exc:
                self._lose_or_raise(exc)

    def _lose_or_raise(self, exc: OSError) -> None:
        import errno

        # A pipe nobody reads; a terminal hung up (closed: EIO on every write, while SIGHUP ends the run). EIO from
        # a file (`invoke up > log` on a failing disk) is the disk's: raised.
        if not isinstance(exc, BrokenPipeError) and not (self._terminal and exc.errno == errno.EIO):
            raise exc
        self._lose()

    def _lose(self) -> None:
        import os

        self.reader_gone = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError, AttributeError):  # no descriptor of its own (a test's StringIO): nothing to do
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_output() -> None:
    """sys.stdout and sys.stderr as ReaderSafe streams (once), before anything binds them. Called from tasks.py."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, ReaderSafe):
            setattr(sys, name, ReaderSafe(stream))


def quick_exit() -> None:
    """At exit, before Python frees its modules, its last collection walks every object the run made: ~40 ms
    once google-cloud-storage (the lock's lease) is loaded, the last thing `down` and every task wait for. The
    objects go to the permanent generation instead (`gc.freeze`); the process ends, and the system frees it.
    Finalizers still run where we rely on them: files and streams are closed by their `with`, the lock and lease
    are released by theirs, and Python flushes stdout and stderr itself. Registered first (tasks.py), so it runs
    after every other exit handler. Called once from tasks.py."""
    import atexit
    import gc

    if not getattr(quick_exit, "registered", False):
        atexit.register(gc.freeze)
        quick_exit.registered = True  # type: ignore[attr-defined]


def install_usage_exit_codes(program: Any = None) -> None:
    """Usage errors exit 2 (DESIGN: 2 = bad configuration or usage) under the stock `invoke` command,
    `-h`/`--help` print the task's usage even where a positional argument is still waiting for a value, and a
    bare run id is the task's --id (`invoke job.logs RUN --follow`).

    Invoke's Program prints a ParseError and hard-codes exit 1; tasks.py is imported inside program.run(),
    before the task arguments are parsed, so it wraps that running instance's public parse_tasks and
    parse_cleanup, and rewrites its public `core.unparsed` (the task tokens) before parse_tasks reads them.
    No private class is patched. Errors before tasks.py loads (`invoke --nope`, a missing collection) keep
    Invoke's own exit 1. Called once from tasks.py."""
    if program is None:
        program = getattr(sys.modules.get("invoke.main"), "program", None)
    if program is None or getattr(program, "_nrg_usage_exit_codes", False):
        return

    def as_usage_error(method: Callable[[], None]) -> Callable[[], None]:
        @functools.wraps(method)
        def wrapped() -> None:
            try:
                method()
            except ParseError as exc:
                raise Exit(f"error: {usage_message(exc)}", code=2) from None

        return wrapped

    parse_tasks = as_usage_error(program.parse_tasks)

    def parse_tasks_with_help() -> None:
        if program.core.unparsed:  # nothing to rewrite for `invoke --list` (building the contexts costs ms)
            contexts = program.collection.to_contexts(
                ignore_unknown_help=program.config.tasks.ignore_unknown_help)
            program.core.unparsed[:] = bare_run_ids(list(program.core.unparsed), contexts,
                                                    program.initial_context.flags)
        parse_tasks()
        for ctx in program.tasks:
            for arg in ctx.positional_args:
                value = arg.value
                if value in _HELP_TOKENS:
                    # Invoke reads a positional before it looks for -h/--help; give them back their meaning.
                    program.args.help.value = ctx.name
                    return
                if isinstance(value, str) and value.startswith("-"):
                    raise Exit(f"error: {ctx.name} needs {arg.name.upper()} before any flag, got {shorten(value)} "
                               f"(`invoke {ctx.name} --help` shows the usage).", code=2)

    program.parse_tasks = parse_tasks_with_help
    program.parse_cleanup = as_usage_error(program.parse_cleanup)
    program._nrg_usage_exit_codes = True
