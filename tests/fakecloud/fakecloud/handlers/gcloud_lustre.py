"""gcloud lustre instances: create (async or not), describe, list, delete, export-data.

An instance is CREATING until its typical latency (15 min × FAKECLOUD_TIME_SCALE) has passed, then ACTIVE
with a mountPoint `IP@tcp:/lustrefs`; before that it has no mountPoint, as a half-made instance would not.
Creating needs a private services connection (VPC peering) on the network, as the real API does.

The instance's files live in $FAKECLOUD_STATE/lustre/<name>/ (tests plant checkpoints there); export-data
copies the files under --lustre-path to --gcs-path-uri in the GCS emulator when STORAGE_EMULATOR_HOST is set.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import time
from pathlib import Path

from ..core import Ctx, Fail, command, public, time_scale
from ..core import gcloud_error as _error
from .gcloud_filter import filtered

CREATE_SECONDS = 900
THROUGHPUTS = ("125", "250", "500", "1000")
# The API's sizes by tier (the Managed Lustre docs' "Performance tiers"): smallest, step, up to, step beyond, largest.
TIERS = {1000: (9_000, 9_000, 1_530_000, 72_000, 10_008_000), 500: (18_000, 18_000, 3_060_000, 144_000, 20_016_000),
         250: (36_000, 36_000, 6_120_000, 288_000, 40_032_000), 125: (72_000, 72_000, 12_240_000, 72_000, 12_240_000)}


def _name(ctx: Ctx) -> str:
    if not ctx.positionals:
        raise Fail(2, _error(ctx, "argument INSTANCE: Must be specified."))
    location = ctx.flag("--location")
    if not location:
        raise Fail(2, _error(ctx, "argument --location: Must be specified."))
    return ctx.positionals[0]


def _key(ctx: Ctx, name: str) -> str:
    return f"{ctx.project}/{ctx.flag('--location')}/{name}"


def _path(ctx: Ctx, name: str) -> str:
    return f"projects/{ctx.project}/locations/{ctx.flag('--location')}/instances/{name}"


def files_root(ctx: Ctx, name: str) -> Path:
    return ctx.state.root / "lustre" / name


def view(obj: dict) -> dict:
    """The instance as describe shows it now: ACTIVE (with its mountPoint) once its time has come; in Google's
    maintenance (FAKECLOUD_LUSTRE_MAINTENANCE=UPGRADING, REPAIRING, UPDATING or the docs' MAINTENANCE) a ready
    instance shows that state instead, still mounted; SUSPENDED (a Cloud KMS key it cannot use) comes with the
    API's stateReason."""
    import os

    out = public(obj)
    if obj.get("_deleting_until"):  # its delete goes on in Google Cloud (its gcloud may have been stopped)
        out["state"] = "DELETING"
    elif time.time() >= obj.get("_ready_at", 0):
        out["state"] = os.environ.get("FAKECLOUD_LUSTRE_MAINTENANCE") or "ACTIVE"
        out["mountPoint"] = f"{obj['_ip']}@tcp:/{obj['filesystem']}"
        if out["state"] == "SUSPENDED":
            out["stateReason"] = "The Cloud KMS key version used by this instance is disabled."
    else:
        out["state"] = "CREATING"
    return out


def _failed(obj: dict | None) -> bool:
    """A create that failed on Google's side (FAKECLOUD_LUSTRE_CREATE_ERROR): the instance is gone once its
    operation has ended, and only the operation's error says why."""
    return obj is not None and bool(obj.get("_error")) and time.time() >= obj.get("_ready_at", 0)


def _operation_name(ctx: Ctx) -> str:
    """The next operation's full name, numbered in order (the same in every run of the same steps)."""
    number = 1700000000000 + len(ctx.state.items("_lustre_operation"))
    return f"projects/{ctx.project}/locations/{ctx.flag('--location')}/operations/operation-{number}-fake"


def _sweep(ctx: Ctx) -> None:
    """Instances whose create failed are gone once their operation has ended, and so are those whose delete has."""
    with ctx.state.locked():
        for key, obj in list(ctx.state.items("lustre").items()):
            if _failed(obj):
                ctx.state.delete("lustre", key)
            elif time.time() >= float(obj.get("_deleting_until") or "inf"):
                _deleted(ctx, key, obj)


def _deleted(ctx: Ctx, key: str, obj: dict) -> None:
    """The end of an instance's delete (its gcloud waited for it, or not): gone with its files; Service
    Networking counts it a while longer (FAKECLOUD_PEERING_HOLD_SECONDS)."""
    import shutil

    ctx.state.delete("lustre", key)
    hold = float(os.environ.get("FAKECLOUD_PEERING_HOLD_SECONDS", "0") or 0)
    if hold and obj.get("_network"):  # Service Networking counts the deleted producer a while longer
        ended = float(obj.get("_deleting_until") or time.time())  # when the delete ended, not when it was seen
        ctx.state.put("_peering_hold", str(obj["_network"]), {"until": ended + hold})
    root = files_root(ctx, key.rsplit("/", 1)[-1])
    if root.exists():
        shutil.rmtree(root)


def _get(ctx: Ctx, name: str) -> dict:
    _sweep(ctx)
    obj = ctx.state.get("lustre", _key(ctx, name))
    if obj is None:
        raise Fail(1, _error(ctx, f"NOT_FOUND: Resource '{_path(ctx, name)}' was not found"))
    return obj


@command("gcloud", "lustre", "instances", "create", mutating=True, latency=CREATE_SECONDS)
def lustre_create(ctx: Ctx) -> None:
    name = _name(ctx)
    for flag in ("--capacity-gib", "--filesystem", "--network", "--per-unit-storage-throughput"):
        if not ctx.flag(flag):
            raise Fail(2, _error(ctx, f"argument {flag}: Must be specified."))
    throughput = str(ctx.flag("--per-unit-storage-throughput"))
    if throughput not in THROUGHPUTS:
        raise Fail(1, _error(ctx, f"INVALID_ARGUMENT: per_unit_storage_throughput {throughput} is not one of "
                                  f"{', '.join(THROUGHPUTS)}"))
    capacity = int(ctx.flag("--capacity-gib"))
    low, step, up_to, then, high = TIERS[int(throughput)]
    if not low <= capacity <= high or capacity % (step if capacity <= up_to else then):
        raise Fail(1, _error(ctx, f"INVALID_ARGUMENT: capacity_gib {capacity} is not a valid size for "
                                  f"per_unit_storage_throughput {throughput}"))
    match = re.fullmatch(r"projects/([^/]+)/global/networks/([^/]+)", str(ctx.flag("--network")))
    if not match:
        raise Fail(1, _error(ctx, "INVALID_ARGUMENT: network must be projects/P/global/networks/N"))
    network = match.group(2)
    if ctx.state.get("network", f"{match.group(1)}/{network}") is None:
        raise Fail(1, _error(ctx, f"NOT_FOUND: network {ctx.flag('--network')} was not found"))
    if not any(c.get("_network") == network for c in ctx.state.list("peering")):
        raise Fail(1, _error(ctx, f"FAILED_PRECONDITION: network {network} has no private services access "
                                  f"connection (gcloud services vpc-peerings connect)"))
    index = len(ctx.state.list("lustre"))
    obj = {"name": _path(ctx, name), "capacityGib": str(capacity), "perUnitStorageThroughput": throughput,
           "filesystem": str(ctx.flag("--filesystem")), "network": str(ctx.flag("--network")),
           "gkeSupportEnabled": bool(ctx.flag("--gke-support-enabled")),
           "description": ctx.flag("--description", ""),
           "labels": dict(kv.split("=", 1) for kv in str(ctx.flag("--labels", "")).split(",") if "=" in kv),
           # The Lustre API's createTime: RFC 3339 in UTC with nanoseconds, as its JSON prints it
           "createTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime()),
           "_network": network, "_ip": f"10.90.{index}.2"}
    error = os.environ.get("FAKECLOUD_LUSTRE_CREATE_ERROR", "")  # "CODE:message", e.g. "8:no capacity in zone"
    operation = _operation_name(ctx)
    with ctx.state.locked():
        _sweep(ctx)
        if ctx.state.get("lustre", _key(ctx, name)) is not None:
            raise Fail(1, _error(ctx, f"ALREADY_EXISTS: Resource '{_path(ctx, name)}' already exists"))
        obj["_ready_at"] = time.time() + CREATE_SECONDS * time_scale()
        obj["_error"] = error
        ctx.state.put("lustre", _key(ctx, name), obj)
        ctx.state.put("_lustre_operation", operation, {"name": operation, "target": obj["name"], "verb": "create",
                                                      "_done_at": obj["_ready_at"], "_error": error})
    files_root(ctx, name).mkdir(parents=True, exist_ok=True)
    if ctx.flag("--async"):  # gcloud's declarative commands' words (yaml_command_translator)
        ctx.err(f"Create request issued for: [{name}]\nCheck operation [{operation}] for status.")
        return
    ctx.work()
    if error:
        raise Fail(1, _error(ctx, f"{error.split(':', 1)[-1]}"))
    ctx.err(f"Created instance [{name}].")


@command("gcloud", "lustre", "operations", "describe", latency=1)
def operation_describe(ctx: Ctx) -> None:
    """A google.longrunning Operation: done once its instance's latency has passed; then `error` {code, message}
    for a create that failed, else `response`."""
    if not ctx.positionals:
        raise Fail(2, _error(ctx, "argument OPERATION: Must be specified."))
    wanted = f"projects/{ctx.project}/locations/{ctx.flag('--location')}/operations/{ctx.positionals[0]}"
    op = ctx.state.get("_lustre_operation", wanted)
    if op is None:
        raise Fail(1, _error(ctx, f"NOT_FOUND: Resource '{wanted}' was not found"))
    ctx.work()
    done = time.time() >= op["_done_at"]
    _sweep(ctx)  # after: a create the answer calls failed is gone too (its instance's time is the same)
    out: dict = {"name": op["name"], "metadata": {"target": op["target"], "verb": op["verb"],
                                                   "apiVersion": "v1"}, "done": done}
    if done and op["_error"]:
        code, _, message = op["_error"].partition(":")
        out["error"] = {"code": int(code) if code.isdigit() else 13, "message": message or op["_error"]}
    elif done:
        kind = "Instance" if op["verb"] == "create" else "ExportDataResponse"
        out["response"] = {"@type": f"type.googleapis.com/google.cloud.lustre.v1.{kind}", "name": op["target"]}
        _transfer_once(ctx, op["name"])  # an export's objects are there once it is done
        op = ctx.state.get("_lustre_operation", wanted) or op
        if "_counters" in op:  # ExportDataMetadata.operationMetadata (TransferOperationMetadata)
            transfer: dict = {"counters": op["_counters"], "transferType": "EXPORT"}
            if op.get("_failures"):
                transfer["errorSummaries"] = [{
                    "errorCode": "PERMISSION_DENIED", "errorCount": str(len(op["_failures"])),
                    "errorLogEntries": [{"uri": uri, "errorDetails": ["the service agent may not write the object"]}
                                        for uri in op["_failures"][:5]]}]
            out["metadata"]["operationMetadata"] = transfer
    ctx.emit(out)


@command("gcloud", "lustre", "instances", "describe", latency=1)
def lustre_describe(ctx: Ctx) -> None:
    name = _name(ctx)
    obj = _get(ctx, name)
    ctx.work()
    ctx.emit(view(obj))


@command("gcloud", "lustre", "instances", "list", latency=1)
def lustre_list(ctx: Ctx) -> None:
    ctx.work()
    location = ctx.flag("--location")
    if not location:
        raise Fail(2, _error(ctx, "argument --location: Must be specified."))
    _sweep(ctx)
    ctx.emit(filtered(ctx, [view(o) for k, o in ctx.state.items("lustre").items()
                            if k.startswith(f"{ctx.project}/")
                            and (location == "-" or f"/locations/{location}/" in o["name"])]))


@command("gcloud", "lustre", "instances", "delete", mutating=True, latency=480)
def lustre_delete(ctx: Ctx) -> None:
    name = _name(ctx)
    obj = _get(ctx, name)
    # Google Cloud takes the delete at once and goes on with it whatever becomes of this gcloud (Ctrl-C): the
    # instance is DELETING until the delete's time has passed. A second delete meanwhile waits for the first (our
    # guess: the API's answer to it is not documented).
    until = float(obj.get("_deleting_until") or time.time() + ctx.latency * time_scale())
    ctx.state.put("lustre", _key(ctx, name), {**obj, "_deleting_until": until})
    time.sleep(max(0.0, until - time.time()))
    with ctx.state.locked():  # unless a sweep in another call saw its time pass first (or it was made anew)
        if (ctx.state.get("lustre", _key(ctx, name)) or {}).get("_deleting_until") == until:
            _deleted(ctx, _key(ctx, name), {**obj, "_deleting_until": until})
    ctx.err(f"Deleted instance [{name}].")


@command("gcloud", "lustre", "instances", "export-data", mutating=True, latency=120)
def lustre_export(ctx: Ctx) -> None:
    name = _name(ctx)
    obj = _get(ctx, name)
    if view(obj)["state"] != "ACTIVE":
        raise Fail(1, _error(ctx, f"FAILED_PRECONDITION: instance {name} is not ACTIVE"))
    uri = str(ctx.flag("--gcs-path-uri", ""))
    match = re.fullmatch(r"gs://([a-z0-9][a-z0-9._-]+)(/.*)?", uri)
    if not match:
        raise Fail(2, _error(ctx, f"argument --gcs-path-uri: {uri!r} is not a gs:// URI"))
    prefix = (match.group(2) or "/").lstrip("/")
    if prefix and not prefix.endswith("/"):
        raise Fail(1, _error(ctx, "INVALID_ARGUMENT: a path inside the bucket must end with '/'"))
    lustre_path = str(ctx.flag("--lustre-path", "/"))
    if not lustre_path.startswith("/"):
        raise Fail(1, _error(ctx, "INVALID_ARGUMENT: --lustre-path must start with '/'"))
    transfer = {"bucket": match.group(1), "prefix": prefix, "source": str(files_root(ctx, name) /
                                                                          lustre_path.lstrip("/")),
                "name": name, "lustre_path": lustre_path, "uri": uri}
    # How long the transfer takes (FAKECLOUD_LUSTRE_EXPORT_SECONDS, default 120 × the time scale), and an error
    # it ends with on Google's side (FAKECLOUD_LUSTRE_EXPORT_ERROR="CODE:message"). FAKECLOUD_LUSTRE_EXPORT_FAILS:
    # each file it would copy fails to be written (the service agent lost the bucket, say), and the operation
    # ends done, without an error, its counters and error summaries saying so.
    seconds = float(os.environ.get("FAKECLOUD_LUSTRE_EXPORT_SECONDS", "120"))
    error = os.environ.get("FAKECLOUD_LUSTRE_EXPORT_ERROR", "")
    operation = _operation_name(ctx)
    ctx.state.put("_lustre_operation", operation, {"name": operation, "target": obj["name"], "verb": "exportData",
                                                   "_done_at": time.time() + seconds * time_scale(),
                                                   "_error": error, "_transfer": transfer,
                                                   "_fails": bool(os.environ.get("FAKECLOUD_LUSTRE_EXPORT_FAILS"))})
    if ctx.flag("--async"):  # gcloud's declarative commands' words (yaml_command_translator); the objects
        # appear when the operation is done (operation_describe), not before
        ctx.err(f"Request issued for: [{name}]\nCheck operation [{operation}] for status.")
        return
    # A waiting gcloud gives up after 30 minutes (api_lib/util/waiter.py), the export going on remotely.
    ctx.work(min(seconds, 1800))
    if seconds > 1800:
        _transfer_once(ctx, operation)
        raise Fail(1, _error(ctx, f"Operation [{operation}] has not finished in 1800 seconds. The operations may "
                                  f"still be underway remotely and may still succeed; use gcloud list and "
                                  f"describe commands or https://console.developers.google.com/ to check "
                                  f"resource state."))
    if error:
        raise Fail(1, _error(ctx, error.split(":", 1)[-1]))
    copied = _transfer_once(ctx, operation)
    ctx.err(f"Exported {copied} files from [{name}]:{lustre_path} to [{uri}].")


def _transfer_once(ctx: Ctx, operation: str) -> int:
    """An export's result, once: every file under the Lustre path as an object under the bucket prefix (in the
    GCS emulator when STORAGE_EMULATOR_HOST is set). As Managed Lustre's transfers do ("transfer-data": only files
    that are not in the bucket yet, or have changed since), a file whose object has its size and MD5 is not copied
    again. How many files were copied."""
    with ctx.state.locked():
        op = ctx.state.get("_lustre_operation", operation) or {}
        transfer = op.get("_transfer")
        if not transfer or op.get("_copied") or op.get("_error"):
            return 0
        op["_copied"] = True
        ctx.state.put("_lustre_operation", operation, op)
    source = Path(transfer["source"])
    files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else []
    # FAKECLOUD_LUSTRE_EXPORT_UNSEEN="GLOB": files under the path that the transfer neither copies nor counts. No
    # documentation promises that a done export without failures copied every file (a symlink, an odd name, a
    # file being written); this is the doubt the data guard must not take on trust.
    unseen = os.environ.get("FAKECLOUD_LUSTRE_EXPORT_UNSEEN", "")
    if unseen:
        import fnmatch

        files = [p for p in files if not fnmatch.fnmatch(str(p.relative_to(source)), unseen)]
    counters = {"foundObjectsCount": len(files), "objectsSkippedCount": 0, "objectsCopiedCount": 0,
                "objectsFailedCount": 0}
    failures: list[str] = []
    if files and os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        gcs = storage.Client(project=ctx.project, credentials=AnonymousCredentials())
        bucket = gcs.bucket(transfer["bucket"])
        copied = []
        for path in files:
            name = transfer["prefix"] + str(path.relative_to(source))
            there = bucket.get_blob(name)
            data = path.read_bytes()
            if there is not None and there.size == len(data) and (
                    there.md5_hash == base64.b64encode(hashlib.md5(data).digest()).decode() if there.md5_hash
                    else there.download_as_bytes() == data):
                counters["objectsSkippedCount"] += 1
                continue
            if op.get("_fails"):
                counters["objectsFailedCount"] += 1
                failures.append(f"gs://{transfer['bucket']}/{name}")
                continue
            bucket.blob(name).upload_from_filename(str(path))
            copied.append(path)
        files = copied
    counters["foundObjectsCount"] -= counters["objectsSkippedCount"]  # "excluding ... skipped due to sync"
    counters["objectsCopiedCount"] = len(files)
    with ctx.state.locked():  # what the operation's metadata says from now on (int64: strings in JSON)
        op = ctx.state.get("_lustre_operation", operation) or {}
        op["_counters"] = {key: str(value) for key, value in counters.items() if value}  # proto3 JSON: no zeros
        op["_failures"] = failures
        ctx.state.put("_lustre_operation", operation, op)
    key = f"{ctx.project}/{ctx.flag('--location')}/{transfer['name']}"
    exports = ctx.state.get("lustre-export", key) or {"runs": []}
    exports["runs"].append({"lustre_path": transfer["lustre_path"], "gcs_path_uri": transfer["uri"],
                            "files": len(files), "time": time.time()})
    ctx.state.put("lustre-export", key, exports)
    return len(files)
