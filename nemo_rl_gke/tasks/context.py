"""What every task shares: settings from the Invoke context and flags, the runner, confirmation, and one
translation of expected failures into exit codes and one-line messages (never a traceback).

Kept light: `invoke --list` imports this for every namespace.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from invoke.exceptions import Exit
from invoke.tasks import task as invoke_task

from ..settings import ConfigError, Settings
from .cli import CheckedArgument, CliTask, install_usage_exit_codes  # noqa: F401 - re-exported for tasks.py

if TYPE_CHECKING:
    from invoke.context import Context

    from ..runner import Runner
    from ..steps import Report, Step


def is_dry(c: Context) -> bool:
    # Invoke's own --dry; c.run would honour it, but we run through sh, so we read it ourselves.
    return bool(c.config.run.dry)


def task(*args: Any, **kwargs: Any) -> Callable[..., Any]:
    """invoke.task (as CliTask), plus: ConfigError -> exit 2, tool failure -> the tool's exit code, one clear
    message, never a traceback."""

    def decorate(body: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(body)
        def guarded(c: Context, *a: Any, **kw: Any) -> Any:
            from ..render import RenderError
            from ..tools import ToolError

            try:
                with ended_like_ctrl_c():
                    return body(c, *a, **kw)
            except (ConfigError, RenderError) as exc:
                raise Exit(f"error: {exc}", code=2) from None
            except ToolError as exc:
                raise Exit(f"error: {exc}", code=exc.exit_code) from None
            except KeyboardInterrupt:
                raise Exit("interrupted", code=130) from None

        made: Callable[..., Any] = invoke_task(*args, klass=CliTask, **kwargs)(guarded)
        return made

    if len(args) == 1 and callable(args[0]) and not kwargs:
        body, args = args[0], ()
        return decorate(body)
    return decorate


# The signals that end a run as Ctrl-C does: a kill, a CI's cancel, the kubelet (SIGTERM); a closed terminal
# (SIGHUP). ENDED_BY: the one that did, once it did.
ENDING_SIGNALS = ("SIGTERM", "SIGHUP")
ENDED_BY: list[int] = []


@contextlib.contextmanager
def ended_like_ctrl_c() -> Iterator[None]:
    """While a task runs, SIGTERM and SIGHUP end it as Ctrl-C does (tools.Ended): the tools it runs are ended
    (they got no signal: SIGTERM comes to invoke alone), every `finally` runs (the lock is let go), the exit
    code is 128 + the signal. Python's default ended the process at once, leaving the lease for 3 hours and the
    tools running. A signal ignored when invoke started (`nohup`) stays ignored; a second one ends the tools
    started since and nothing more (the run is ending: its `finally` must not be cut short). Only the main
    thread can set handlers: a task run from another thread changes nothing. Once a signal came, however the
    block ends (Ended; a tool it ended, a refusal or a wait cut short on the way out; its raise lost in a hook
    that ignores exceptions), the task exits 128 + the signal.

    Ctrl-C (SIGINT, where Python's own handler has it) stays Python's KeyboardInterrupt, held like the others
    through a step that must not be cut in two (tools.deferring): the lease's take and its record, its release.
    Raised there, it left the lease for 3 hours. A second Ctrl-C while the first one's ending is under way is
    said, not raised: an impatient user's second press cut the ending short (the lease left; a traceback from
    a lock it interrupted). A third leaves at once, even from a step the first one waits for. Once a task a
    signal came to has ended (the lock let go), SIGINT stays with `_leaving` until the process is gone: a press
    there leaves at once, also while the task's end waits for the tools it ended."""
    import signal

    # Imported here, not in a handler (no import there); not at the top (`invoke --list` imports this module).
    from ..tools import AGAIN, CTRL_C, Ended, end_every_tool, end_every_tool_and_wait, raise_unless_deferred

    again = f"\n{AGAIN}\n".encode()
    came: list[int] = []  # the signals this task got, a Ctrl-C a stream took (and cleared from CTRL_C) included

    def ended(number: int, _frame: object) -> None:
        came.append(number)
        end_every_tool(f"ended: invoke got {signal.Signals(number).name}")
        if not ENDED_BY:
            ENDED_BY.append(number)
            raise_unless_deferred(Ended())

    def interrupted(number: int, _frame: object) -> None:
        came.append(number)
        CTRL_C.append(number)
        if len(CTRL_C) == 2:
            if not _a_board_draws_it():
                with contextlib.suppress(OSError):  # os.write: no lock a print takes (the main thread may hold it)
                    os.write(2, again)
            return
        if len(CTRL_C) > 2:
            raise KeyboardInterrupt
        raise_unless_deferred(KeyboardInterrupt())

    before = {}
    if threading.current_thread() is threading.main_thread():
        for name in ENDING_SIGNALS:
            number = signal.Signals[name]
            if signal.getsignal(number) != signal.SIG_IGN:
                before[number] = signal.signal(number, ended)
        # Python's own: not ignored, not someone else's; or ours, left by a task a signal came to (in-process)
        current = signal.getsignal(signal.SIGINT)
        if current is signal.default_int_handler or _is_leaving(current):
            CTRL_C.clear()
            signal.signal(signal.SIGINT, interrupted)
            before[signal.SIGINT] = signal.default_int_handler
    try:
        yield
    except BaseException:
        if ENDED_BY:
            raise _ended() from None
        raise
    finally:
        for number, handler in before.items():
            if number == signal.SIGINT and came:  # the run is over: Invoke prints the task's exit and ends
                handler = _leaving
            if handler is not None:  # None: one set outside Python, which Python cannot set back
                signal.signal(number, handler)
        if came:  # what threads no one joined on the way out still run: ended and waited for, not left behind
            end_every_tool_and_wait(f"ended: invoke got {signal.Signals(came[0]).name}")
    if ENDED_BY:
        raise _ended()


