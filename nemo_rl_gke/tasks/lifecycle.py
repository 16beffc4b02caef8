"""Top-level lifecycle tasks: `up` and `down` (and `doctor`, from `checkup`; `plan` and `status` are in
`overview`; the teardown `down` shares with every `clean.*` and `….delete` is in `teardown`).

They run the one resource graph (`resources.all_steps`): `up` creates what is missing, independent steps in
parallel, with a live board; `down` walks it backwards and ends with a leftover scan. Two changing runs against
the same project and cluster never interleave (`lock.py`). `up` changes nothing that exists: when what exists
differs from the settings (GPU type, mode, node count, Spot or reservation) it stops with exit 2 before any
change; `--resize` applies a node count, and the Ray cluster's GPU workers (which `up` alone leaves, with a note).

Examples:
    invoke --dry up                      # the whole plan, offline, nothing runs
    invoke up --gpu=h200 --nodes=2 --spot --yes
    invoke up --nodes=4 --resize         # the existing GPU pool to 4 nodes, Ray to 4 workers (asks first)
    invoke plan
    invoke down --yes                    # keeps Lustre and the bucket (checkpoints)
    invoke storage.export && invoke down --yes --delete-data   # everything but the bucket
    invoke down --yes --delete-data --delete-bucket            # back to zero spend
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from invoke.context import Context
from invoke.exceptions import Exit

from ..settings import Settings

if TYPE_CHECKING:  # imported where used: `invoke --list` imports this module
    from ..cost import Estimate
    from ..runner import Runner
    from ..steps import Step
    from .drift import Difference
from . import context
from .checkup import doctor
from .cluster import FLAG_HELP, cluster_settings
from .context import UNLOCK_HELP, YES_HELP, present_map
from .teardown import TEARDOWN_HELP, tear_down


# ---- helpers shared with clean.py ----------------------------------------------------------------
def describe(s: Settings) -> str:
    capacity = f"reservation {s.RESERVATION}" if s.RESERVATION else "spot" if s.SPOT else "on-demand"
    return (f"project {s.PROJECT_ID}, cluster {s.CLUSTER_NAME} ({s.CLUSTER_MODE}) in {s.region}, "
            f"{s.GPU_NODES} × {s.gpu.machine_type} ({s.gpu.short}, {capacity}) in {s.zone}")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _say_cost(r: Runner, est: Estimate, *, prefix: str) -> None:
    from .. import cost

    r.say(f"{prefix}estimated cost while up:", err=not r.dry)
    for line in cost.summary_lines(est):
        r.say(f"{prefix}  {line}", err=not r.dry)


def _announce_up(c: Context, r: Runner, s: Settings, steps: list[Step], present: dict[str, bool | None],
                 resizing: list[Difference], est: Estimate, *, yes: bool) -> None:
    """Say what `up` will create or resize and what it costs; ask before any change (--yes answers)."""
    from .. import cost, graph

    missing = [step for step in steps if not step.always and not present[step.name]]
    r.say(f"up: {describe(s)}", err=True)
    if missing:
        critical = graph.critical_path_seconds(missing)
        r.say(f"will create {len(missing)} of {len(steps)} (about {_minutes(critical)} end to end): "
              + ", ".join(step.title for step in missing), err=True)
    elif not resizing:
        r.say("everything exists already; only refreshing credentials and checks.", err=True)
    pool = next((d for d in resizing if d.field == "nodes"), None)
    ray = next((d for d in resizing if d.field == "workers"), None)
    if pool is not None:
        r.say(f"will resize the GPU node pool from {pool.have} to {s.GPU_NODES} nodes (and the Ray cluster to "
              f"{s.GPU_NODES} workers)", err=True)
    elif ray is not None:
        r.say(f"will upgrade the Ray cluster from {ray.have} to {s.GPU_NODES} GPU workers", err=True)
    _say_cost(r, est, prefix="")
    if resizing or any(step.mutating for step in missing):
        what = ([f"resize the GPU pool to {s.GPU_NODES} nodes"] if pool is not None else
                [f"upgrade the Ray cluster to {s.GPU_NODES} GPU workers"] if ray is not None else [])
        what += [f"create {len(missing)} resources"] if missing else []
        question = " and ".join(what)
        context.confirm(c, f"{question[0].upper()}{question[1:]} in {s.PROJECT_ID}, about "
                           f"{cost.money(est.total)}/hour while up?", yes=yes)


def bring_up(c: Context, s: Settings, *, yes: bool, force_unlock: bool = False, resize: bool = False) -> None:
    from .. import cost, graph
    from ..board import Board
    from ..resources import all_steps

    steps = all_steps(s)
    r = context.runner(c, s)
    est = cost.estimate(s)
    critical = graph.critical_path_seconds(steps)
    if r.dry:
        r.say(f"# up: {describe(s)}")
        r.say(f"# {len(steps)} steps, independent ones in parallel; critical path about {_minutes(critical)}")
        _say_cost(r, est, prefix="# ")
        graph.apply(r, steps)
        return
    context.require_tools(c, "up")
    import sys
    from contextlib import ExitStack

    from ..lock import bucket_lease, state_lock
    from ..resources import storage_steps
    from ..steps import GraphError

    owner_check = any(step.name == storage_steps.BUCKET for step in steps)
    with state_lock(s, "up"):
        # Both read-only: the bucket's owner (google-cloud-storage's import alone is 0.3 s) while the lists run.
        found: dict[str, dict[str, bool | None]] = {}
        r.parallel([lambda: storage_steps.check_bucket_owner(r, s) if owner_check else None,
                    lambda: found.update(present=present_map(r, steps))])
        present = found["present"]
        resizing = _drift_check(r, s, present, resize=resize, steps=steps)  # exit 2 on a difference, before any change
        bucket = next((step for step in steps if step.name == storage_steps.BUCKET), None)
        first = bucket is not None and not present[bucket.name]
        # The lease before a question on a terminal: an answer may come minutes later, and no other machine's run
        # may change what the lists found meanwhile (a teardown asks under its lease too). Not with
        # --force-unlock (a "no" must not have taken over another run's lease), nor without a terminal (exit 2,
        # having written nothing), nor for a first `up` (no bucket yet to hold it).
        early = not (first or force_unlock or yes) and sys.stdin.isatty()
        with ExitStack() as held:
            if early:
                held.enter_context(bucket_lease(s, "up", force=force_unlock))
            _announce_up(c, r, s, steps, present, resizing, est, yes=yes)
            if bucket is not None and first:
                # The bucket first (seconds): it holds the lease every machine sees, so even a first `up` is locked.
                bucket.create(r)
                present[bucket.name] = True
            if not early:
                held.enter_context(bucket_lease(s, "up", force=force_unlock))
            with Board(steps, title=f"up {s.CLUSTER_NAME}", runner=r) as board:
                if resizing:
                    _resize(r, s, present, resizing)
                try:
                    graph.apply(r, steps, listener=board.listener, known=present)
                except GraphError:
                    r.say("up stopped: steps already running were let finish; nothing new was started. Fix the "
                          "cause above, then run `invoke up` again: it keeps what exists and continues "
                          "(`invoke plan` shows what is left).", err=True)
                    raise
    r.say(f"up: done. Next: `invoke status`, `invoke job.submit NAME`; `invoke down` when finished "
          f"(about {cost.money(est.total)}/hour until then).", err=True)


def _drift_check(r: Runner, s: Settings, present: dict[str, bool | None], *, resize: bool,
                 steps: Any = None) -> list[Difference]:
    """Refuse (exit 2) when what exists differs from the settings; `up` changes nothing that exists. The counts
    that differ (the GPU pool's nodes, the Ray cluster's workers) are applied with --resize: returned then. Ray's
    workers alone never block: `up` leaves them with a note (`ray.deploy --nodes=N` runs fewer on purpose)."""
    from . import drift

    found = drift.existing(r, s, present, steps)
    differences = drift.differences(s, found)
    blocking = drift.blocking(differences, resize=resize)
    if blocking:
        raise Exit(f"error: {drift.refusal(s, differences, blocking, what='up')}", code=2)
    from ..resources import cluster_features

    cluster_features.say_note(r, s, found.cluster_off)
    counts = [d for d in differences if d.field in drift.RESIZED]
    if resize and not counts:
        r.say("--resize: the GPU pool and the Ray cluster already have the settings' counts (or do not exist "
              "yet).", err=True)
    workers = next((d for d in counts if d.field == "workers"), None)
    if not resize and workers is not None:
        r.say(f"note: the Ray cluster has {workers.have} GPU worker(s), the settings say {workers.want}; up leaves "
              f"it so. `invoke up --resize` or `invoke ray.deploy` upgrades it.", err=True)
    return counts if resize else []


def _resize(r: Runner, s: Settings, present: dict[str, bool | None], resizing: list[Difference]) -> None:
    """Resize the GPU pool to GPU_NODES (when its size differs), and have the graph upgrade the Ray release to
    as many workers."""
    from ..commands import gcloud
    from ..resources import cluster_steps, ray_steps

    if any(d.field == "nodes" for d in resizing):
        result = r.run(gcloud.node_pool_resize(s), accept=cluster_steps.STILL_RUNNING,
                       timeout=cluster_steps.GCLOUD_WAIT_SECONDS + 300)
        if not result.ok:  # gcloud's own 20-minute limit: GKE goes on resizing
            minutes = ray_steps.READY_TIMEOUT_SECONDS // 60
            ray = (f" (the Ray cluster's wait for its workers, {minutes:.0f} minutes at most, waits for the nodes; "
                   f"`invoke up` again waits longer)" if present.get(ray_steps.RELEASE) else "")
            r.say(f"gcloud stopped waiting for the GPU pool's resize to {s.GPU_NODES} nodes (its own limit); GKE goes "
                  f"on with it{ray}.", err=True)
    if present.get(ray_steps.RELEASE):
        present[ray_steps.RELEASE] = False  # its create is `helm upgrade --install`: GPU_NODES workers, waited for


# ---- tasks -------------------------------------------------------------------------------------
RESIZE_HELP = ("Apply a GPU node count that differs from the existing pool's (gcloud container clusters resize "
               "--node-pool; asks first), then upgrade the Ray cluster to as many workers.")


@context.task(help={**FLAG_HELP, "resize": RESIZE_HELP, "yes": YES_HELP, "force_unlock": UNLOCK_HELP})
def up(c: Context, gpu: str | None = None, mode: str | None = None, nodes: int | None = None, spot: bool = False,
       reservation: str | None = None, resize: bool = False, yes: bool = False, force_unlock: bool = False) -> None:
    """Create everything (networks, cluster, GPU nodes, storage, Ray) in parallel; skips what exists."""
    s = cluster_settings(c, gpu, mode, nodes, spot, reservation)
    bring_up(c, s, yes=yes, force_unlock=force_unlock, resize=resize)


@context.task(help=TEARDOWN_HELP)
def down(c: Context, delete_data: bool = False, delete_unexported: bool = False, delete_bucket: bool = False,
         yes: bool = False, force_unlock: bool = False) -> None:
    """Delete everything `up` made, in parallel, then scan for leftovers (Lustre and bucket kept by default)."""
    from ..resources import all_steps

    s = context.settings(c)
    tear_down(c, s, all_steps(s), delete_data=delete_data, yes=yes, what="down",
              delete_unexported=delete_unexported, delete_bucket=delete_bucket, force_unlock=force_unlock)


def drift(s: Settings, step_name: str, body: dict[str, Any]) -> str:
    """What differs between one existing resource (its describe JSON) and the settings; '' if nothing."""
    from . import drift as drift_module

    found = drift_module.read_cluster(s, body) if step_name == "cluster.cluster" else drift_module.read_pool(body)
    return drift_module.by_step(drift_module.differences(s, found)).get(step_name, "")


TASKS = [up, down, doctor]  # with overview.TASKS (plan, status): the top-level tasks
