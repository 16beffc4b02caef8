"""What `invoke doctor` asks: gcloud version, active account, config, enabled services, regional GPU
quotas, reservations; and what `doctor --fix` changes: services enable.

Tests shape the answers through state kind "doctor", key "settings" (absent = a healthy project):
    {"account": "me@example.com" or "", "services": [...enabled...],
     "quotas": {"NVIDIA_B200_GPUS": {"limit": 16, "usage": 0}, ...}}
Reservations live under kind "reservation", key "<project>/<zone>/<name>" (the describe body).
"""

from __future__ import annotations

from ..core import Ctx, Fail, command, gcloud_error, public
from .gcloud_filter import filtered

HEALTHY = {
    "account": "tester@example.com",
    "services": ["container.googleapis.com", "compute.googleapis.com", "storage.googleapis.com",
                 "lustre.googleapis.com", "servicenetworking.googleapis.com", "iam.googleapis.com"],
    "quotas": {metric: {"limit": 64, "usage": 0} for metric in (
        "NVIDIA_B200_GPUS", "PREEMPTIBLE_NVIDIA_B200_GPUS",
        "NVIDIA_H200_GPUS", "PREEMPTIBLE_NVIDIA_H200_GPUS")},
}


def _settings(ctx: Ctx) -> dict:
    return {**HEALTHY, **(ctx.state.get("doctor", "settings") or {})}


@command("gcloud", "version", latency=0)
def version(ctx: Ctx) -> None:
    body = {"Google Cloud SDK": "528.0.0", "bq": "2.1.18", "core": "2025.06.27", "gsutil": "5.35"}
    if ctx.flag("--format"):
        ctx.emit(body)
    else:
        ctx.out("\n".join(f"{k} {v}" for k, v in body.items()))


@command("gcloud", "auth", "list", latency=0.5)
def auth_list(ctx: Ctx) -> None:
    account = _settings(ctx)["account"]
    if not account:
        ctx.err("No credentialed accounts.\n\nTo login, run:\n  $ gcloud auth login `ACCOUNT`")
        return
    ctx.emit(filtered(ctx, [{"account": account, "status": "ACTIVE"}]))  # --filter as gcloud applies it


@command("gcloud", "config", "get", latency=0)
def config_get(ctx: Ctx) -> None:
    key = ctx.positionals[0] if ctx.positionals else ""
    values = {"project": ctx.project, "account": _settings(ctx)["account"]}
    if key not in values:
        raise Fail(1, gcloud_error(ctx, f"Section [core] has no property [{key}]."))
    ctx.out(values[key])


# gcloud's auth/* properties set by CLOUDSDK_AUTH_* variables (the fake has no configuration files): `config list`
# shows them; `auth list` shows only logged-in accounts (a key file named by credential_file_override is none).
AUTH_VARIABLES = {"credential_file_override": "CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE",
                  "access_token_file": "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE",
                  "impersonate_service_account": "CLOUDSDK_AUTH_IMPERSONATE_SERVICE_ACCOUNT"}


@command("gcloud", "config", "list", latency=0)
def config_list(ctx: Ctx) -> None:
    auth = {key: ctx.environ[name] for key, name in AUTH_VARIABLES.items() if ctx.environ.get(name)}
    core = {"account": _settings(ctx)["account"], "disable_usage_reporting": "True"}
    ctx.emit({**({"auth": auth} if auth else {}), "core": {k: v for k, v in core.items() if v}})


@command("gcloud", "services", "list", latency=1)
def services_list(ctx: Ctx) -> None:
    ctx.work()
    ctx.emit([{"config": {"name": name}, "state": "ENABLED"} for name in _settings(ctx)["services"]])


