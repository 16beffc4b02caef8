"""`doctor`: is this machine and this project ready for `up`? Tools, account, project, APIs, GPU quota or
reservation, the NCCL installer manifests, the storage client's credentials, the HF token and its access to the
models (PREFETCH_MODELS and the gated models of jobs/); `--fix`
enables the missing APIs (asking first, like every changing task).

The web and credential checks go through `Probes` (plain functions: urllib with a short timeout, and
google.auth), so tests hand in fakes. NRG_DOCTOR_PROBES=module:function names a factory of other probes:
the fake cloud's flows use it, since the real ones would reach the internet.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from invoke.context import Context
from invoke.exceptions import Exit

from ..settings import Settings
from . import context

if TYPE_CHECKING:
    from ..readiness import AdcAnswer, Check, WebAnswer
    from ..runner import Result, Runner

WEB_TIMEOUT = 5.0  # seconds for one HTTP answer
ADC_TIMEOUT = 10.0  # seconds to find and refresh Application Default Credentials
STORAGE_SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"
PROBES_ENV = "NRG_DOCTOR_PROBES"


@dataclass(frozen=True)
class Probes:
    """How doctor reaches the web and the credentials: http_get(url, headers) and adc()."""

    http_get: Callable[[str, Mapping[str, str]], WebAnswer]
    adc: Callable[[], AdcAnswer]


def http_get(url: str, headers: Mapping[str, str], timeout: float = WEB_TIMEOUT) -> WebAnswer:
    """One GET with urllib: its status and the first KiB, or why there was no answer. Headers (a token)
    are sent, never logged or returned."""
    import urllib.error
    import urllib.request

    from ..readiness import WebAnswer

    class SameHostAuthorization(urllib.request.HTTPRedirectHandler):
        """urllib copies every header of a request to its redirect, to any host: the token goes no further than
        the host it was meant for (as `requests` does)."""

        def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
            from urllib.parse import urlsplit

            new = super().redirect_request(req, fp, code, msg, headers, newurl)
            if new is not None and urlsplit(newurl).netloc != urlsplit(req.full_url).netloc:
                new.remove_header("Authorization")
            return new

    request = urllib.request.Request(url, headers=dict(headers), method="GET")
    opener = urllib.request.build_opener(SameHostAuthorization())
    try:
        with opener.open(request, timeout=timeout) as response:
            return WebAnswer(response.status, response.read(1024).decode("utf-8", "replace"))
    except urllib.error.HTTPError as exc:  # its body too: the service's own words (the hub's "awaiting a review")
        try:
            body = exc.read(1024).decode("utf-8", "replace")
        except OSError:
            body = ""
        return WebAnswer(exc.code, body, str(exc.reason))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return WebAnswer(None, "", str(getattr(exc, "reason", exc)))


def adc(timeout: float = ADC_TIMEOUT) -> AdcAnswer:
    """Find Application Default Credentials and refresh them once (an expired or revoked login fails here,
    not in the middle of `up`), in a thread with a deadline: the metadata-server probe can hang."""
    import functools
    import threading

    from ..readiness import AdcAnswer

    found: list[AdcAnswer] = []

    def work() -> None:
        try:
            import google.auth
            from google.auth.transport.requests import Request

            credentials, project = google.auth.default(scopes=[STORAGE_SCOPE])
            # google-auth leaves Credentials.refresh untyped.
            credentials.refresh(functools.partial(Request(), timeout=timeout))  # type: ignore[no-untyped-call]
            who = (getattr(credentials, "service_account_email", None) or getattr(credentials, "account", None)
                   or type(credentials).__name__)
            found.append(AdcAnswer(True, f"{who}" + (f" (quota project {project})" if project else "")))
        except Exception as exc:  # noqa: BLE001 — any failure here is the answer: no usable credentials
            first = (str(exc).strip().splitlines() or [""])[0]
            found.append(AdcAnswer(False, f"{type(exc).__name__}: {first}"[:200]))

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(timeout + 2)
    return found[0] if found else AdcAnswer(False, f"no answer within {timeout:.0f} s")


REAL_PROBES = Probes(http_get=http_get, adc=adc)


def probes() -> Probes:
    spec = os.environ.get(PROBES_ENV, "")
    if not spec:
        return REAL_PROBES
    import importlib

    from ..settings import ConfigError

    module, _, attribute = spec.partition(":")
    try:
        factory: Callable[[], Probes] = getattr(importlib.import_module(module), attribute)
        return factory()
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise ConfigError(PROBES_ENV, spec, f"name a module:function that returns Probes ({exc}).") from None


@context.task(help={"fix": "Enable the APIs that are missing (asks first; --yes answers).",
                    "yes": context.YES_ONE_HELP})
def doctor(c: Context, fix: bool = False, yes: bool = False) -> None:
    """Check tools, account, project, APIs, quota, NCCL installer, credentials, HF token; --fix enables APIs."""
    from ..commands import doctor as checks

    s = context.settings(c)
    r: Runner = context.runner(c, s)
    if r.dry:
        r.say("# doctor asks (read-only):")
        for argv in checks.queries(s):
            r.say("#   " + " ".join(argv))
        for line in checks.web_queries(s):
            r.say("#   " + line)
        if fix:
            r.say("# doctor --fix enables the APIs that are missing (a dry run assumes all are):")
            r.run(checks.enable_apis(s, checks.REQUIRED_APIS))
        return
    chosen = probes()
    results = run_checks(r, s, chosen)
    if fix:
        results = fix_apis(c, r, s, results, yes=yes)
    for check in results:
        for line in check.lines():
            print(line)
    failed = [check for check in results if not check.ok]
    if failed:
        hint = " (`invoke doctor --fix` enables the APIs)" if any(f.name == "APIs" for f in failed) and not fix else ""
        raise Exit(f"doctor: {len(failed)} of {len(results)} checks failed; fix them before `invoke up`{hint}.",
                   code=1)
    warned = sum(1 for check in results if check.warn)
    print(f"doctor: all {len(results)} checks passed" + (f" ({warned} with a warning: `!` above)." if warned else "."))


def fix_apis(c: Context, r: Runner, s: Settings, results: list[Check], *, yes: bool) -> list[Check]:
    """Enable the missing APIs after a confirmation, then ask again: the APIs line shows the new state."""
    from .. import readiness as verdicts
    from ..commands import doctor as checks

    listed = r.query(checks.enabled_services(s), ok_codes=range(256))
    if listed is None or not listed.ok:
        return results  # the APIs check already says why the list failed
    missing = checks.missing_apis(listed.stdout)
    if not missing:
        return results
    context.confirm(c, f"Enable {', '.join(missing)} in project {s.PROJECT_ID}?", yes=yes)
    r.run(checks.enable_apis(s, missing), retry=False)
    again = r.query(checks.enabled_services(s), ok_codes=range(256))
    fixed = verdicts.check_apis(s, again.stdout if again is not None else "")
    return [fixed if check.name == "APIs" else check for check in results]


def run_checks(r: Runner, s: Settings, chosen: Probes | None = None) -> list[Check]:
    """Run doctor's read-only queries in parallel and turn each answer into a Check (tools, then the cloud,
    then the web and the credentials: the order doctor prints them in)."""
    chosen = chosen or probes()
    return r.parallel([*_tool_checks(r), *_cloud_checks(r, s), *_web_checks(s, chosen)])


def _tool(r: Runner, name: str, argv: list[str], parse: Callable[[str], Check]) -> Check:
    """A local tool's version: a missing or failing tool is a failed check, with how to install it."""
    from .. import readiness as verdicts
    from ..tools import INSTALL_HINTS, MissingTool

    try:
        result = r.query(argv)
    except MissingTool:
        return verdicts.missing_tool(name, INSTALL_HINTS.get(name, f"install {name}"))
    assert result is not None  # a dry run never runs the checks
    if not result.ok:
        return verdicts.Check(name, False, verdicts.error_line(result.stderr, "failed"),
                              INSTALL_HINTS.get(name, ""))
    return parse(result.stdout)


