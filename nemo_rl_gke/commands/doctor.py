"""`doctor`'s questions, as pure argv builders: the tools' versions, the account, the project, its APIs, the GPU
machine type and RoCE network profile in NODE_LOCATION, and the GPU quota or the reservation; plus what doctor
asks the web (for the dry run). readiness.py turns each answer into a ✓/✗ Check with the fix.
"""

from __future__ import annotations

import re

from ..settings import Settings
from . import gcloud, kubectl

Argv = list[str]

REQUIRED_APIS = (
    "container.googleapis.com",
    "compute.googleapis.com",
    "storage.googleapis.com",
    "lustre.googleapis.com",
    "servicenetworking.googleapis.com",
)
HF_WHOAMI = "https://huggingface.co/api/whoami-v2"


def model_file_url(model: str) -> str:
    """A small file every model repo has: reading it with the token answers 200 only with access. (The model
    API answers a gated repo's metadata to anyone; a file of a gated repo needs the licence accepted: 403.)"""
    return f"https://huggingface.co/{model}/resolve/main/config.json"


def models_to_check(s: Settings) -> list[tuple[str, list[str]]]:
    """(model, []) for each model `up` prefetches (PREFETCH_MODELS), then (model, the jobs that name it) for each
    other gated model of the job catalogue (jobs/): only those jobs need it."""
    from .. import jobspec, prefetch

    prefetched = prefetch.models(s)
    by_model: dict[str, list[str]] = {}
    for name in jobspec.available():
        try:
            spec = jobspec.load(name)
        except Exception:  # noqa: BLE001 - a broken job file is job.submit's to report, not doctor's
            continue
        if spec.gated and spec.model_name not in prefetched:
            by_model.setdefault(spec.model_name, []).append(name)
    return [(model, []) for model in prefetched] + list(by_model.items())


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


def auth_properties() -> Argv:
    """gcloud's properties as they apply now (its configuration and CLOUDSDK_* variables): auth/* says which
    credentials it uses in place of the logged-in account (a key file or token file, as CI sets them)."""
    return ["gcloud", "config", "list", "--format=json"]


def project_describe(s: Settings) -> Argv:
    return ["gcloud", "projects", "describe", s.PROJECT_ID, "--format=json"]


def enabled_services(s: Settings) -> Argv:
    return ["gcloud", "services", "list", "--enabled", gcloud.project_flag(s),
            "--format=value(config.name)"]


def region_quotas(s: Settings) -> Argv:
    return ["gcloud", "compute", "regions", "describe", s.region, gcloud.project_flag(s),
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


def machine_type_describe(s: Settings) -> Argv:
    """Is the GPU machine type offered in NODE_LOCATION? (Else the node pool fails after the cluster is up.)"""
    return ["gcloud", "compute", "machine-types", "describe", s.gpu.machine_type, f"--zone={s.zone}",
            gcloud.project_flag(s), "--format=json"]


def network_profile_describe(s: Settings) -> Argv:
    """Does NODE_LOCATION have the RoCE network profile the RDMA VPC is created with?"""
    from .. import names

    return ["gcloud", "compute", "network-profiles", "describe", names.rdma_profile(s), gcloud.project_flag(s),
            "--format=json"]


def server_config(s: Settings) -> Argv:
    """The GKE versions CONTROL_PLANE_LOCATION offers now: a pinned GKE_VERSION leaves the list within months."""
    return ["gcloud", "container", "get-server-config", f"--location={s.CONTROL_PLANE_LOCATION}",
            gcloud.project_flag(s), "--format=json"]


def enable_apis(s: Settings, apis: list[str] | tuple[str, ...]) -> Argv:
    """What `doctor --fix` runs: enable the missing APIs (a long-running operation gcloud waits for)."""
    return ["gcloud", "services", "enable", *apis, gcloud.project_flag(s)]


def missing_apis(stdout: str) -> list[str]:
    enabled = {line.strip() for line in (stdout or "").splitlines() if line.strip()}
    return [api for api in REQUIRED_APIS if api not in enabled]


def web_queries(s: Settings) -> list[str]:
    """What doctor asks the web (for the dry run): never the token itself."""
    out = [f"GET {url}" for url in kubectl.nccl_installer_urls(s)]
    out.append("Application Default Credentials (google.auth.default, then a token refresh)")
    header = " (Authorization: Bearer HF_TOKEN, not shown)" if s.HF_TOKEN else " (no token)"
    if s.HF_TOKEN:
        out.append(f"GET {HF_WHOAMI}{header}")
    out += [f"GET {model_file_url(model)}{header}" for model, _ in models_to_check(s)]
    return out


def queries(s: Settings) -> list[Argv]:
    """Every command doctor runs (read-only), for the dry run and the gcloud parse test."""
    out = [gcloud_version(), kubectl_version(), helm_version(), auth_plugin_version(), active_account(),
           project_describe(s), enabled_services(s), machine_type_describe(s), network_profile_describe(s),
           server_config(s)]
    out.append(reservation_describe(s) if s.RESERVATION else region_quotas(s))
    return out
