"""`doctor`'s verdicts (pure): each answer to a question of commands/doctor.py, or of the web, as a ✓/✗ Check
with the fix.

Each check turns one tool's answer into ✓/✗ with the fix. Quota metric names (Compute Engine regional
quotas, `gcloud compute regions describe`): NVIDIA_B200_GPUS / PREEMPTIBLE_NVIDIA_B200_GPUS for
a4-highgpu-8g, NVIDIA_H200_GPUS / PREEMPTIBLE_NVIDIA_H200_GPUS for a3-ultragpu-8g. Spot VMs draw on the
preemptible quota when the project has one, else on the standard one. A reservation was counted against
quota when it was made, so with RESERVATION the check is the reservation's free capacity instead.

Besides the tools' answers, doctor asks the web what `up` and `job.submit` will fetch: the two NCCL RDMA
installer manifests at NCCL_INSTALLER_REF (kubectl fetches the URL, a 404 stops `up` at the GPU pool), the
Application Default Credentials the storage client uses (the bucket steps), and, when HF_TOKEN is set,
Hugging Face's whoami (the token is sent in a header, never shown). Those answers arrive as `WebAnswer` /
`AdcAnswer` values from injectable probes (tasks/checkup.py), so everything here stays pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypedDict

from .commands.doctor import REQUIRED_APIS, missing_apis, reservation_parts
from .settings import NCCL_INSTALLER_DEFAULT_REF, Settings

MIN_HELM = (3, 14)
MIN_GCLOUD = (528, 0)  # `gcloud lustre` is GA there; older releases lack the command group
HF_TOKENS_PAGE = "https://huggingface.co/settings/tokens"
ADC_FIX = "run `gcloud auth application-default login` (the storage client uses Application Default Credentials)"
QUOTA_METRICS = {
    "nvidia-b200": "NVIDIA_B200_GPUS",
    "nvidia-h200-141gb": "NVIDIA_H200_GPUS",
}


class RegionQuota(TypedDict, total=False):
    """One entry of `gcloud compute regions describe --format=json`'s quotas."""

    metric: str
    limit: float
    usage: float


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warn: bool = False  # passed, with something to know (`!`): it does not fail doctor

    def lines(self) -> list[str]:
        mark = "✗" if not self.ok else "!" if self.warn else "✓"
        out = [f"{mark} {self.name}: {self.detail}"]
        if (not self.ok or self.warn) and self.fix:
            out.append(f"    fix: {self.fix}")
        return out


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


# Credentials gcloud uses instead of a logged-in account, which `gcloud auth list` does not show, in the order it
# takes them (core/credentials/store.py): CLOUDSDK_AUTH_ACCESS_TOKEN (a variable, no property), an access token
# file, a key file (google-github-actions/auth sets CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE).
CREDENTIAL_PROPERTIES = ("access_token_file", "credential_file_override")


def check_account(stdout: str, properties_json: str | None = None, *, token_variable: bool = False,
                  is_file: Callable[[str], bool] | None = None) -> Check:
    """The credentials gcloud takes, in its order (an active account is ignored while another is set): an access
    token in CLOUDSDK_AUTH_ACCESS_TOKEN (token_variable, never shown), the file its properties name
    (properties_json: `gcloud config list --format=json`), which must be a readable file (is_file; gcloud reads the
    path as given) or every gcloud call fails "Failed to load credential file", then `gcloud auth list`'s active
    account (stdout). With auth/impersonate_service_account, the calls run as that service account: said too."""
    accounts = [line.strip() for line in (stdout or "").splitlines() if line.strip()]
    try:
        auth = (json.loads(properties_json or "{}") or {}).get("auth") or {}
    except (json.JSONDecodeError, AttributeError):
        auth = {}
    if not isinstance(auth, dict):
        auth = {}
    check = _credentials(accounts, auth, token_variable=token_variable, is_file=is_file)
    acting = auth.get("impersonate_service_account")
    if acting and check.ok:
        return Check("account", True, f"{check.detail}; gcloud's calls run as {acting} "
                                      f"(auth/impersonate_service_account)")
    return check