def _cloud(r: Runner, name: str, argv: list[str], parse: Callable[[Result], Check]) -> Check:
    """A gcloud question whose every exit code is an answer; without gcloud, a failed check."""
    from .. import readiness as verdicts
    from ..tools import INSTALL_HINTS, MissingTool

    try:
        result = r.query(argv, ok_codes=range(256))
    except MissingTool:
        result = None
    if result is None:
        return verdicts.Check(name, False, "gcloud is missing", INSTALL_HINTS["gcloud"])
    return parse(result)


def _properties(r: Runner) -> str:
    """gcloud's properties as JSON ("" when gcloud could not say)."""
    from ..commands import doctor as checks

    result = r.query(checks.auth_properties(), ok_codes=range(256))
    return result.stdout if result is not None and result.ok else ""


def _tool_checks(r: Runner) -> list[Callable[[], Check]]:
    from .. import readiness as verdicts
    from ..commands import doctor as checks

    return [
        lambda: _tool(r, "gcloud", checks.gcloud_version(), verdicts.check_gcloud),
        lambda: _tool(r, "kubectl", checks.kubectl_version(), verdicts.check_kubectl),
        lambda: _tool(r, "helm", checks.helm_version(), verdicts.check_helm),
        lambda: _tool(r, "gke-gcloud-auth-plugin", checks.auth_plugin_version(), verdicts.check_auth_plugin),
    ]