def _leaving(number: int, _frame: object) -> None:
    """SIGINT's handler once a task a signal came to has ended, until the process is gone. Nothing of the run is
    left to stop (its tools ended, its lock let go, its threads done): Invoke only prints the task's exit and
    ends. So a Ctrl-C leaves at once, 130, once what was printed is flushed as far as it can be. Python's own
    handler raised KeyboardInterrupt in Invoke's exit path, which then exits 1 without a word (CI saw it: a
    double Ctrl-C's second press 30 ms after the first, the ending just done). A program that runs Invoke
    in-process and goes on after the run sets its own handler back."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a flush the interrupted code was in refuses (reentrant call)
            stream.flush()
    os._exit(128 + number)


def _a_board_draws_it() -> bool:
    """Whether a live board on the terminal shows the second Ctrl-C's note (it reads tools.CTRL_C): a line
    written under it was drawn over at its next redraw, a quarter of a second later. For a signal's handler:
    the board's module as loaded (the handler imports nothing), attributes read, no lock taken."""
    board = sys.modules.get(f"{__name__.rsplit('.', 2)[0]}.board")
    return board is not None and any(shown.drawing() for shown in list(board.ON_SCREEN))


def _is_leaving(handler: object) -> bool:
    # By name: an in-process run (tests/support/inprocess.py) may have imported this module afresh since.
    return getattr(handler, "__module__", None) == __name__ and getattr(handler, "__name__", None) == "_leaving"


def _ended() -> Exit:
    import signal

    number = ENDED_BY[0]
    return Exit(f"ended by {signal.Signals(number).name}: what was under way was stopped, as Ctrl-C stops it; "
                f"run the task again to go on.", code=128 + number)


_NOTED_EXAMPLE = False  # say "using .env.example" once per process, not once per task


