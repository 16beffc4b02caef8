"""A permanent failure injected at a mutating step of `up`, then `up` again: the cloud ends exactly as after
a clean `up` (compared on the fake's resource state).

By default one step per layer runs (the slowest create of each layer: where real failures cluster);
NRG_FAILURE_MATRIX=all runs every mutating step of the graph (about 30 s per step)."""

from __future__ import annotations

import io
import os
import shlex

import pytest
from lifecycle_buckets import buckets

from support.fake import FakeCloud, example_settings, read_env_example


def first_command(step) -> str:
    """The words of the first changing command the step's create runs (from a dry run), as FAKECLOUD_FAIL
    matches them; '' when the step changes things through a client library instead of a tool."""
    from nemo_rl_gke.runner import Runner

    out = io.StringIO()
    step.create(Runner(dry=True, out=out, err=io.StringIO()))
    text = out.getvalue()
    if "client call" in text:  # google-cloud-storage: the printed gcloud line is an equivalent, never run
        return ""
    read_only = {"describe", "get", "list", "status"}
    lines = [line for line in text.splitlines() if line.startswith("$ ")
             and not read_only & set(shlex.split(line[2:], comments=True)[:5])]
    if not lines:
        return ""
    words = shlex.split(lines[0][2:], comments=True)
    # Up to the first path-like word: a chart or file path may be written differently in a real run.
    cut = next((i for i, word in enumerate(words) if i > 1 and "/" in word), len(words))
    return " ".join(words[:cut])


def _steady(obj):
    """Resource state without the times a re-run rewrites (a helm release's `updated`)."""
    if isinstance(obj, dict):
        return {k: _steady(v) for k, v in obj.items() if k not in ("updated", "last_deployed")}
    if isinstance(obj, list):
        return [_steady(v) for v in obj]
    return obj


def failure_cases() -> list:
    from nemo_rl_gke.resources import all_steps

    steps = [step for step in all_steps(example_settings()) if step.mutating and not step.always]
    if os.environ.get("NRG_FAILURE_MATRIX") != "all":
        slowest = {}
        for step in steps:
            if step.create_seconds > getattr(slowest.get(step.layer), "create_seconds", -1):
                slowest[step.layer] = step
        steps = list(slowest.values())
    return [pytest.param(step.name, first_command(step), id=step.name) for step in steps]


@pytest.fixture(scope="module")
def clean_state(tmp_path_factory):
    """The fake cloud's resources after one clean `up`."""
    from fakecloud.handlers.gcloud_projects import project_number
    from support.gcs_emulator import running_emulator

    fake = FakeCloud(tmp_path_factory.mktemp("clean"))
    fake.write_env()
    with running_emulator(project_number(read_env_example()["PROJECT_ID"])) as emulator:
        fake.env["STORAGE_EMULATOR_HOST"] = emulator.host
        done = fake.invoke("up", "--yes")
        assert done.code == 0, done.output[-3000:]
        return _steady(fake.resources()), sorted(buckets(fake))


@pytest.mark.parametrize(("step_name", "command"), failure_cases())
def test_up_after_failure_at_step_ends_like_a_clean_up(cloud, clean_state, step_name, command):
    if not command.startswith(("gcloud ", "kubectl ", "helm ")):
        pytest.skip(f"{step_name} calls no tool (client library): nothing for FAKECLOUD_FAIL to fail")
    failed = cloud.invoke("up", "--yes", FAKECLOUD_FAIL=f"{command}:1:permanent")
    assert failed.code != 0 and "invoke up` again" in failed.stderr, failed.output[-2000:]
    again = cloud.invoke("up", "--yes")
    assert again.code == 0, again.output[-3000:]
    after, reference = (_steady(cloud.resources()), sorted(buckets(cloud))), clean_state
    differing = sorted(f"{kind}/{key}" for kind in set(after[0]) | set(reference[0])
                       for key in set(after[0].get(kind, {})) | set(reference[0].get(kind, {}))
                       if after[0].get(kind, {}).get(key) != reference[0].get(kind, {}).get(key))
    assert (differing, after[1]) == ([], reference[1])
