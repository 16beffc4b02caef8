"""How the runner shows a long wait (a Lustre instance becoming ACTIVE, Ray pods becoming Ready): the live
board when one is up, else a spinner on a terminal, else a line at the start and one at the end."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

# What a long wait shows instead of the runner's own spinner (a live board, say): called with the label, the
# seconds waited and `done`: False at the start and about every runner.WAIT_SLICE_SECONDS, then at the end True (got
# what it waited for) or why not ("timed out after 60 s", "interrupted", "failed").
WaitDisplay = Callable[[str, float, "bool | str"], None]


@dataclass
class Waiting:
    """One wait being shown (Runner.waiting)."""

    label: str
    started: float
    display: WaitDisplay | None = None
    outcome: str | None = None  # None: ended with what it waited for

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def tick(self) -> None:
        if self.display is not None:
            self.display(self.label, self.elapsed(), False)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def showing(label: str, *, dry: bool, display: WaitDisplay | None, err: IO[str],
            say: Callable[[str], None]) -> Iterator[Waiting]:
    """Runner.waiting: show one wait through display (the live board), else a rich spinner with the elapsed
    time on a terminal (err), else start/end lines (say). A dry run shows nothing."""
    wait = Waiting(label, time.monotonic(), display)
    if dry:
        yield wait
        return
    if display is not None:
        display(label, 0.0, False)
        try:
            yield wait
        except KeyboardInterrupt:
            wait.outcome = wait.outcome or "interrupted"
            raise
        except Exception:
            wait.outcome = wait.outcome or "failed"
            raise
        finally:
            display(label, wait.elapsed(), wait.outcome or True)
        return
    if _isatty(err):
        from rich.console import Console
        from rich.text import Text

        console = Console(file=err)
        with console.status(Text(f"{label}…")) as status:  # the label as it is, never markup
            stop = threading.Event()

            def tick() -> None:
                while not stop.wait(1.0):
                    status.update(Text(f"{label}… {wait.elapsed():.0f} s"))

            ticker = threading.Thread(target=tick, daemon=True)
            ticker.start()
            try:
                yield wait
            finally:
                stop.set()
    else:
        say(f"… {label}")
        yield wait
    if wait.outcome:
        say(f"✗ {label}: {wait.outcome}")
    else:
        say(f"✓ {label} ({wait.elapsed():.1f} s)")
