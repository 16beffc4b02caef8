"""The teardown `down`, every `clean.*` and every `….delete` share: list what will go and what stays (data,
what other deployments share), confirm, destroy in parallel with the live board (the data guard runs first),
then scan for leftovers and say what is still there (exit 1) or that nothing of ours is left."""

from __future__ import annotations

import sys
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from invoke.context import Context
from invoke.exceptions import Exit

from ..settings import Settings
from . import context
from .context import UNLOCK_HELP, YES_HELP, present_map

if TYPE_CHECKING:  # imported where used: `invoke --list` imports this module
    from ..resources.inventory import Inventory
    from ..resources.leftovers import EarlyLists, Scan
    from ..runner import Runner
    from ..steps import Consent, Listener, Step


DATA_HELP = ("Also delete the Lustre instance, once every run on it is verified in the bucket (`invoke "
             "storage.export`). The bucket stays.")


UNEXPORTED_HELP = "With --delete-data: delete Lustre even with runs not in the bucket (lists them, asks)."


BUCKET_HELP = "Also delete the bucket, the durable home of exported checkpoints (asks, naming its size)."


TEARDOWN_HELP = {"delete_data": DATA_HELP, "delete_unexported": UNEXPORTED_HELP, "delete_bucket": BUCKET_HELP,
                 "yes": YES_HELP, "force_unlock": UNLOCK_HELP}


def kept_message(kept: list[Any], shared: Collection[str] = ()) -> str:
    """What stays on purpose (only what exists: `kept` comes from the report, which checked). shared: the steps
    kept because another deployment uses them (`_teardown_plan`): no flag deletes those, so none is named."""
    # A layer task marks what another layer's kept data needs as holding data (layer_teardown_steps: clean.net's
    # main VPC while the Lustre instance stays); it has no flag of its own, so it is said as needed, not as data.
    standing = [step for step in kept if step.holds_data and step.needs() and not step.consent]
    held = [step for step in kept if step.holds_data and step.consent]
    if not held:
        if not standing:
            return ""
        them = "them" if len(standing) > 1 else "it"
        return (f"kept {', '.join(step.title for step in standing)}: the kept Lustre instance needs {them}; "
                f"`invoke storage.export` then `invoke down --delete-data` deletes {them} along with the instance.")
    from ..graph import needed_by

    # The user's own bucket (GS_BUCKET_EXISTING) is never deleted: that, not sharing, is why it stays.
    common = [step for step in held if step.name in shared and step.needs() != "user_owned"]
    data = [step for step in held if step not in common]
    needed = needed_by(kept, [step.name for step in held])  # not what stays for another reason (a cluster kept)
    others = [step.title for step in kept if step not in held and (step.name in needed or step in standing)]
    if not data:
        them = "them" if len(common) > 1 else "it"
        return (f"kept {' and '.join(step.title for step in common)}: another deployment shares {them} (above), "
                f"whatever the flags." + (" Also kept what they need: " + ", ".join(others) + "." if others else ""))
    hints = []
    if any(step.needs() == "delete_data" for step in data):
        hints.append("`invoke storage.export` then `--delete-data` deletes the Lustre instance")
    if any(step.needs() == "delete_bucket" for step in data):
        hints.append("`--delete-bucket` deletes the bucket")
    if any(step.needs() == "user_owned" for step in data):
        hints.append("the bucket is your own (GS_BUCKET_EXISTING=true): never deleted")
    hold = "they hold" if len(data) > 1 else "it holds"
    text = (f"kept {' and '.join(step.title for step in data)}: {hold} checkpoints"
            + "".join(f"; {hint}" for hint in hints) + ".")
    if common:
        text += f" Kept too, as another deployment shares it: {' and '.join(step.title for step in common)}."
    if others:
        text += " Also kept what they need: " + ", ".join(others) + "."
    return text


def check_flags(*, delete_data: bool, delete_unexported: bool) -> None:
    """The teardown flags that make no sense together: exit 2 before any call (every teardown task, first)."""
    from ..settings import ConfigError

    if delete_unexported and not delete_data:
        raise ConfigError("--delete-unexported", "set", "it only applies with --delete-data (add both to delete "
                                                         "the Lustre instance with runs not in the bucket).")


