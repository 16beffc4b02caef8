"""Top-level lifecycle tasks: `up` and `down` (and `doctor`, from `checkup`; `plan` and `status` are in
`overview`), and the teardown every `clean.*` and `….delete` shares.

They run the one resource graph (`resources.all_steps`): `up` creates what is missing, independent steps in
parallel, with a live board; `down` walks it backwards and ends with a leftover scan. Two changing runs against
the same project and cluster never interleave (`lock.py`). `up` changes nothing that exists: when what exists
differs from the settings (GPU type, mode, node count, Spot or reservation) it stops with exit 2 before any
change; `--resize` applies a node count.

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

import functools
import sys
from typing import TYPE_CHECKING, Any

from invoke.context import Context
from invoke.exceptions import Exit

from ..settings import Settings

if TYPE_CHECKING:  # imported where used: `invoke --list` imports this module
    from ..cost import Estimate
    from ..graph import Consent, Step
    from ..resources.leftovers import Scan
    from ..runner import Runner
from . import context
from .checkup import doctor
from .cluster import FLAG_HELP, cluster_settings

YES_HELP = "Answer yes to the confirmations (needed without a terminal)."
DATA_HELP = ("Also delete the Lustre instance, once every run on it is verified in the bucket (`invoke "
             "storage.export`). The bucket stays.")
UNEXPORTED_HELP = "With --delete-data: delete Lustre even with runs not in the bucket (lists them, asks)."
BUCKET_HELP = "Also delete the bucket, the durable home of exported checkpoints (asks, naming its size)."
UNLOCK_HELP = context.UNLOCK_HELP
TEARDOWN_HELP = {"delete_data": DATA_HELP, "delete_unexported": UNEXPORTED_HELP, "delete_bucket": BUCKET_HELP,
                 "yes": YES_HELP, "force_unlock": UNLOCK_HELP}


# ---- helpers shared with clean.py ----------------------------------------------------------------
def describe(s: Settings) -> str:
    capacity = f"reservation {s.RESERVATION}" if s.RESERVATION else "spot" if s.SPOT else "on-demand"
    return (f"project {s.PROJECT_ID}, cluster {s.CLUSTER_NAME} ({s.CLUSTER_MODE}) in {s.region}, "
            f"{s.GPU_NODES} × {s.gpu.machine_type} ({s.gpu.short}, {capacity}) in {s.zone}")


def present_map(r: Runner, steps: list[Step], *, any_state: bool = False) -> dict[str, bool | None]:
    """step name -> exists, asked in parallel (read-only); `always` steps count as absent.

    None: the check could not tell (a peering cannot be listed before its network exists); `up` then
    lets the graph ask again when the step's turn comes. any_state: present in any state (teardowns: a
    Lustre instance still CREATING is there to delete or keep), not only ready."""
    from ..tools import ToolError

    def ask(step: Any) -> bool | None:
        try:
            return bool(step.is_present(r) if any_state else step.exists(r))
        except ToolError:
            return None

    checked = [step for step in steps if not step.always]
    # One thread per check: most wait for the inventory's lists, and the few that ask their tool directly
    # (helm status, the prefetch Jobs' label) should not queue behind them.
    found = r.parallel([functools.partial(ask, step) for step in checked], max_workers=max(16, len(checked)))
    answer: dict[str, bool | None] = {step.name: False for step in steps}
    answer.update({step.name: ok for step, ok in zip(checked, found, strict=True)})
    return answer


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _say_cost(r: Runner, est: Estimate, *, prefix: str) -> None:
    from .. import cost

    r.say(f"{prefix}estimated cost while up:", err=not r.dry)
    for line in cost.summary_lines(est):
        r.say(f"{prefix}  {line}", err=not r.dry)


def _announce_up(c: Context, r: Runner, s: Settings, steps: list[Step], present: dict[str, bool | None],
                 resizing: int | None, est: Estimate, *, yes: bool) -> None:
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
    if resizing:
        r.say(f"will resize the GPU node pool from {resizing} to {s.GPU_NODES} nodes (and the Ray cluster to "
              f"{s.GPU_NODES} workers)", err=True)
    _say_cost(r, est, prefix="")
    if resizing or any(step.mutating for step in missing):
        what = [f"resize the GPU pool to {s.GPU_NODES} nodes"] if resizing else []
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
    from ..lock import bucket_lease, state_lock
    from ..resources import storage_steps

    owner_check = any(step.name == storage_steps.BUCKET for step in steps)
    with state_lock(s, "up"):
        # Both read-only: the bucket's owner (google-cloud-storage's import alone is 0.3 s) while the lists run.
        found: dict[str, dict[str, bool | None]] = {}
        r.parallel([lambda: storage_steps.check_bucket_owner(r, s) if owner_check else None,
                    lambda: found.update(present=present_map(r, steps))])
        present = found["present"]
        resizing = _drift_check(r, s, present, resize=resize, steps=steps)  # exit 2 on a difference, before any change
        _announce_up(c, r, s, steps, present, resizing, est, yes=yes)
        bucket = next((step for step in steps if step.name == storage_steps.BUCKET), None)
        if bucket is not None and not present[bucket.name]:
            # The bucket first (seconds): it holds the lease every machine sees, so even a first `up` is locked.
            bucket.create(r)
            present[bucket.name] = True
        with bucket_lease(s, "up", force=force_unlock), Board(steps, title=f"up {s.CLUSTER_NAME}", runner=r) as board:
            if resizing:
                _resize(r, s, present)
            try:
                graph.apply(r, steps, listener=board.listener, known=present)
            except graph.GraphError:
                r.say("up stopped: steps already running were let finish; nothing new was started. Fix the "
                      "cause above, then run `invoke up` again: it keeps what exists and continues "
                      "(`invoke plan` shows what is left).", err=True)
                raise
    r.say(f"up: done. Next: `invoke status`, `invoke job.submit NAME`; `invoke down` when finished "
          f"(about {cost.money(est.total)}/hour until then).", err=True)


def _drift_check(r: Runner, s: Settings, present: dict[str, bool | None], *, resize: bool,
                 steps: Any = None) -> int | None:
    """Refuse (exit 2) when what exists differs from the settings; `up` changes nothing that exists. A node
    count that differs is applied with --resize: returns the pool's current count then (None: nothing to do)."""
    from . import drift

    differences = drift.differences(s, drift.existing(r, s, present, steps))
    blocking = [d for d in differences if not (resize and d.field == "nodes")]
    if blocking:
        lines = "\n".join(f"  {d.document()['title']}: {d.text()}" for d in differences)
        raise Exit(f"error: what exists in {s.PROJECT_ID} differs from the settings (flags, then .env):\n{lines}\n"
                   f"up changes nothing that exists, so it stops here; nothing was changed. {drift.advice(blocking)}",
                   code=2)
    nodes = next((d for d in differences if d.field == "nodes"), None)
    if resize and nodes is None:
        r.say("--resize: the GPU pool already has the settings' node count (or there is no pool yet).", err=True)
    return int(nodes.have) if nodes is not None else None