@command("gcloud", "services", "enable", mutating=True, latency=20)
def services_enable(ctx: Ctx) -> None:
    """Enable services the way the real command answers: a long-running operation reported on stderr; a name
    that is no Google API (or not visible to the caller) fails the whole call with PERMISSION_DENIED."""
    names = list(ctx.positionals)
    if not names:
        raise Fail(2, gcloud_error(ctx, "argument SERVICE [SERVICE ...]: Must be specified."))
    unknown = [n for n in names if not n.endswith(".googleapis.com")]
    if unknown:
        raise Fail(1, gcloud_error(ctx, "PERMISSION_DENIED: Not found or permission denied for service(s): "
                                        f"{', '.join(unknown)}."))
    ctx.work()
    with ctx.state.locked():
        current = _settings(ctx)
        enabled = list(current["services"]) + [n for n in names if n not in current["services"]]
        ctx.state.put("doctor", "settings", {**(ctx.state.get("doctor", "settings") or {}), "services": enabled})
    ctx.err('Operation "operations/acf.p2-000000000000-fakecloud" finished successfully.')


def _unavailable(ctx: Ctx) -> set[str]:
    # Tests take capacity away with {"unavailable": ["<zone>/<machine type>", "<network profile>"]}.
    return set(_settings(ctx).get("unavailable", []))


@command("gcloud", "compute", "machine-types", "describe", latency=1)
def machine_types_describe(ctx: Ctx) -> None:
    name = ctx.positionals[0] if ctx.positionals else ""
    zone = ctx.flag("--zone", "")
    if not name:
        raise Fail(2, gcloud_error(ctx, "argument NAME: Must be specified."))
    if f"{zone}/{name}" in _unavailable(ctx):
        raise Fail(1, gcloud_error(ctx, f"Could not fetch resource:\n - The resource 'projects/{ctx.project}/zones/"
                                        f"{zone}/machineTypes/{name}' was not found\n"))
    ctx.work()
    ctx.emit({"kind": "compute#machineType", "name": name, "zone": zone, "guestCpus": 224})


@command("gcloud", "compute", "network-profiles", "describe", latency=1)
def network_profiles_describe(ctx: Ctx) -> None:
    name = ctx.positionals[0] if ctx.positionals else ""
    if not name:
        raise Fail(2, gcloud_error(ctx, "argument NETWORK_PROFILE: Must be specified."))
    if name in _unavailable(ctx) or not name.endswith("-vpc-roce"):
        raise Fail(1, gcloud_error(ctx, f"Could not fetch resource:\n - The resource 'projects/{ctx.project}/global/"
                                        f"networkProfiles/{name}' was not found\n"))
    ctx.work()
    ctx.emit({"kind": "compute#networkProfile", "name": name, "location": {"name": name.rsplit("-vpc-", 1)[0]}})


@command("gcloud", "compute", "regions", "describe", latency=1)
def regions_describe(ctx: Ctx) -> None:
    region = ctx.positionals[0] if ctx.positionals else ""
    if not region:
        raise Fail(2, gcloud_error(ctx, "argument NAME: Must be specified."))
    ctx.work()
    quotas = [{"metric": metric, **values} for metric, values in _settings(ctx)["quotas"].items()]
    ctx.emit({"name": region, "status": "UP", "quotas": quotas})


@command("gcloud", "compute", "project-info", "describe", latency=1)
def project_info(ctx: Ctx) -> None:
    ctx.work()
    total = sum(v["limit"] for m, v in _settings(ctx)["quotas"].items() if not m.startswith("PREEMPTIBLE_"))
    ctx.emit({"name": ctx.project, "quotas": [{"metric": "GPUS_ALL_REGIONS", "limit": total, "usage": 0}]})


@command("gcloud", "compute", "reservations", "describe", latency=1)
def reservations_describe(ctx: Ctx) -> None:
    name = ctx.positionals[0] if ctx.positionals else ""
    zone = ctx.flag("--zone", "")
    body = ctx.state.get("reservation", f"{ctx.project}/{zone}/{name}")
    if body is None:
        raise Fail(1, gcloud_error(ctx, f"NOT_FOUND: The resource 'projects/{ctx.project}/zones/{zone}/"
                                        f"reservations/{name}' was not found"))
    ctx.work()
    ctx.emit(public(body))