def consent(c: Context, *, delete_data: bool, delete_unexported: bool, delete_bucket: bool,
            yes: bool) -> Consent:
    """The teardown's consent from its flags; the guards ask through context.confirm (`--yes` answers)."""
    from ..steps import Consent

    check_flags(delete_data=delete_data, delete_unexported=delete_unexported)
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
    from ..steps import GraphError

    given = consent(c, delete_data=delete_data, delete_unexported=delete_unexported, delete_bucket=delete_bucket,
                    yes=yes)
    r = context.runner(c, s)
    scope = ", ".join(layers) if layers else "everything"
    if layers and "storage" not in layers:  # no data flags here: the data is another layer's
        data = ("keeping the Lustre instance and the bucket (only `down`, `clean.storage` and `storage.delete` "
                "delete them, by flag)")
    else:
        data = ("INCLUDING the Lustre instance (after the export check)" if delete_data else
                "keeping the Lustre instance (add --delete-data to delete it)")
        data += (", INCLUDING the bucket" if delete_bucket else
                 ", keeping the bucket (add --delete-bucket to delete it)")
    question = f"Delete {scope} of nemo-rl-gke in {s.PROJECT_ID} (cluster {s.CLUSTER_NAME}), {data}?"
    if r.dry:
        from ..resources import cluster_steps

        r.say(f"# {what}: {scope} in {s.PROJECT_ID}, {data}")
        graph.destroy(r, steps, consent=given)
        if any(step.name == cluster_steps.CLUSTER for step in steps):
            r.say(f"# a real run keeps cluster {s.CLUSTER_NAME} if nemo-rl-gke did not create it (no managed-by "
                  f"label), deleting only what we added to it")
        elif cluster_steps.networks_alone(steps):
            r.say(f"# a real run first refuses (exit 2, nothing deleted) while cluster {s.CLUSTER_NAME} stands on "
                  f"these networks, and says what deletes it first (`invoke cluster.delete` for one nemo-rl-gke made)")
        kinds = [item.kind + "s" for item in leftovers.listings(s) if not layers or item.layer in layers]
        lists = f"; read-only lists of {', '.join(kinds)}" if kinds else ""
        r.say(f"# then: leftover scan (each step asked by name{lists})")
        return
    if not yes and not sys.stdin.isatty():
        context.confirm(c, question, yes=False)  # no terminal and no --yes: exit 2 before any external call
    failure = None
    with deployment_lock(s, what, force=force_unlock):
        # Nothing is asked between the plan and the deletes with --yes: the export check reads beside the lists.
        present, shared, going = _teardown_plan(r, s, steps, given, what, read_ahead=yes)
        _add_claim_guard(r, s, steps, present)
        if going:
            context.confirm(c, question, yes=yes)
        rescan, early = _rescan(r, s, steps, layers)
        with Board(steps, title=f"{what} {s.CLUSTER_NAME}", runner=r) as board:
            try:
                report = graph.destroy(r, steps, consent=given, known=present, keep=shared,
                                       listener=_both(board.listener, early or (lambda *_: None)))
            except GraphError as exc:
                failure, report = exc, exc.report
        kept = report.by_outcome("kept")
        message = kept_message(kept, shared)
        if message:
            r.say(message, err=True)
        result = leftovers.scan(r, s, rescan, kept=kept, layers=layers, gone=early.trusted() if early else set())
        if early is not None:
            early.wait()
    _teardown_outcome(r, s, what, result, failure, kept, shared, delete_data=delete_data,
                      delete_bucket=delete_bucket)


def _add_claim_guard(r: Runner, s: Settings, steps: list[Step], present: dict[str, bool | None]) -> None:
    """Give the Lustre claim's step a guard (run, like the data guards, before anything is deleted, after them in
    step order so their refusal is said first): the claim may not go while a pod this teardown leaves mounts it.
    In place: the list keeps what it carries (its inventory)."""
    from dataclasses import replace

    from ..resources import storage_steps
    from ..resources.inventory import inventory_of

    going = {step.name for step in steps}
    if r.dry or storage_steps.PVC not in going or not present.get(storage_steps.PVC):
        return
    inv = inventory_of(steps)
    for index, step in enumerate(steps):
        if step.name == storage_steps.PVC:
            steps[index] = replace(step, guard=lambda runner, _consent: _claim_free_or_refuse(runner, s, going, inv))


CLAIM_USERS = "teardown.claim-users"  # the plan's read of the pods mounting the claim (with --yes), for its guard


def _read_claim_users(r: Runner, s: Settings, inv: Inventory) -> None:
    """The claim guard's read, taken beside the plan's listings when nothing is asked between them and the
    deletes (`--yes`): one `kubectl get pods` off the path to the first delete. Any doubt leaves nothing, and
    the guard reads as it always does."""
    from ..resources import storage_steps
    from ..tools import ToolError

    try:
        inv.handoff.keep(CLAIM_USERS, storage_steps.claim_users(r, s))
    except (ToolError, ValueError):
        return


