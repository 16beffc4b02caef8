"""Top-level lifecycle tasks: `up`, `down`, `plan`, `status` (and `doctor`, from `checkup`).

They run the one resource graph (`resources.all_steps`): `up` creates what is missing, independent steps in
parallel, with a live board; `down` walks it backwards and ends with a leftover scan; `plan` and `status`
only ask. Two `up`/`down`/`clean` runs against the same project and cluster never interleave (`lock.py`).

Examples:
    invoke --dry up                      # the whole plan, offline, nothing runs
    invoke up --gpu=h200 --nodes=2 --spot --yes
    invoke plan
    invoke down --yes                    # keeps Lustre and the bucket (checkpoints)
    invoke storage.export && invoke down --yes --delete-data   # everything but the bucket
    invoke down --yes --delete-data --delete-bucket            # back to zero spend
"""

from __future__ import annotations

import sys
from typing import Any

from invoke import Exit

from ..lock import bucket_lease, deployment_lock, state_lock
from . import context
from .checkup import doctor
from .cluster import FLAG_HELP, cluster_settings

YES_HELP = "Answer yes to the confirmations (needed without a terminal)."
DATA_HELP = ("Also delete the Lustre instance, once every run on it is verified in the bucket (`invoke "
             "storage.export`). The bucket stays.")
UNEXPORTED_HELP = "With --delete-data: delete Lustre even with runs not in the bucket (lists them, asks)."
BUCKET_HELP = "Also delete the bucket, the durable home of exported checkpoints (asks, naming its size)."
UNLOCK_HELP = ("Take over the deployment's lock even if another run (on any machine) holds it; says whose. Only "
               "when that run is gone.")
TEARDOWN_HELP = {"delete_data": DATA_HELP, "delete_unexported": UNEXPORTED_HELP, "delete_bucket": BUCKET_HELP,
                 "yes": YES_HELP, "force_unlock": UNLOCK_HELP}


# ---- helpers shared with clean.py ----------------------------------------------------------------
def describe(s: Any) -> str:
    capacity = f"reservation {s.RESERVATION}" if s.RESERVATION else "spot" if s.SPOT else "on-demand"
    return (f"project {s.PROJECT_ID}, cluster {s.CLUSTER_NAME} ({s.CLUSTER_MODE}) in {s.region}, "
            f"{s.GPU_NODES} × {s.gpu.machine_type} ({s.gpu.short}, {capacity}) in {s.zone}")


def present_map(r: Any, steps: list[Any], *, any_state: bool = False) -> dict[str, bool | None]:
    """step name -> exists, asked in parallel (read-only); `always` steps count as absent.

    None: the check could not tell (a peering cannot be listed before its network exists); `up` then
    lets the graph ask again when the step's turn comes. any_state: present in any state (teardowns: a
    Lustre instance still CREATING is there to delete or keep), not only ready."""
    from ..runner import ToolError

    def ask(step: Any) -> bool | None:
        try:
            return bool(step.is_present(r) if any_state else step.exists(r))
        except ToolError:
            return None

    checked = [step for step in steps if not step.always]
    found = r.parallel([lambda step=step: ask(step) for step in checked])
    answer: dict[str, bool | None] = {step.name: False for step in steps}
    answer.update({step.name: ok for step, ok in zip(checked, found, strict=True)})
    return answer


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _say_cost(r: Any, est: Any, *, prefix: str) -> None:
    from .. import cost

    r.say(f"{prefix}estimated cost while up:", err=not r.dry)
    for line in cost.summary_lines(est):
        r.say(f"{prefix}  {line}", err=not r.dry)


