"""What the steps' existence checks ask, recorded without running anything (for the real tools' parse checks)."""

from __future__ import annotations

import io
from typing import Any


def asked_by_checks(s: Any, *, presence: bool = False) -> list[list[str]]:
    """Every argv each step's exists() (and, with presence, is_present()) asks, from a runner that answers
    'not found' to everything without running it."""
    from nemo_rl_gke.resources import all_steps
    from nemo_rl_gke.runner import Result, Runner

    asked: list[list[str]] = []

    class Recording(Runner):
        def _execute(self, argv, *, stdin, retry, timeout):  # noqa: ANN001 - the Runner's own signature
            asked.append(list(argv))
            return Result(list(argv), 1, "", "ERROR: (gcloud) NOT_FOUND: was not found")

    r = Recording(out=io.StringIO(), err=io.StringIO())
    for step in all_steps(s):
        if step.always:
            continue
        for check in (step.exists, step.is_present) if presence else (step.exists,):
            try:
                check(r)
            except Exception:  # noqa: BLE001 - a check that needs a live answer still recorded its argv
                pass
    return asked