def _read_pods_for_guards(r: Runner, s: Settings, inv: Inventory) -> None:
    """The claim guard's read and the data guard's search for the head pod, from one `kubectl get pods` of the
    namespace (the head is one of its pods); then the data guard's listing of /data/runs in it. A kubectl that
    did not answer leaves both to read as they always do."""
    import json

    from ..commands import kubectl
    from ..resources import data_guard, storage_steps

    result = r.query(kubectl.get(s, "pods", namespace=s.NAMESPACE), ok_codes=range(256))
    if result is None or not result.ok:
        return
    try:
        pods = json.loads(result.stdout or "{}").get("items") or []
    except ValueError:
        return
    inv.handoff.keep(CLAIM_USERS, storage_steps.mounting_claim(pods))
    data_guard.read_ahead(r, s, inv, pods=pods)


def _claim_free_or_refuse(r: Runner, s: Settings, going: set[str], inv: Inventory | None = None) -> None:
    """A teardown that deletes the Lustre claim but not the pods mounting it (clean.storage or storage.delete with
    Ray still deployed, or a pod of the user's): Kubernetes keeps a claim in use (pvc-protection), so kubectl's
    delete would wait, and give up after DELETE_TIMEOUT. Refused before anything is deleted, naming the pods and
    what stops them."""
    from .. import names, prefetch
    from ..commands import kubectl
    from ..resources import prefetch_steps, ray_steps, storage_steps

    def labels(pod: dict[str, Any]) -> dict[str, str]:
        return (pod.get("metadata") or {}).get("labels") or {}

    found, read = (False, None) if inv is None else inv.handoff.take(CLAIM_USERS)
    users: list[dict[str, Any]] = list(read or []) if found else storage_steps.claim_users(r, s)
    if ray_steps.RELEASE in going:  # this teardown uninstalls Ray first
        users = [p for p in users if labels(p).get("ray.io/cluster") != names.RAY_RELEASE]
    if prefetch_steps.PREFETCH in going:  # and deletes the prefetch Jobs first
        users = [p for p in users if labels(p).get("app.kubernetes.io/component") != prefetch.COMPONENT]
    if not users:
        return
    pods = ", ".join(str((p.get("metadata") or {}).get("name")) for p in users[:6]) + (", …" if len(users) > 6 else "")
    ray = any(labels(p).get("ray.io/cluster") == names.RAY_RELEASE for p in users)
    # A Job's pod is made again when deleted: its Job is what to delete (Kubernetes labels its pods with it).
    owners = [labels(p).get("batch.kubernetes.io/job-name") or labels(p).get("job-name") for p in users]
    jobs = sorted({str(job) for job in owners if job})
    stop = ([f"delete their Job first (`kubectl delete job {' '.join(jobs)} --namespace={s.NAMESPACE}`: a Job "
             f"makes its pod again)"] if jobs else []) + (
        [f"delete them first (`kubectl delete pod NAME --namespace={s.NAMESPACE}`; one that has ended holds the claim "
         f"too, until it is deleted)"] if not all(owners) else [])
    fix = ("`invoke clean.ray --yes` first (the Ray cluster mounts /data), or `invoke down` for everything" if ray
           else "; ".join(stop))
    raise Exit(f"error: the Lustre claim {names.LUSTRE_PVC} is in use by {len(users)} pod(s): {pods}. Kubernetes "
               f"keeps a claim while a pod mounts it, so its delete would wait for them (and give up after "
               f"{kubectl.DELETE_TIMEOUT}). Nothing was deleted: {fix}.", code=1)


def _rescan(r: Runner, s: Settings, steps: list[Step], layers: tuple[str, ...]
            ) -> tuple[list[Step], EarlyLists | None]:
    """The leftover scan's steps, with a fresh inventory (knowing the project number the teardown read; asking
    only what the layers' steps ask), and the teardown listener that lists each kind for it once that kind's
    deletes have ended (None without an inventory)."""
    from ..resources import all_steps, leftovers
    from ..resources.inventory import inventory_of

    rescan = all_steps(s)
    fresh, before = inventory_of(rescan), inventory_of(steps)
    if fresh is None:
        return rescan, None
    if before is not None:
        fresh.knows_number_of(before)  # a project's number never changes: not asked again
    if layers:  # `clean.ray` lists nothing of the networks or Lustre (the labelled lists of its layers still run)
        fresh.restrict([step for step in rescan if step.layer in layers])
    return rescan, leftovers.EarlyLists(r, fresh, steps)


def _both(first: Listener, second: Listener) -> Listener:
    def listener(step: Step, state: str, seconds: float) -> None:
        first(step, state, seconds)
        second(step, state, seconds)

    return listener


