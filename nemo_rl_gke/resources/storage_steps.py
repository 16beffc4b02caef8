"""Storage: the bucket (durable home of exported checkpoints) with its Workload Identity binding, the
Kubernetes service account and Secret, and Managed Lustre end to end (peering range -> VPC peering ->
instance -> PV/PVC). The bucket and the Lustre instance hold data: `destroy` keeps them without consent.

The data guard lives here, in the Lustre step, so every path to the delete (down, clean, clean.storage,
storage.delete) goes through it: the instance goes only with --delete-data and a verified export (every run
under /data/runs in gs://BUCKET/runs/ with the same files and sizes, none running), or with
--delete-unexported after a confirmation that lists what is lost. The bucket goes only with --delete-bucket,
after a confirmation naming it with its object count and size.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from .. import gcs, names
from ..commands import gcloud, kubectl, lustre
from ..graph import Action, Check, Guard, Step
from ..runner import ALREADY_EXISTS, NOT_FOUND, Runner, ToolError
from ..settings import Settings
from . import cluster_steps as cluster
from . import net_steps as net
from .inventory import Decide, Inventory, KubeRef, named, short
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
        r.run(kubectl.apply_stdin(s), stdin=lustre.to_yaml(docs), stdin_label=label)

    return apply


def secret_present(r: Runner, s: Settings) -> bool:
    """The Secret exists with exactly our values (a changed token makes this False: the apply updates it).

    Its JSON carries the values (base64): never echoed, and on failure only stderr is reported.
    """
    result = r.query(kubectl.get(s, "secret", names.SECRET_NAME, namespace=s.NAMESPACE), ok_codes=range(256))
    if result is None:
        return False
    if result.ok:
        return lustre.secret_matches(s, result.stdout)
    if result.not_found:
        return False
    raise ToolError(r.redact(f"kubectl could not read Secret {names.SECRET_NAME}: {result.stderr.strip()}"),
                    result.exit_code)


def _apply_secret(s: Settings) -> Action:
    def apply(r: Runner) -> None:
        keys = ", ".join(lustre.secret_values(s))
        r.run(kubectl.apply_stdin(s), stdin=lustre.to_yaml([lustre.secret(s)]),
              stdin_label=f"Secret {names.SECRET_NAME} ({keys}; values hidden)")

    return apply


# ---- the peering -----------------------------------------------------------------------------------------
def existing_peering_ranges(r: Runner, s: Settings) -> list[str] | None:
    """Our network's Service Networking ranges; None without a peering, or without the network itself (after a
    complete `down`, `vpc-peerings list --network=…` says the network is not found: then there is no peering)."""
    result = r.query(lustre.peering_list(s), ok_codes=range(256))
    if result is None or result.not_found:
        return None
    if not result.ok:
        raise r.failure(result)
    return lustre.peering_ranges(result.stdout)


def _peering_exists(s: Settings) -> Check:
    def exists(r: Runner) -> bool:
        ranges = existing_peering_ranges(r, s)
        return ranges is not None and names.lustre_range(s) in ranges

    return exists


def _peering_listed(s: Settings) -> Decide:
    def decide(items: list[dict[str, Any]]) -> bool:
        ranges = lustre.peering_ranges(json.dumps(items))
        return ranges is not None and names.lustre_range(s) in ranges

    return decide


def _peering_create(s: Settings) -> Action:
    def create(r: Runner) -> str | None:
        action, ranges = lustre.peering_plan(existing_peering_ranges(r, s), names.lustre_range(s))
        if action == "connect":
            r.run(lustre.peering_connect(s), timeout=1800)
        elif action == "update":
            # Another service's peering on this VPC: keep its ranges and add ours.
            r.run(lustre.peering_update(s, ranges), timeout=1800)
        else:
            return "exists"
        return None

    return create


def _peering_delete(s: Settings) -> Action:
    def delete(r: Runner) -> str | None:
        if r.dry:
            r.run(lustre.peering_delete(s))
            return None
        action, remaining = lustre.peering_teardown(existing_peering_ranges(r, s), names.lustre_range(s))
        if action == "delete":
            r.run(lustre.peering_delete(s), accept=NOT_FOUND, timeout=1800)
        elif action == "update":
            # Others still use the peering: remove only our range (removing one needs --force).
            r.run(lustre.peering_update(s, remaining, force=True), timeout=1800)
        else:
            return "absent"
        return None

    return delete


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


def _lustre_present(s: Settings) -> Check:
    def present(r: Runner) -> bool:
        # Any state: a CREATING instance already bills, holds the network, and must be deleted or kept.
        return lustre_state(r, s) is not None

    return present


def _lustre_ready(s: Settings) -> Check:
    def exists(r: Runner) -> bool:
        # An instance still CREATING (an interrupted run) is not done: create() then waits for it.
        info = lustre_state(r, s)
        return info is not None and info["state"] == lustre.LUSTRE_READY_STATE

    return exists


def _lustre_create(s: Settings) -> Action:
    def create(r: Runner) -> str | None:
        result = r.run(lustre.lustre_create(s), accept=ALREADY_EXISTS, timeout=600)
        seen: dict[str, str] = {}

        def ready() -> bool:
            info = lustre_state(r, s)
            state = info["state"] if info else "NOT_FOUND"
            seen["state"] = state
            if state in lustre.LUSTRE_FAILED_STATES or state == "NOT_FOUND":
                raise ToolError(f"Lustre instance {s.LUSTRE_NAME} is {state} instead of becoming "
                                f"{lustre.LUSTRE_READY_STATE}; see `gcloud lustre instances describe "
                                f"{s.LUSTRE_NAME} --location={s.lustre_zone}`.", 1)
            return state == lustre.LUSTRE_READY_STATE

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
        return bool(found) and (not ready or found[0].get("state") == lustre.LUSTRE_READY_STATE)

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
        return deleter(lustre.lustre_delete(s))(r)

    return delete


def check_bucket_owner(r: Runner, s: Settings) -> None:
    """Before creating: a bucket named GS_BUCKET that exists without our label is the user's own; it is used
    only with GS_BUCKET_EXISTING=true (and then never deleted). GS_BUCKET_EXISTING=true needs it to exist."""
    from ..settings import ConfigError

    if r.dry:
        return
    bucket = gcs.get_bucket(gcs.client(s), s)
    if bucket is None and s.GS_BUCKET_EXISTING:
        raise ConfigError("GS_BUCKET_EXISTING", "true", f"gs://{s.bucket} does not exist. Create it, or set "
                                                        f"GS_BUCKET_EXISTING=false to let `up` create it.")
    if bucket is not None and not s.GS_BUCKET_EXISTING and not gcs.is_ours(bucket):
        raise ConfigError("GS_BUCKET", s.bucket, f"gs://{s.bucket} exists and was not created by nemo-rl-gke (no "
                                                 f"managed-by={names.MANAGED_BY} label). To use it as your own "
                                                 f"bucket, set GS_BUCKET_EXISTING=true (nothing will ever delete "
                                                 f"it); or pick another GS_BUCKET.")


def _apply_pv(s: Settings) -> Action:
    def apply(r: Runner) -> None:
        # In a dry run the describe is printed and the PV gets a placeholder address.
        described = r.run(lustre.lustre_describe(s), dry_stdout=lustre.dry_describe(s))
        info = lustre.lustre_info(described.stdout)
        ip = lustre.mount_ip(info["mount_point"])
        capacity = info["capacity_gib"] or s.LUSTRE_CAPACITY_GIB
        pv, _ = lustre.pv_pvc_yaml(s, ip, capacity)
        r.run(kubectl.apply_stdin(s), stdin=pv,
              stdin_label=f"manifests/lustre-pv.yaml rendered (ip {ip}{' placeholder' if r.dry else ''}, "
                          f"{capacity}Gi)")

    return apply


def pv_capacity_gib(r: Runner, s: Settings) -> int:
    result = r.query(kubectl.get(s, "persistentvolume", names.LUSTRE_PV), ok_codes=(0, 1))
    if result is None or not result.ok:
        return s.LUSTRE_CAPACITY_GIB
    storage = json.loads(result.stdout or "{}").get("spec", {}).get("capacity", {}).get("storage", "")
    return int(storage[:-2]) if storage.endswith("Gi") and storage[:-2].isdigit() else s.LUSTRE_CAPACITY_GIB


def _apply_pvc(s: Settings) -> Action:
    def apply(r: Runner) -> None:
        capacity = pv_capacity_gib(r, s)
        _, pvc = lustre.pv_pvc_yaml(s, lustre.DRY_RUN_IP, capacity)
        r.run(kubectl.apply_stdin(s), stdin=pvc,
              stdin_label=f"manifests/lustre-pvc.yaml rendered ({capacity}Gi)")

    return apply


def steps(s: Settings, inventory: Inventory | None = None) -> list[Step]:
    """In the order a dry run prints them: bucket, KSA, binding, secret, range, peering, Lustre, PV, PVC."""
    inv = inventory or Inventory(s)
    inv.register(BUCKET, "project")
    inv.register(BINDING, "project")
    in_cluster: dict[str, Any] = {"deps": (cluster.CREDENTIALS,), "parent": cluster.CLUSTER, "create_seconds": 2,
                  "delete_seconds": 2}

    def number(r: Runner) -> str:
        return project_number(r, s, inv)

    def secret_listed(items: list[dict[str, Any]]) -> bool:
        found = [i for i in items if i.get("kind") == "Secret" and i["metadata"]["name"] == names.SECRET_NAME]
        return bool(found) and lustre.secret_matches(s, json.dumps(found[0]))

    def kube(step: str, word: str, kind: str, name: str, fallback_argv: list[str]) -> Check:
        return inv.in_cluster(step, KubeRef(word, kind, name, s.NAMESPACE), None, check(fallback_argv))

    lustre_lists = {"ready": _lustre_listed(s, ready=True), "any": _lustre_listed(s, ready=False)}
    return [
        Step(BUCKET, f"bucket gs://{s.bucket} ({s.region})",
             lambda r: gcs.bucket_exists(r, s, functools.partial(number, r)),
             lambda r: gcs.create_bucket(r, s, functools.partial(number, r)), lambda r: gcs.delete_bucket(r, s),
             holds_data=True, consent="user_owned" if s.GS_BUCKET_EXISTING else "delete_bucket",
             guard=_bucket_guard(s), shared=True, create_seconds=3, delete_seconds=5),
        Step(KSA, f"service account {s.NAMESPACE}/{s.KSA_NAME}",
             kube(KSA, "serviceaccount", "ServiceAccount", s.KSA_NAME,
                  kubectl.get(s, "serviceaccount", s.KSA_NAME, namespace=s.NAMESPACE)),
             _apply(s, lustre.service_account(s), f"ServiceAccount {s.NAMESPACE}/{s.KSA_NAME}"),
             deleter(kubectl.delete(s, "serviceaccount", s.KSA_NAME, namespace=s.NAMESPACE)), **in_cluster),
        Step(BINDING, f"{lustre.OBJECT_USER_ROLE} on gs://{s.bucket} for {s.NAMESPACE}/{s.KSA_NAME}",
             lambda r: gcs.binding_exists(r, s, functools.partial(number, r)),
             lambda r: gcs.ensure_binding(r, s, number(r)),
             lambda r: gcs.drop_binding(r, s, number(r)),
             deps=(BUCKET,), shared=True, create_seconds=5, delete_seconds=5),
        Step(SECRET, f"Secret {s.NAMESPACE}/{names.SECRET_NAME}",
             inv.in_cluster(SECRET, KubeRef("secret", "Secret", names.SECRET_NAME, s.NAMESPACE), secret_listed,
                            lambda r: secret_present(r, s)),
             _apply_secret(s), deleter(kubectl.delete(s, "secret", names.SECRET_NAME, namespace=s.NAMESPACE)),
             **in_cluster),
        Step(RANGE, f"peering range {names.lustre_range(s)} (/{lustre.PEERING_PREFIX_LENGTH} on {s.NETWORK})",
             inv.check(RANGE, "address range", named(names.lustre_range(s)), check(lustre.range_describe(s))),
             creator(lustre.range_create(s)),
             delete_if_ours(lustre.range_describe(s), lustre.range_delete(s), f"range {names.lustre_range(s)}",
                            listed=lambda r: inv.item(r, "address range", names.lustre_range(s))),
             deps=(net.MAIN,), shared=True, create_seconds=30, delete_seconds=10),
        Step(PEERING, f"VPC peering {s.NETWORK} <-> {lustre.SERVICE_NETWORKING}",
             inv.check(PEERING, "VPC peering", _peering_listed(s), _peering_exists(s)),
             _peering_create(s), _peering_delete(s), deps=(RANGE,), shared=True, create_seconds=90,
             delete_seconds=60),
        Step(LUSTRE, f"Lustre instance {s.LUSTRE_NAME} ({s.LUSTRE_CAPACITY_GIB} GiB, {s.lustre_zone})",
             inv.check(LUSTRE, "Lustre instance", lustre_lists["ready"], _lustre_ready(s)),
             _lustre_create(s), _lustre_delete(s, inv), deps=(PEERING,),
             holds_data=True, consent="delete_data", guard=_lustre_guard(s, inv),
             present=inv.check(LUSTRE, "Lustre instance", lustre_lists["any"], _lustre_present(s)),
             shared=True, create_seconds=900, delete_seconds=480),
        Step(PV, f"PersistentVolume {names.LUSTRE_PV}",
             kube(PV, "persistentvolume", "PersistentVolume", names.LUSTRE_PV,
                  kubectl.get(s, "persistentvolume", names.LUSTRE_PV)),
             _apply_pv(s), deleter(kubectl.delete(s, "persistentvolume", names.LUSTRE_PV)),
             **{**in_cluster, "deps": (cluster.CREDENTIALS, LUSTRE)}),
        Step(PVC, f"PersistentVolumeClaim {s.NAMESPACE}/{names.LUSTRE_PVC}",
             kube(PVC, "persistentvolumeclaim", "PersistentVolumeClaim", names.LUSTRE_PVC,
                  kubectl.get(s, "persistentvolumeclaim", names.LUSTRE_PVC, namespace=s.NAMESPACE)),
             _apply_pvc(s), deleter(kubectl.delete(s, "persistentvolumeclaim", names.LUSTRE_PVC,
                                                   namespace=s.NAMESPACE)),
             **{**in_cluster, "deps": (cluster.CREDENTIALS, PV)}),
    ] if inventory is not None else inv.track(steps(s, inv))


# ---- what the namespace tasks ask ------------------------------------------------------------------------
def credentials_if_cluster(r: Runner, s: Settings) -> None:
    """kubectl needs credentials for the deletes; without a cluster its objects are gone already."""
    if not r.dry and r.exists(gcloud.cluster_describe(s)):
        r.run(gcloud.get_credentials(s))


# ---- the export check: the Lustre instance's guard -------------------------------------------------------
def head_pod(r: Runner, s: Settings, inv: Inventory | None = None) -> str | None:
    """The Running Ray head pod, which mounts the Lustre volume at /data; None without cluster, Ray or pod.

    inv: this run's inventory: its cluster listing says whether there is a cluster, and a kubectl that
    answered its listings needs no fresh credentials (two calls less before a teardown can start)."""
    clusters = inv.listed(r, "cluster") if inv is not None else None
    if clusters is not None and inv is not None:
        if inv.cluster(clusters) is None:
            return None
    elif not r.exists(gcloud.cluster_describe(s)):
        return None
    if inv is None or not inv.kube_answered():
        r.run(gcloud.get_credentials(s))
    result = r.query(kubectl.get(s, "pods", namespace=s.NAMESPACE,
                                 selector=f"ray.io/cluster={names.RAY_RELEASE},ray.io/node-type=head"),
                     ok_codes=range(256))
    if result is None or not result.ok:
        return None
    items = json.loads(result.stdout or "{}").get("items", [])
    running = [p["metadata"]["name"] for p in items if p.get("status", {}).get("phase") == "Running"]
    return running[0] if running else None


def head_exec(s: Settings, pod: str) -> list[str]:
    from .. import jobscript

    return kubectl.base(s) + ["exec", "-i", pod, f"--namespace={s.NAMESPACE}",
                              f"--container={jobscript.HEAD_CONTAINER}", "--", "bash"]


def lustre_runs(r: Runner, s: Settings, inv: Inventory | None = None) -> tuple[dict[str, int], set[str], str] | None:
    """(files under /data/runs -> size, running run ids, the pod asked), or None with no head pod to ask."""
    pod = head_pod(r, s, inv)
    if pod is None:
        return None
    result = r.query(head_exec(s, pod), stdin=lustre.RUNS_LISTING_SCRIPT, ok_codes=(0,), timeout=300)
    if result is None:
        return None
    files, _, running = lustre.parse_runs_listing(result.stdout)
    return files, running, pod


def export_check(r: Runner, s: Settings, inv: Inventory | None = None) -> tuple[dict[str, str], str]:
    """(run id -> why it is not safely in the bucket, how that was established). Empty: every run is there.

    With a head pod: /data/runs and gs://BUCKET/runs/ listed now, file by file. Without one (the cluster is
    gone, nothing can write to /data any more): the last full export's record, if it wrote something, is
    less than a day old, and every file it saw on /data (or in the bucket) is still in the bucket."""
    bucket_files = lustre.bucket_run_files(gcs.list_prefix(s, lustre.RUNS_PREFIX))
    where = f"gs://{s.bucket}/{lustre.RUNS_PREFIX}"
    listed = lustre_runs(r, s, inv)
    if listed is not None:
        files, running, pod = listed
        runs = {path.split("/", 1)[0] for path in files}
        missing = lustre.unexported_runs(files, bucket_files, running)
        if not missing:
            record_check(r, s, files)
        return missing, f"listed /data/runs in pod {pod} ({len(runs)} runs, {len(files)} files) and {where}"
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    how = f"no Ray head pod to list /data; the records in gs://{s.bucket}/nemo-rl-gke/"
    check = gcs.read_export_record(s, lustre.CHECK_MARKER)
    text = gcs.read_export_record(s)
    usable = [lustre.parse_export_record(t) for t, ok in ((check, lustre.check_is_fresh(check, now)),
                                                          (text, lustre.export_is_fresh(text, now))) if ok]
    if not usable:
        record = lustre.parse_export_record(text)
        if record is None:
            return {"(every run)": "no export recorded, and no Ray head pod to list /data/runs"}, how
        copied = int(record.get("copied") or 0)
        why = (f"the last export ({record.get('time')}) copied nothing" if copied == 0 else
               f"the last full export is from {record.get('time')} (more than "
               f"{lustre.EXPORT_FRESH.total_seconds() / 3600:.0f} h ago, or of one run only)")
        return {"(every run)": why}, how
    record = max((rec for rec in usable if rec is not None), key=lambda rec: rec["when"])
    seen = record.get("lustre_files")
    seen = seen if isinstance(seen, dict) else record.get("objects") or {}
    return lustre.unexported_runs({k: int(v) for k, v in seen.items()}, bucket_files,
                                  set(record.get("running") or ())), f"{how}, of {record.get('time')}"


def record_check(r: Runner, s: Settings, files: dict[str, int]) -> None:
    """Remember a verification by listing (for a re-run after the head pod is gone); best effort: without a
    bucket there is nowhere to keep it, and the check itself stands."""
    from datetime import UTC, datetime

    lustre_path, uri, _ = lustre.export_paths(s, None)
    try:
        gcs.write_export_record(s, lustre.export_record(s, lustre_path, uri, datetime.now(UTC), copied=-1,
                                                        lustre_files=files), lustre.CHECK_MARKER)
    except gcs.StorageError as exc:
        r.say(f"note: the export check was not recorded in the bucket ({str(exc).splitlines()[0][:160]})",
              err=True)


def _lustre_guard(s: Settings, inv: Inventory | None = None) -> Guard:
    def guard(r: Runner, consent: Any) -> None:
        if r.dry:
            r.say(f"# a real run first checks that every run under /data/runs is in gs://{s.bucket}/"
                  f"{lustre.RUNS_PREFIX} (same files and sizes) and that none is running")
            return
        listed = inv.listed(r, "Lustre instance") if inv is not None else None
        if (not any(short(i.get("name")) == s.LUSTRE_NAME for i in listed) if listed is not None
                else lustre_state(r, s) is None):
            return
        missing, how = export_check(r, s, inv)
        if not missing:
            r.say(f"export verified: every run on Lustre {s.LUSTRE_NAME} is in gs://{s.bucket}/"
                  f"{lustre.RUNS_PREFIX} ({how}).", err=True)
            return
        lines = "\n".join(f"  - {run}: {why}" for run, why in missing.items())
        if not consent.delete_unexported:
            raise ToolError(f"refusing to delete Lustre instance {s.LUSTRE_NAME}: these runs are not safely in "
                            f"gs://{s.bucket}/{lustre.RUNS_PREFIX} ({how}):\n{lines}\nRun `invoke storage.export` "
                            f"(stop running jobs first: `invoke job.stop ID`), then run this again; or add "
                            f"--delete-unexported to delete them anyway.", 1)
        r.say(f"--delete-unexported: deleting Lustre instance {s.LUSTRE_NAME} loses these runs ({how}):\n{lines}",
              err=True)
        if consent.ask is None:
            raise ToolError("refusing to lose unexported runs without a confirmation (nobody to ask).", 1)
        consent.ask(f"Delete Lustre instance {s.LUSTRE_NAME} and lose the {len(missing)} run(s) listed above?")

    return guard


def _bucket_guard(s: Settings) -> Guard:
    def guard(r: Runner, consent: Any) -> None:
        if r.dry:
            r.say(f"# a real run first asks, naming gs://{s.bucket} with its object count and size")
            return
        bucket = gcs.get_bucket(gcs.client(s), s)
        if bucket is None or not gcs.is_ours(bucket):
            return  # nothing to delete, or the user's own (its delete keeps it and says so)
        held = gcs.summary(s)
        if held is None:
            return
        question = (f"Delete bucket gs://{s.bucket} with its {held['objects']} objects ({size_text(held['bytes'])}), "
                    f"the exported checkpoints among them?")
        r.say(f"--delete-bucket: gs://{s.bucket} holds {held['objects']} objects, {size_text(held['bytes'])}.",
              err=True)
        if consent.ask is None:
            raise ToolError(f"refusing to delete gs://{s.bucket} without a confirmation (nobody to ask).", 1)
        consent.ask(question)

    return guard


def export(r: Runner, s: Settings, run: str | None) -> list[tuple[str, int]]:
    """Managed Lustre's export-data to the bucket, then what the bucket holds there, and a record of both.

    The record counts as an export only if this export wrote objects (new generations): an export of nothing
    proves nothing. With a head pod, /data/runs is listed too and any run missing from the bucket is named."""
    from datetime import UTC, datetime

    lustre_path, uri, prefix = lustre.export_paths(s, run)
    before = {} if r.dry else gcs.generations(s, prefix)
    r.run(lustre.lustre_export(s, lustre_path, uri), timeout=6 * 3600)
    if r.dry:
        gcs.show(r, lustre.list_equivalent(s, prefix))
        return []
    after = gcs.generations(s, prefix)
    copied = sum(1 for name, gen in after.items() if before.get(name) != gen)
    objects = gcs.list_prefix(s, prefix)
    listed = lustre_runs(r, s) if run is None else None
    files, running = (listed[0], sorted(listed[1])) if listed is not None else (None, [])
    gcs.write_export_record(s, lustre.export_record(
        s, lustre_path, uri, datetime.now(UTC), copied=copied, objects=lustre.bucket_run_files(objects),
        lustre_files=files, running=running))
    total = sum(size for _, size in objects)
    r.say(f"gs://{s.bucket}/{prefix}: {len(objects)} objects, {size_text(total)} ({copied} written by this export)")
    for name, size in objects:
        r.say(f"  {size_text(size):>10}  gs://{s.bucket}/{name}")
    if files is not None:
        missing = lustre.unexported_runs(files, lustre.bucket_run_files(objects), set(running))
        for run_id, why in missing.items():
            r.say(f"not exported: {run_id}: {why}", err=True)
    if copied == 0:
        r.say("this export copied nothing, so it does not count as an export of /data/runs.", err=True)
    return objects


def status_rows(r: Runner, s: Settings) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    bucket = gcs.summary(s)
    rows.append((f"bucket gs://{s.bucket}", "absent" if bucket is None else
                 f"{bucket['location']}, {bucket['objects']} objects, {size_text(bucket['bytes'])}"))
    info = lustre_state(r, s)
    rows.append((f"Lustre {s.LUSTRE_NAME}", "absent" if info is None else
                 f"{info['state']}, {info['capacity_gib']} GiB, IP {info['ip'] or '-'}"))
    pvc = r.query(kubectl.get(s, "persistentvolumeclaim", names.LUSTRE_PVC, namespace=s.NAMESPACE,
                              output="jsonpath={.status.phase}"))
    rows.append((f"PVC {s.NAMESPACE}/{names.LUSTRE_PVC}",
                 (pvc.stdout.strip() or "present") if pvc is not None and pvc.ok else "absent"))
    # Only the name: the values never leave the cluster.
    secret = r.query(kubectl.get(s, "secret", names.SECRET_NAME, namespace=s.NAMESPACE, output="name"))
    rows.append((f"Secret {s.NAMESPACE}/{names.SECRET_NAME}", "present" if secret is not None and secret.ok
                 else "absent"))
    return rows


def size_text(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