def settings(c: Context, *, offline: bool = False, **overrides: Any) -> Settings:
    """Settings for this task: .env (or ENV_FILE), then the environment, then the flags.

    Dry runs and offline tasks fall back to .env.example (and say so); real runs refuse without a .env.
    """
    from .. import settings as settings_module

    allow_example = offline or is_dry(c)
    loaded = settings_module.load(allow_example=allow_example, **overrides)
    global _NOTED_EXAMPLE
    if "placeholder" in loaded.source and not _NOTED_EXAMPLE:
        _NOTED_EXAMPLE = True
        print(f"note: no .env here, using {loaded.source}; copy .env.example to .env for real runs.",
              file=sys.stderr)
    return loaded


def runner(c: Context, s: Settings) -> Runner:
    from ..runner import Runner

    # The Invoke config's `runner` section (invoke.yaml, -f FILE, INVOKE_RUNTIME_CONFIG): poll/backoff seconds,
    # attempts, and for tests the process seam; unknown keys are refused.
    return Runner(dry=is_dry(c), secrets=s.secrets, verbose=bool(c.config.get("verbose", False)),
                  **Runner.options(c.config.get("runner")))


BRING_UP_TOOLS = ("gcloud", "kubectl", "helm", "gke-gcloud-auth-plugin")


def require_tools(c: Context, what: str, tools: Sequence[str] = BRING_UP_TOOLS) -> None:
    """Exit 2 before any call when a tool the task needs is not on PATH (nor in .tools/bin): a bring-up would
    otherwise create VPCs and a cluster (minutes, billed) and stop at its first kubectl or helm call. kubectl and
    helm need gke-gcloud-auth-plugin for a GKE cluster's credentials. A dry run needs none of them."""
    from ..tools import INSTALL_HINTS, MissingTool, find_tool

    if is_dry(c):
        return
    missing = []
    for tool in tools:
        try:
            find_tool(tool)
        except MissingTool:
            missing.append(f"{tool} ({INSTALL_HINTS.get(tool, 'install it and put it on PATH')})")
    if missing:
        raise Exit(f"error: {what} needs {', '.join(tools)}; not on PATH: {'; '.join(missing)}. Nothing was "
                   f"created; `invoke doctor` checks them all.", code=2)


def confirm(c: Context, question: str, *, yes: bool) -> None:
    """Ask before destroying or spending. --yes answers; no terminal and no --yes: exit 2. Dry runs never ask."""
    if yes or is_dry(c):
        return
    if not sys.stdin.isatty():
        raise Exit(f"{question}\nrefusing without confirmation: no terminal to ask on. Re-run with --yes.", code=2)
    from ..board import paused

    with ASKING, paused():  # one question at a time, never inside the live board (questions come from the main
        # thread today: a step's question asked from a worker thread could not be interrupted by Ctrl-C)
        try:
            answer = input(f"{question} [y/N] ").strip().lower()
        except BaseException:  # Ctrl-C, end of input: the prompt's line ends, what follows starts on its own
            print(flush=True)
            raise
    if answer not in ("y", "yes"):
        raise Exit("cancelled; nothing was changed.", code=1)
    from ..lock import stop_if_taken_over

    stop_if_taken_over()  # the lock held while the question waited may have been taken over


ASKING = threading.Lock()


UNLOCK_HELP = ("Take over the deployment's lock even if another run (on any machine) holds it; says whose. Only "
               "when that run is gone.")


@contextlib.contextmanager
def deployment_locked(c: Context, s: Settings, what: str, *, force: bool = False) -> Iterator[None]:
    """A changing task's turn: the deployment's lock (this machine's, and the lease in the bucket every machine
    sees), so two changing runs never interleave; a dry run changes nothing and takes none."""
    if is_dry(c):
        yield
        return
    from ..lock import deployment_lock

    with deployment_lock(s, what, force=force):
        yield