def _cloud_checks(r: Runner, s: Settings) -> list[Callable[[], Check]]:
    from .. import readiness as verdicts
    from ..commands import doctor as checks

    thunks: list[Callable[[], Check]] = [
        lambda: _cloud(r, "account", checks.active_account(), lambda res: verdicts.check_account(
            res.stdout, _properties(r), token_variable=bool(os.environ.get("CLOUDSDK_AUTH_ACCESS_TOKEN")),
            is_file=lambda path: os.path.isfile(path) and os.access(path, os.R_OK))),
        lambda: _cloud(r, "project", checks.project_describe(s),
                       lambda res: verdicts.check_project(s, res.exit_code, res.stdout, res.stderr)),
        lambda: _cloud(r, "APIs", checks.enabled_services(s), lambda res: verdicts.check_apis(s, res.stdout)),
        lambda: _cloud(r, f"{s.gpu.machine_type} in {s.zone}", checks.machine_type_describe(s),
                       lambda res: verdicts.check_machine_type(s, res.exit_code, res.stderr)),
        lambda: _cloud(r, "RDMA network profile", checks.network_profile_describe(s),
                       lambda res: verdicts.check_network_profile(s, res.exit_code, res.stderr)),
        lambda: _cloud(r, "GKE version", checks.server_config(s),
                       lambda res: verdicts.check_gke_version(s, res.exit_code, res.stdout, res.stderr)),
    ]
    if s.RESERVATION:
        thunks.append(lambda: _cloud(r, f"reservation {s.RESERVATION}", checks.reservation_describe(s),
                                     lambda res: verdicts.check_reservation(s, res.exit_code, res.stdout,
                                                                            res.stderr)))
        return thunks

    def quota(res: Result) -> Check:
        if res.ok:
            return verdicts.check_quota(s, res.stdout)
        return verdicts.Check(f"GPU quota ({s.region})", False,
                              verdicts.error_line(res.stderr, "cannot read quotas"),
                              "check the project and region, and that compute.googleapis.com is enabled")

    thunks.append(lambda: _cloud(r, f"GPU quota ({s.region})", checks.region_quotas(s), quota))
    return thunks


def _web_checks(s: Settings, chosen: Probes) -> list[Callable[[], Check]]:
    from .. import readiness as verdicts
    from ..commands import doctor as checks
    from ..commands import kubectl

    def nccl() -> Check:
        return verdicts.check_nccl_installer(s, {url: chosen.http_get(url, {})
                                                 for url in kubectl.nccl_installer_urls(s)})

    def storage_credentials() -> Check:
        # The storage client's own switch (gcs_client.client): with an emulator, no Google credentials are used.
        emulator = os.environ.get("STORAGE_EMULATOR_HOST", "")
        return verdicts.check_storage_credentials(emulator, None if emulator else chosen.adc())

    token = {"Authorization": f"Bearer {s.HF_TOKEN}"} if s.HF_TOKEN else {}

    def hf_token() -> Check:
        if not token:
            return verdicts.check_hf_token(s, None)
        return verdicts.check_hf_token(s, chosen.http_get(checks.HF_WHOAMI, token))

    def model(name: str, jobs: list[str]) -> Callable[[], Check]:
        return lambda: verdicts.check_model_access(name, chosen.http_get(checks.model_file_url(name), token),
                                                   token=bool(token), jobs=jobs)

    # Read as the download will be: with HF_TOKEN when it is set, without a token when it is not.
    return [nccl, storage_credentials, hf_token, *(model(name, jobs) for name, jobs in checks.models_to_check(s))]
