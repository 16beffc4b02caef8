"""A wait that ends when the cluster says so, not at the next poll: `kubectl wait` in the background beside a
poll (Runner.poll's `wake`). Kubernetes answers the moment the condition holds; the poll keeps its display and
its checks, and asks nothing while the watch is out."""

from __future__ import annotations

import threading
import time

from ..runner import Interrupted, Runner


class Watch:
    """Runs argv (a `kubectl wait … --timeout=<seconds>s`) on a thread; `ready` is set when it exits 0."""

    def __init__(self, r: Runner, argv: list[str], seconds: float):
        self.ready = threading.Event()
        self._r, self._argv, self._seconds = r, argv, seconds
        self._thread: threading.Thread | None = None
        self._answered = False

    def out(self) -> bool:
        """Still waiting (neither answered yes nor ended)."""
        return self._thread is not None and self._thread.is_alive() and not self._answered

    def start(self) -> None:
        self.ready.clear()
        self._answered = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        try:
            result = self._r.query(self._argv, ok_codes=range(256), timeout=self._seconds + 60)
            if result is not None and result.ok:
                self._answered = True  # before the wake: the poll it wakes (and clears) must not see it out
                self.ready.set()
                return
            # It gave up before its time (no pod matched yet, one was replaced): not again before then.
            self._r.wait_for(max(0.0, self._seconds - (time.monotonic() - started)))
        except Interrupted:  # Ctrl-C: the poll beside it stops too
            return