def _credentials(accounts: list[str], auth: dict[str, Any], *, token_variable: bool,
                 is_file: Callable[[str], bool] | None) -> Check:
    """check_account's verdict on the credentials themselves, in gcloud's order."""
    if token_variable:
        return Check("account", True, "an access token in CLOUDSDK_AUTH_ACCESS_TOKEN; `gcloud auth list` shows no "
                                      "account for it")
    named = next((key for key in CREDENTIAL_PROPERTIES if auth.get(key)), None)
    if named and is_file is not None and not is_file(str(auth[named])):
        return Check("account", False, f"auth/{named} names {auth[named]}, which is not a file: every gcloud call "
                                       f"fails to load it", f"point auth/{named} (CLOUDSDK_AUTH_{named.upper()}) at "
                                       f"the file, or unset it and run `gcloud auth login`")
    if named:
        return Check("account", True, f"the credentials in auth/{named} ({auth[named]})"
                                      + (f", not the logged-in {accounts[0]}" if accounts else
                                         "; `gcloud auth list` shows no account for them"))
    if accounts:
        return Check("account", True, accounts[0])
    return Check("account", False, "no active gcloud account",
                 "run `gcloud auth login` (and `gcloud auth application-default login`)")


def check_project(s: Settings, exit_code: int, stdout: str, stderr: str) -> Check:
    if exit_code != 0:
        reason = error_line(stderr, "not found or no permission")
        return Check("project", False, f"{s.PROJECT_ID}: {reason}",
                     f"check PROJECT_ID in .env, and that your account can see it (`gcloud projects describe "
                     f"{s.PROJECT_ID}`)")
    state = json.loads(stdout or "{}").get("lifecycleState", "ACTIVE")
    if state != "ACTIVE":
        return Check("project", False, f"{s.PROJECT_ID} is {state}", "use an active project")
    return Check("project", True, s.PROJECT_ID)


def check_apis(s: Settings, stdout: str) -> Check:
    missing = missing_apis(stdout)
    if missing:
        return Check("APIs", False, "not enabled: " + ", ".join(missing),
                     f"run `invoke doctor --fix` (or `gcloud services enable {' '.join(missing)} "
                     f"--project={s.PROJECT_ID}`)")
    return Check("APIs", True, "enabled: " + ", ".join(a.split(".")[0] for a in REQUIRED_APIS))


def error_line(stderr: str, default: str) -> str:
    """A tool's own sentence on why it failed. gcloud's is its `ERROR: (gcloud.…) …` line (with the line after it
    when it ends in ':', compute's "Could not fetch resource:"), not the details the newer APIs print after it as
    YAML ("- '@type': type.googleapis.com/google.rpc.ErrorInfo", …, "reason: IAM_PERMISSION_DENIED"); otherwise
    the last line."""
    lines = [line.strip() for line in (stderr or "").strip().splitlines() if line.strip()]
    errors = [index for index, line in enumerate(lines) if line.startswith("ERROR:")]
    if not errors:
        return lines[-1].strip(" -") if lines else default
    line = re.sub(r"^ERROR: \([^)]*\) ?", "", lines[errors[-1]])
    if line.endswith(":") and errors[-1] + 1 < len(lines):
        line += " " + lines[errors[-1] + 1].strip(" -")
    return line or default


