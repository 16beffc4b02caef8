"""`invoke doctor` through the real command on the fake cloud: the NCCL installer manifests, the storage
client's credentials, the HF token's state (never the token), and `--fix` enabling the missing APIs with the
confirmation rules of every changing task. Web and credential answers come from fakecloud.doctor_probes."""

from __future__ import annotations

import os
import stat

import pytest

from support.fake import REPO, TEST_HF_TOKEN, FakeCloud

PROBES = {"NRG_DOCTOR_PROBES": "fakecloud.doctor_probes:probes",
          "PYTHONPATH": str(REPO / "tests" / "fakecloud")}
ALL_APIS = ["container.googleapis.com", "compute.googleapis.com", "storage.googleapis.com", "lustre.googleapis.com",
            "servicenetworking.googleapis.com"]


@pytest.fixture
def doc(fake: FakeCloud) -> FakeCloud:
    """The fake cloud with a gke-gcloud-auth-plugin stand-in on PATH and the fake web probes."""
    plugin_dir = fake.root / "plugin-bin"
    plugin_dir.mkdir()
    plugin = plugin_dir / "gke-gcloud-auth-plugin"
    plugin.write_text("#!/bin/sh\necho 'Kubernetes v1.30.0+fakecloud'\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    path = fake.process_env()["PATH"]
    fake.env.update(PROBES, PATH=path.replace(os.pathsep, os.pathsep + str(plugin_dir) + os.pathsep, 1),
                    STORAGE_EMULATOR_HOST="")  # doctor judges the real Cloud Storage's credentials
    return fake


def _line(done, name: str) -> str:
    return next((ln for ln in done.stdout.splitlines() if ln[2:].startswith(name)), "")


def _state(cloud: FakeCloud):
    from fakecloud.core import State

    return State(cloud.state_dir)


def test_doctor_healthy_fake_project_passes_with_the_new_checks(doc):
    done = doc.invoke("doctor")
    lines = [_line(done, name)[:1] for name in ("NCCL RDMA installer", "storage credentials", "HF_TOKEN")]
    assert (done.code, lines, TEST_HF_TOKEN in done.output) == (0, ["✓", "✓", "✓"], False), done.output


def test_doctor_asks_for_both_installer_manifests_at_the_pinned_commit(doc):
    import json

    doc.invoke("doctor")
    asked = [json.loads(line) for line in (doc.state_dir / "web.jsonl").read_text().splitlines()]
    urls = sorted(a["url"].rsplit("/", 3)[-3] + "/" + a["url"].rsplit("/", 1)[-1] for a in asked
                  if "raw.githubusercontent" in a["url"])
    ref = "2da1c92ff7bd772a2c833710bb6c21dcfe6dfaae"
    assert urls == [f"{ref}/nccl-rdma-installer-autopilot.yaml", f"{ref}/nccl-rdma-installer.yaml"]


def test_doctor_installer_ref_that_answers_404_fails_saying_what_to_set(doc):
    done = doc.invoke("doctor", NCCL_INSTALLER_REF="64f0eeb0dc1d980eaef8939584f832bb10e3d482")
    line = _line(done, "NCCL RDMA installer")
    assert (done.code, line.startswith("✗"), "HTTP 404" in line, "NCCL_INSTALLER_REF" in done.stdout) == \
        (1, True, True, True), done.output


def test_doctor_installer_unreachable_says_to_check_the_network(doc):
    from nemo_rl_gke.commands import kubectl
    from nemo_rl_gke.settings import load

    s = load(allow_example=False, environ={}, cwd=doc.workdir)
    for url in kubectl.nccl_installer_urls(s):
        _state(doc).put("web", url, {"unreachable": "[Errno -2] Name or service not known"})
    done = doc.invoke("doctor")
    assert (done.code, "raw.githubusercontent.com" in done.stdout, "no answer" in _line(done, "NCCL")) == \
        (1, True, True), done.output


def test_doctor_without_application_default_credentials_says_how_to_log_in(doc):
    _state(doc).put("doctor", "settings", {"adc": False})
    done = doc.invoke("doctor")
    line = _line(done, "storage credentials")
    assert (done.code, line.startswith("✗"), "gcloud auth application-default login" in done.stdout) == \
        (1, True, True), done.output


def test_doctor_with_storage_emulator_reports_the_emulator_not_adc(doc):
    _state(doc).put("doctor", "settings", {"adc": False})
    done = doc.invoke("doctor", STORAGE_EMULATOR_HOST="http://127.0.0.1:9")
    line = _line(done, "storage credentials")
    assert (done.code, line.startswith("!"), "http://127.0.0.1:9" in line) == (0, True, True), done.output
    assert "unset STORAGE_EMULATOR_HOST for a real deployment" in done.stdout


def test_doctor_rejected_hf_token_fails_without_showing_it(doc):
    token = "notAnHfTokenButLongEnough42"
    done = doc.invoke("doctor", HF_TOKEN=token)
    line = _line(done, "HF_TOKEN")
    assert (done.code, line.startswith("✗"), "401" in line, token in done.output,
            "huggingface.co/settings/tokens" in done.stdout) == (1, True, True, False, True), done.output


def test_doctor_empty_hf_token_with_a_gated_prefetch_fails_saying_set_hf_token(doc):
    doc.write_env(HF_TOKEN="")  # PREFETCH_MODELS: the default, google/gemma-3-27b-it, gated
    done = doc.invoke("doctor")
    asked = (doc.state_dir / "web.jsonl").read_text()
    assert (done.code, "not set" in _line(done, "HF_TOKEN"), "whoami" in asked) == (1, True, False), done.output
    line = _line(done, "model google/gemma-3-27b-it")
    assert line.startswith("✗ model google/gemma-3-27b-it: gated, private or not on huggingface.co (HTTP 401 "
                           "without a token; HF_TOKEN is not set)"), done.output
    assert "set HF_TOKEN in .env; or leave it out of PREFETCH_MODELS" in done.stdout


def test_doctor_empty_hf_token_and_a_misspelt_model_does_not_say_only_gated(doc):
    """Without a token the hub answers 401 for a repository it does not have, as for a gated one."""
    doc.write_env(HF_TOKEN="", PREFETCH_MODELS="Qwen/Qwen2.5-15B")
    done = doc.invoke("doctor")
    line = _line(done, "model Qwen/Qwen2.5-15B")
    assert (done.code, line.startswith("✗"), "gated, private or not on huggingface.co" in line) == (1, True, True)
    assert "check the name (https://huggingface.co/Qwen/Qwen2.5-15B)" in done.stdout


def test_doctor_empty_hf_token_warns_only_for_the_job_that_needs_a_gated_model(doc):
    doc.write_env(HF_TOKEN="", PREFETCH_MODELS="Qwen/Qwen2.5-1.5B")
    done = doc.invoke("doctor")
    assert done.code == 0, done.output
    assert _line(done, "model Qwen/Qwen2.5-1.5B").startswith("✓ model Qwen/Qwen2.5-1.5B: public")
    assert _line(done, "model google/gemma-3-27b-it (job gemma3-gsm8k)").startswith("! "), done.output
    assert "checks passed (1 with a warning" in done.stdout


def test_doctor_reads_a_file_of_each_model_it_will_need_with_the_token(doc):
    import json

    done = doc.invoke("doctor", PREFETCH_MODELS="Qwen/Qwen2.5-1.5B")
    assert done.code == 0, done.output
    # PREFETCH_MODELS, then the gated models of jobs/ (gemma3-gsm8k's)
    for model in ("Qwen/Qwen2.5-1.5B", "google/gemma-3-27b-it"):
        assert _line(done, f"model {model}").startswith("✓"), done.output
    asked = [json.loads(line) for line in (doc.state_dir / "web.jsonl").read_text().splitlines()]
    files = [a for a in asked if a["url"].endswith("/resolve/main/config.json")]
    assert sorted((a["url"].split("/")[3:5], a["headers"]) for a in files) == \
        [(["Qwen", "Qwen2.5-1.5B"], ["Authorization"]), (["google", "gemma-3-27b-it"], ["Authorization"])]


def test_doctor_gated_model_without_access_fails_naming_the_licence_page(doc):
    url = "https://huggingface.co/google/gemma-3-27b-it/resolve/main/config.json"
    _state(doc).put("web", url, {"status": 403, "reason": "Forbidden", "body": "Access to model google/gemma-3-27b-it "
                                 "is restricted and you are not in the authorized list."})
    done = doc.invoke("doctor")
    line = _line(done, "model google/gemma-3-27b-it")
    assert (done.code, line.startswith("✗"), "HTTP 403" in line) == (1, True, True), done.output
    assert "accept its licence at https://huggingface.co/google/gemma-3-27b-it" in done.stdout
    assert TEST_HF_TOKEN not in done.output


def test_doctor_model_not_on_the_hub_names_prefetch_models(doc):
    done = doc.invoke("doctor", PREFETCH_MODELS="google/gemma-3-270b-it")
    line = _line(done, "model google/gemma-3-270b-it")
    assert (done.code, line.startswith("✗"), "HTTP 404" in line, "PREFETCH_MODELS" in done.stdout) == \
        (1, True, True, True), done.output


def test_doctor_hf_token_never_reaches_the_calls_log_or_web_log(doc):
    doc.invoke("doctor")
    logs = [(doc.state_dir / name).read_text() for name in ("calls.jsonl", "web.jsonl")]
    assert [TEST_HF_TOKEN in text for text in logs] == [False, False]


@pytest.mark.parametrize("unavailable,line", [("us-central1-b/a4-highgpu-8g", "a4-highgpu-8g in us-central1-b"),
                                               ("us-central1-b-vpc-roce", "RDMA network profile")])
def test_doctor_zone_without_gpu_machines_or_roce_profile_fails_before_up(doc, unavailable, line):
    _state(doc).put("doctor", "settings", {"unavailable": [unavailable]})
    done = doc.invoke("doctor")
    assert (done.code, _line(done, line)[:1], "NODE_LOCATION" in done.stdout) == (1, "✗", True), done.output


# ---- doctor --fix --------------------------------------------------------------------------------------------
def _without(cloud: FakeCloud, *apis: str) -> None:
    _state(cloud).put("doctor", "settings", {"services": [a for a in ALL_APIS if a not in apis]})


def _enables(cloud: FakeCloud) -> list[list[str]]:
    return [c["argv"] for c in cloud.calls() if c["argv"][:2] == ["services", "enable"]]


def test_doctor_missing_apis_points_at_doctor_fix(doc):
    _without(doc, "lustre.googleapis.com")
    done = doc.invoke("doctor")
    assert (done.code, "invoke doctor --fix" in done.output, _enables(doc)) == (1, True, [])


def test_doctor_fix_yes_enables_only_the_missing_apis_then_passes(doc):
    _without(doc, "lustre.googleapis.com", "servicenetworking.googleapis.com")
    done = doc.invoke("doctor", "--fix", "--yes")
    assert (done.code, _line(done, "APIs")[:1], _enables(doc)) == (0, "✓", [[
        "services", "enable", "lustre.googleapis.com", "servicenetworking.googleapis.com",
        "--project=my-nemo-project"]]), done.output


def test_doctor_fix_without_terminal_or_yes_refuses_and_enables_nothing(doc):
    _without(doc, "lustre.googleapis.com")
    done = doc.invoke("doctor", "--fix")
    assert (done.code, "--yes" in done.stderr, _enables(doc)) == (2, True, [])


def test_doctor_fix_with_nothing_missing_changes_nothing(doc):
    done = doc.invoke("doctor", "--fix")
    assert (done.code, _enables(doc)) == (0, [])


def test_doctor_fix_dry_run_shows_the_enable_command_and_calls_nothing(doc):
    done = doc.invoke("--dry", "doctor", "--fix")
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("$ gcloud services enable")), "")
    assert (done.code, all(api in line for api in ALL_APIS), doc.calls()) == (0, True, []), done.output