def bring_up(c: Any, s: Any, *, yes: bool, force_unlock: bool = False) -> None:
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
    from ..resources import storage_steps

    if any(step.name == storage_steps.BUCKET for step in steps):
        storage_steps.check_bucket_owner(r, s)
    with state_lock(s, "up"):
        present = present_map(r, steps)
        missing = [step for step in steps if not step.always and not present[step.name]]
        r.say(f"up: {describe(s)}", err=True)
        if missing:
            critical = graph.critical_path_seconds(missing)
            r.say(f"will create {len(missing)} of {len(steps)} (about {_minutes(critical)} end to end): "
                  + ", ".join(step.title for step in missing), err=True)
        else:
            r.say("everything exists already; only refreshing credentials and checks.", err=True)
        _say_cost(r, est, prefix="")
        if any(step.mutating for step in missing):
            context.confirm(c, f"Create {len(missing)} resources in {s.PROJECT_ID}, about "
                               f"{cost.money(est.total)}/hour while up?", yes=yes)
        bucket = next((step for step in steps if step.name == storage_steps.BUCKET), None)
        if bucket is not None and not present[bucket.name]:
            # The bucket first (seconds): it holds the lease every machine sees, so even a first `up` is locked.
            bucket.create(r)
            present[bucket.name] = True
        with bucket_lease(s, "up", force=force_unlock), Board(steps, title=f"up {s.CLUSTER_NAME}") as board:
            try:
                graph.apply(r, steps, listener=board.listener, known=present)
            except graph.GraphError:
                r.say("up stopped: steps already running were let finish; nothing new was started. Fix the "
                      "cause above, then run `invoke up` again: it keeps what exists and continues "
                      "(`invoke plan` shows what is left).", err=True)
                raise
    r.say(f"up: done. Next: `invoke status`, `invoke job.submit NAME`; `invoke down` when finished "
          f"(about {cost.money(est.total)}/hour until then).", err=True)


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


def consent(c: Any, *, delete_data: bool, delete_unexported: bool, delete_bucket: bool, yes: bool) -> Any:
    """The teardown's consent from its flags; the guards ask through context.confirm (`--yes` answers)."""
    from ..graph import Consent
    from ..settings import ConfigError

    if delete_unexported and not delete_data:
        raise ConfigError("--delete-unexported", "set", "it only applies with --delete-data (add both to delete "
                                                         "the Lustre instance with runs not in the bucket).")
    return Consent(delete_data=delete_data, delete_unexported=delete_unexported, delete_bucket=delete_bucket,
                   ask=lambda question: context.confirm(c, question, yes=yes))


def _bucket_line(s: Any) -> str:
    """The bucket left behind, with what it holds and costs ('' if there is none)."""
    from .. import cost, gcs
    from ..resources.storage_steps import size_text

    try:
        held = gcs.summary(s)
    except Exception:  # noqa: BLE001 - a summary line must not fail the teardown
        return ""
    if held is None:
        return ""
    return (f"left: bucket gs://{s.bucket} ({held['objects']} objects, {size_text(held['bytes'])}, about "
            f"{cost.money(cost.bucket_monthly(held['bytes']))}/month); `--delete-bucket` deletes it.")


def tear_down(c: Any, s: Any, steps: list[Any], *, delete_data: bool, yes: bool, what: str,
              layers: tuple[str, ...] = (), delete_unexported: bool = False, delete_bucket: bool = False,
              force_unlock: bool = False) -> None:
    """`down` and `clean.*`: list what will go, confirm, destroy in parallel with the board, scan for leftovers."""
    from .. import graph
    from ..board import Board
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
        r.say(f"# then: leftover scan (each step asked by name; read-only lists of {', '.join(kinds)})")
        return
    if not yes and not sys.stdin.isatty():
        context.confirm(c, question, yes=False)  # no terminal and no --yes: exit 2 before any external call
    failure = None
    with deployment_lock(s, what, force=force_unlock):
        from ..resources import cluster_steps

        others = cluster_steps.other_deployments(r, s)
        shared = [step.name for step in steps if step.shared] if others else []
        present = present_map(r, steps, any_state=True)
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
        if going:
            context.confirm(c, question, yes=yes)
        with Board(steps, title=f"{what} {s.CLUSTER_NAME}") as board:
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

        result = leftovers.scan(r, s, all_steps(s), kept=kept, layers=layers)
    for warning in result.warnings:
        r.say(f"? {warning}", err=True)
    if failure is not None:
        r.say(f"{what} stopped: fix the cause above, then run `invoke {what}` again (it skips what is gone).",
              err=True)
        raise failure
    if result.left:
        lines = "\n".join(f"  {found.line()}" for found in result.left)
        raise Exit(f"error: still there after {what} (and possibly billing):\n{lines}\n"
                   f"Run `invoke {what}` again, or delete them in the console.", code=1)
    if delete_data and not delete_bucket and any(step.needs() == "delete_bucket" for step in kept):
        line = _bucket_line(s)
        if line:
            r.say(line, err=True)
    tail = " except what is kept on purpose (above)." if kept else "."
    r.say(f"{what}: nothing of ours is left{tail}", err=True)