def check_gke_version(s: Settings, exit_code: int, stdout: str, stderr: str) -> Check:
    """GKE_VERSION is one CONTROL_PLANE_LOCATION offers now (GKE drops versions within months: a pin that left
    fails the cluster's create, after the VPCs are made); empty, the channel's default is new enough."""
    from .validation import version_tuple

    name = "GKE version"
    if exit_code != 0:
        return Check(name, False, error_line(stderr, "cannot read the server config"),
                     "check CONTROL_PLANE_LOCATION, and that container.googleapis.com is enabled")
    body = json.loads(stdout or "{}")
    body = body if isinstance(body, dict) else {}
    # cluster_create names no release channel: GKE enrols the cluster in the most mature channel that offers the
    # version (STABLE, then REGULAR, then RAPID), or in REGULAR, at its default, without one. A Standard cluster
    # may also take a version no channel offers (validMasterVersions); Autopilot is always in a channel.
    channels = {str(c.get("channel")): c for c in body.get("channels") or [] if isinstance(c, dict)}
    regular = channels.get("REGULAR") or {}
    default = str(regular.get("defaultVersion") or body.get("defaultClusterVersion") or "")
    offered = {version for channel in ("STABLE", "REGULAR", "RAPID") for version in [
        *((channels.get(channel) or {}).get("validVersions") or []),
        (channels.get(channel) or {}).get("defaultVersion")] if version}
    if not s.autopilot:
        offered |= set(body.get("validMasterVersions") or [])

    def new_enough(versions: Iterable[str]) -> list[str]:
        return sorted((v for v in versions if version_tuple(str(v)) and version_tuple(str(v)) >= version_tuple(
            s.gpu.min_gke)), key=version_tuple, reverse=True)

    usable = new_enough(regular.get("validVersions") or []) or new_enough(offered)
    default_ok = bool(default) and bool(new_enough([default]))
    if not s.GKE_VERSION:
        if default and not default_ok:
            return Check(name, False, f"the default, {default}, is older than {s.gpu.min_gke} ({s.gpu.accelerator})",
                         f"set GKE_VERSION to one it offers: {', '.join(usable[:3]) or 'none is new enough'}")
        return Check(name, True, f"the channel's default{': ' + default if default else ''}")
    if s.GKE_VERSION in offered:
        return Check(name, True, s.GKE_VERSION)
    return Check(name, False, f"GKE_VERSION={s.GKE_VERSION} is not offered in {s.CONTROL_PLANE_LOCATION} now: up's "
                       f"cluster create would fail (a cluster already made is not affected)",
                 f"set GKE_VERSION to one it offers ({', '.join(usable[:3]) or 'none is new enough'})"
                 + (f", or leave it empty for the channel's default ({default})" if default_ok else ""))


def check_machine_type(s: Settings, exit_code: int, stderr: str) -> Check:
    name = f"{s.gpu.machine_type} in {s.zone}"
    if exit_code != 0:
        return Check(name, False, f"not offered: {error_line(stderr, 'not found')[:160]}",
                     f"set NODE_LOCATION to a zone of {s.region} that offers {s.gpu.machine_type} (`gcloud compute "
                     f"machine-types list --filter=name={s.gpu.machine_type} --project={s.PROJECT_ID}`), or change "
                     f"GPU_TYPE")
    return Check(name, True, "offered")


def check_network_profile(s: Settings, exit_code: int, stderr: str) -> Check:
    from . import names

    profile = names.rdma_profile(s)
    name = "RDMA network profile"
    if exit_code != 0:
        return Check(name, False, f"{profile}: {error_line(stderr, 'not found')[:160]}",
                     f"set NODE_LOCATION to a zone with a RoCE network profile (`gcloud compute network-profiles list "
                     f"--project={s.PROJECT_ID}`)")
    return Check(name, True, profile)


# ---- web answers (from the probes in tasks/checkup.py) ----------------------------------------
@dataclass(frozen=True)
class WebAnswer:
    """One HTTP answer: the status, or None when there was none (no network, DNS, timeout) and why."""

    status: int | None
    body: str = ""
    reason: str = ""


@dataclass(frozen=True)
class AdcAnswer:
    """Application Default Credentials: found and refreshed (who), or not (why)."""

    ok: bool
    detail: str


def check_nccl_installer(s: Settings, answers: dict[str, WebAnswer]) -> Check:
    """Both installer manifests (standard and Autopilot) must answer 200 at NCCL_INSTALLER_REF."""
    name = "NCCL RDMA installer"
    short = s.NCCL_INSTALLER_REF[:12]
    bad = {url: answer for url, answer in answers.items() if answer.status != 200}
    if not bad:
        return Check(name, True, f"both manifests answer 200 at {short}")
    shown = "; ".join(f"{url.rsplit('/', 1)[-1]}: " + (f"HTTP {a.status}" if a.status is not None
                                                      else f"no answer ({a.reason[:80]})")
                      for url, a in bad.items())
    if all(a.status is None for a in bad.values()):
        fix = ("check that this machine reaches raw.githubusercontent.com (kubectl fetches the manifest from here "
               "during `up`)")
    elif s.NCCL_INSTALLER_REF == NCCL_INSTALLER_DEFAULT_REF:
        fix = ("the pinned commit no longer serves the file: set NCCL_INSTALLER_REF in .env to a commit of "
               "GoogleCloudPlatform/container-engine-accelerators master that has both "
               "gpudirect-rdma/nccl-rdma-installer.yaml and nccl-rdma-installer-autopilot.yaml")
    else:
        fix = (f"NCCL_INSTALLER_REF={s.NCCL_INSTALLER_REF} lacks the file: use a master commit that has both "
               f"installer manifests, or remove the line to use the default {NCCL_INSTALLER_DEFAULT_REF}")
    return Check(name, False, shown, fix)


