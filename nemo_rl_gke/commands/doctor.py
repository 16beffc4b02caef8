"""`doctor`: is this machine and this project ready for `up`? Pure argv builders and checks.

Each check turns one tool's answer into ✓/✗ with the fix. Quota metric names (Compute Engine regional
quotas, `gcloud compute regions describe`): NVIDIA_B200_GPUS / PREEMPTIBLE_NVIDIA_B200_GPUS for
a4-highgpu-8g, NVIDIA_H200_GPUS / PREEMPTIBLE_NVIDIA_H200_GPUS for a3-ultragpu-8g. Spot VMs draw on the
preemptible quota when the project has one, else on the standard one. A reservation was counted against
quota when it was made, so with RESERVATION the check is the reservation's free capacity instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..settings import Settings

Argv = list[str]

MIN_HELM = (3, 14)
MIN_GCLOUD = (528, 0)  # `gcloud lustre` is GA there; older releases lack the command group
REQUIRED_APIS = (
    "container.googleapis.com",
    "compute.googleapis.com",
    "storage.googleapis.com",
    "lustre.googleapis.com",
    "servicenetworking.googleapis.com",
)
QUOTA_METRICS = {
    "nvidia-b200": "NVIDIA_B200_GPUS",
    "nvidia-h200-141gb": "NVIDIA_H200_GPUS",
}


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""

    def lines(self) -> list[str]:
        out = [f"{'✓' if self.ok else '✗'} {self.name}: {self.detail}"]
        if not self.ok and self.fix:
            out.append(f"    fix: {self.fix}")
        return out


# ---- argv builders ---------------------------------------------------------------------------
def gcloud_version() -> Argv:
    return ["gcloud", "version", "--format=json"]


def kubectl_version() -> Argv:
    return ["kubectl", "version", "--client", "--output=json"]


def helm_version() -> Argv:
    return ["helm", "version", "--short"]


def auth_plugin_version() -> Argv:
    return ["gke-gcloud-auth-plugin", "--version"]


def active_account() -> Argv:
    return ["gcloud", "auth", "list", "--filter=status:ACTIVE", "--format=value(account)"]


def project_describe(s: Settings) -> Argv:
    return ["gcloud", "projects", "describe", s.PROJECT_ID, "--format=json"]


def enabled_services(s: Settings) -> Argv:
    return ["gcloud", "services", "list", "--enabled", f"--project={s.PROJECT_ID}",
            "--format=value(config.name)"]


def region_quotas(s: Settings) -> Argv:
    return ["gcloud", "compute", "regions", "describe", s.region, f"--project={s.PROJECT_ID}",
            "--format=json"]


def reservation_parts(s: Settings) -> tuple[str, str]:
    """(project, name) of RESERVATION: a plain name, or projects/P/reservations/R[/reservationBlocks/B]."""
    match = re.match(r"^projects/([^/]+)/reservations/([^/]+)", s.RESERVATION)
    if match:
        return match.group(1), match.group(2)
    return s.PROJECT_ID, s.RESERVATION


def reservation_describe(s: Settings) -> Argv:
    project, name = reservation_parts(s)
    return ["gcloud", "compute", "reservations", "describe", name, f"--project={project}", f"--zone={s.zone}",
            "--format=json"]


def queries(s: Settings) -> list[Argv]:
    """Every command doctor runs (read-only), for the dry run and the gcloud parse test."""
    out = [gcloud_version(), kubectl_version(), helm_version(), auth_plugin_version(), active_account(),
           project_describe(s), enabled_services(s)]
    out.append(reservation_describe(s) if s.RESERVATION else region_quotas(s))
    return out


# ---- checks (pure: a tool's stdout in, a Check out) ------------------------------------------
def _version(text: str) -> tuple[int, ...] | None:
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    return tuple(int(g or 0) for g in match.groups()) if match else None


def missing_tool(name: str, hint: str) -> Check:
    return Check(name, False, "not found on PATH", hint)


def check_gcloud(stdout: str) -> Check:
    try:
        version = json.loads(stdout or "{}").get("Google Cloud SDK", "")
    except json.JSONDecodeError:
        version = stdout
    found = _version(version)
    if found is None:
        return Check("gcloud", False, f"cannot read its version from {stdout[:60]!r}",
                     "reinstall the Google Cloud CLI")
    shown = ".".join(map(str, found))
    if found[:2] < MIN_GCLOUD:
        return Check("gcloud", False, f"{shown} is older than {MIN_GCLOUD[0]} (no `gcloud lustre`)",
                     "run `gcloud components update` (or upgrade the google-cloud-cli package)")
    return Check("gcloud", True, shown)


def check_kubectl(stdout: str) -> Check:
    try:
        version = json.loads(stdout or "{}").get("clientVersion", {}).get("gitVersion", "")
    except json.JSONDecodeError:
        version = stdout
    match = re.search(r"v?\d+\.\d+\.\d+\S*", version or "")
    if match is None:
        return Check("kubectl", False, f"cannot read its version from {stdout[:60]!r}",
                     "run `gcloud components install kubectl`")
    return Check("kubectl", True, match.group(0))


def check_helm(stdout: str) -> Check:
    found = _version(stdout)
    if found is None:
        return Check("helm", False, f"cannot read its version from {stdout[:60]!r}",
                     "install helm 3.14 or later: https://helm.sh/docs/intro/install/")
    shown = stdout.strip().split("+")[0]
    if found[:2] < MIN_HELM:
        return Check("helm", False, f"{shown} is older than 3.14",
                     "install helm 3.14 or later: https://helm.sh/docs/intro/install/ "
                     "(or `python scripts/fetch_helm.py`)")
    return Check("helm", True, shown)


def check_auth_plugin(stdout: str) -> Check:
    return Check("gke-gcloud-auth-plugin", True, (stdout.strip().splitlines() or ["present"])[0])


def check_account(stdout: str) -> Check:
    accounts = [line.strip() for line in (stdout or "").splitlines() if line.strip()]
    if not accounts:
        return Check("account", False, "no active gcloud account",
                     "run `gcloud auth login` (and `gcloud auth application-default login`)")
    return Check("account", True, accounts[0])


def check_project(s: Settings, exit_code: int, stdout: str, stderr: str) -> Check:
    if exit_code != 0:
        reason = (stderr.strip().splitlines() or ["not found or no permission"])[-1]
        return Check("project", False, f"{s.PROJECT_ID}: {reason}",
                     f"check PROJECT_ID in .env, and that your account can see it (`gcloud projects describe "
                     f"{s.PROJECT_ID}`)")
    state = json.loads(stdout or "{}").get("lifecycleState", "ACTIVE")
    if state != "ACTIVE":
        return Check("project", False, f"{s.PROJECT_ID} is {state}", "use an active project")
    return Check("project", True, s.PROJECT_ID)


def check_apis(s: Settings, stdout: str) -> Check:
    enabled = {line.strip() for line in (stdout or "").splitlines() if line.strip()}
    missing = [api for api in REQUIRED_APIS if api not in enabled]
    if missing:
        return Check("APIs", False, "not enabled: " + ", ".join(missing),
                     f"run `gcloud services enable {' '.join(missing)} --project={s.PROJECT_ID}`")
    return Check("APIs", True, "enabled: " + ", ".join(a.split(".")[0] for a in REQUIRED_APIS))


def gpus_needed(s: Settings) -> int:
    return s.GPU_NODES * s.gpu.gpus_per_node


def _headroom(quotas: list[dict], metric: str) -> tuple[float, float] | None:
    for quota in quotas:
        if quota.get("metric") == metric:
            limit, usage = float(quota.get("limit", 0)), float(quota.get("usage", 0))
            return limit, limit - usage
    return None


def check_quota(s: Settings, stdout: str) -> Check:
    """GPU quota in the region against GPU_NODES × 8 (standard metric, or preemptible for Spot)."""
    quotas = json.loads(stdout or "{}").get("quotas", [])
    need = gpus_needed(s)
    metric = QUOTA_METRICS[s.gpu.accelerator]
    name = f"GPU quota ({s.region})"
    wanted = f"{'PREEMPTIBLE_' if s.SPOT else ''}{metric}"
    fix = (f"request {wanted} >= {need} in {s.region}: Console > IAM & Admin > Quotas (filter: metric), "
           f"or lower GPU_NODES / use --reservation")
    standard = _headroom(quotas, metric)
    if s.SPOT:
        preemptible = _headroom(quotas, f"PREEMPTIBLE_{metric}")
        if preemptible is not None and preemptible[0] > 0:
            free = preemptible[1]
            used_metric = f"PREEMPTIBLE_{metric}"
        else:
            # Without a preemptible quota, Spot VMs count against the standard one.
            free = standard[1] if standard else 0.0
            used_metric = metric
    else:
        free = standard[1] if standard else 0.0
        used_metric = metric
    detail = f"{used_metric}: {free:g} free, up needs {need} ({s.GPU_NODES} nodes × {s.gpu.gpus_per_node})"
    return Check(name, free >= need, detail, fix)


def check_reservation(s: Settings, exit_code: int, stdout: str, stderr: str) -> Check:
    name = f"reservation {s.RESERVATION}"
    if exit_code != 0:
        reason = (stderr.strip().splitlines() or ["not found"])[-1]
        return Check(name, False, f"not found in {s.zone}: {reason}",
                     f"check RESERVATION and NODE_LOCATION (`gcloud compute reservations list "
                     f"--project={reservation_parts(s)[0]}`), or use --spot")
    body = json.loads(stdout or "{}")
    specific = body.get("specificReservation", {})
    machine = specific.get("instanceProperties", {}).get("machineType", "")
    free = int(specific.get("count", 0)) - int(specific.get("inUseCount", 0))
    if machine and machine != s.gpu.machine_type:
        return Check(name, False, f"reserves {machine}, not {s.gpu.machine_type}",
                     f"use a reservation of {s.gpu.machine_type}, or set GPU_TYPE to match")
    if body.get("status", "READY") != "READY":
        return Check(name, False, f"status {body.get('status')}", "wait until the reservation is READY")
    if free < s.GPU_NODES:
        return Check(name, False, f"{free} of {specific.get('count', 0)} VMs free, up needs {s.GPU_NODES}",
                     "lower GPU_NODES, free VMs in the reservation, or use --spot")
    return Check(name, True, f"{free} {s.gpu.machine_type} free, up needs {s.GPU_NODES}")