# ---- tasks -------------------------------------------------------------------------------------
@context.task(help={**FLAG_HELP, "yes": YES_HELP, "force_unlock": UNLOCK_HELP})
def up(c, gpu=None, mode=None, nodes=None, spot=False, reservation=None, yes=False, force_unlock=False):
    """Create everything (networks, cluster, GPU nodes, storage, Ray) in parallel; skips what exists."""
    s = cluster_settings(c, gpu, mode, nodes, spot, reservation)
    bring_up(c, s, yes=yes, force_unlock=force_unlock)


@context.task(help=TEARDOWN_HELP)
def down(c, delete_data=False, delete_unexported=False, delete_bucket=False, yes=False, force_unlock=False):
    """Delete everything `up` made, in parallel, then scan for leftovers (Lustre and bucket kept by default)."""
    from ..resources import all_steps

    s = context.settings(c)
    tear_down(c, s, all_steps(s), delete_data=delete_data, yes=yes, what="down",
              delete_unexported=delete_unexported, delete_bucket=delete_bucket, force_unlock=force_unlock)


@context.task(help=FLAG_HELP)
def plan(c, gpu=None, mode=None, nodes=None, spot=False, reservation=None):
    """Show what `up` would create and what it would leave as is, with the cost per hour (read-only)."""
    from .. import cost
    from ..resources import all_steps

    s = cluster_settings(c, gpu, mode, nodes, spot, reservation)
    steps = all_steps(s)
    r = context.runner(c, s)
    present = present_map(r, steps)
    est = cost.estimate(s)
    hourly = cost.hourly_by_step(est, steps)
    differs = _drifts(r, s, present)
    rows = []
    for step in steps:
        action = ("run" if step.always else "leave" if present[step.name] else "create" if present[step.name]
                  is False else "create?")
        if step.name in differs:
            action = f"leave, but it differs: {differs[step.name]}"
        rows.append((step.title, action, cost.money(hourly[step.name]) + "/h" if step.name in hourly else ""))
    context.print_table(f"plan: {describe(s)}", ("resource", "up would", "cost"), rows)
    creating = sum(1 for row in rows if row[1].startswith("create"))
    now = sum(v for name, v in hourly.items() if present.get(name))
    leaving = sum(1 for row in rows if row[1].startswith("leave"))
    print(f"up would create {creating} of {len(steps)} and leave {leaving}. Everything up: about "
          f"{cost.money(est.total)}/hour; what exists now: about {cost.money(now)}/hour.")
    if differs:
        print(f"{len(differs)} existing resource(s) differ from the settings; up does not change them. To "
              f"rebuild: `invoke clean.cluster --yes` then `invoke up`.")
    print(f"({est.caveat()})")


def drift(s: Any, step_name: str, body: dict) -> str:
    """What differs between an existing resource (its describe JSON) and the settings; '' if nothing."""
    out = []
    if step_name == "cluster.cluster":
        autopilot = bool((body.get("autopilot") or {}).get("enabled"))
        if autopilot != s.autopilot:
            out.append(f"it is {'autopilot' if autopilot else 'standard'}, the settings say {s.CLUSTER_MODE}")
    elif step_name == "cluster.gpu-pool":
        config = body.get("config") or {}
        nodes = body.get("initialNodeCount")
        if nodes is not None and int(nodes) != s.GPU_NODES:
            out.append(f"{nodes} nodes, the settings say {s.GPU_NODES}")
        machine = config.get("machineType")
        if machine and machine != s.gpu.machine_type:
            out.append(f"{machine}, the settings say {s.gpu.machine_type}")
        spot = bool(config.get("spot"))
        if spot != (s.SPOT and not s.RESERVATION):
            out.append(("Spot VMs" if spot else "not Spot VMs") + ", the settings say otherwise")
    return "; ".join(out)


