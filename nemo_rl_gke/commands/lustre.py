"""Pure builders for storage: gcloud argv (peering range, VPC peering, Managed Lustre, export), the gcloud
equivalents of what the google-cloud-storage client does (printed in dry runs), the Kubernetes objects
(ServiceAccount, Secret) and the rendered Lustre PV/PVC, and the small decisions around them.

Nothing here runs anything; `steps/storage.py` wires these to the runner.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from .. import names
from ..settings import Settings

Argv = list[str]

SERVICE_NETWORKING = "servicenetworking.googleapis.com"
PEERING_PREFIX_LENGTH = 20
OBJECT_USER_ROLE = "roles/storage.objectUser"
# Runs live at /data/runs/<id>/ in the pods (the PV is mounted at /data): /runs/<id> on the filesystem.
RUNS_PATH = "/runs"
# The bucket mirrors the Lustre layout: gs://BUCKET/runs/<id>/...
RUNS_PREFIX = "runs/"
# A small JSON object in the bucket recording each export; storage.delete reads it before deleting data.
EXPORT_MARKER = "nemo-rl-gke/last-export.json"
EXPORT_FRESH = timedelta(hours=24)
# What the data guard last verified by listing /data/runs (same format, "copied": -1): a teardown interrupted
# after the Ray head pod was gone can still rely on it when re-run.
CHECK_MARKER = "nemo-rl-gke/last-check.json"
# In a dry run the instance does not exist yet: the PV is rendered with this documentation-range address.
DRY_RUN_IP = "192.0.2.1"
LUSTRE_READY_STATE = "ACTIVE"
LUSTRE_FAILED_STATES = ("FAILED", "DELETING", "STOPPED")
_LABELS = {"app.kubernetes.io/managed-by": names.MANAGED_BY}


def _p(s: Settings) -> str:
    return f"--project={s.PROJECT_ID}"


def network_uri(s: Settings) -> str:
    return f"projects/{s.PROJECT_ID}/global/networks/{s.NETWORK}"


def volume_handle(s: Settings) -> str:
    return f"{s.PROJECT_ID}/{s.lustre_zone}/{s.LUSTRE_NAME}"


def workload_principal(s: Settings, project_number: str) -> str:
    """The Workload Identity principal of KSA_NAME in NAMESPACE (no GCP service account in between)."""
    return (f"principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/"
            f"{s.PROJECT_ID}.svc.id.goog/subject/ns/{s.NAMESPACE}/sa/{s.KSA_NAME}")


# ---- peering address range -------------------------------------------------------------------------
def range_describe(s: Settings) -> Argv:
    return ["gcloud", "compute", "addresses", "describe", names.lustre_range(s), _p(s), "--global",
            "--format=json"]


def range_list(s: Settings, filter_: str) -> Argv:
    return ["gcloud", "compute", "addresses", "list", _p(s), "--global", f"--filter={filter_}", "--format=json"]


def range_create(s: Settings) -> Argv:
    return ["gcloud", "compute", "addresses", "create", names.lustre_range(s), _p(s), "--global",
            "--purpose=VPC_PEERING", f"--prefix-length={PEERING_PREFIX_LENGTH}", f"--network={s.NETWORK}",
            f"--description={names.DESCRIPTION}"]


def range_delete(s: Settings) -> Argv:
    return ["gcloud", "compute", "addresses", "delete", names.lustre_range(s), _p(s), "--global", "--quiet"]


# ---- VPC peering to Service Networking ----------------------------------------------------------------
def peering_list(s: Settings) -> Argv:
    return ["gcloud", "services", "vpc-peerings", "list", f"--network={s.NETWORK}",
            f"--service={SERVICE_NETWORKING}", _p(s), "--format=json"]


def peering_connect(s: Settings) -> Argv:
    return ["gcloud", "services", "vpc-peerings", "connect", f"--service={SERVICE_NETWORKING}",
            f"--ranges={names.lustre_range(s)}", f"--network={s.NETWORK}", _p(s)]


def peering_update(s: Settings, ranges: list[str], *, force: bool = False) -> Argv:
    argv = ["gcloud", "services", "vpc-peerings", "update", f"--service={SERVICE_NETWORKING}",
            f"--ranges={','.join(ranges)}", f"--network={s.NETWORK}", _p(s)]
    return argv + (["--force"] if force else [])


def peering_delete(s: Settings) -> Argv:
    return ["gcloud", "services", "vpc-peerings", "delete", f"--service={SERVICE_NETWORKING}",
            f"--network={s.NETWORK}", _p(s), "--quiet"]


def peering_ranges(list_json: str) -> list[str] | None:
    """The reserved ranges of the Service Networking peering on NETWORK, or None if there is none."""
    connections = json.loads(list_json or "[]") or []
    for connection in connections:
        if str(connection.get("service", "")).endswith(SERVICE_NETWORKING):
            return list(connection.get("reservedPeeringRanges") or [])
    return None


def peering_plan(existing: list[str] | None, ours: str) -> tuple[str, list[str]]:
    """What to do about the peering: ("connect"|"update"|"none", ranges to pass).

    A peering another service already made (Cloud SQL, Filestore...) keeps its ranges: `connect` again with
    a different range fails ("use UpdateConnection"), so we `update` with the union instead.
    """
    if existing is None:
        return "connect", [ours]
    if ours in existing:
        return "none", existing
    return "update", [*existing, ours]


def peering_teardown(existing: list[str] | None, ours: str) -> tuple[str, list[str]]:
    """("delete"|"update"|"none", remaining ranges): only our range goes; other services keep theirs."""
    if existing is None or ours not in existing:
        return "none", existing or []
    remaining = [r for r in existing if r != ours]
    return ("update", remaining) if remaining else ("delete", [])


# ---- Managed Lustre ----------------------------------------------------------------------------------
def lustre_describe(s: Settings, *, fmt: str = "json") -> Argv:
    return ["gcloud", "lustre", "instances", "describe", s.LUSTRE_NAME, f"--location={s.lustre_zone}", _p(s),
            f"--format={fmt}"]


def lustre_list(s: Settings, filter_: str) -> Argv:
    return ["gcloud", "lustre", "instances", "list", f"--location={s.lustre_zone}", _p(s), f"--filter={filter_}",
            "--format=json"]


def lustre_create(s: Settings) -> Argv:
    # --async: the create takes ~15 minutes; we poll describe and show progress instead of a silent wait.
    return ["gcloud", "lustre", "instances", "create", s.LUSTRE_NAME, f"--location={s.lustre_zone}", _p(s),
            f"--capacity-gib={s.LUSTRE_CAPACITY_GIB}", f"--per-unit-storage-throughput={s.LUSTRE_THROUGHPUT}",
            f"--filesystem={names.LUSTRE_FILESYSTEM}", f"--network={network_uri(s)}", "--gke-support-enabled",
            f"--description={names.DESCRIPTION}", f"--labels={names.deployment_labels(s)}", "--async"]


def lustre_delete(s: Settings) -> Argv:
    return ["gcloud", "lustre", "instances", "delete", s.LUSTRE_NAME, f"--location={s.lustre_zone}", _p(s),
            "--quiet"]


def lustre_export(s: Settings, lustre_path: str, gcs_uri: str) -> Argv:
    return ["gcloud", "lustre", "instances", "export-data", s.LUSTRE_NAME, f"--location={s.lustre_zone}",
            _p(s), f"--lustre-path={lustre_path}", f"--gcs-path-uri={gcs_uri}"]


def export_paths(s: Settings, run: str | None) -> tuple[str, str, str]:
    """(lustre path, gs:// URI, bucket prefix) of an export: every run, or one run."""
    if run:
        return f"{RUNS_PATH}/{run}", f"gs://{s.bucket}/{RUNS_PREFIX}{run}/", f"{RUNS_PREFIX}{run}/"
    return RUNS_PATH, f"gs://{s.bucket}/{RUNS_PREFIX}", RUNS_PREFIX


def mount_ip(mount_point: str) -> str:
    """`10.90.0.2@tcp:/lustrefs` -> `10.90.0.2`."""
    ip = (mount_point or "").split("@", 1)[0].strip()
    if not ip:
        raise ValueError(f"no IP in the Lustre mountPoint {mount_point!r}")
    return ip


def lustre_info(describe_json: str) -> dict[str, Any]:
    body = json.loads(describe_json or "{}")
    mount = body.get("mountPoint") or ""
    return {"state": body.get("state", "UNKNOWN"), "capacity_gib": int(body.get("capacityGib") or 0),
            "mount_point": mount, "ip": mount.split("@", 1)[0] if mount else ""}


def dry_describe(s: Settings) -> str:
    return json.dumps({"name": s.LUSTRE_NAME, "state": LUSTRE_READY_STATE,
                       "capacityGib": str(s.LUSTRE_CAPACITY_GIB),
                       "mountPoint": f"{DRY_RUN_IP}@tcp:/{names.LUSTRE_FILESYSTEM}"})


# ---- gcloud equivalents of the google-cloud-storage client calls (printed, never run) ---------------------
def bucket_create_equivalent(s: Settings) -> Argv:
    return ["gcloud", "storage", "buckets", "create", f"gs://{s.bucket}", _p(s), f"--location={s.region}",
            "--enable-hierarchical-namespace", "--uniform-bucket-level-access"]


def bucket_delete_equivalent(s: Settings) -> Argv:
    return ["gcloud", "storage", "rm", "--recursive", f"gs://{s.bucket}", _p(s)]


def binding_add_equivalent(s: Settings, project_number: str) -> Argv:
    return ["gcloud", "storage", "buckets", "add-iam-policy-binding", f"gs://{s.bucket}", _p(s),
            f"--member={workload_principal(s, project_number)}", f"--role={OBJECT_USER_ROLE}"]


def binding_remove_equivalent(s: Settings, project_number: str) -> Argv:
    return ["gcloud", "storage", "buckets", "remove-iam-policy-binding", f"gs://{s.bucket}", _p(s),
            f"--member={workload_principal(s, project_number)}", f"--role={OBJECT_USER_ROLE}"]


def list_equivalent(s: Settings, prefix: str) -> Argv:
    return ["gcloud", "storage", "ls", "--recursive", f"gs://{s.bucket}/{prefix}", _p(s)]


# ---- export records and the export check ------------------------------------------------------------
def export_record(s: Settings, lustre_path: str, gcs_uri: str, when: datetime, *, copied: int = 0,
                  objects: dict[str, int] | None = None, lustre_files: dict[str, int] | None = None,
                  running: list[str] | None = None) -> str:
    """What one export did, written next to the data: how many objects it wrote (new generations), what the
    bucket held under runs/ afterwards, and what /data/runs held (None: no head pod to ask)."""
    return json.dumps({"instance": volume_handle(s), "lustre_path": lustre_path, "gcs_uri": gcs_uri,
                       "time": when.astimezone(UTC).isoformat(), "copied": copied, "objects": objects or {},
                       "lustre_files": lustre_files, "running": running or []}, sort_keys=True)


def parse_export_record(record_json: str | None) -> dict[str, Any] | None:
    """The record as a dict, or None if there is none or it does not parse (a corrupt record proves nothing)."""
    if not record_json:
        return None
    try:
        record = json.loads(record_json)
        record["when"] = datetime.fromisoformat(record["time"])
    except (ValueError, KeyError, TypeError):
        return None
    return record if isinstance(record, dict) else None


def check_is_fresh(record_json: str | None, now: datetime) -> bool:
    """A verification by listing (/data/runs seen, every file in the bucket) less than EXPORT_FRESH ago."""
    record = parse_export_record(record_json)
    return (record is not None and isinstance(record.get("lustre_files"), dict)
            and now - record["when"] < EXPORT_FRESH)


def export_is_fresh(record_json: str | None, now: datetime) -> bool:
    """A full export (every run) that wrote at least one object, less than EXPORT_FRESH ago."""
    record = parse_export_record(record_json)
    if record is None:
        return False
    return (record.get("lustre_path") == RUNS_PATH and int(record.get("copied") or 0) > 0
            and now - record["when"] < EXPORT_FRESH)


# Read-only: every file under /data/runs with its size, and the runs still running (a pid, no exit code,
# and the process alive, as job.status judges it). NRG_POD_ROOT is empty in a real pod (the fake's pod root).
RUNS_LISTING_SCRIPT = r"""set -u
runs="${NRG_POD_ROOT:-}/data/runs"
[ -d "$runs" ] || exit 0
cd "$runs" || exit 0
for d in */; do
  d="${d%/}"
  [ -d "$d" ] || continue
  echo "run $d"
  if [ -s "$d/pid" ] && [ ! -e "$d/exit_code" ] && kill -0 "$(cat "$d/pid")" 2>/dev/null; then
    echo "running $d"
  fi
done
find . -type f -printf 'file %s %P\n'
"""


def parse_runs_listing(text: str) -> tuple[dict[str, int], set[str], set[str]]:
    """(files under runs/ -> size, run ids, running run ids) from RUNS_LISTING_SCRIPT's output."""
    files: dict[str, int] = {}
    runs: set[str] = set()
    running: set[str] = set()
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "file":
            size, _, path = rest.partition(" ")
            if size.isdigit() and path:
                files[path] = int(size)
                runs.add(path.split("/", 1)[0])
        elif kind == "run" and rest:
            runs.add(rest)
        elif kind == "running" and rest:
            running.add(rest)
    return files, runs, running


def bucket_run_files(objects: list[tuple[str, int]]) -> dict[str, int]:
    """gs://B/runs/<path> objects -> {<path>: size} (folder placeholders left out)."""
    return {name[len(RUNS_PREFIX):]: size for name, size in objects
            if name.startswith(RUNS_PREFIX) and not name.endswith("/")}


def unexported_runs(lustre_files: dict[str, int], bucket_files: dict[str, int],
                    running: set[str] | frozenset[str] = frozenset()) -> dict[str, str]:
    """run id -> why it is not safely in the bucket: still running, or files missing or of another size.

    A run is exported when every file under /data/runs/<run>/ is at gs://B/runs/<run>/ with the same size."""
    missing: dict[str, list[str]] = {}
    differ: dict[str, list[str]] = {}
    for path, size in sorted(lustre_files.items()):
        run = path.split("/", 1)[0]
        if path not in bucket_files:
            missing.setdefault(run, []).append(path)
        elif bucket_files[path] != size:
            differ.setdefault(run, []).append(path)
    out: dict[str, str] = {}
    for run in sorted(set(missing) | set(differ) | set(running)):
        why = []
        if run in running:
            why.append("still running")
        if run in missing:
            why.append(f"{len(missing[run])} file(s) not in the bucket (e.g. {missing[run][0]})")
        if run in differ:
            why.append(f"{len(differ[run])} file(s) of another size in the bucket (e.g. {differ[run][0]})")
        out[run] = "; ".join(why)
    return out


# ---- Kubernetes objects -----------------------------------------------------------------------------------
def service_account(s: Settings) -> list[dict[str, Any]]:
    """The KSA (and its namespace when it is not `default`): the Ray pods' identity on the bucket."""
    docs: list[dict[str, Any]] = []
    if s.NAMESPACE != "default":
        docs.append({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": s.NAMESPACE, "labels": _LABELS}})
    docs.append({"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": s.KSA_NAME, "namespace": s.NAMESPACE,
                              "labels": _LABELS}})
    return docs


def secret_values(s: Settings) -> dict[str, str]:
    return {"HF_TOKEN": s.HF_TOKEN, "WANDB_API_KEY": s.WANDB_API_KEY}


def secret(s: Settings) -> dict[str, Any]:
    """The Secret with the tokens: only ever sent on kubectl's stdin, never printed or written to disk."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": names.SECRET_NAME, "namespace": s.NAMESPACE,
                         "labels": _LABELS},
            "stringData": secret_values(s)}


def secret_matches(s: Settings, get_json: str) -> bool:
    """The Secret in the cluster holds exactly our values (`data` is base64; a fake may keep stringData).

    A Secret in a bad state (a value that is not base64 or not UTF-8, a body that is not JSON) does not match:
    `storage.create` then replaces it, instead of failing on every re-run."""
    import binascii

    try:
        body = json.loads(get_json or "{}")
        found = {k: base64.b64decode(v, validate=True).decode() for k, v in (body.get("data") or {}).items()}
        found.update(body.get("stringData") or {})
    except (ValueError, TypeError, AttributeError, binascii.Error):  # UnicodeDecodeError is a ValueError
        return False
    return found == secret_values(s)


def to_yaml(docs: list[dict[str, Any]]) -> str:
    import yaml

    return "---\n".join(yaml.safe_dump(doc, sort_keys=False) for doc in docs)


def pv_values(s: Settings, ip: str, capacity_gib: int) -> dict[str, object]:
    return {"PV_NAME": names.LUSTRE_PV, "PVC_NAME": names.LUSTRE_PVC, "NAMESPACE": s.NAMESPACE,
            "CAPACITY": f"{capacity_gib}Gi", "VOLUME_HANDLE": volume_handle(s), "LUSTRE_IP": ip,
            "FILESYSTEM": names.LUSTRE_FILESYSTEM}


def pv_pvc_yaml(s: Settings, ip: str, capacity_gib: int) -> tuple[str, str]:
    from .. import render

    values = pv_values(s, ip, capacity_gib)
    pv = render.render_file("lustre-pv.yaml", values)
    pvc = render.render_file("lustre-pvc.yaml", {k: values[k] for k in ("PV_NAME", "PVC_NAME", "NAMESPACE",
                                                                         "CAPACITY")})
    return pv, pvc
