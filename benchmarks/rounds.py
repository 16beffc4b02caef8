"""Sequential rounds in a calls log: the longest chain of calls each of which started only after the one
before it had ended (what had to wait for what). One round: every call overlapped the others."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def call_rounds(calls: Sequence[dict[str, Any]]) -> int:
    """Length of the longest chain c1, c2, … where c(k+1) was launched after c(k) ended (calls.jsonl times).

    A call's start is when its process was launched (`launched`, before the interpreter's start-up), so a
    call that only waited for a free CPU does not count as having waited for another call."""
    ordered = sorted(calls, key=lambda c: (c["end"], c["start"]))
    depth: list[int] = []
    for i, call in enumerate(ordered):
        began = call.get("launched", call["start"])
        before = [depth[j] for j in range(i) if ordered[j]["end"] <= began]
        depth.append(1 + max(before, default=0))
    return max(depth, default=0)
