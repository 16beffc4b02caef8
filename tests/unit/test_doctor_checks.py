"""doctor's new checks as pure functions (web answers in, ✓/✗ with the fix out), and the real probes against
a local HTTP server and a stubbed google.auth: nothing here reaches the internet."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

from nemo_rl_gke import readiness
from nemo_rl_gke.commands import doctor, kubectl
from nemo_rl_gke.readiness import AdcAnswer, WebAnswer
from nemo_rl_gke.settings import NCCL_INSTALLER_DEFAULT_REF, Settings, coerce, validate
from nemo_rl_gke.tasks import checkup
from support.fake import read_env_example

OTHER_REF = "155bfa49b7459a55c2352495d3eeb46a55637be6"


def settings(**overrides: str) -> Settings:
    values = {k: v for k, v in read_env_example().items() if k in Settings.__dataclass_fields__}
    return validate(Settings(**coerce({**values, **overrides})))


def answers(s: Settings, *statuses: int | None) -> dict[str, WebAnswer]:
    return {url: WebAnswer(status, "", "" if status else "Name or service not known")
            for url, status in zip(kubectl.nccl_installer_urls(s), statuses, strict=True)}


# ---- the installer pin -----------------------------------------------------------------------------------
def test_nccl_installer_urls_name_both_manifests_at_the_setting_ref():
    urls = kubectl.nccl_installer_urls(settings(NCCL_INSTALLER_REF=OTHER_REF))
    assert [u.rsplit("/", 1)[-1] for u in urls] == ["nccl-rdma-installer.yaml", "nccl-rdma-installer-autopilot.yaml"]
    assert all(f"/container-engine-accelerators/{OTHER_REF}/gpudirect-rdma/" in u for u in urls)


@pytest.mark.parametrize("mode", ["standard", "autopilot"])
def test_nccl_installer_apply_uses_the_setting_ref(mode):
    s = settings(CLUSTER_MODE=mode, NCCL_INSTALLER_REF=OTHER_REF)
    argv = kubectl.nccl_installer_apply(s)
    assert argv[-1] == "--filename=" + kubectl.nccl_installer_url(s)
    assert OTHER_REF in argv[-1] and NCCL_INSTALLER_DEFAULT_REF not in argv[-1]


def test_nccl_check_passes_when_both_answer_200():
    s = settings()
    assert readiness.check_nccl_installer(s, answers(s, 200, 200)).ok


def test_nccl_check_404_at_the_default_ref_says_to_set_the_ref():
    s = settings()
    check = readiness.check_nccl_installer(s, answers(s, 200, 404))
    assert (check.ok, "nccl-rdma-installer-autopilot.yaml: HTTP 404" in check.detail,
            "set NCCL_INSTALLER_REF" in check.fix) == (False, True, True)


def test_nccl_check_404_at_another_ref_names_it_and_the_default():
    s = settings(NCCL_INSTALLER_REF=OTHER_REF)
    check = readiness.check_nccl_installer(s, answers(s, 404, 404))
    assert (check.ok, OTHER_REF in check.fix, NCCL_INSTALLER_DEFAULT_REF in check.fix) == (False, True, True)


def test_nccl_check_without_any_answer_says_to_check_the_network():
    s = settings()
    check = readiness.check_nccl_installer(s, answers(s, None, None))
    assert (check.ok, "raw.githubusercontent.com" in check.fix) == (False, True)


# ---- storage credentials ---------------------------------------------------------------------------------
def test_storage_credentials_with_emulator_reports_it_and_needs_no_adc():
    check = readiness.check_storage_credentials("http://127.0.0.1:9023", None)
    assert (check.ok, check.warn, "http://127.0.0.1:9023" in check.detail) == (True, True, True)


KEY = '{"auth": {"credential_file_override": "/ci/key.json"}, "core": {"account": "me@example.com"}}'


@pytest.mark.parametrize(("listed", "properties", "token", "files", "ok", "said"), [
    ("me@example.com\n", "{}", False, set(), True, "me@example.com"),
    ("", "{}", False, set(), False, "no active gcloud account"),
    ("me@example.com\n", KEY, False, {"/ci/key.json"}, True, "auth/credential_file_override (/ci/key.json), not the "
                                                              "logged-in me@example.com"),
    ("me@example.com\n", KEY, False, set(), False, "names /ci/key.json, which is not a file"),  # gcloud ignores me@
    ("me@example.com\n", KEY, True, set(), True, "CLOUDSDK_AUTH_ACCESS_TOKEN"),  # the variable comes first
    ("", '{"auth": {"access_token_file": "/t", "credential_file_override": "/k"}}', False, {"/t", "/k"}, True,
     "auth/access_token_file (/t)"),
])
def test_the_account_check_takes_credentials_in_gclouds_order(listed, properties, token, files, ok, said):
    check = readiness.check_account(listed, properties, token_variable=token, is_file=files.__contains__)
    assert (check.ok, said in check.detail) == (ok, True), check


def test_the_account_check_says_whom_gclouds_calls_run_as_under_impersonation():
    acting = '{"auth": {"impersonate_service_account": "deployer@p.iam.gserviceaccount.com"}}'
    check = readiness.check_account("me@example.com\n", acting, is_file=set().__contains__)
    assert check.ok and check.detail == ("me@example.com; gcloud's calls run as deployer@p.iam.gserviceaccount.com "
                                         "(auth/impersonate_service_account)"), check
    assert not readiness.check_account("", acting, is_file=set().__contains__).ok  # nobody to impersonate with


def test_storage_credentials_missing_says_application_default_login():
    check = readiness.check_storage_credentials("", AdcAnswer(False, "DefaultCredentialsError: not found. More."))
    assert (check.ok, "gcloud auth application-default login" in check.fix, "More" in check.detail) == \
        (False, True, False)


def test_storage_credentials_found_names_the_account():
    check = readiness.check_storage_credentials("", AdcAnswer(True, "me@example.com"))
    assert (check.ok, "me@example.com" in check.detail) == (True, True)


# ---- HF token --------------------------------------------------------------------------------------------
TOKEN = "hf_secretTOKENvalue123"


def test_hf_token_unset_is_reported_as_not_set():
    check = readiness.check_hf_token(settings(HF_TOKEN=""), None)
    assert (check.ok, "not set" in check.detail) == (True, True)


def test_hf_token_valid_names_the_user_never_the_token():
    body = '{"type": "user", "name": "alice", "auth": {"accessToken": {"role": "read"}}}'
    check = readiness.check_hf_token(settings(HF_TOKEN=TOKEN), WebAnswer(200, body))
    assert (check.ok, "alice" in check.detail, "read" in check.detail, TOKEN in "".join(check.lines())) == \
        (True, True, True, False)


@pytest.mark.parametrize("answer,fix_part", [(WebAnswer(401, "{}"), "huggingface.co/settings/tokens"),
                                             (WebAnswer(None, "", "timed out"), "reaches huggingface.co"),
                                             (WebAnswer(503, ""), "later")])
def test_hf_token_not_valid_or_not_checkable_fails_with_the_fix(answer, fix_part):
    check = readiness.check_hf_token(settings(HF_TOKEN=TOKEN), answer)
    assert (check.ok, fix_part in check.fix, TOKEN in "".join(check.lines())) == (False, True, False)


def test_web_queries_for_the_dry_run_never_show_the_token():
    lines = doctor.web_queries(settings(HF_TOKEN=TOKEN, PREFETCH_MODELS="Qwen/Qwen2.5-1.5B"))
    assert (len(lines), TOKEN in "".join(lines), "whoami-v2" in lines[3]) == (6, False, True)
    assert doctor.web_queries(settings(HF_TOKEN="", PREFETCH_MODELS=""))[-1].endswith("config.json (no token)")
    assert [line.split()[1] for line in lines[4:]] == [doctor.model_file_url("Qwen/Qwen2.5-1.5B"),
                                                      doctor.model_file_url("google/gemma-3-27b-it")]


def test_models_to_check_are_the_prefetched_then_the_gated_jobs_each_once():
    # qwen's job is not gated: only a prefetch puts it in
    assert doctor.models_to_check(settings(PREFETCH_MODELS="")) == [("google/gemma-3-27b-it", ["gemma3-gsm8k"])]
    assert doctor.models_to_check(settings(PREFETCH_MODELS="google/gemma-3-27b-it, Qwen/Qwen2.5-1.5B")) == \
        [("google/gemma-3-27b-it", []), ("Qwen/Qwen2.5-1.5B", [])]


@pytest.mark.parametrize("answer,token,ok,words", [
    (WebAnswer(200, "{}"), True, True, "may download it"),
    (WebAnswer(200, "{}"), False, True, "public"),
    (WebAnswer(403, "Access to model x is restricted", "Forbidden"), True, False,
     "accept its licence at https://huggingface.co/o/m"),
    (WebAnswer(401, "{}", "Unauthorized"), False, False, "set HF_TOKEN in .env; or leave it out of PREFETCH_MODELS"),
    (WebAnswer(401, "{}", "Unauthorized"), True, False, "huggingface.co/settings/tokens"),
    (WebAnswer(404, "{}", "Not Found"), True, False, "PREFETCH_MODELS"),
    (WebAnswer(502, ""), True, False, "later")])
def test_model_prefetched_by_up_fails_doctor_unless_it_can_be_read(answer, token, ok, words):
    check = readiness.check_model_access("o/m", answer, token=token, jobs=[])
    assert (check.name, check.ok, check.warn, words in check.detail + check.fix) == ("model o/m", ok, False, True)


def test_model_only_a_job_names_is_a_warning_naming_the_job():
    check = readiness.check_model_access("o/m", WebAnswer(401, "{}"), token=False, jobs=["gemma3-gsm8k"])
    assert (check.name, check.ok, check.warn) == ("model o/m (job gemma3-gsm8k)", True, True)
    assert check.lines()[0].startswith("! model o/m (job gemma3-gsm8k): gated, private or not on huggingface.co")
    assert "fix: check the name" in check.lines()[1] and "PREFETCH_MODELS" not in check.fix


def test_model_403_shows_the_hubs_own_words_and_404_tells_a_missing_file():
    pending = WebAnswer(403, '{"error":"Your request to access model o/m is awaiting a review from the repo '
                             'authors."}', "Forbidden")
    check = readiness.check_model_access("o/m", pending, token=True, jobs=[])
    assert '(HTTP 403: "Your request to access model o/m is awaiting a review from the repo authors.")' in check.detail
    entry = readiness.check_model_access("o/m", WebAnswer(404, "Entry not found", "Not Found"), token=True, jobs=[])
    assert (entry.ok, "has no config.json" in entry.detail) == (False, True)


def test_http_get_keeps_the_body_of_an_error_answer(local_web):
    assert checkup.http_get(f"{local_web}/missing", {}).body == "404: Not Found"


def test_model_hub_out_of_reach_is_a_warning_the_cluster_downloads_it():
    check = readiness.check_model_access("o/m", WebAnswer(None, "", "timed out"), token=True, jobs=[])
    assert (check.ok, check.warn, "timed out" in check.detail, "the cluster reaches" in check.fix) == \
        (True, True, True, True)


# ---- --fix -----------------------------------------------------------------------------------------------
def test_enable_apis_argv_names_the_apis_and_project():
    assert doctor.enable_apis(settings(), ["lustre.googleapis.com"]) == [
        "gcloud", "services", "enable", "lustre.googleapis.com", "--project=my-nemo-project"]


def test_missing_apis_keeps_required_order():
    assert doctor.missing_apis("compute.googleapis.com\niam.googleapis.com\n") == [
        api for api in doctor.REQUIRED_APIS if api != "compute.googleapis.com"]


@pytest.mark.parametrize("build", [lambda s: doctor.enable_apis(s, list(doctor.REQUIRED_APIS)),
                                   doctor.machine_type_describe, doctor.network_profile_describe])
def test_doctor_new_gcloud_commands_parse_in_the_real_gcloud(build):
    """Exit 2 would mean our flags are wrong; without an account a well-formed command exits 1."""
    binary = shutil.which("gcloud")
    if binary is None or "fakecloud" in binary:
        pytest.skip("needs the real Google Cloud CLI on PATH")
    env = {**os.environ, "CLOUDSDK_CONFIG": tempfile.mkdtemp(), "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"}
    argv = build(settings())
    done = subprocess.run([binary, *argv[1:]], env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stderr


def test_machine_type_missing_in_zone_says_to_change_the_zone():
    check = readiness.check_machine_type(settings(), 1, "ERROR: (gcloud.compute.machine-types.describe) Could not fetch"
                                                     " resource:\n - The resource '…' was not found\n")
    assert (check.ok, "was not found" in check.detail, "NODE_LOCATION" in check.fix) == (False, True, True)


def test_network_profile_missing_names_the_profile():
    check = readiness.check_network_profile(settings(), 1, "ERROR: not found")
    assert (check.ok, "us-central1-b-vpc-roce" in check.detail) == (False, True)


# ---- the real probes, offline ----------------------------------------------------------------------------
class _Handler(http.server.BaseHTTPRequestHandler):
    seen: list[str | None] = []

    def do_GET(self):  # noqa: N802 — http.server's name
        _Handler.seen.append(self.headers.get("Authorization"))
        if self.path in ("/here", "/elsewhere"):  # the same server, named by another host for /elsewhere
            host = "localhost" if self.path == "/elsewhere" else "127.0.0.1"
            self.send_response(302)
            self.send_header("Location", f"http://{host}:{self.server.server_address[1]}/ok")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/slow":
            time.sleep(3)
        status = 200 if self.path in ("/ok", "/slow") else 404
        body = b'{"name": "alice"}' if status == 200 else b"404: Not Found"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def local_web():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_http_get_returns_status_and_body_and_sends_the_header(local_web):
    answer = checkup.http_get(f"{local_web}/ok", {"Authorization": "Bearer x-token"})
    assert (answer.status, answer.body, _Handler.seen[-1]) == (200, '{"name": "alice"}', "Bearer x-token")


def test_http_get_sends_the_token_to_its_own_host_only_across_a_redirect(local_web):
    same = checkup.http_get(f"{local_web}/here", {"Authorization": "Bearer x-token"})
    assert (same.status, _Handler.seen[-2:]) == (200, ["Bearer x-token", "Bearer x-token"])
    other = checkup.http_get(f"{local_web}/elsewhere", {"Authorization": "Bearer x-token"})
    assert (other.status, _Handler.seen[-2:]) == (200, ["Bearer x-token", None])  # urllib alone: "Bearer x-token"


def test_http_get_404_is_a_status_not_an_exception(local_web):
    assert checkup.http_get(f"{local_web}/missing", {}).status == 404


def test_http_get_times_out_quickly_with_a_reason(local_web):
    started = time.monotonic()
    answer = checkup.http_get(f"{local_web}/slow", {}, timeout=0.5)
    assert (answer.status, bool(answer.reason), time.monotonic() - started < 2.5) == (None, True, True)


def test_http_get_unreachable_is_no_answer_with_the_reason():
    answer = checkup.http_get("http://127.0.0.1:9/", {}, timeout=1)
    assert (answer.status, bool(answer.reason)) == (None, True)


def test_adc_missing_credentials_is_an_answer_not_an_exception(monkeypatch):
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    def missing(**_):
        raise DefaultCredentialsError("Your default credentials were not found. To set up ADC, see the docs.")

    monkeypatch.setattr(google.auth, "default", missing)
    answer = checkup.adc(timeout=2)
    assert (answer.ok, answer.detail.startswith("DefaultCredentialsError: Your default credentials")) == (False, True)


def test_adc_that_hangs_gives_up_at_the_deadline(monkeypatch):
    import google.auth

    monkeypatch.setattr(google.auth, "default", lambda **_: time.sleep(30))
    started = time.monotonic()
    answer = checkup.adc(timeout=0.2)
    assert (answer.ok, "no answer" in answer.detail, time.monotonic() - started < 5) == (False, True, True)


SERVER_CONFIG = {  # get-server-config's shape (container v1 ServerConfig): channels differ, as they do in GKE
    "defaultClusterVersion": "1.33.4-gke.1172000", "validMasterVersions": ["1.33.9-gke.100", "1.32.9-gke.100"],
    "channels": [
        {"channel": "RAPID", "defaultVersion": "1.34.1-gke.1200000", "validVersions": ["1.34.1-gke.1200000"]},
        {"channel": "REGULAR", "defaultVersion": "1.33.5-gke.1000000",
         "validVersions": ["1.33.5-gke.1000000", "1.33.4-gke.1172000"]},
        {"channel": "STABLE", "defaultVersion": "1.32.9-gke.100", "validVersions": ["1.32.9-gke.100"]},
        {"channel": "EXTENDED", "defaultVersion": "1.31.9-gke.100", "validVersions": ["1.31.9-gke.100"]}]}


@pytest.mark.parametrize(("mode", "version", "passes"), [
    ("standard", "", True), ("standard", "1.33.5-gke.1000000", True), ("standard", "1.34.1-gke.1200000", True),
    ("standard", "1.32.9-gke.100", True),  # STABLE's
    ("standard", "1.33.9-gke.100", True), ("autopilot", "1.33.9-gke.100", False),  # in no channel
    ("standard", "1.32.2-gke.1422000", False),  # gone: the tutorial's pin
])
def test_gke_version_is_checked_against_what_the_location_offers(mode, version, passes):
    import json

    check = readiness.check_gke_version(settings(GPU_TYPE="b200", CLUSTER_MODE=mode, GKE_VERSION=version), 0,
                                        json.dumps(SERVER_CONFIG), "")
    assert check.ok is passes, check
    if not version:
        assert "1.33.5-gke.1000000" in check.detail  # REGULAR's default: what a cluster without a pin gets
    if not passes:
        assert "1.33.5-gke.1000000" in check.fix and "EXTENDED" not in check.fix


def test_gke_version_of_the_extended_channel_only_is_not_offered_to_a_new_cluster():
    import json

    check = readiness.check_gke_version(settings(GPU_TYPE="h200", GKE_VERSION="1.31.9-gke.100"), 0,
                                        json.dumps(SERVER_CONFIG), "")
    assert not check.ok and "not offered" in check.detail


def test_gke_version_suggests_a_new_enough_one_from_any_channel_and_not_a_default_too_old():
    import json

    old_regular = {"channels": [
        {"channel": "REGULAR", "defaultVersion": "1.31.1-gke.100", "validVersions": ["1.31.1-gke.100"]},
        {"channel": "RAPID", "defaultVersion": "1.33.5-gke.1000000", "validVersions": ["1.33.5-gke.1000000"]}]}
    for version in ("", "1.32.2-gke.1422000"):
        check = readiness.check_gke_version(settings(GPU_TYPE="b200", GKE_VERSION=version), 0,
                                            json.dumps(old_regular), "")
        assert not check.ok and "1.33.5-gke.1000000" in check.fix and "leave it empty" not in check.fix, check
    assert readiness.check_gke_version(settings(GPU_TYPE="b200", GKE_VERSION="1.33.5-gke.1000000"), 0,
                                       json.dumps(old_regular), "").ok
