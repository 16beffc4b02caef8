"""The live board of `up`, `down`, `clean` and the `*.create|delete` tasks: one display that owns the console.

It plugs into `graph.apply/destroy` as the listener, and into the runner while it lives (`Board(...,
runner=r)` or `board.attach(r)`): the runner's long waits (Lustre ACTIVE, Ray pods Ready) become rows of the
board through the runner's `wait_display` hook, with their elapsed time, instead of a second console, and the
runner's `$ gcloud …` echo and notes are printed above the live region, never into it.

On a terminal it redraws a rich table in place (rich.live), fitted to the terminal's height: running steps
and waits are always shown; finished steps fold first into one summary row, then waiting ones. Otherwise
(CI, a pipe, a log file) it prints one plain line per finished step and per wait, so logs stay readable.
Either way it ends with a one-line tally.
"""

from __future__ import annotations

import io
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import IO, TYPE_CHECKING, cast

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

    from .runner import Runner
    from .steps import Step

MARKS = {"running": "…", "created": "✓", "ran": "✓", "deleted": "✓", "exists": "·", "absent": "·",
         "kept": "·", "with-parent": "·", "failed": "✗", "interrupted": "✗", "skipped": "-", "waiting": " "}
FINISHED = ("created", "ran", "deleted", "exists", "absent", "kept", "with-parent", "skipped")
# Lines of the live region that are not rows: the title, the header, the rule under it and the caption, and
# one spare line so the terminal never scrolls the region itself.
CHROME_LINES = 5


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _seconds(elapsed: float | None) -> str:
    if elapsed is None:
        return ""
    return f"{elapsed:.0f} s" if elapsed >= 10 else f"{elapsed:.1f} s"


