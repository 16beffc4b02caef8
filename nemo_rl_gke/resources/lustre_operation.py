"""Managed Lustre's long-running operations. An `--async` create or export names one ("Check operation [...]");
it says when the work is done, and it alone carries the error of work that failed on Google's side."""

from __future__ import annotations

import json
from typing import Any

from ..commands import lustre
from ..runner import Runner
from ..settings import Settings


def state(r: Runner, s: Settings, operation: str) -> tuple[bool, str] | None:
    """(done, its error as "message (code N)" or ""); None in a dry run. An operation that cannot be read (no
    permission, not found, after the runner's retries of transient errors) raises: waiting on it would be blind.
    A transfer that ended without an error but with objects it failed to write (its counters, its error
    summaries) failed too: what it did not copy is not in the bucket."""
    found = describe(r, s, operation)
    return None if found is None else outcome(found)


def outcome(found: dict[str, Any]) -> tuple[bool, str]:
    """(done, its error or ""), from the operation as described (see state)."""
    error = found.get("error") or {}
    said = f"{error.get('message') or error} (code {error.get('code', '?')})" if error else ""
    if not said and found.get("done"):
        said = _failed_objects(found)
    return bool(found.get("done")), said


def describe(r: Runner, s: Settings, operation: str) -> dict[str, Any] | None:
    """The operation as the API gives it; None in a dry run."""
    answer = r.query(lustre.operation_describe(s, operation))
    if answer is None:
        return None
    if not answer.ok:
        raise r.failure(answer)
    body = json.loads(answer.stdout or "{}")
    return body if isinstance(body, dict) else {}


def counters(found: dict[str, Any]) -> dict[str, int] | None:
    """A transfer's counters (TransferOperationMetadata.counters: foundObjectsCount, objectsSkippedCount,
    objectsCopiedCount, objectsFailedCount, …; int64, so strings in JSON), or None when it reports none."""
    raw = _transfer(found).get("counters")
    if not isinstance(raw, dict):
        return None
    try:
        return {key: int(value) for key, value in raw.items()}
    except (TypeError, ValueError):
        return None


def _transfer(found: dict[str, Any]) -> dict[str, Any]:
    """The operation's TransferOperationMetadata ({} for an operation that is not a transfer)."""
    metadata = (found.get("metadata") or {}).get("operationMetadata")
    return metadata if isinstance(metadata, dict) else {}


def _failed_objects(found: dict[str, Any]) -> str:
    summaries = _transfer(found).get("errorSummaries")
    failed = (counters(found) or {}).get("objectsFailedCount", 0)
    if not failed and not summaries:
        return ""
    first: dict[str, Any] = next(
        (entry for summary in summaries or [] for entry in summary.get("errorLogEntries") or []), {})
    detail = "; ".join(first.get("errorDetails") or []) or next(
        (str(summary.get("errorCode")) for summary in summaries or []), "")
    where = f" ({first.get('uri')}: {detail})" if first.get("uri") else f" ({detail})" if detail else ""
    return f"{failed or 'some'} objects failed to copy{where}"