def test_doctor_probes_seam_that_does_not_import_exits_2(doc):
    done = doc.invoke("doctor", NRG_DOCTOR_PROBES="no.such.module:probes")
    assert (done.code, "NRG_DOCTOR_PROBES" in done.stderr, "Traceback" in done.output) == (2, True, False)


def test_doctor_says_gclouds_message_not_the_last_line_of_its_details(doc):
    # The newer APIs' errors end with their details as YAML: doctor showed "reason: IAM_PERMISSION_DENIED" alone.
    done = doc.invoke("doctor", FAKECLOUD_FAIL="projects describe:1:denied")
    line = _line(done, "project")
    assert done.code == 1 and "does not have permission to access projects instance" in line, done.stdout
    assert "IAM_PERMISSION_DENIED" not in line and "'@type'" not in line, line


def test_doctor_a_pinned_gke_version_the_location_no_longer_offers_fails_naming_ones_it_does(doc):
    # GKE drops versions within months: the tutorial's 1.32.2-gke.1422000 pin failed at the cluster's create.
    doc.write_env(GKE_VERSION="1.32.2-gke.1422000")
    done = doc.invoke("doctor")
    line = _line(done, "GKE version")
    assert done.code == 1 and "GKE_VERSION=1.32.2-gke.1422000 is not offered in us-central1 now" in line, done.stdout
    assert "1.34.1-gke.1200000" in done.stdout and "leave it empty" in done.stdout


