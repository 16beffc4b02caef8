"""The live board of `up`, `down` and `clean`: one row per step, its state and elapsed time.

It plugs into `graph.apply/destroy` as the listener. On a terminal it redraws a rich table in place
(rich.live); otherwise (CI, a pipe, a log file) it prints one plain line per finished step, so logs stay
readable. Either way it ends with a one-line tally.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

MARKS = {"running": "…", "created": "✓", "ran": "✓", "deleted": "✓", "exists": "·", "absent": "·",
         "kept": "·", "with-parent": "·", "failed": "✗", "skipped": "-", "waiting": " "}


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Board:
    def __init__(self, steps: Sequence[Any], *, out: IO[str] | None = None, live: bool | None = None,
                 title: str = "", clock=time.monotonic):
        self.steps = list(steps)
        self.out = out or sys.stderr
        self.live = _isatty(self.out) if live is None else live
        self.title = title
        self.clock = clock
        self.state = {step.name: "waiting" for step in self.steps}
        self.started: dict[str, float] = {}
        self.seconds: dict[str, float] = {}
        self._lock = threading.Lock()
        self._live: Any = None
        self._began = clock()

    # ---- the graph's listener ----------------------------------------------------------------
    def listener(self, step: Any, state: str, seconds: float) -> None:
        with self._lock:
            self.state[step.name] = state
            if state == "running":
                self.started[step.name] = self.clock()
            else:
                self.seconds[step.name] = seconds
        if self._live is not None:
            self._live.refresh()  # redraws through get_renderable
        elif state != "running":
            line = f"{MARKS.get(state, '✓')} {step.title}: {state} ({seconds:.1f} s)"
            with self._lock:
                print(line, file=self.out, flush=True)

    # ---- drawing -------------------------------------------------------------------------------
    def elapsed(self, name: str) -> float | None:
        if name in self.seconds:
            return self.seconds[name]
        if name in self.started:
            return self.clock() - self.started[name]
        return None

    def rows(self) -> list[tuple[str, str, str]]:
        with self._lock:
            out = []
            for step in self.steps:
                state = self.state[step.name]
                elapsed = self.elapsed(step.name)
                shown = "" if elapsed is None else f"{elapsed:.0f} s" if elapsed >= 10 else f"{elapsed:.1f} s"
                out.append((step.title, f"{MARKS.get(state, '✓')} {state}", shown))
            return out

    def render(self) -> Any:
        from rich.table import Table

        table = Table(title=self.title or None, title_justify="left", expand=False)
        table.add_column("step")
        table.add_column("state")
        table.add_column("elapsed", justify="right")
        for row in self.rows():
            table.add_row(*row)
        table.caption = f"{self.clock() - self._began:.0f} s"
        return table

    def tally(self) -> str:
        counts: dict[str, int] = {}
        for state in self.state.values():
            counts[state] = counts.get(state, 0) + 1
        took = self.clock() - self._began
        return f"done in {took:.1f} s: " + ", ".join(f"{n} {k}" for k, n in counts.items())

    # ---- lifetime ------------------------------------------------------------------------------
    def __enter__(self) -> Board:
        self._began = self.clock()
        if self.live:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self.render(), console=Console(file=self.out), refresh_per_second=4,
                              get_renderable=self.render)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.refresh()
            self._live.__exit__(*exc)
            self._live = None
        print(self.tally(), file=self.out, flush=True)