def apply_steps(c: Context, s: Settings, steps: list[Step], *, title: str = "create", what: str = "") -> Report:
    """Create what is missing among steps, in parallel, with the live board. what: the task, which refuses
    (exit 2) before any change when its steps need another layer's that do not exist (require_prerequisites)."""
    from .. import graph

    r = runner(c, s)
    if r.dry:
        return graph.apply(r, steps)
    if what:
        require_prerequisites(r, what, steps)
    from ..board import Board

    with Board(steps, title=f"{title} {s.CLUSTER_NAME}", runner=r) as board:
        return graph.apply(r, steps, listener=board.listener)


def dry_read(r: Runner, what: str, reads: str, questions: Sequence[Sequence[str]] = ()) -> str:
    """A read-only task's dry run, said one way by all: the commands it would ask first (`$ …`), then one line
    saying that nothing was asked and what the task reads without --dry. It shows no state: asking nothing, a dry
    run cannot know what exists ("absent", "$0.00/hour" would be made up). Returns that line (without its "# ")
    for the --json document's `note`."""
    from ..runner import DRY_QUESTIONS

    if questions:
        r.say(DRY_QUESTIONS)
        for argv in questions:
            r.show_command(list(argv))
    note = f"dry run: nothing was asked; without --dry, {what} {reads}."
    r.say(f"# {note}")
    return note


def not_asked(steps: Sequence[Step], **unknown: None) -> list[dict[str, Any]]:
    """A dry run's resources for --json: each named, its state null (not asked), and the other fields null."""
    return [{"name": step.name, "title": step.title, "state": None, **unknown} for step in steps if not step.always]


def require_prerequisites(r: Runner, what: str, steps: list[Step]) -> None:
    """Exit 2 before any change when a step this task would run needs a step of another layer that does not exist:
    `storage.create` on a project without the cluster made the bucket, the range, the peering and Lustre, then
    failed at get-credentials. Only the steps that will run count (an `always` one, one not there yet), and of
    what they need only the foundations are asked (a cluster that exists answers for its network): from the
    run's listing, which their own checks fetch anyway. What cannot be told (a listing that failed) is not
    refused: the step says why when it runs. A dry run asks nothing. Steps not chosen from the whole graph
    (`layer_steps`) are not checked."""
    from .. import graph
    from ..resources import LAYERS

    whole: list[Step] = getattr(steps, "whole", [])
    needs = graph.outside_needs(whole, [step.name for step in steps])
    if r.dry or not needs:
        return
    by_name = {step.name: step for step in whole}
    askers = [by_name[name] for name in needs]
    there = present_map(r, askers)
    wanted = {name for step in askers if there.get(step.name) is not True for name in needs[step.name]}
    absent = _absent(r, steps, [by_name[name] for name in graph.foundations(whole, wanted)])
    if not absent:
        return
    # Refused: what the missing steps stand on is asked too, so that the message names every task to run.
    chosen = {step.name for step in steps}
    below = graph.needed_by(whole, [step.name for step in absent])
    absent = _absent(r, steps, [step for step in whole if step.name in below - chosen and not step.always])
    if absent:
        tasks = [f"{layer}.create" for layer in LAYERS if any(step.layer == layer for step in absent)]
        raise Exit(prerequisites_message(what, [step.title for step in absent], tasks), code=2)


def prerequisites_message(what: str, titles: Sequence[str], tasks: Sequence[str]) -> str:
    """The refusal of a task whose steps need what other tasks make (titles: what is missing, graph order)."""
    named = [f"the {title}" for title in titles]
    if len(named) > 3:
        named = [*named[:3], f"{len(named) - 3} more"]
    listed = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
    verb = "does" if len(titles) == 1 else "do"
    return (f"error: {what} needs {listed}, which {verb} not exist: run `invoke {' '.join(tasks)}` first, or "
            f"`invoke up` for everything. Nothing was created.")