def _drifts(r: Any, s: Any, present: dict[str, bool | None]) -> dict[str, str]:
    import json

    from ..commands import gcloud

    asks = {"cluster.cluster": gcloud.cluster_describe(s), "cluster.gpu-pool": gcloud.node_pool_describe(s)}
    wanted = [(name, argv) for name, argv in asks.items() if present.get(name)]
    answers = r.parallel([lambda argv=argv: r.query(argv) for _, argv in wanted])
    out = {}
    for (name, _), result in zip(wanted, answers, strict=True):
        if result is not None and result.ok:
            text = drift(s, name, json.loads(result.stdout or "{}"))
            if text:
                out[name] = text
    return out


@context.task
def status(c):
    """One table of every resource: state, age and cost per hour; then the Ray cluster and the latest job."""
    from .. import cost
    from ..resources import all_steps

    s = context.settings(c)
    steps = all_steps(s)
    r = context.runner(c, s)
    # Any state: a Lustre instance still CREATING already bills (plan asks "ready?": what up would do).
    present = present_map(r, steps, any_state=True)
    est = cost.estimate(s)
    hourly = cost.hourly_by_step(est, steps)
    ages = _ages(r, s, steps, present)
    rows = []
    for step in steps:
        if step.always:
            continue
        here = present[step.name]
        rate = hourly.get(step.name, 0.0) if here else 0.0
        age = ages.get(step.name)
        so_far = cost.money(rate * age / 3600) if age is not None and rate else ""
        state = "present" if here else "absent" if here is False else "unknown"
        rows.append((step.title, state, cost.money(rate) + "/h" if rate else "",
                     _age_text(age), so_far))
    context.print_table(f"status: {describe(s)}", ("resource", "state", "cost", "age", "so far"), rows)
    total = sum(hourly.get(name, 0.0) for name, here in present.items() if here)
    print(f"now: about {cost.money(total)}/hour ({est.caveat()})")
    _extra_status(c, s)


def _age_text(age: float | None) -> str:
    if age is None:
        return ""
    if age >= 2 * 86400:
        return f"{age / 86400:.0f} d"
    if age >= 2 * 3600:
        return f"{age / 3600:.0f} h"
    return f"{age / 60:.0f} min"


def _ages(r: Any, s: Any, steps: list[Any], present: dict[str, bool]) -> dict[str, float]:
    """Seconds since creation, for the resources that bill by the hour and report a creation time."""
    import json

    from .. import cost
    from ..commands import gcloud

    asks = {"cluster.cluster": gcloud.cluster_describe(s)}
    lustre_step = cost.attach_step("lustre", steps)
    try:
        from ..commands import lustre

        if lustre_step:
            asks[lustre_step] = lustre.lustre_describe(s)
    except ImportError:  # storage layer not there
        pass
    wanted = [(name, argv) for name, argv in asks.items() if present.get(name)]
    answers = r.parallel([lambda argv=argv: r.query(argv) for _, argv in wanted])
    out = {}
    for (name, _), result in zip(wanted, answers, strict=True):
        if result is None or not result.ok:
            continue
        body = json.loads(result.stdout or "{}")
        created = _parse_time(body.get("createTime") or body.get("creationTimestamp"))
        if created is not None:
            out[name] = max(0.0, _now() - created)
    # The GPU pool and the CPU pool are billed from the cluster's age at most.
    if "cluster.cluster" in out:
        for name in present:
            if name.startswith("cluster.") and name not in out and present[name]:
                out.setdefault(name, out["cluster.cluster"])
    return out


def _now() -> float:
    import time

    return time.time()


def _parse_time(text: Any) -> float | None:
    from datetime import UTC, datetime

    if not text:
        return None
    try:
        value = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _extra_status(c: Any, s: Any) -> None:
    """The Ray cluster and the latest job, through those modules' public status helpers when they exist."""
    import importlib

    for module_name, function in (("ray", "cluster_summary"), ("job", "latest_summary")):
        module = importlib.import_module(f"nemo_rl_gke.tasks.{module_name}")
        helper = getattr(module, function, None)
        if helper is None:
            print(f"{module_name}: for details run `invoke {module_name}.status`")
            continue
        try:
            for line in helper(c, s) or []:
                print(line)
        except Exception as exc:  # noqa: BLE001 - status must still print the rest
            print(f"{module_name}: could not read status: {str(exc).splitlines()[0] if str(exc) else exc}",
                  file=sys.stderr)


TASKS = [up, down, plan, status, doctor]
