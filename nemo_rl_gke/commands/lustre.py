"""Pure builders for Managed Lustre and its network: gcloud argv (peering range, VPC peering to Service
Networking, the instance, its export to the bucket) and the small decisions around them (which ranges a
peering keeps, the instance's mount address). The bucket's commands are in buckets.py, the export records
and the export check in exports.py, the Kubernetes objects in kube_objects.py.

Nothing here runs anything; resources/storage_steps.py wires these to the runner.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .. import names
from ..settings import Settings
from .gcloud import project_flag

Argv = list[str]

SERVICE_NETWORKING = "servicenetworking.googleapis.com"
PEERING_PREFIX_LENGTH = 20
# In a dry run the instance does not exist yet: the PV is rendered with this documentation-range address.
DRY_RUN_IP = "192.0.2.1"
LUSTRE_READY_STATE = "ACTIVE"
# Usable: ready, or in Google's maintenance of a ready instance (v1's UPGRADING, REPAIRING, and the deprecated
# UPDATING; the docs' state table also names MAINTENANCE, "undergoing maintenance", which gcloud 528's enum
# lacks), which keeps its mountPoint: an existing instance then is not created again (ALREADY_EXISTS) and
# waited for an hour.
LUSTRE_USABLE_STATES = (LUSTRE_READY_STATE, "UPGRADING", "REPAIRING", "UPDATING", "MAINTENANCE")
# The v1 Instance states that never become ACTIVE by waiting (v1 has no FAILED: a create that fails ends in its
# operation's error, and the instance goes). SUSPENDED: a Cloud KMS key it cannot use; its stateReason says which.
LUSTRE_FAILED_STATES = ("DELETING", "STOPPED", "SUSPENDED")


def network_uri(s: Settings) -> str:
    return f"projects/{s.PROJECT_ID}/global/networks/{s.NETWORK}"


def volume_handle(s: Settings) -> str:
    return f"{s.PROJECT_ID}/{s.lustre_zone}/{s.LUSTRE_NAME}"


# ---- peering address range -------------------------------------------------------------------------
def range_describe(s: Settings) -> Argv:
    return ["gcloud", "compute", "addresses", "describe", names.lustre_range(s), project_flag(s), "--global",
            "--format=json"]


def range_list(s: Settings, filter_: str) -> Argv:
    return ["gcloud", "compute", "addresses", "list", project_flag(s),
            "--global", f"--filter={filter_}", "--format=json"]


def range_create(s: Settings) -> Argv:
    return ["gcloud", "compute", "addresses", "create", names.lustre_range(s), project_flag(s), "--global",
            "--purpose=VPC_PEERING", f"--prefix-length={PEERING_PREFIX_LENGTH}", f"--network={s.NETWORK}",
            f"--description={names.DESCRIPTION}"]


def range_delete(s: Settings) -> Argv:
    return ["gcloud", "compute", "addresses", "delete", names.lustre_range(s), project_flag(s), "--global", "--quiet"]


# ---- VPC peering to Service Networking ----------------------------------------------------------------
def peering_list(s: Settings) -> Argv:
    return ["gcloud", "services", "vpc-peerings", "list", f"--network={s.NETWORK}",
            f"--service={SERVICE_NETWORKING}", project_flag(s), "--format=json"]


def peering_connect(s: Settings) -> Argv:
    return ["gcloud", "services", "vpc-peerings", "connect", f"--service={SERVICE_NETWORKING}",
            f"--ranges={names.lustre_range(s)}", f"--network={s.NETWORK}", project_flag(s)]


def peering_update(s: Settings, ranges: list[str], *, force: bool = False) -> Argv:
    argv = ["gcloud", "services", "vpc-peerings", "update", f"--service={SERVICE_NETWORKING}",
            f"--ranges={','.join(ranges)}", f"--network={s.NETWORK}", project_flag(s)]
    return argv + (["--force"] if force else [])


def peering_delete(s: Settings) -> Argv:
    return ["gcloud", "services", "vpc-peerings", "delete", f"--service={SERVICE_NETWORKING}",
            f"--network={s.NETWORK}", project_flag(s), "--quiet"]


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
    return ["gcloud", "lustre", "instances", "describe", s.LUSTRE_NAME, f"--location={s.lustre_zone}", project_flag(s),
            f"--format={fmt}"]


def operation_id(output: str) -> str:
    """The operation an `--async` create or export started: from gcloud's "Check operation
    [projects/P/locations/Z/operations/ID] for status." (stderr), or the operation it prints (stdout, its
    `name:`); "" when it printed neither (core/user_output_enabled=false)."""
    found = (re.search(r"Check operation \[(?:[^\]]*/)?([^\]/]+)\]", output or "")
             or re.search(r"""^\s*"?name"?:\s*"?projects/[^/\s"]+/locations/[^/\s"]+/operations/([^/\s"]+)""",
                          output or "", re.MULTILINE))
    return found.group(1) if found else ""


def operation_describe(s: Settings, operation: str) -> Argv:
    """A Lustre operation (a create's, an export's): `done`, and on failure `error` {code, message}, the only
    place a failure on Google's side is told (a failed create's instance just goes)."""
    return ["gcloud", "lustre", "operations", "describe", operation, f"--location={s.lustre_zone}", project_flag(s),
            "--format=json"]


def lustre_list(s: Settings, filter_: str) -> Argv:
    return ["gcloud", "lustre", "instances", "list", f"--location={s.lustre_zone}", project_flag(s),
            f"--filter={filter_}",
            "--format=json"]


def lustre_create(s: Settings) -> Argv:
    # --async: the create takes ~15 minutes; we poll describe and show progress instead of a silent wait.
    return ["gcloud", "lustre", "instances", "create", s.LUSTRE_NAME, f"--location={s.lustre_zone}", project_flag(s),
            f"--capacity-gib={s.LUSTRE_CAPACITY_GIB}", f"--per-unit-storage-throughput={s.LUSTRE_THROUGHPUT}",
            f"--filesystem={names.LUSTRE_FILESYSTEM}", f"--network={network_uri(s)}", "--gke-support-enabled",
            f"--description={names.DESCRIPTION}", f"--labels={names.deployment_labels(s)}", "--async"]


def lustre_delete(s: Settings) -> Argv:
    return ["gcloud", "lustre", "instances", "delete", s.LUSTRE_NAME, f"--location={s.lustre_zone}", project_flag(s),
            "--quiet"]


def lustre_export(s: Settings, lustre_path: str, gcs_uri: str) -> Argv:
    return ["gcloud", "lustre", "instances", "export-data", s.LUSTRE_NAME, f"--location={s.lustre_zone}",
            project_flag(s), f"--lustre-path={lustre_path}", f"--gcs-path-uri={gcs_uri}", "--async"]


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
            "mount_point": mount, "ip": mount.split("@", 1)[0] if mount else "",
            "reason": str(body.get("stateReason") or "")}


def dry_describe(s: Settings) -> str:
    return json.dumps({"name": s.LUSTRE_NAME, "state": LUSTRE_READY_STATE,
                       "capacityGib": str(s.LUSTRE_CAPACITY_GIB),
                       "mountPoint": f"{DRY_RUN_IP}@tcp:/{names.LUSTRE_FILESYSTEM}"})