def _teardown_plan(r: Runner, s: Settings, steps: list[Step], given: Consent, what: str, *,
                   read_ahead: bool = False) -> tuple[dict[str, bool | None], list[str], bool]:
    """Ask what exists and which other deployments share the project; say what will go and what stays.
    read_ahead: also take the data guard's read of /data/runs now (`data_guard.read_ahead`).
    Returns (step -> present, the shared steps to keep, whether anything will be deleted)."""
    from .. import graph
    from ..resources import cluster_steps, data_guard, ray_steps, storage_steps
    from ..resources.inventory import inventory_of

    # Read-only, at once: the steps that ask their tool directly (helm, the prefetch Jobs' label) need not
    # wait for the inventory's lists, which the others read.
    found: dict[str, Any] = {}
    inv = inventory_of(steps)
    anew = inv is not None and inv.fetched_anew  # before these reads (clean.*'s look at its data did it)
    if inv is not None:
        inv.fetch_when_recreated = True
    reads = [lambda: found.update(others=cluster_steps.other_deployments(r, s, steps)),
             lambda: found.update(present=present_map(r, steps, any_state=True))]
    # The guards' read of /data/runs: the Lustre step's (with --delete-data), the Ray release's (it records it).
    readers = (storage_steps.LUSTRE, ray_steps.RELEASE) if given.delete_data else (ray_steps.RELEASE,)
    guard = read_ahead and inv is not None and any(step.name in readers for step in steps)
    claim = read_ahead and inv is not None and not r.dry and any(step.name == storage_steps.PVC for step in steps)
    if guard and claim and inv is not None:  # both from one `get pods` of the namespace: a process less
        reads.append(lambda: _read_pods_for_guards(r, s, inv))
    elif guard and inv is not None:
        reads.append(lambda: data_guard.read_ahead(r, s, inv))
    elif claim and inv is not None:
        reads.append(lambda: _read_claim_users(r, s, inv))
    r.parallel(reads)
    others: list[str] = found["others"]
    present: dict[str, bool | None] = found["present"]
    if inv is not None and inv.fetched_anew and not anew:  # the context was an earlier cluster's: read anew
        inv.forget_kube()  # (through the old one they answered "no such context": absent, the claim's users unseen)
        present = present_map(r, steps, any_state=True)
    if not r.dry and any(step.name == storage_steps.PV for step in steps):
        storage_steps.refuse_teardown_of_a_taken_volume(r, s, steps)
    if not r.dry:
        cluster_steps.refuse_networks_under_the_cluster(r, s, steps, what)
    shared = [step.name for step in steps if step.shared] if others else []
    shared += cluster_steps.keep_if_not_ours(r, s, steps, present)  # a cluster made another way stays
    keep = graph.kept_steps(steps, given, shared)
    going = [step.title for step in steps if step.delete is not None and step.name not in keep
             and present.get(step.name) is not False and not step.always]
    staying = [step.title for step in steps if step.name in keep and present.get(step.name)]
    r.say(f"{what} will delete ({len(going)}): " + (", ".join(going) or "nothing (none of it exists)"),
          err=True)
    if staying:
        r.say(f"{what} will keep ({len(staying)}): " + ", ".join(staying), err=True)
    if others and any(present.get(name) for name in shared):
        adopted = ("; in a cluster made another way, that deletes only our node pool: one made another way "
                   "stays on our VPCs until you delete it (`gcloud container node-pools delete`)"
                   if any("made another way" in other for other in others) else "")
        r.say(f"keeping what deployments share (VPCs, peering, Lustre, bucket): other deployment(s) "
              f"{', '.join(others)} in {s.PROJECT_ID} may still use them; `CLUSTER_NAME=NAME invoke down` "
              f"there first{adopted}.", err=True)
    return present, shared, bool(going)


def _teardown_outcome(r: Runner, s: Settings, what: str, result: Scan, failure: Exception | None,
                      kept: list[Step], shared: Collection[str], *, delete_data: bool, delete_bucket: bool) -> None:
    """The end of a teardown: the leftover scan's warnings, then the graph's failure, what is still there
    (exit 1), or that nothing of ours is left (and what the kept bucket holds, unless another deployment shares
    it: no flag deletes it then). shared: the steps kept for another deployment (`_teardown_plan`)."""
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
    if delete_data and not delete_bucket and any(step.needs() == "delete_bucket" and step.name not in shared
                                                 for step in kept):
        line = _bucket_line(s)
        if line:
            r.say(line, err=True)
    tail = " except what is kept on purpose (above)" if kept else ""
    if result.warnings:  # a list that could not be read is no proof that nothing is left
        r.say(f"{what}: nothing of ours was found{tail}, but {len(result.warnings)} check(s) could not be read "
              f"(marked ? above): `invoke status` looks again.", err=True)
        return
    r.say(f"{what}: nothing of ours is left{tail}.", err=True)