def test_doctor_no_gke_version_is_the_channels_default(doc):
    done = doc.invoke("doctor")
    assert "✓ GKE version: the channel's default: 1.33.5-gke.1000000" in done.stdout, done.stdout


def test_doctor_takes_a_key_file_gcloud_uses_for_the_account_auth_list_does_not_show(doc):
    # google-github-actions/auth sets CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE: every gcloud call works, and
    # `gcloud auth list` lists no account (seen on gcloud 528): doctor said "no active gcloud account".
    _state(doc).put("doctor", "settings", {"account": ""})
    key = doc.root / "gha-creds-1.json"
    key.write_text("{}")
    done = doc.invoke("doctor", CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE=str(key))
    line = _line(done, "account")
    assert line.startswith("✓") and f"auth/credential_file_override ({key})" in line, done.output
    gone = doc.invoke("doctor", CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE=str(doc.root / "gone.json"))
    assert _line(gone, "account").startswith("✗") and "which is not a file" in gone.stdout, gone.output
    token = doc.invoke("doctor", CLOUDSDK_AUTH_ACCESS_TOKEN="ya29.not-a-real-token")
    assert _line(token, "account").startswith("✓") and "ya29" not in token.output, token.output
    alone = doc.invoke("doctor")
    assert _line(alone, "account").startswith("✗") and alone.code == 1, alone.output


def test_doctor_says_whom_gclouds_calls_run_as_under_impersonation(doc):
    done = doc.invoke("doctor", CLOUDSDK_AUTH_IMPERSONATE_SERVICE_ACCOUNT="deployer@p.iam.gserviceaccount.com")
    line = _line(done, "account")
    assert line.startswith("✓") and "calls run as deployer@p.iam.gserviceaccount.com" in line, done.output
