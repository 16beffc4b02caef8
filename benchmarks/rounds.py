"""Sequential rounds in a calls log: the longest chain of calls each of which started only after the one
before it had ended (what had to wait for what). One round: every call overlapped the others."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def call_rounds(calls: Sequence[dict[str, Any]]) -> int:
    """Length of the longest chain c1, c2, … with c(k+1).start >= c(k).end (calls.jsonl start/end times)."""
    ordered = sorted(calls, key=lambda c: (c["end"], c["start"]))
    depth: list[int] = []
    for i, call in enumerate(ordered):
        before = [depth[j] for j in range(i) if ordered[j]["end"] <= call["start"]]
        depth.append(1 + max(before, default=0))
    return max(depth, default=0)
