"""Counters the reliability suite reports at the end of the pytest run (see conftest.py)."""

from __future__ import annotations

from collections import Counter

COUNTS: Counter[str] = Counter()
NOT_ON_FAKE: set[str] = set()  # tasks only dry-run, with the reason


def add(what: str, n: int = 1) -> None:
    """what: 'cases' (generated inputs checked), 'faults' (failures injected), 'files' (files scanned)."""
    COUNTS[what] += n