def _resize(r: Runner, s: Settings, present: dict[str, bool | None]) -> None:
    """Resize the GPU pool to GPU_NODES, and have the graph upgrade the Ray release to as many workers."""
    from ..commands import gcloud
    from ..resources import ray_steps

    r.run(gcloud.node_pool_resize(s), timeout=3600)
    if present.get(ray_steps.RELEASE):
        present[ray_steps.RELEASE] = False  # its create is `helm upgrade --install`: GPU_NODES workers, waited for


def kept_message(kept: list[Any]) -> str:
    """What stays on purpose (only what exists: `kept` comes from the report, which checked)."""
    data = [step for step in kept if step.holds_data and step.needs()]
    if not data:
        return ""
    others = [step.title for step in kept if step not in data]
    hints = []
    if any(step.needs() == "delete_data" for step in data):
        hints.append("`invoke storage.export` then `--delete-data` deletes the Lustre instance")
    if any(step.needs() == "delete_bucket" for step in data):
        hints.append("`--delete-bucket` deletes the bucket")
    if any(step.needs() == "user_owned" for step in data):
        hints.append("the bucket is your own (GS_BUCKET_EXISTING=true): never deleted")
    text = (f"kept {' and '.join(step.title for step in data)}: they hold checkpoints"
            + "".join(f"; {hint}" for hint in hints) + ".")
    if others:
        text += " Also kept what they need: " + ", ".join(others) + "."
    return text