def _absent(r: Runner, steps: list[Step], asked: list[Step]) -> list[Step]:
    """The asked steps (none `always`) known not to be there in any state, asked at once from the run's
    listings."""
    from ..resources.inventory import inventory_of

    inventory = inventory_of(steps)
    if inventory is not None:
        inventory.include(asked)  # another layer's listings, fetched in one round with any not fetched yet
    found = present_map(r, asked, any_state=True)
    return [step for step in asked if found[step.name] is False]


def listing_questions(steps: Sequence[Step]) -> list[list[str]]:
    """The listings a real run of these steps asks first (one per kind), for a dry run to show."""
    from ..resources.inventory import inventory_of

    inv = inventory_of(steps)
    return inv.questions() if inv is not None else []


def status_states(c: Context, s: Settings, steps: list[Step]) -> list[tuple[Step, str]]:
    """(step, present|absent) for each resource step, asked in parallel (not for a dry run: see dry_read)."""
    r = runner(c, s)
    checked = [step for step in steps if not step.always]
    found = r.parallel([functools.partial(step.exists, r) for step in checked])
    return [(step, "present" if ok else "absent") for step, ok in zip(checked, found, strict=True)]


def status_rows(c: Context, s: Settings, steps: list[Step]) -> list[tuple[str, str]]:
    """(title, present|absent) for each resource step, asked in parallel."""
    return [(step.title, state) for step, state in status_states(c, s, steps)]


def status_task(c: Context, title: str, steps_of: Callable[[Settings], list[Step]], *, as_json: bool,
                kind: str, reads: str) -> None:
    """A layer's `status`: a table, or with --json `{"version": 1, "kind": ..., "dry_run": ..., "resources":
    [{"name", "title", "state"}]}` (state: present or absent). A dry run asks nothing: the listings it would
    ask and one line saying so (dry_read); with --json, every state null and that line as `note`."""
    with json_output(as_json) as out:
        s = settings(c)
        steps = steps_of(s)
        r = runner(c, s)
        if r.dry:
            note = dry_read(r, kind, reads, listing_questions(steps))
            if out:
                out.emit({"kind": kind, "dry_run": True, "project": s.PROJECT_ID, "cluster": s.CLUSTER_NAME,
                          "resources": not_asked(steps), "note": note}, secrets=s.secrets)
            return
        states = status_states(c, s, steps)
        if out:
            out.emit({"kind": kind, "dry_run": is_dry(c), "project": s.PROJECT_ID, "cluster": s.CLUSTER_NAME,
                      "resources": [{"name": step.name, "title": step.title, "state": state}
                                    for step, state in states]}, secrets=s.secrets)
            return
        print_table(title.format(s=s), ("resource", "state"), [(step.title, state) for step, state in states])


# Columns whose values the next command needs whole (a run id for --id, a pod for kubectl logs).
ID_COLUMNS = ("id", "run id", "pod", "resource", "name")


