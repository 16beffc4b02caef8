"""ray steps (being built; see the issue tracker)."""

from __future__ import annotations

from ..graph import Step
from ..settings import Settings


def steps(s: Settings) -> list[Step]:
    return []
