"""The usual shapes of a step's actions, so each layer only lists its resources."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .. import names
from ..runner import ALREADY_EXISTS, NOT_FOUND, Runner


def check(argv: list[str]) -> Callable[[Runner], bool]:
    """Exists if the describe/get exits 0; absent if it says not found."""
    return lambda r: r.exists(argv)


def creator(argv: list[str], **run_options: Any) -> Callable[[Runner], str | None]:
    """Run a create; 'already exists' (a race with another run) counts as done."""

    def create(r: Runner) -> str | None:
        result = r.run(argv, accept=ALREADY_EXISTS, **run_options)
        return "exists" if result.already_exists else None

    return create


def deleter(argv: list[str]) -> Callable[[Runner], str | None]:
    """Run a delete; 'not found' (someone else deleted it) counts as done."""

    def delete(r: Runner) -> str | None:
        result = r.run(argv, accept=NOT_FOUND)
        return "absent" if result.not_found else None

    return delete


def delete_if_ours(describe: list[str], delete: list[str], what: str,
                   listed: Callable[[Runner], dict[str, Any] | None] | None = None) -> Callable[[Runner], str | None]:
    """Delete only what carries our description: a pre-existing VPC named in NETWORK is the user's.

    listed: the resource as this run's inventory listed it (a description does not change), else described."""

    def remove(r: Runner) -> str | None:
        body = listed(r) if listed is not None else None
        if body is None:
            found = r.query(describe)
            body = json.loads(found.stdout or "{}") if found is not None and found.ok else None
        if body is not None:
            description = body.get("description") or ""
            if names.DESCRIPTION not in description:
                r.say(f"kept {what}: not created by nemo-rl-gke (its description lacks '{names.DESCRIPTION}')",
                      err=True)
                return "kept"
        return deleter(delete)(r)

    return remove