def check_storage_credentials(emulator: str, answer: AdcAnswer | None) -> Check:
    """The storage client's credentials: ADC for Google Cloud, none for a local emulator."""
    name = "storage credentials"
    if emulator:  # a warning: left set in a shell, it splits a real deployment between two clouds
        return Check(name, True, f"STORAGE_EMULATOR_HOST={emulator}: the bucket, the export records and the lock's "
                                 f"lease go to that emulator (anonymous), while gcloud, kubectl and helm act on "
                                 f"Google Cloud", "unset STORAGE_EMULATOR_HOST for a real deployment", warn=True)
    if answer is None or not answer.ok:
        why = (answer.detail if answer is not None else "not checked").split(". ")[0]
        return Check(name, False, f"no usable Application Default Credentials ({why[:160]})", ADC_FIX)
    return Check(name, True, f"Application Default Credentials: {answer.detail[:120]}")


def check_hf_token(s: Settings, answer: WebAnswer | None) -> Check:
    """HF_TOKEN's state, never the token: valid (whose), rejected, or not checkable."""
    name = "HF_TOKEN"
    if not s.HF_TOKEN:
        return Check(name, True, "not set (only gated models such as google/gemma-3-27b-it need it)")
    if answer is None or answer.status is None:
        reason = answer.reason[:80] if answer is not None else "not checked"
        return Check(name, False, f"set, but huggingface.co did not answer ({reason})",
                     "check that this machine reaches huggingface.co")
    if answer.status == 200:
        try:
            body = json.loads(answer.body or "{}")
        except json.JSONDecodeError:
            body = {}
        who = body.get("name") if isinstance(body, dict) else None
        role = ((body.get("auth") or {}).get("accessToken") or {}).get("role") if isinstance(body, dict) else None
        detail = "valid" + (f" for {who}" if who else "") + (f" ({role} token)" if role else "")
        return Check(name, True, detail + "; gated models also need their licence accepted on the model page")
    if answer.status in (401, 403):
        return Check(name, False, f"rejected by huggingface.co (HTTP {answer.status})",
                     f"create a read token at {HF_TOKENS_PAGE} and put it in HF_TOKEN in .env")
    return Check(name, False, f"huggingface.co answered HTTP {answer.status}", "try again later")


