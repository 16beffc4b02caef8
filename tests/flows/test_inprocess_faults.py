"""Each kind of failure the fake cloud injects, on a gcloud, a kubectl and a helm call of `up`: the transient
ones (5xx, rate limit, 429, operation in progress) are retried and `up` succeeds; a permanent one stops `up`
with the tool's message and exit 1, no traceback. The fake words each kind as the real tool does
(tests/fakecloud/fakecloud/main.py FAULT_TEXT), so this checks the Runner's TRANSIENT pattern against them."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from fakecloud.main import FAULT_TEXT
from reliability.cloud import make_cloud, run

# One mutating call per tool in `up`.
ONE_PER_TOOL = {"gcloud": "compute networks create nemo-gvnic-net ", "kubectl": "apply --filename=-",
                "helm": "helm upgrade "}
TRANSIENT_KINDS = ["transient", "ratelimit", "429", "inprogress"]


def armed(kind: str) -> str:
    return ";".join(f"{pattern}:1:{kind}" for pattern in ONE_PER_TOOL.values())


def failed_calls(fake) -> dict[str, int]:
    calls = [c for c in fake.calls() if c["exit"] != 0 and c["mutating"]]
    return {tool: sum(1 for c in calls if c["tool"] == tool) for tool in ONE_PER_TOOL}


@pytest.fixture
def cloud(tmp_path):
    with ExitStack() as stack:
        yield make_cloud(stack, tmp_path)


@pytest.mark.parametrize("kind", TRANSIENT_KINDS)
def test_inprocess_faults_transient_kind_is_retried_and_up_succeeds(cloud, kind):
    done = run(cloud, "up", "--yes", FAKECLOUD_FAIL=armed(kind))
    retried = {tool: done.stderr.count(f"transient error from {tool} ") for tool in ONE_PER_TOOL}
    once = {tool: 1 for tool in ONE_PER_TOOL}
    assert (done.code, failed_calls(cloud), retried) == (0, once, once), done.output[-3000:]


@pytest.mark.parametrize("tool", list(ONE_PER_TOOL))
def test_inprocess_faults_permanent_failure_stops_up_with_the_tools_message(cloud, tool):
    done = run(cloud, "up", "--yes", FAKECLOUD_FAIL=f"{ONE_PER_TOOL[tool]}:1:permanent")
    message = FAULT_TEXT["permanent"][tool].replace("ERROR: (gcloud) ", "")  # gcloud names the command there
    assert (done.code, failed_calls(cloud)[tool], message in done.stderr, "Traceback" in done.output,
            "transient error" in done.stderr) == (1, 1, True, False, False), done.output[-3000:]


def test_inprocess_faults_every_transient_text_matches_the_runners_pattern_and_permanent_does_not():
    from nemo_rl_gke.runner import TRANSIENT

    texts = {(kind, tool): text for kind, by_tool in FAULT_TEXT.items() for tool, text in by_tool.items()}
    assert {key: bool(TRANSIENT.search(text)) for key, text in texts.items()} == {
        key: key[0] not in ("permanent", "refused", "denied", "endpoint") for key in texts}


@pytest.mark.parametrize("kind", ["permanent", "refused"])
def test_inprocess_faults_refused_answers_at_once_and_permanent_after_the_calls_work(cloud, kind):
    # A network's create: 25 s of work, a failure after 5 of them (1 s at scale 0.2), a refusal at once.
    import subprocess

    from support.fake import FAKE_BIN

    done = subprocess.run([str(FAKE_BIN / "gcloud"), "compute", "networks", "create", "nemo-gvnic-net",
                           "--project=my-nemo-project", "--subnet-mode=custom"], capture_output=True, text=True,
                          env=cloud.process_env(FAKECLOUD_FAIL=f"networks create:1:{kind}", FAKECLOUD_TIME_SCALE="0.2"))
    (failed,) = cloud.calls()
    seconds = failed["end"] - failed["start"]
    assert (done.returncode, "injected permanent failure" in done.stderr, seconds >= 1.0, cloud.resources()) == (
        1, True, kind == "permanent", {}), done.stderr


def test_inprocess_faults_unknown_kind_is_a_loud_error_of_the_fake(cloud):
    done = run(cloud, "net.create", FAKECLOUD_FAIL="networks create:1:flaky")
    assert (done.code != 0, "FAKECLOUD_FAIL kind 'flaky' is unknown" in done.stderr) == (True, True)


def test_inprocess_faults_real_processes_inject_the_same_rate_limit(cloud):
    cloud.processes = True
    done = run(cloud, "net.create", FAKECLOUD_FAIL="compute networks create nemo-rdma-net :1:ratelimit")
    assert (done.code, "transient error from gcloud " in done.stderr, "Queries per minute" in done.stderr) == (
        0, True, True), done.output[-3000:]