def consent(c: Context, *, delete_data: bool, delete_unexported: bool, delete_bucket: bool,
            yes: bool) -> Consent:
    """The teardown's consent from its flags; the guards ask through context.confirm (`--yes` answers)."""
    from ..graph import Consent
    from ..settings import ConfigError

    if delete_unexported and not delete_data:
        raise ConfigError("--delete-unexported", "set", "it only applies with --delete-data (add both to delete "
                                                         "the Lustre instance with runs not in the bucket).")
    return Consent(delete_data=delete_data, delete_unexported=delete_unexported, delete_bucket=delete_bucket,
                   ask=lambda question: context.confirm(c, question, yes=yes))


def _bucket_line(s: Settings) -> str:
    """The bucket left behind, with what it holds and costs ('' if there is none)."""
    from .. import cost, gcs
    from ..resources.data_guard import size_text

    try:
        held = gcs.summary(s)
    except Exception:  # noqa: BLE001 - a summary line must not fail the teardown
        return ""
    if held is None:
        return ""
    return (f"left: bucket gs://{s.bucket} ({held['objects']} objects, {size_text(held['bytes'])}, about "
            f"{cost.money(cost.bucket_monthly(held['bytes']))}/month); `--delete-bucket` deletes it.")


def tear_down(c: Context, s: Settings, steps: list[Step], *, delete_data: bool, yes: bool, what: str,
              layers: tuple[str, ...] = (), delete_unexported: bool = False, delete_bucket: bool = False,
              force_unlock: bool = False) -> None:
    """`down` and `clean.*`: list what will go, confirm, destroy in parallel with the board, scan for leftovers."""
    from .. import graph
    from ..board import Board
    from ..lock import deployment_lock
    from ..resources import leftovers

    given = consent(c, delete_data=delete_data, delete_unexported=delete_unexported, delete_bucket=delete_bucket,
                    yes=yes)
    r = context.runner(c, s)
    scope = ", ".join(layers) if layers else "everything"
    data = ("INCLUDING the Lustre instance (after the export check)" if delete_data else
            "keeping the Lustre instance (add --delete-data to delete it)")
    data += (", INCLUDING the bucket" if delete_bucket else ", keeping the bucket (add --delete-bucket to delete it)")
    question = f"Delete {scope} of nemo-rl-gke in {s.PROJECT_ID} (cluster {s.CLUSTER_NAME}), {data}?"
    if r.dry:
        r.say(f"# {what}: {scope} in {s.PROJECT_ID}, {data}")
        graph.destroy(r, steps, consent=given)
        kinds = [item.kind + "s" for item in leftovers.listings(s) if not layers or item.layer in layers]
        lists = f"; read-only lists of {', '.join(kinds)}" if kinds else ""
        r.say(f"# then: leftover scan (each step asked by name{lists})")
        return
    if not yes and not sys.stdin.isatty():
        context.confirm(c, question, yes=False)  # no terminal and no --yes: exit 2 before any external call
    failure = None
    with deployment_lock(s, what, force=force_unlock):
        present, shared, going = _teardown_plan(r, s, steps, given, what)
        if going:
            context.confirm(c, question, yes=yes)
        with Board(steps, title=f"{what} {s.CLUSTER_NAME}", runner=r) as board:
            try:
                report = graph.destroy(r, steps, consent=given, listener=board.listener, known=present,
                                       keep=shared)
            except graph.GraphError as exc:
                failure, report = exc, exc.report
        kept = report.by_outcome("kept")
        message = kept_message(kept)
        if message:
            r.say(message, err=True)
        from ..resources import all_steps
        from ..resources.inventory import inventory_of

        rescan = all_steps(s)
        fresh, before = inventory_of(rescan), inventory_of(steps)
        if fresh is not None and before is not None:
            fresh.knows_number_of(before)  # a project's number never changes: not asked again
        result = leftovers.scan(r, s, rescan, kept=kept, layers=layers)
    _teardown_outcome(r, s, what, result, failure, kept, delete_data=delete_data, delete_bucket=delete_bucket)


