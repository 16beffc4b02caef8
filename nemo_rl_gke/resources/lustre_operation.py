"""Managed Lustre's long-running operations. An `--async` create or export names one ("Check operation [...]");
it says when the work is done, and it alone carries the error of work that failed on Google's side."""

from __future__ import annotations

import json

from ..commands import lustre
from ..runner import Runner
from ..settings import Settings


def state(r: Runner, s: Settings, operation: str) -> tuple[bool, str] | None:
    """(done, its error as "message (code N)" or ""); None in a dry run. An operation that cannot be read (no
    permission, not found, after the runner's retries of transient errors) raises: waiting on it would be blind."""
    answer = r.query(lustre.operation_describe(s, operation))
    if answer is None:
        return None
    if not answer.ok:
        raise r.failure(answer)
    body = json.loads(answer.stdout or "{}")
    error = body.get("error") or {}
    said = f"{error.get('message') or error} (code {error.get('code', '?')})" if error else ""
    return bool(body.get("done")), said