class AboveLive(io.TextIOBase):
    """A text stream for the runner while the board is live: each complete line is printed above the live
    region (rich keeps the region at the bottom), so command echo never lands inside it."""

    def __init__(self, board: Board):
        self.board = board
        self._partial = ""
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            lines = (self._partial + text).split("\n")
            self._partial = lines.pop()
        for line in lines:
            self.board.print_above(line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            partial, self._partial = self._partial, ""
        if partial:
            self.board.print_above(partial)

    def isatty(self) -> bool:
        return False  # the runner must not start a spinner of its own on this stream


class Board:
    def __init__(self, steps: Sequence[Step], *, out: IO[str] | None = None, live: bool | None = None,
                 title: str = "", clock: Callable[[], float] = time.monotonic, runner: Runner | None = None,
                 console: Console | None = None):
        self.steps = list(steps)
        self.out = out or sys.stderr
        self.live = _isatty(self.out) if live is None else live
        self.title = title
        self.clock = clock
        self.state = {step.name: "waiting" for step in self.steps}
        self.started: dict[str, float] = {}
        self.seconds: dict[str, float] = {}
        self.waits: dict[str, float] = {}  # label -> when the wait started (board clock), while it lasts
        self._lock = threading.RLock()
        self._live: Live | None = None
        self._console = console  # tests hand a rich Console of a given size
        self._began = clock()
        self._runner = runner
        self._saved: dict[str, object] = {}  # the runner's attributes the board replaced
        self.stream = AboveLive(self)
        self._held: list[str] | None = None  # while a question pauses the board: the lines printed meanwhile
        # A pause's stop and restart, the board's end, and each line printed above it: one at a time, so no line
        # lands on a question's line and the held ones come out first, in order (re-entered by the drains).
        self._pausing = threading.RLock()

    # ---- the graph's listener ----------------------------------------------------------------
    def listener(self, step: Step, state: str, seconds: float) -> None:
        with self._lock:
            self.state[step.name] = state
            if state == "running":
                self.started[step.name] = self.clock()
            else:
                self.seconds[step.name] = seconds
        if self._live is not None:
            self._live.refresh()  # redraws through get_renderable
        elif state != "running":
            self._plain(f"{MARKS.get(state, '✓')} {step.title}: {state} ({seconds:.1f} s)")

    # ---- the runner's wait_display hook ------------------------------------------------------------
    def wait_display(self, label: str, seconds: float, done: bool | str) -> None:
        """One row per wait, with its elapsed time. done: False while waiting; True (or the outcome, e.g.
        "timed out", when the runner says it) at the end."""
        with self._lock:
            if not done:
                fresh = label not in self.waits
                self.waits.setdefault(label, self.clock() - seconds)
            else:
                fresh = False
                self.waits.pop(label, None)
        if self._live is not None:
            self._live.refresh()
        elif fresh:
            self._plain(f"… waiting: {label}")
        elif isinstance(done, str):
            self._plain(f"  wait {done} after {seconds:.1f} s: {label}")
        elif done:
            self._plain(f"  waited {seconds:.1f} s: {label}")

    # ---- printing ----------------------------------------------------------------------------------
    def _plain(self, line: str) -> None:
        with self._lock:
            # One write per line, as Runner.say does: print() writes the newline separately, and a worker's
            # `$ …` echo on the same stream could land between them (two lines glued, one echo lost).
            self.out.write(line + "\n")
            self.out.flush()

    def print_above(self, line: str) -> None:
        """A line of output (a `$ …` echo, a note) above the live region; a plain line without one. While a
        question pauses the board, held until it is answered (not printed onto the question's line)."""
        with self._pausing:
            if self._held is not None:
                self._held.append(line)
                return
            live = self._live
            if live is not None:
                from rich.text import Text

                # Not under the board's lock: rich's Live holds its own lock while it renders the board, which
                # takes the board's lock; the console serialises prints itself.
                live.console.print(Text(line), soft_wrap=True)
            else:
                self._plain(line)

    def _let_go_of_held(self) -> None:
        """The lines held during a question, printed now (under _pausing: before any newer line)."""
        held, self._held = self._held or [], None
        for line in held:
            self.print_above(line)

    # ---- drawing -------------------------------------------------------------------------------
    def elapsed(self, name: str) -> float | None:
        if name in self.seconds:
            return self.seconds[name]
        if name in self.started:
            return self.clock() - self.started[name]
        return None

    def rows(self) -> list[tuple[str, str, str]]:
        """Every step: (title, mark and state, elapsed)."""
        with self._lock:
            return [(step.title, f"{MARKS.get(self.state[step.name], '✓')} {self.state[step.name]}",
                     _seconds(self.elapsed(step.name))) for step in self.steps]

    def wait_rows(self) -> list[tuple[str, str, str]]:
        with self._lock:
            now = self.clock()
            return [(f"  ↳ {label}", "… waiting", _seconds(now - since)) for label, since in self.waits.items()]

    def visible_rows(self, height: int) -> list[tuple[str, str, str]]:
        """The rows that fit in height lines. Running steps and waits are always shown. Finished steps fold
        first (into one "N steps done" row), then the last of the steps to go ("N more to go"), then failures."""
        rows = self.rows()
        with self._lock:
            states = [self.state[step.name] for step in self.steps]
        waits = self.wait_rows()
        room = max(0, height - CHROME_LINES)
        over = len(rows) + len(waits) - room
        if over <= 0:
            return self._with_waits(rows, waits, states)
        keep = [True] * len(rows)
        head: list[tuple[str, str, str]] = []
        tail: list[tuple[str, str, str]] = []
        finished = [i for i, state in enumerate(states) if state in FINISHED]
        if finished:
            for i in finished:
                keep[i] = False
            head.append((f"{len(finished)} steps done", "✓ done", ""))
            over -= len(finished) - 1
        for group, label, into in (("waiting", "more to go", tail), ("failed", "more failed", tail)):
            members = [i for i, state in enumerate(states) if state == group]
            if over <= 0 or not members:
                continue
            folded = members[-min(len(members), over + 1):]  # the last ones: the next to start stay in view
            for i in folded:
                keep[i] = False
            into.append((f"{len(folded)} {label}", f"{MARKS.get(group, ' ')} {group}", ""))
            over -= len(folded) - 1
        shown = [row for row, kept in zip(rows, keep, strict=True) if kept]
        shown_states = [state for state, kept in zip(states, keep, strict=True) if kept]
        return head + self._with_waits(shown, waits, shown_states) + tail

    @staticmethod
    def _with_waits(rows: list[tuple[str, str, str]], waits: list[tuple[str, str, str]],
                    states: list[str]) -> list[tuple[str, str, str]]:
        """Waits under the last running step (they belong to running steps), else at the end."""
        running = [i for i, state in enumerate(states) if state == "running"]
        at = running[-1] + 1 if running else len(rows)
        return rows[:at] + waits + rows[at:]

    def drawing(self) -> bool:
        """Live and not paused by a question (nor stopped by a Ctrl-C at one): the board redraws itself (for a
        signal's handler: attributes read, no lock)."""
        live = self._live
        return live is not None and live.is_started and self._held is None

    def render(self, height: int | None = None, width: int = 80) -> RenderableType:
        from rich import box
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        from .tools import AGAIN, CTRL_C

        if height is None:
            height = self._live.console.height if self._live is not None else 10_000
        # A second Ctrl-C during the ending: its note on the board (a line written under a live board is drawn
        # over at its next redraw), above the rows: the terminal's height crops running rows, not the note.
        note = Text(AGAIN) if len(CTRL_C) >= 2 else None
        if note is not None:
            height -= len(textwrap.wrap(AGAIN, width))
        title = Text(self.title, style="table.title") if self.title else None
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                      expand=False)
        table.add_column("step", overflow="ellipsis", no_wrap=True, max_width=56)
        table.add_column("state", no_wrap=True)
        table.add_column("elapsed", justify="right", no_wrap=True)
        for row in self.visible_rows(height):
            table.add_row(*(Text(cell) for cell in row))  # titles and waits' labels as they are, never markup
        table.caption = f"{self.clock() - self._began:.0f} s"
        table.caption_justify = "left"
        return table if note is None else Group(note, table)

    def tally(self) -> str:
        counts: dict[str, int] = {}
        for state in self.state.values():
            counts[state] = counts.get(state, 0) + 1
        took = self.clock() - self._began
        return f"done in {took:.1f} s: " + ", ".join(f"{n} {k}" for k, n in counts.items())

    # ---- the runner, while the board lives --------------------------------------------------------
    def attach(self, runner: Runner) -> None:
        """Route the runner's output lines and long waits through the board until it closes."""
        self._runner = runner
        if self._live is not None:
            self._hook()

    def _hook(self) -> None:
        r = self._runner
        if r is None or self._saved:
            return
        self._saved = {"out": r.out, "err": r.err}
        if hasattr(r, "wait_display"):
            self._saved["wait_display"] = r.wait_display
            r.wait_display = self.wait_display
        # AboveLive is a text stream (io.TextIOBase), which typeshed does not count as an IO[str].
        r.err = cast("IO[str]", self.stream)
        if _isatty(r.out):  # stdout on the same screen: above the region too; a pipe keeps its data
            r.out = cast("IO[str]", self.stream)

    def _unhook(self) -> None:
        r = self._runner
        if r is None or not self._saved:
            return
        for name, value in self._saved.items():
            setattr(r, name, value)
        self._saved = {}

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The live board stops redrawing (its rows so far stay on the screen) and gives the terminal back, so a
        question with its [y/N] and what is typed are plain lines; it goes on below them once answered. Live, the
        question would be printed through rich's redirected stdout as markup ("[y/N]" read as a style and
        dropped) into a region redrawn four times a second."""
        self.stream.flush()
        answered = False
        live = None
        try:
            with self._pausing:
                live = self._live
                if live is not None:
                    self._held = []
                    live.stop()
            yield
            answered = True
        finally:
            with self._pausing:
                # Not after an interrupted question (Ctrl-C): the run is ending, and the board's end prints its tally.
                if answered and live is not None and self._live is live:  # not ended meanwhile
                    # A new Live: the stopped one would start by moving the cursor up over the height of the board
                    # it drew last, erasing the question and its answer.
                    self._live = self._new_live()
                    self._live.start(refresh=True)
                self._let_go_of_held()

    # ---- lifetime ------------------------------------------------------------------------------
    def _new_live(self) -> Live:
        from rich.console import Console
        from rich.live import Live

        console = self._console = self._console or Console(file=self.out)
        return Live(console=console, refresh_per_second=4, transient=False,
                    get_renderable=lambda: self.render(console.height, console.width),
                    redirect_stdout=_isatty(sys.stdout), redirect_stderr=True, vertical_overflow="crop")

    def __enter__(self) -> Board:
        self._began = self.clock()
        if self.live:
            self._live = self._new_live()
            self._live.__enter__()
            ON_SCREEN.append(self)
            self._hook()
        elif self._runner is not None and hasattr(self._runner, "wait_display"):
            # Plain mode: waits are plain lines too (no spinner on a log file).
            self._saved = {"wait_display": self._runner.wait_display}
            self._runner.wait_display = self.wait_display
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stream.flush()
        with self._pausing:
            if self._live is not None:
                ON_SCREEN.remove(self)
                self._live.refresh()
                self._live.__exit__(kind, exc, traceback)
                self._live = None
            self._let_go_of_held()  # ended while a question waited (Ctrl-C): plain lines now
        self._unhook()
        print(self.tally(), file=self.out, flush=True)


ON_SCREEN: list[Board] = []  # the live board on the terminal now (at most one), for a question to pause


@contextmanager
def paused() -> Iterator[None]:
    """While a question waits for its answer (context.confirm): the live board on the screen, if any, pauses
    (Board.paused)."""
    if not ON_SCREEN:
        yield
        return
    with ON_SCREEN[-1].paused():
        yield