def _teardown_plan(r: Runner, s: Settings, steps: list[Step], given: Consent,
                   what: str) -> tuple[dict[str, bool | None], list[str], bool]:
    """Ask what exists and which other deployments share the project; say what will go and what stays.
    Returns (step -> present, the shared steps to keep, whether anything will be deleted)."""
    from .. import graph
    from ..resources import cluster_steps

    # Both read-only, at once: the steps that ask their tool directly (helm, the prefetch Jobs' label)
    # need not wait for the inventory's lists, which both read.
    found: dict[str, Any] = {}
    r.parallel([lambda: found.update(others=cluster_steps.other_deployments(r, s, steps)),
                lambda: found.update(present=present_map(r, steps, any_state=True))])
    others: list[str] = found["others"]
    present: dict[str, bool | None] = found["present"]
    shared = [step.name for step in steps if step.shared] if others else []
    keep = graph.kept_steps(steps, given, shared)
    going = [step.title for step in steps if step.delete is not None and step.name not in keep
             and present.get(step.name) is not False and not step.always]
    staying = [step.title for step in steps if step.name in keep and present.get(step.name)]
    r.say(f"{what} will delete ({len(going)}): " + (", ".join(going) or "nothing (none of it exists)"),
          err=True)
    if staying:
        r.say(f"{what} will keep ({len(staying)}): " + ", ".join(staying), err=True)
    if others and any(present.get(name) for name in shared):
        r.say(f"keeping what deployments share (VPCs, peering, Lustre, bucket): other deployment(s) "
              f"{', '.join(others)} in {s.PROJECT_ID} may still use them; `CLUSTER_NAME=NAME invoke down` "
              f"there first.", err=True)
    return present, shared, bool(going)


def _teardown_outcome(r: Runner, s: Settings, what: str, result: Scan, failure: Exception | None,
                      kept: list[Step], *, delete_data: bool, delete_bucket: bool) -> None:
    """The end of a teardown: the leftover scan's warnings, then the graph's failure, what is still there
    (exit 1), or that nothing of ours is left (and what the kept bucket holds)."""
    for warning in result.warnings:
        r.say(f"? {warning}", err=True)
    if failure is not None:
        r.say(f"{what} stopped: fix the cause above, then run `invoke {what}` again (it skips what is gone).",
              err=True)
        raise failure
    if result.left:
        lines = "\n".join(f"  {leftover.line()}" for leftover in result.left)
        raise Exit(f"error: still there after {what} (and possibly billing):\n{lines}\n"
                   f"Run `invoke {what}` again, or delete them in the console.", code=1)
    if delete_data and not delete_bucket and any(step.needs() == "delete_bucket" for step in kept):
        line = _bucket_line(s)
        if line:
            r.say(line, err=True)
    tail = " except what is kept on purpose (above)." if kept else "."
    r.say(f"{what}: nothing of ours is left{tail}", err=True)


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

    found = drift_module.read_cluster(body) if step_name == "cluster.cluster" else drift_module.read_pool(body)
    return drift_module.by_step(drift_module.differences(s, found)).get(step_name, "")


TASKS = [up, down, doctor]  # with overview.TASKS (plan, status): the top-level tasks
