"""`storage`: the bucket (durable home of checkpoints) with Workload Identity for the Ray pods, the
Kubernetes Secret with the tokens, and Managed Lustre end to end (peering range, VPC peering, instance,
PV/PVC at /data).

The Lustre instance and the bucket hold your checkpoints: `storage.delete` keeps both unless you add
--delete-data, and even then refuses to delete Lustre without an export from the last 24 hours.

Examples:
    invoke --dry storage.create           # the whole plan, nothing runs
    invoke storage.create                 # ~20 min the first time (Lustre), seconds afterwards
    invoke storage.export --run=gsm8k-1   # /data/runs/gsm8k-1 -> gs://GS_BUCKET/runs/gsm8k-1/
    invoke storage.delete --yes           # PV/PVC and the binding; Lustre and the bucket stay
    invoke storage.export && invoke storage.delete --delete-data --yes
"""

import re

from invoke import Collection, Exit

from . import context

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _steps(s):
    from ..resources import cluster_steps as cluster
    from ..resources import storage_steps as storage

    # kubectl needs the cluster's credentials; `up` has that step already, storage.create brings its own.
    return [st for st in cluster.steps(s) if st.name == cluster.CREDENTIALS] + storage.steps(s)


@context.task
def create(c):
    """Create the bucket, KSA and its binding, the Secret, and Lustre with its PV/PVC (skips what exists)."""
    s = context.settings(c)
    context.apply_steps(c, s, _steps(s))


@context.task
def status(c):
    """Show the bucket (location, size), Lustre (state, capacity, IP), the PVC phase and the Secret."""
    from ..resources import storage_steps

    s = context.settings(c)
    r = context.runner(c, s)
    if r.dry:
        r.say("# storage.status reads the bucket, Lustre and the cluster; a dry run shows nothing.")
        return
    context.print_table("storage", ("resource", "state"), storage_steps.status_rows(r, s))


@context.task(help={"delete_data": "Also delete the Lustre instance and the bucket, with every checkpoint in "
                                   "them (needs an export from the last 24 h).",
                    "yes": "Answer yes to the confirmation (needed without a terminal)."})
def delete(c, delete_data=False, yes=False):
    """Delete the PV/PVC, KSA, Secret and binding; with --delete-data also Lustre, peering, range, bucket."""
    from ..resources import storage_steps

    s = context.settings(c)
    r = context.runner(c, s)
    lost = storage_steps.data_at_risk(r, s) if delete_data else []
    if lost and not storage_steps.recent_export(r, s):
        raise Exit("refusing to delete data that has no recent export. This would be lost:\n"
                   + "\n".join(f"  - {line}" for line in lost)
                   + "\nRun `invoke storage.export` first (it copies /data/runs to the bucket), then re-run.",
                   code=1)
    what = "the Lustre PV/PVC, service account, Secret and bucket binding"
    if delete_data:
        what += f", AND the Lustre instance {s.LUSTRE_NAME}, its peering and range, and gs://{s.bucket}"
    context.confirm(c, f"Delete {what}?", yes=yes)
    storage_steps.credentials_if_cluster(r, s)
    report = context.destroy_steps(c, s, _steps(s), delete_data=delete_data)
    for step in report.by_outcome("kept"):
        if step.holds_data:
            r.say(f"kept {step.title}: it holds checkpoints; add --delete-data (after `invoke "
                  f"storage.export`) to delete it.", err=True)


@context.task(help={"run": "Export only this run (/data/runs/ID); default: every run."})
def export(c, run=None):
    """Copy checkpoints from Lustre to gs://GS_BUCKET/runs/ and list what the bucket holds there."""
    from ..resources import storage_steps
    from ..settings import ConfigError

    if run is not None and not _RUN_ID.match(run):
        raise ConfigError("--run", run, "a run id is letters, digits, '.', '_' or '-' (as in job.list).")
    s = context.settings(c)
    r = context.runner(c, s)
    storage_steps.export(r, s, run)


ns = Collection("storage", create, status, delete, export)