def check_model_access(model: str, answer: WebAnswer | None, *, token: bool, jobs: list[str]) -> Check:
    """Whether the model can be downloaded as `up`'s prefetch and the driver will: with HF_TOKEN (token), or
    without one. jobs: the jobs of jobs/ that name it, when only they need it (not PREFETCH_MODELS): then a
    refusal is a warning (`!`), since only those jobs would fail; a model `up` prefetches fails doctor."""
    needed = f" (job {', '.join(jobs)})" if jobs else ""
    name = f"model {model}{needed}"
    page = f"https://huggingface.co/{model}"
    if answer is not None and answer.status == 200:
        return Check(name, True, "HF_TOKEN may download it" if token else "public: no token needed")
    if answer is None or answer.status is None:
        # A warning, not a failure: the downloads run in the cluster, which may reach the hub when we do not.
        reason = answer.reason[:80] if answer is not None else "not checked"
        return Check(name, True, f"not checked: huggingface.co did not answer this machine ({reason})",
                     "check that the cluster reaches huggingface.co (the prefetch and the driver download there)",
                     warn=True)
    said = _hub_words(answer.body)
    if answer.status == 403:
        detail = ("gated, and HF_TOKEN's account has no access to it yet (HTTP 403"
                  + (f': "{said}"' if said else "") + "): its download would fail")
        fix = (f"accept its licence at {page} with the account of HF_TOKEN (some need an approval; a fine-grained "
               f"token also needs read access to public gated repos), then run doctor again")
    elif answer.status == 401 and not token:
        # Without a token the hub answers 401 alike for a gated, a private and a missing repository.
        detail = "gated, private or not on huggingface.co (HTTP 401 without a token; HF_TOKEN is not set)"
        fix = (f"check the name ({page}); if it is gated, accept its licence there, create a read token at "
               f"{HF_TOKENS_PAGE} and set HF_TOKEN in .env" + ("" if jobs else "; or leave it out of PREFETCH_MODELS"))
    elif answer.status == 401:
        detail = "huggingface.co did not take HF_TOKEN for it (HTTP 401)"
        fix = f"create a read token at {HF_TOKENS_PAGE}, put it in HF_TOKEN, and accept the licence at {page}"
    elif answer.status == 404 and "entry not found" in answer.body.lower():
        detail = "the repository has no config.json (HTTP 404, Entry not found): not a model NeMo RL can load"
        fix = f"check the name in {'the job file (jobs/*.yaml)' if jobs else 'PREFETCH_MODELS'}"
    elif answer.status == 404:
        detail = "not on huggingface.co (HTTP 404)"
        fix = f"check the name in {'the job file (jobs/*.yaml)' if jobs else 'PREFETCH_MODELS'}"
    else:
        detail, fix = f"huggingface.co answered HTTP {answer.status}", "try again later"
    if jobs:
        return Check(name, True, f"{detail}; only the job(s) naming it would fail", fix, warn=True)
    return Check(name, False, detail + " (`up` prefetches it: PREFETCH_MODELS)", fix)


def _hub_words(body: str) -> str:
    """The hub's own message in an error body (JSON {"error": ...} or text), on one line, at most 160 characters."""
    text = body.strip()
    try:
        found = json.loads(text)
        text = str(found.get("error", "")) if isinstance(found, dict) else ""
    except json.JSONDecodeError:
        pass
    line = " ".join(text.split())
    return line if len(line) <= 160 else line[:157] + "..."


def gpus_needed(s: Settings) -> int:
    return s.GPU_NODES * s.gpu.gpus_per_node


def _headroom(quotas: list[RegionQuota], metric: str) -> tuple[float, float] | None:
    for quota in quotas:
        if quota.get("metric") == metric:
            limit, usage = float(quota.get("limit", 0)), float(quota.get("usage", 0))
            return limit, limit - usage
    return None


def check_quota(s: Settings, stdout: str) -> Check:
    """GPU quota in the region against GPU_NODES × 8 (standard metric, or preemptible for Spot)."""
    quotas: list[RegionQuota] = json.loads(stdout or "{}").get("quotas", [])
    need = gpus_needed(s)
    metric = QUOTA_METRICS[s.gpu.accelerator]
    name = f"GPU quota ({s.region})"
    wanted = f"{'PREEMPTIBLE_' if s.SPOT else ''}{metric}"
    fix = (f"request {wanted} >= {need} in {s.region}: Console > IAM & Admin > Quotas (filter: metric), "
           f"or lower GPU_NODES / use --reservation")
    standard = _headroom(quotas, metric)
    if standard is None and (not s.SPOT or _headroom(quotas, f"PREEMPTIBLE_{metric}") is None):
        # The region may not list the metric: gcloud 528's Compute API enum has no NVIDIA_B200_GPUS nor
        # NVIDIA_H200_GPUS (it prints whatever the API returns), and the newer GPU families may be counted in
        # Cloud Quotas per GPU family. Unverified on a live project. Absent is not "0 free".
        return Check(name, True, f"{wanted} is not among {s.region}'s quotas (`gcloud compute regions describe`), "
                                 f"so it was not checked; up needs {need} GPUs",
                     f"check the {s.gpu.short.upper()} GPU quota of {s.region} in Console > IAM & Admin > Quotas "
                     f"(newer GPUs may be counted per GPU family: GPUS-PER-GPU-FAMILY-per-project-region)",
                     warn=True)
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
        reason = error_line(stderr, "not found")
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