def print_table(title: str, header: tuple[str, ...], rows: Sequence[tuple[str, ...]], *,
                ids: tuple[str, ...] = ID_COLUMNS, file: Any = None, terminal_width: int | None = None) -> None:
    """A rich table on stdout. Columns named in `ids` (run ids, resource names: what the next command needs)
    are never cut: on a terminal they keep their full width and the other columns wrap (never below their
    header's width; a terminal too narrow for that gets lines wider than itself, not a cut value). Piped or
    redirected, the table is as wide as its content (not 80 columns), so `invoke job.list | grep` sees whole
    ids and one line per row."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # Every text as it is (rich.Text), never read as markup: a tool's reason in a cell ("[alice@example.com]",
    # "[/data/runs]") would lose its brackets' content, or end the task on a MarkupError.
    table = Table(title=Text(title, style="table.title"), title_justify="left")
    for index, name in enumerate(header):
        if name in ids:
            longest = max([len(name), *(len(str(row[index])) for row in rows)])
            table.add_column(name, no_wrap=True, overflow="fold", min_width=longest)
        else:
            table.add_column(name, overflow="fold", min_width=len(name))
    for row in rows:
        table.add_row(*(Text(str(cell)) for cell in row))
    console = Console(file=file, width=terminal_width)
    wide = Console(file=console.file, width=100_000)  # measures what the table needs, nothing real reaches it
    needed = wide.measure(table)
    if not console.is_terminal and terminal_width is None:
        console = Console(file=console.file, width=max(80, needed.maximum))
    elif console.width < needed.minimum:
        console = Console(file=console.file, width=needed.minimum, force_terminal=console.is_terminal)
    console.print(table)


# ---- --json: one document on stdout, everything else on stderr --------------------------------------
JSON_HELP = "Print one JSON document on stdout instead of tables (messages go to stderr)."
JSON_VERSION = 1  # bump when a documented field changes meaning or goes away


class JsonOut:
    """Where a --json task puts its one document (see json_output)."""

    def __init__(self, stream: Any):
        self.stream = stream
        self.emitted = False

    def emit(self, document: dict[str, Any], *, secrets: tuple[str, ...] = ()) -> None:
        if self.emitted:
            raise RuntimeError("a --json task prints exactly one JSON document")
        emit_json(document, out=self.stream, secrets=secrets)
        self.emitted = True


def emit_json(document: dict[str, Any], *, out: Any = None, secrets: tuple[str, ...] = ()) -> None:
    """One JSON document, one object, on stdout: `{"version": 1, ...}` (fields in the order given; dates and
    paths as strings), secrets replaced by ***."""
    import json

    if not isinstance(document, dict):
        raise TypeError("a --json document is one JSON object")
    text = json.dumps({"version": JSON_VERSION, **document}, indent=2, ensure_ascii=False, default=str)
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    stream = out or sys.stdout
    stream.write(text + "\n")
    stream.flush()


@contextlib.contextmanager
def json_output(enabled: bool) -> Iterator[JsonOut | None]:
    """The --json rule: inside the block, everything printed to stdout (runner lines, tables, notes, `$`
    commands of a dry run) goes to stderr instead; `out.emit(document)` writes the one JSON document to the
    real stdout. Without --json it yields None and changes nothing. Create the runner inside the block.

        with context.json_output(json_) as out:
            s = context.settings(c)
            rows = ...
            if out:
                out.emit({"resources": [...]}, secrets=s.secrets)
                return
            context.print_table(...)
    """
    if not enabled:
        yield None
        return
    target = JsonOut(sys.stdout)
    with contextlib.redirect_stdout(sys.stderr):
        yield target
    if not target.emitted:  # a task's bug; still one line, no traceback
        raise Exit("error: --json: this task printed no JSON document (a bug: please report it).", code=1)


YES_HELP = "Answer yes to the confirmations (needed without a terminal)."
YES_ONE_HELP = "Answer yes to the confirmation (needed without a terminal)."  # tasks that ask one question


def present_map(r: Runner, steps: list[Step], *, any_state: bool = False) -> dict[str, bool | None]:
    """step name -> exists, asked in parallel (read-only); `always` steps count as absent.

    None: the check could not tell (a peering cannot be listed before its network exists); `up` then
    lets the graph ask again when the step's turn comes. any_state: present in any state (teardowns: a
    Lustre instance still CREATING is there to delete or keep), not only ready."""
    from ..tools import ToolError

    def ask(step: Any) -> bool | None:
        try:
            return bool(step.is_present(r) if any_state else step.exists(r))
        except ToolError:
            return None

    checked = [step for step in steps if not step.always]
    # One thread per check: most wait for the inventory's lists, and the few that ask their tool directly
    # (helm status, the prefetch Jobs' label) should not queue behind them.
    found = r.parallel([functools.partial(ask, step) for step in checked], max_workers=max(16, len(checked)))
    answer: dict[str, bool | None] = {step.name: False for step in steps}
    answer.update({step.name: ok for step, ok in zip(checked, found, strict=True)})
    return answer
