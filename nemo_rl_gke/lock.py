"""The per project+cluster lock that keeps two changing runs (`up`, `down`, `clean`) from interleaving.

A lock file (~/.cache/nemo-rl-gke/<project>-<cluster>.lock); a second run refuses at once and says who holds
it (the lock frees itself when that process ends, even if it crashed).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from invoke import Exit


def lock_path(s: Any) -> Any:
    import os
    from pathlib import Path

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nemo-rl-gke"
    return base / f"{s.PROJECT_ID}-{s.CLUSTER_NAME}.lock"


@contextmanager
def state_lock(s: Any, what: str):
    """Hold the per project+cluster lock; refuse (exit 1) if another run holds it."""
    import fcntl
    import json
    import os
    import time

    path = lock_path(s)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            try:
                holder = json.loads(handle.read() or "{}")
            except json.JSONDecodeError:
                holder = {}
            who = (f"`invoke {holder.get('what', '?')}` (pid {holder.get('pid', '?')}, "
                   f"since {holder.get('since', '?')})")
            raise Exit(f"error: another run holds {path}: {who} works on {s.PROJECT_ID}/{s.CLUSTER_NAME}. "
                       f"Two runs must not interleave; wait for it to finish, then run this again (the lock "
                       f"frees itself when that process ends).", code=1) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"what": what, "pid": os.getpid(),
                                 "since": time.strftime("%Y-%m-%d %H:%M:%S")}))
        handle.flush()
        try:
            yield path
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
