"""Storage: the bucket (durable home of exported checkpoints) with its Workload Identity binding, the
Kubernetes service account and Secret, and Managed Lustre end to end (peering range -> VPC peering ->
instance -> PV/PVC). The bucket and the Lustre instance hold data: `destroy` keeps them without consent.

The data guard (data_guard.py) is the Lustre step's guard, so every path to the delete (down, clean,
clean.storage, storage.delete) goes through it: the instance goes only with --delete-data and a verified
export (every run under /data/runs in gs://BUCKET/runs/ with the same files and sizes, none running), or with
--delete-unexported after a confirmation that lists what is lost. The bucket goes only with --delete-bucket,
after a confirmation naming it with its object count and size.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from .. import gcs, gcs_client, names
from ..commands import buckets, exports, kube_objects, kubectl, lustre
from ..runner import ALREADY_EXISTS, NO_CONTEXT, Result, Runner, last_lines
from ..settings import Settings
from ..steps import Action, Check, Step
from ..tools import ToolError
from . import cluster_steps as cluster
from . import data_guard, lustre_operation, peering
from . import net_steps as net
from .head_pod import leaving
from .inventory import Decide, Inventory, KubeRef, find_kube, named, short
from .step_shapes import check, creator, delete_if_ours, deleter

BUCKET = "storage.bucket"
KSA = "storage.ksa"
BINDING = "storage.bucket-binding"
SECRET = "storage.secret"
RANGE = "storage.range"
PEERING = "storage.peering"
LUSTRE = "storage.lustre"
PV = "storage.pv"
PVC = "storage.pvc"

LUSTRE_TIMEOUT_SECONDS = 3600
DRY_PROJECT_NUMBER = "PROJECT_NUMBER"


def project_number(r: Runner, s: Settings, inventory: Inventory | None = None) -> str:
    """PROJECT_NUMBER from settings, else `gcloud projects describe` (once per inventory, i.e. per run)."""
    if s.PROJECT_NUMBER:
        return s.PROJECT_NUMBER
    if r.dry:
        return DRY_PROJECT_NUMBER
    return (inventory or Inventory(s)).project_number(r)


# ---- Kubernetes objects through stdin --------------------------------------------------------------------
def _apply(s: Settings, docs: list[dict[str, Any]], label: str) -> Action:
    def apply(r: Runner) -> None:
        r.run(kubectl.apply_stdin(s), stdin=kube_objects.to_yaml(docs), stdin_label=label)

    return apply


def secret_present(r: Runner, s: Settings) -> bool:
    """The Secret exists with exactly our values (a changed token makes this False: the apply updates it).

    Its JSON carries the values (base64): never echoed, and on failure only stderr is reported.
    """
    result = r.query(kubectl.get(s, "secret", names.SECRET_NAME, namespace=s.NAMESPACE), ok_codes=range(256))
    if result is None:
        return False
    if result.ok:
        return kube_objects.secret_matches(s, result.stdout)
    if result.not_found:
        return False
    raise ToolError(r.redact(f"kubectl could not read Secret {names.SECRET_NAME}: {result.stderr.strip()}"),
                    result.exit_code)


def _apply_secret(s: Settings) -> Action:
    def apply(r: Runner) -> None:
        keys = ", ".join(kube_objects.secret_values(s))
        r.run(kubectl.apply_stdin(s), stdin=kube_objects.to_yaml([kube_objects.secret(s)]),
              stdin_label=f"Secret {names.SECRET_NAME} ({keys}; values hidden)")

    return apply




# ---- Managed Lustre --------------------------------------------------------------------------------------
def lustre_state(r: Runner, s: Settings) -> dict[str, Any] | None:
    """state, capacity_gib, mount_point, ip of the instance, or None if it does not exist."""
    result = r.query(lustre.lustre_describe(s))
    if result is None:
        return None
    if result.ok:
        return lustre.lustre_info(result.stdout)
    if result.not_found:
        return None
    raise r.failure(result)


def claim_users(r: Runner, s: Settings) -> list[dict[str, Any]]:
    """The pods of the namespace that mount the Lustre claim and are not on their way out: while one is there,
    Kubernetes keeps the claim (pvc-protection) and `kubectl delete` waits for it. An ended pod (Succeeded or
    Failed) holds it too: the controller counts every pod placed on a node that mounts it, whatever its phase
    (pvc_protection_controller.go podUsesPVC), until the pod is deleted. One being deleted (the Ray pods for a
    while after `clean.ray`: helm's uninstall does not wait for them) lets go within its grace period, which the
    claim's delete waits for."""
    result = r.query(kubectl.get(s, "pods", namespace=s.NAMESPACE), ok_codes=(0,))
    if result is None:
        return []
    return mounting_claim(json.loads(result.stdout or "{}").get("items") or [])


def mounting_claim(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of a namespace's pods, those `claim_users` counts."""
    out = []
    for pod in pods:
        volumes = (pod.get("spec") or {}).get("volumes") or []
        mounts = any((v.get("persistentVolumeClaim") or {}).get("claimName") == names.LUSTRE_PVC for v in volumes)
        if mounts and not leaving(pod):
            out.append(pod)
    return out


def _lustre_present(s: Settings) -> Check:
    def present(r: Runner) -> bool:
        # Any state: a CREATING instance already bills, holds the network, and must be deleted or kept.
        return lustre_state(r, s) is not None

    return present


def _lustre_ready(s: Settings) -> Check:
    def exists(r: Runner) -> bool:
        # An instance still CREATING (an interrupted run) is not done: create() then waits for it.
        info = lustre_state(r, s)
        return info is not None and info["state"] in lustre.LUSTRE_USABLE_STATES

    return exists


# Kept for the next step (Inventory.handoff): the describe that saw Lustre ready (for the PV), the PV's capacity.
READY_DESCRIBE = "Lustre describe when ready"
PV_CAPACITY = "PV capacity"


def _lustre_create(s: Settings, inv: Inventory) -> Action:
    def create(r: Runner) -> str | None:
        result = r.run(lustre.lustre_create(s), accept=ALREADY_EXISTS, timeout=600)
        seen: dict[str, str] = {}
        # Our create's operation: until it is done the instance is not ready, and its error is the only word on
        # a failure on Google's side (no capacity in the zone, a quota). A re-run's earlier create: the instance.
        operation = "" if result.already_exists else lustre.operation_id(result.stderr + "\n" + result.stdout)

        def ready() -> bool:
            if operation and not seen.get("operation done"):
                done = lustre_operation.state(r, s, operation)
                if done is not None and not done[0]:
                    return False
                seen["operation done"] = "yes"  # then the instance's own state decides (ACTIVE, its mountPoint)
                if done is not None and done[1]:
                    raise ToolError(f"Lustre instance {s.LUSTRE_NAME} was not created: {done[1]}, operation "
                                    f"{operation}. Fix what it says, then `invoke storage.create`.", 1)
            info = lustre_state(r, s)
            state = info["state"] if info else "NOT_FOUND"
            seen["state"] = state
            if state == "DELETING":  # an earlier teardown's delete goes on in Google Cloud after its gcloud went
                raise ToolError(f"Lustre instance {s.LUSTRE_NAME} is DELETING: Google Cloud is deleting it, and its "
                                f"files with it (a teardown's delete goes on after its gcloud was stopped). Wait "
                                f"until it is gone (`gcloud lustre instances describe {s.LUSTRE_NAME} "
                                f"--location={s.lustre_zone}` answers NOT_FOUND), then run this again: it makes a "
                                f"new one.", 1)
            if state in lustre.LUSTRE_FAILED_STATES or state == "NOT_FOUND":
                reason = f" ({info['reason']})" if info and info["reason"] else ""
                raise ToolError(f"Lustre instance {s.LUSTRE_NAME} is {state}{reason} instead of becoming "
                                f"{lustre.LUSTRE_READY_STATE}, and waiting will not change that; see `gcloud lustre "
                                f"instances describe {s.LUSTRE_NAME} --location={s.lustre_zone}`.", 1)
            if state in lustre.LUSTRE_USABLE_STATES:
                inv.handoff.keep(READY_DESCRIBE, info)
            return state in lustre.LUSTRE_USABLE_STATES

        label = f"Lustre instance {s.LUSTRE_NAME} ({s.LUSTRE_CAPACITY_GIB} GiB) becoming ready (~15 min)"
        if not r.poll(label, ready, timeout=LUSTRE_TIMEOUT_SECONDS):
            raise ToolError(f"Lustre instance {s.LUSTRE_NAME} still {seen.get('state', 'CREATING')} after "
                            f"{LUSTRE_TIMEOUT_SECONDS // 60} minutes; re-run `invoke storage.create` to keep "
                            f"waiting.", 1)
        return "exists" if result.already_exists else None

    return create


def _lustre_listed(s: Settings, *, ready: bool) -> Decide:
    def decide(items: list[dict[str, Any]]) -> bool:
        found = [i for i in items if short(i.get("name")) == s.LUSTRE_NAME]
        return bool(found) and (not ready or found[0].get("state") in lustre.LUSTRE_USABLE_STATES)

    return decide


def _lustre_delete(s: Settings, inv: Inventory) -> Action:
    def delete(r: Runner) -> str | None:
        # Only an instance we created: one without our managed-by label is the user's (LUSTRE_NAME reused).
        body = inv.item(r, "Lustre instance", s.LUSTRE_NAME)
        if body is None:
            result = r.query(lustre.lustre_describe(s))
            body = json.loads(result.stdout or "{}") if result is not None and result.ok else None
        if body is not None:
            labels = body.get("labels") or {}
            if isinstance(labels, str):  # gcloud prints a map; tolerate "k=v,k=v"
                labels = dict(kv.split("=", 1) for kv in labels.split(",") if "=" in kv)
            if labels.get("managed-by") != names.MANAGED_BY:
                r.say(f"kept Lustre instance {s.LUSTRE_NAME}: not created by nemo-rl-gke (no "
                      f"managed-by={names.MANAGED_BY} label)", err=True)
                return "kept"
        outcome = deleter(lustre.lustre_delete(s))(r)
        if not r.dry:
            # The listing of /data/runs taken as Ray went away described this instance: it proves nothing
            # about a Lustre made again under the same name (an export of it would be held to its runs).
            try:
                gcs.drop_record(s, exports.CHECK_MARKER)
            except ToolError as exc:
                r.say(f"note: gs://{s.bucket}/{exports.CHECK_MARKER} stays ({exc}): a Lustre made again under "
                      f"this name is held to its listing until Ray is deployed on it.", err=True)
        return outcome

    return delete


def check_bucket_owner(r: Runner, s: Settings) -> None:
    """Before creating: a bucket named GS_BUCKET that exists without our label is the user's own; it is used
    only with GS_BUCKET_EXISTING=true (and then never deleted). GS_BUCKET_EXISTING=true needs it to exist."""
    from ..settings import ConfigError

    if r.dry:
        return
    bucket = gcs.get_bucket(gcs_client.client(s), s)
    if bucket is None and s.GS_BUCKET_EXISTING:
        raise ConfigError("GS_BUCKET_EXISTING", "true", f"gs://{s.bucket} does not exist. Create it, or set "
                                                        f"GS_BUCKET_EXISTING=false to let `up` create it.")
    if bucket is not None and not s.GS_BUCKET_EXISTING and not gcs.is_ours(bucket):
        raise ConfigError("GS_BUCKET", s.bucket, f"gs://{s.bucket} exists and was not created by nemo-rl-gke (no "
                                                 f"managed-by={names.MANAGED_BY} label). To use it as your own "
                                                 f"bucket, set GS_BUCKET_EXISTING=true (nothing will ever delete "
                                                 f"it); or pick another GS_BUCKET.")


# ---- the volume's binding ----------------------------------------------------------------------------
def pv_binding(s: Settings, pv: dict[str, Any] | None) -> str:
    """What the PersistentVolume named ours is to our claim (pure): "absent"; "ours" (bound to our claim, or
    waiting for it); "stale" (Released or Failed: its claim was deleted, and Kubernetes never binds it to a new
    claim of the same name; or waiting for a claim that is not ours: nothing mounts it, so it is made anew);
    "taken" (bound to another claim: another NAMESPACE's, or one made by hand)."""
    if pv is None:
        return "absent"
    phase = (pv.get("status") or {}).get("phase")
    ref = (pv.get("spec") or {}).get("claimRef") or {}
    mine = not ref or (ref.get("namespace"), ref.get("name")) == (s.NAMESPACE, names.LUSTRE_PVC)
    if phase in ("Released", "Failed"):
        return "stale"
    return "ours" if mine else "taken" if phase == "Bound" else "stale"


def claim_fix(s: Settings, ref: dict[str, Any]) -> str:
    """What to do about the volume bound to another claim (ref: its claimRef)."""
    if ref.get("name") != names.LUSTRE_PVC:
        return (f"that claim is not one of ours: delete it (`kubectl delete pvc {ref.get('name')} "
                f"--namespace={ref.get('namespace')}`) once nothing mounts it, then run this again")
    return (f"set NAMESPACE={ref.get('namespace')} again, or move it: with NAMESPACE={ref.get('namespace')}, "
            f"`invoke clean.ray --yes` then `invoke clean.storage --yes` (Lustre, its files and the bucket stay), "
            f"then NAMESPACE={s.NAMESPACE} and `invoke up`")


def refuse_teardown_of_a_taken_volume(r: Runner, s: Settings, steps: Any) -> None:
    """Exit 2 before a teardown deletes anything when our volume is bound to another claim: the deployment of
    another NAMESPACE (or a claim made by hand) uses it, and Lustre through it. Its delete would wait for that
    claim (pv-protection), then fail with the teardown half done; and Lustre, with --delete-data, would go from
    under it (the data guard looks in our NAMESPACE only). Read from the run's listing; where kubectl could not
    answer it (no context on this machine yet), the Lustre step's guard asks (volume_held_elsewhere)."""
    from invoke.exceptions import Exit

    ref = taken_claim(r, s, steps)
    if ref is None:
        return
    theirs, ours = claim_names(s, ref)
    raise Exit(f"error: PersistentVolume {names.LUSTRE_PV} is bound to the claim {theirs}, not {ours}: it is in use "
               f"there, and Lustre {s.LUSTRE_NAME} through it. Nothing was deleted: {_teardown_fix(s, ref)}.", code=2)


def volume_held_elsewhere(s: Settings, inv: Inventory) -> Callable[[Runner], None]:
    """Part of the Lustre step's guard (after the confirmation, with --delete-data): when the teardown's listing
    had no answer from kubectl (no context on this machine), the volume is read now (credentials fetched first),
    and one another claim holds stops the teardown before anything is deleted. A kubectl
    that cannot answer (a cluster going away, no RBAC for persistentvolumes) is said, not fatal: the data guard
    itself goes on without a head pod."""

    def check(r: Runner) -> None:
        if _pv_as_listed(r, inv)[0]:  # the plan read it (refuse_teardown_of_a_taken_volume)
            return
        try:
            # Its own credentials (kubectl reads a missing context as "not found": the volume would read absent),
            # whatever the export check before it fetched. A PV that cannot be read fails its own delete, which
            # Lustre's waits for. No cluster, or one with no endpoint yet: no volume in it either.
            if not cluster.credentials_if_cluster(r, s, say=False):
                return
            pv = read_pv(r, s)
        except ToolError as exc:
            r.say(f"note: PersistentVolume {names.LUSTRE_PV} could not be read ({str(exc).splitlines()[0]}), so "
                  f"whether another namespace's claim holds it is not known.", err=True)
            return
        if pv is not None and pv_binding(s, pv) == "taken":
            ref, theirs, ours = _claims(s, pv)
            raise ToolError(f"refusing to delete Lustre instance {s.LUSTRE_NAME}: PersistentVolume "
                            f"{names.LUSTRE_PV} is bound to the claim {theirs}, not {ours}: it is in use there. "
                            f"Nothing was deleted: {_teardown_fix(s, ref)}.", 1)

    return check


def _teardown_fix(s: Settings, ref: dict[str, Any]) -> str:
    return (f"run this with NAMESPACE={ref.get('namespace')} (that deployment's teardown), or move it first: "
            f"{claim_fix(s, ref)}" if ref.get("name") == names.LUSTRE_PVC else claim_fix(s, ref))


def taken_claim(r: Runner, s: Settings, steps: Any) -> dict[str, Any] | None:
    """The claimRef of our volume when another claim holds it (pv_binding "taken"), from this run's kubectl
    listing (steps: their inventory); None without that listing, or when it is not so."""
    from .inventory import inventory_of

    inv = inventory_of(steps or [])
    pv = _pv_as_listed(r, inv)[1] if inv is not None else None
    return ((pv or {}).get("spec") or {}).get("claimRef") if pv_binding(s, pv) == "taken" else None


def _listed_pv(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    return find_kube(items, "PersistentVolume", names.LUSTRE_PV)


def _pv_as_listed(r: Runner, inv: Inventory) -> tuple[bool, dict[str, Any] | None]:
    """(the run's `kubectl get` of the namespace answered, the volume in it): the listing the PV step's checks
    read (its KubeRef lives in NAMESPACE's call, the PV being cluster-scoped)."""
    return inv.kube_item(r, "PersistentVolume", names.LUSTRE_PV)


def read_pv(r: Runner, s: Settings) -> dict[str, Any] | None:
    """The volume as the cluster has it now (None: not there, or a dry run)."""
    result = r.query(kubectl.get(s, "persistentvolume", names.LUSTRE_PV))
    if result is None or (not result.ok and result.not_found):
        return None
    if not result.ok:
        raise r.failure(result)
    found: dict[str, Any] = json.loads(result.stdout or "{}")
    return found


def _pv_usable(s: Settings, inv: Inventory) -> Check:
    """The PV step exists when the volume is there and ours to bind (pv_binding "ours"): a stale or taken one
    is for its create to deal with."""
    return inv.in_cluster(PV, KubeRef("persistentvolume", "PersistentVolume", names.LUSTRE_PV, s.NAMESPACE),
                          lambda items: pv_binding(s, _listed_pv(items)) == "ours",
                          lambda r: pv_binding(s, read_pv(r, s)) == "ours")


def _pv_now(r: Runner, s: Settings, inv: Inventory, *, ask_again: tuple[str, ...]) -> dict[str, Any] | None:
    """The volume from the run's listing of the namespace (none for a cluster this run made), else from the
    cluster; asked again when the listing's answer is one of ask_again (pv_binding): the listing may be minutes
    old (taken before a Lustre create), and what we act on at once must be the volume as it is now."""
    answered, pv = _pv_as_listed(r, inv)
    return read_pv(r, s) if not answered or pv_binding(s, pv) in ask_again else pv


def claim_names(s: Settings, ref: dict[str, Any]) -> tuple[str, str]:
    """The claim a claimRef names, and ours, as NAMESPACE/NAME."""
    return f"{ref.get('namespace')}/{ref.get('name')}", f"{s.NAMESPACE}/{names.LUSTRE_PVC}"


def _claims(s: Settings, pv: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
    """The volume's claimRef, and the claims it names and ours (claim_names)."""
    ref = (pv.get("spec") or {}).get("claimRef") or {}
    return (ref, *claim_names(s, ref))


def _stale_pv_gone(r: Runner, s: Settings, inv: Inventory) -> None:
    """Before the PV's apply: a volume our claim can no longer bind is deleted (only the pointer: Retain keeps
    every file on Lustre), so the apply makes it anew; one bound to another claim is refused, naming it."""
    pv = _pv_now(r, s, inv, ask_again=("stale", "taken"))
    binding = pv_binding(s, pv)
    if pv is None or binding in ("absent", "ours"):
        return
    ref, theirs, ours = _claims(s, pv)
    if binding == "taken":  # `up` refuses on it before any change (drift); storage.create meets it here
        raise ToolError(f"PersistentVolume {names.LUSTRE_PV} is bound to the claim {theirs}, not {ours}, and a "
                        f"volume binds one claim: ours would wait Pending, and the Ray pods with it. Nothing was "
                        f"changed for it: {claim_fix(s, ref)}.", 1)
    phase = (pv.get("status") or {}).get("phase") or "unbound"
    why = (f"its claim {theirs} was deleted, and Kubernetes never binds such a volume to a new claim"
           if phase in ("Released", "Failed") else f"it waited for the claim {theirs}, not {ours}")
    r.say(f"PersistentVolume {names.LUSTRE_PV} was {phase} ({why}): making it anew; it only points at Lustre "
          f"{s.LUSTRE_NAME}, whose files stay.", err=True)
    r.run(kubectl.delete(s, "persistentvolume", names.LUSTRE_PV))


def _pv_delete(s: Settings, inv: Inventory) -> Action:
    """A teardown's delete of the volume. One another claim holds is refused before the teardown starts
    (refuse_teardown_of_a_taken_volume); bound since, it fails here, so nothing that waits for it (Lustre) goes:
    its delete would wait for that claim (pv-protection) and give up after DELETE_TIMEOUT."""
    delete = deleter(kubectl.delete(s, "persistentvolume", names.LUSTRE_PV))

    def run(r: Runner) -> str | None:
        pv = _pv_now(r, s, inv, ask_again=("taken",))
        if pv is None or pv_binding(s, pv) != "taken":
            return delete(r)
        ref, theirs, ours = _claims(s, pv)
        raise ToolError(f"PersistentVolume {names.LUSTRE_PV} is bound to the claim {theirs} since this teardown "
                        f"started, not {ours}: not deleted, nor what it points at; {claim_fix(s, ref)}.", 1)

    return run


def _apply_pv(s: Settings, inv: Inventory) -> Action:
    def apply(r: Runner) -> None:
        _stale_pv_gone(r, s, inv)
        # Lustre's wait's last describe (this run), else one now (a dry run prints it: placeholder address).
        found, info = inv.handoff.take(READY_DESCRIBE)
        if not found:
            info = lustre.lustre_info(r.run(lustre.lustre_describe(s), dry_stdout=lustre.dry_describe(s)).stdout)
        ip = lustre.mount_ip(info["mount_point"])
        capacity = info["capacity_gib"] or s.LUSTRE_CAPACITY_GIB
        pv, _ = kube_objects.pv_pvc_yaml(s, ip, capacity)
        r.run(kubectl.apply_stdin(s), stdin=pv,
              stdin_label=f"manifests/lustre-pv.yaml rendered (ip {ip}{' placeholder' if r.dry else ''}, "
                          f"{capacity}Gi)")
        if not r.dry:
            inv.handoff.keep(PV_CAPACITY, capacity)

    return apply


def pv_capacity_gib(r: Runner, s: Settings) -> int:
    result = r.query(kubectl.get(s, "persistentvolume", names.LUSTRE_PV), ok_codes=(0, 1))
    if result is None or not result.ok:
        return s.LUSTRE_CAPACITY_GIB
    storage = json.loads(result.stdout or "{}").get("spec", {}).get("capacity", {}).get("storage", "")
    return int(storage[:-2]) if storage.endswith("Gi") and storage[:-2].isdigit() else s.LUSTRE_CAPACITY_GIB


def _apply_pvc(s: Settings, inv: Inventory) -> Action:
    def apply(r: Runner) -> None:
        found, capacity = inv.handoff.take(PV_CAPACITY)  # the PV this run applied; else the one in the cluster
        capacity = capacity if found else pv_capacity_gib(r, s)
        _, pvc = kube_objects.pv_pvc_yaml(s, lustre.DRY_RUN_IP, capacity)
        r.run(kubectl.apply_stdin(s), stdin=pvc,
              stdin_label=f"manifests/lustre-pvc.yaml rendered ({capacity}Gi)")

    return apply


def steps(s: Settings, inventory: Inventory | None = None) -> list[Step]:
    """In the order a dry run prints them: bucket, KSA, binding, secret, range, peering, Lustre, PV, PVC."""
    inv = inventory or Inventory(s)
    if inventory is None:
        return inv.track(steps(s, inv))
    built = {step.name: step for step in [*_bucket_steps(s, inv), *_kube_steps(s, inv), *_lustre_steps(s, inv)]}
    return [built[name] for name in (BUCKET, KSA, BINDING, SECRET, RANGE, PEERING, LUSTRE, PV, PVC)]


def _bucket_steps(s: Settings, inv: Inventory) -> list[Step]:
    """The bucket (data: kept without --delete-bucket) and its Workload Identity binding; both need the
    project number only once the bucket exists."""
    inv.register(BUCKET, "project")
    inv.register(BINDING, "project")

    def number(r: Runner) -> str:
        return project_number(r, s, inv)

    return [
        Step(BUCKET, f"bucket gs://{s.bucket} ({s.region})",
             lambda r: gcs.bucket_exists(r, s, functools.partial(number, r)),
             lambda r: gcs.create_bucket(r, s, functools.partial(number, r)), lambda r: gcs.delete_bucket(r, s),
             holds_data=True, consent="user_owned" if s.GS_BUCKET_EXISTING else "delete_bucket",
             guard=data_guard.bucket_guard(s), shared=True, create_seconds=3, delete_seconds=5, delete_last=True),
        Step(BINDING, f"{buckets.OBJECT_USER_ROLE} on gs://{s.bucket} for {s.NAMESPACE}/{s.KSA_NAME}",
             lambda r: gcs.binding_exists(r, s, functools.partial(number, r)),
             lambda r: gcs.ensure_binding(r, s, number(r)),
             lambda r: gcs.drop_binding(r, s, number(r)),
             deps=(BUCKET,), shared=True, create_seconds=5, delete_seconds=5),
    ]


def _kube_steps(s: Settings, inv: Inventory) -> list[Step]:
    """The objects in the cluster (KSA, Secret, PV, PVC): answered by the namespace's one `kubectl get`, gone
    with the cluster."""
    in_cluster: dict[str, Any] = {"deps": (cluster.CREDENTIALS,), "parent": cluster.CLUSTER, "create_seconds": 2,
                                  "delete_seconds": 2}
    # A NAMESPACE of its own is made by the KSA's apply: what else lives in it waits for that (kubectl's apply
    # into a namespace not there yet fails: namespaces "NAME" not found).
    in_namespace = {**in_cluster, "deps": (cluster.CREDENTIALS, KSA) if s.NAMESPACE != "default" else (
        cluster.CREDENTIALS,)}

    def secret_listed(items: list[dict[str, Any]]) -> bool:
        found = [i for i in items if i.get("kind") == "Secret" and i["metadata"]["name"] == names.SECRET_NAME]
        return bool(found) and kube_objects.secret_matches(s, json.dumps(found[0]))

    def kube(step: str, word: str, kind: str, name: str, fallback_argv: list[str]) -> Check:
        return inv.in_cluster(step, KubeRef(word, kind, name, s.NAMESPACE), None, check(fallback_argv))

    return [
        Step(KSA, f"service account {s.NAMESPACE}/{s.KSA_NAME}",
             kube(KSA, "serviceaccount", "ServiceAccount", s.KSA_NAME,
                  kubectl.get(s, "serviceaccount", s.KSA_NAME, namespace=s.NAMESPACE)),
             _apply(s, kube_objects.service_account(s), f"ServiceAccount {s.NAMESPACE}/{s.KSA_NAME}"),
             deleter(kubectl.delete(s, "serviceaccount", s.KSA_NAME, namespace=s.NAMESPACE)), **in_cluster),
        Step(SECRET, f"Secret {s.NAMESPACE}/{names.SECRET_NAME}",
             inv.in_cluster(SECRET, KubeRef("secret", "Secret", names.SECRET_NAME, s.NAMESPACE), secret_listed,
                            lambda r: secret_present(r, s)),
             _apply_secret(s), deleter(kubectl.delete(s, "secret", names.SECRET_NAME, namespace=s.NAMESPACE)),
             **in_namespace),
        Step(PV, f"PersistentVolume {names.LUSTRE_PV}", _pv_usable(s, inv), _apply_pv(s, inv), _pv_delete(s, inv),
             # A teardown deletes it in any state (one Released too).
             present=kube(PV, "persistentvolume", "PersistentVolume", names.LUSTRE_PV,
                          kubectl.get(s, "persistentvolume", names.LUSTRE_PV)),
             **{**in_cluster, "deps": (cluster.CREDENTIALS, LUSTRE)}),
        Step(PVC, f"PersistentVolumeClaim {s.NAMESPACE}/{names.LUSTRE_PVC}",
             kube(PVC, "persistentvolumeclaim", "PersistentVolumeClaim", names.LUSTRE_PVC,
                  kubectl.get(s, "persistentvolumeclaim", names.LUSTRE_PVC, namespace=s.NAMESPACE)),
             _apply_pvc(s, inv), deleter(kubectl.delete(s, "persistentvolumeclaim", names.LUSTRE_PVC,
                                                   namespace=s.NAMESPACE)),
             **{**in_namespace, "deps": (*in_namespace["deps"], PV)}),
    ]


def _lustre_steps(s: Settings, inv: Inventory) -> list[Step]:
    """Managed Lustre end to end: the peering range, the VPC peering, the instance (data: the guard)."""
    lustre_lists = {"ready": _lustre_listed(s, ready=True), "any": _lustre_listed(s, ready=False)}
    return [
        Step(RANGE, f"peering range {names.lustre_range(s)} (/{lustre.PEERING_PREFIX_LENGTH} on {s.NETWORK})",
             inv.check(RANGE, "address range", named(names.lustre_range(s)), check(lustre.range_describe(s))),
             creator(lustre.range_create(s)),
             delete_if_ours(lustre.range_describe(s), lustre.range_delete(s), f"range {names.lustre_range(s)}",
                            listed=lambda r: inv.item(r, "address range", names.lustre_range(s))),
             deps=(net.MAIN,), shared=True, create_seconds=30, delete_seconds=10),
        Step(PEERING, f"VPC peering {s.NETWORK} <-> {lustre.SERVICE_NETWORKING}",
             inv.check(PEERING, peering.KIND, peering.listed(s), peering.exists(s)),
             peering.create(s, inv), peering.delete(s), deps=(RANGE,), shared=True, create_seconds=90,
             delete_seconds=60),
        Step(LUSTRE, f"Lustre instance {s.LUSTRE_NAME} ({s.LUSTRE_CAPACITY_GIB} GiB, {s.lustre_zone})",
             inv.check(LUSTRE, "Lustre instance", lustre_lists["ready"], _lustre_ready(s)),
             _lustre_create(s, inv), _lustre_delete(s, inv), deps=(PEERING,),
             holds_data=True, consent="delete_data",
             guard=data_guard.lustre_guard(s, inv, lustre_state, volume_held_elsewhere(s, inv)),
             present=inv.check(LUSTRE, "Lustre instance", lustre_lists["any"], _lustre_present(s)),
             shared=True, create_seconds=900, delete_seconds=480),
    ]


# ---- storage.status -------------------------------------------------------------------------------------
def status_questions(s: Settings) -> list[list[str]]:
    """The commands storage.status asks (pure): Lustre's describe, the claim's phase, the Secret's name. The bucket
    is read with the storage client (no command)."""
    return [lustre.lustre_describe(s),
            kubectl.get(s, "persistentvolumeclaim", names.LUSTRE_PVC, namespace=s.NAMESPACE,
                        output="jsonpath={.status.phase}"),
            kubectl.get(s, "secret", names.SECRET_NAME, namespace=s.NAMESPACE, output="name")]


def status_rows(r: Runner, s: Settings) -> list[tuple[str, str]]:
    """storage.status's rows, read at once: the bucket, Lustre, the claim's phase, the Secret (its name only: the
    values never leave the cluster). An object kubectl could not ask about is "unknown" with kubectl's reason
    (no credentials, no context, a cluster not there), never "absent". kubectl's reads are watched
    (kube_context.watch): a context that outlived its cluster is dropped within seconds, where kubectl would dial
    its dead endpoint for minutes per row."""
    from . import kube_context

    _, pvc_argv, secret_argv = status_questions(s)
    ask = functools.partial(r.query, ok_codes=range(256))  # any answer is a row ("unknown: why"), not a traceback
    reads: list[Callable[[], Any]] = [lambda: gcs.summary(s), lambda: lustre_state(r, s),
                                      functools.partial(ask, pvc_argv), functools.partial(ask, secret_argv)]
    with kube_context.watch(r, s):
        bucket, info, pvc, secret = r.parallel(reads)

    def in_cluster(result: Result | None, here: str) -> str:
        if result is not None and result.ok:
            return here
        if result is not None and NO_CONTEXT.search(result.stderr):  # its "not found" is the context's
            return ("unknown: no kubectl context for the cluster here (`invoke cluster.credentials` fetches it; "
                    "if the cluster is gone, so is what was in it)")
        if result is None or result.not_found:
            return "absent"
        return f"unknown: {last_lines(result.stderr, 1) or f'kubectl exit {result.exit_code}'}"

    phase = (pvc.stdout.strip() if pvc else "") or "present"
    return [(f"bucket gs://{s.bucket}", "absent" if bucket is None else
             f"{bucket['location']}, {bucket['objects']} objects, {data_guard.size_text(bucket['bytes'])}"),
            (f"Lustre {s.LUSTRE_NAME}", "absent" if info is None else
             f"{info['state']}, {info['capacity_gib']} GiB, IP {info['ip'] or '-'}"),
            (f"PVC {s.NAMESPACE}/{names.LUSTRE_PVC}", in_cluster(pvc, phase)),
            (f"Secret {s.NAMESPACE}/{names.SECRET_NAME}", in_cluster(secret, "present"))]
