"""The usual shapes of a step's actions, so each layer only lists its resources."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from typing import Any

from .. import names
from ..runner import ALREADY_EXISTS, NOT_FOUND, Runner

# GCE refusing to delete a network or subnet something still uses: "The network resource
# 'projects/P/global/networks/N' is already being used by 'projects/P/global/firewalls/F'".
IN_USE = re.compile(r"is already being used by '([^']+)'")


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
                   listed: Callable[[Runner], dict[str, Any] | None] | None = None,
                   ours: Callable[[str], bool] | None = None) -> Callable[[Runner], str | None]:
    """Delete only what carries our description: a pre-existing VPC named in NETWORK is the user's.

    listed: the resource as this run's inventory listed it (a description does not change), else described.
    ours(name): whether a resource GCE says still uses it is ours (a delete that has not reached it yet: the
    teardown fails, and a re-run goes on). One that is not (a cluster made another way, a VM of the user's)
    keeps it: said, and "kept", not a failure every re-run repeats."""

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
        if ours is None:
            return deleter(delete)(r)
        result = r.run(delete, accept=re.compile(f"{NOT_FOUND.pattern}|{IN_USE.pattern}", re.IGNORECASE))
        user = IN_USE.search(result.stderr) if not result.ok else None
        if user is None:
            return "absent" if not result.ok else None
        if ours(user.group(1).rsplit("/", 1)[-1]):
            raise r.failure(result)
        r.say(f"kept {what}: it is still used by '{user.group(1)}', which nemo-rl-gke did not create; once that "
              f"is gone, `invoke down` deletes it", err=True)
        return "kept"

    return remove


def made_by_us(s: Any, extra: Collection[str] = ()) -> Callable[[str], bool]:
    """Whether a resource name is one of ours (the names we give, and what GKE makes for our cluster)."""
    from .leftovers import our_names

    known = {name for group in our_names(s).values() for name in group} | set(extra)
    return lambda name: name in known or name.startswith(f"gke-{s.CLUSTER_NAME}-")
