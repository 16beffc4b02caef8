"""gcloud's configuration can hide what we read of its answers; the environment our runs give it
(tools.TOOL_ENVIRONMENT) outranks that configuration. Checked on the real gcloud, offline, and the fake's model
of it (fakecloud/gcloud_output.py) checked against the same answers."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from fakecloud.gcloud_output import Shown
from nemo_rl_gke.tools import tool_environment

HIDING = {"core/user_output_enabled": "false", "core/verbosity": "error", "core/show_structured_logs": "always",
          "core/console_log_format": "detailed", "core/print_handled_tracebacks": "true"}
DESCRIBE = ["compute", "networks", "describe", "x", "--project=p", "--format=json"]  # fails offline: no account


@pytest.fixture(scope="module")
def configured(real_gcloud):
    """The real gcloud and an environment whose configuration sets HIDING (`gcloud config set`)."""
    binary, env = real_gcloud
    for key, value in HIDING.items():
        subprocess.run([binary, "config", "set", key, value], env=env, check=True, capture_output=True, timeout=120)
    return binary, env


def _gcloud(configured, *args: str, ours: bool) -> subprocess.CompletedProcess[str]:
    binary, env = configured
    return subprocess.run([binary, *args], env=tool_environment("gcloud", env) if ours else env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_a_configuration_without_user_output_prints_no_list_and_ours_does(configured):
    hidden = _gcloud(configured, "config", "list", "--format=json", ours=False)
    assert (hidden.returncode, hidden.stdout) == (0, ""), hidden  # read as an empty list, exit 0
    shown = _gcloud(configured, "config", "list", "--format=json", ours=True)
    assert shown.returncode == 0 and json.loads(shown.stdout)["core"]["user_output_enabled"] == "true", shown
    assert Shown(output=False).shape('[{"name": "x"}]\n', "") == ("", "")  # the fake drops it the same way


def test_a_configuration_with_structured_logs_prints_json_records_and_ours_prints_text(configured):
    structured = _gcloud(configured, *DESCRIBE, ours=False)
    record = json.loads(structured.stderr.strip().splitlines()[0])
    assert structured.returncode == 1 and record["message"].startswith("(gcloud.compute.networks.describe) ")
    text = _gcloud(configured, *DESCRIBE, ours=True)
    assert text.returncode == 1 and text.stderr.startswith("ERROR: (gcloud.compute.networks.describe) "), text.stderr
    assert "crashed" not in text.stderr  # print_handled_tracebacks adds "ERROR: gcloud crashed (...)" after it
    # The fake prints the same record for the same text.
    _, faked = Shown(verbosity=40, structured=True).shape("", text.stderr)
    fake_record = json.loads(faked)
    assert set(fake_record) == set(record) and fake_record["verbosity"] == record["verbosity"] == "ERROR"
    assert fake_record["message"] == record["message"]


def test_a_configuration_of_detailed_logs_starts_each_record_with_its_time(configured):
    binary, env = configured
    configured = binary, {**env, "CLOUDSDK_CORE_SHOW_STRUCTURED_LOGS": "never"}
    detailed = _gcloud(configured, *DESCRIBE, ours=False)
    first = detailed.stderr.splitlines()[0]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ERROR: \(gcloud\.compute\.networks\.describe\) .*",
                        first), detailed.stderr
    text = _gcloud(configured, *DESCRIBE, ours=True).stderr
    faked = Shown(detailed=True).shape("", text)[1].splitlines()[0]
    assert re.sub(r"^\S+ \S+ ", "", faked) == re.sub(r"^\S+ \S+ ", "", first) and faked[:4] == first[:4]


@pytest.mark.parametrize(("value", "shown"), [("true", True), ("Y", True), ("none", True), ("n", False),
                                              ("", False), (" true", False), ("garbage", False)])
def test_the_fake_reads_user_output_enabled_as_gcloud_does(configured, value, shown):
    binary, env = configured
    configured = binary, {**env, "CLOUDSDK_CORE_USER_OUTPUT_ENABLED": value}
    real = _gcloud(configured, "config", "list", "--format=json", ours=False)
    assert bool(real.stdout) is shown, real
    assert Shown.read([], {"CLOUDSDK_CORE_USER_OUTPUT_ENABLED": value}).output is shown


def test_a_configuration_with_verbosity_error_drops_warnings_and_ours_keeps_them(configured):
    # A warning gcloud gives offline, as it gives "List results may be incomplete" for a partial list.
    binary, env = configured
    warned = ("config", "get", "core/disable_color")
    configured = binary, {**env, "CLOUDSDK_CORE_DISABLE_COLOR": "maybe"}
    hidden = _gcloud(configured, *warned, ours=False)
    assert hidden.returncode == 0 and hidden.stderr == "", hidden
    kept = _gcloud(configured, *warned, ours=True)
    assert kept.stderr.startswith("WARNING: Invalid value for property [core/disable_color]"), kept.stderr
    assert Shown(output=False, verbosity=40, structured=True).shape("maybe\n", kept.stderr) == ("", "")
    assert Shown().shape("maybe\n", kept.stderr) == ("maybe\n", kept.stderr)


def test_a_key_file_gcloud_uses_shows_in_its_properties_not_in_auth_list_and_doctor_takes_it(real_gcloud, tmp_path):
    # What doctor's account check reads, from the real gcloud: CI's CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE.
    from nemo_rl_gke.commands import doctor
    from nemo_rl_gke.readiness import check_account

    binary, env = real_gcloud
    key = tmp_path / "gha-creds.json"
    key.write_text("{}")
    env = {**env, "CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE": str(key)}
    listed, properties = (subprocess.run([binary, *argv[1:]], env=tool_environment("gcloud", env), text=True,
                                         capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
                          for argv in (doctor.active_account(), doctor.auth_properties()))
    assert listed.returncode == 0 and listed.stdout == "", listed
    verdict = check_account(listed.stdout, properties.stdout)
    assert verdict.ok and str(key) in verdict.detail, (verdict, properties.stdout)
    assert not check_account("", '{"core": {"disable_usage_reporting": "True"}}').ok
    impersonating = {**env, "CLOUDSDK_AUTH_IMPERSONATE_SERVICE_ACCOUNT": "d@p.iam.gserviceaccount.com"}
    acting = subprocess.run([binary, *doctor.auth_properties()[1:]], text=True, capture_output=True, timeout=120,
                            env=tool_environment("gcloud", impersonating))
    assert "run as d@p.iam.gserviceaccount.com" in check_account("", acting.stdout).detail, acting.stdout
