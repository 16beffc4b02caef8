"""`storage`: the bucket (durable home of checkpoints) with Workload Identity for the Ray pods, the
Kubernetes Secret with the tokens, and Managed Lustre end to end (peering range, VPC peering, instance,
PV/PVC at /data).

The Lustre instance and the bucket hold your checkpoints: `storage.delete` keeps both by default.
--delete-data deletes Lustre once every run on it is verified in the bucket (`storage.export` first);
--delete-bucket deletes the bucket, after a confirmation naming its size.

Examples:
    invoke --dry storage.create           # the whole plan, nothing runs
    invoke storage.create                 # ~20 min the first time (Lustre), seconds afterwards
    invoke storage.export --run=gsm8k-1   # /data/runs/gsm8k-1 -> gs://GS_BUCKET/runs/gsm8k-1/
    invoke storage.delete --yes           # PV/PVC and the binding; Lustre and the bucket stay
    invoke storage.export && invoke storage.delete --delete-data --yes   # the bucket stays
"""

from __future__ import annotations

import re
from typing import Any

from invoke.collection import Collection
from invoke.context import Context

from ..settings import Settings
from . import context
from .context import UNLOCK_HELP
from .teardown import TEARDOWN_HELP

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _steps(s: Settings) -> list[Any]:
    from ..resources import cluster_steps as cluster
    from ..resources import layer_steps

    # kubectl needs the cluster's credentials; `up` has that step already, storage.create brings its own.
    return layer_steps(s, "storage", cluster.CREDENTIALS)


@context.task(help={"force_unlock": UNLOCK_HELP})
def create(c: Context, force_unlock: bool = False) -> None:
    """Create the bucket, KSA and its binding, the Secret, and Lustre with its PV/PVC (skips what exists)."""
    from ..resources import storage_steps

    s = context.settings(c)
    r = context.runner(c, s)
    storage_steps.check_bucket_owner(r, s)
    with context.deployment_locked(c, s, "storage.create", force=force_unlock):
        from ..resources import cluster_features

        steps = _steps(s)
        # The PV mounts through the cluster's Lustre driver: refused now (exit 2) on a cluster without it.
        cluster_features.require(r, s, steps, cluster_features.LUSTRE_NEEDS)
        context.apply_steps(c, s, steps, what="storage.create")


@context.task
def status(c: Context) -> None:
    """Show the bucket (location, size), Lustre (state, capacity, IP), the PVC phase and the Secret."""
    from ..resources import storage_steps

    s = context.settings(c)
    r = context.runner(c, s)
    if r.dry:
        context.dry_read(r, "storage.status", "shows the bucket (location, size), Lustre (state, capacity, IP), the "
                                              "PVC's phase and the Secret", storage_steps.status_questions(s))
        return
    context.print_table("storage", ("resource", "state"), storage_steps.status_rows(r, s))


@context.task(help=TEARDOWN_HELP)
def delete(c: Context, delete_data: bool = False, delete_unexported: bool = False, delete_bucket: bool = False,
           yes: bool = False, force_unlock: bool = False) -> None:
    """Delete PV/PVC, KSA, Secret, binding; Lustre with --delete-data (export checked), bucket with --delete-bucket."""
    import sys

    from ..resources import all_steps, cluster_steps
    from .clean import layer_teardown_steps
    from .teardown import check_flags, tear_down

    check_flags(delete_data=delete_data, delete_unexported=delete_unexported)  # before any call
    s = context.settings(c)
    r = context.runner(c, s)
    if not r.dry and (yes or sys.stdin.isatty()):
        cluster_steps.credentials_if_cluster(r, s)  # kubectl's deletes need them (a fresh machine has none)
    # The same teardown as clean.storage: the list of what goes first, the lock, the leftover scan.
    steps = layer_teardown_steps(all_steps(s), "storage", delete_data, delete_bucket)
    tear_down(c, s, steps, delete_data=delete_data, yes=yes, what="storage.delete", layers=("storage",),
              delete_unexported=delete_unexported, delete_bucket=delete_bucket, force_unlock=force_unlock)


@context.task(help={"run": "Export only this run (/data/runs/ID); default: every run.", "force_unlock": UNLOCK_HELP})
def export(c: Context, run: str | None = None, force_unlock: bool = False) -> None:
    """Copy checkpoints from Lustre to gs://GS_BUCKET/runs/ and list what the bucket holds there."""
    from ..resources import data_guard
    from ..settings import ConfigError

    if run is not None and not _RUN_ID.match(run):
        raise ConfigError("--run", run, "a run id is letters, digits, '.', '_' or '-' (as in job.list).")
    s = context.settings(c)
    r = context.runner(c, s)
    with context.deployment_locked(c, s, "storage.export", force=force_unlock):
        data_guard.export(r, s, run)


ns = Collection("storage", create, status, delete, export)
