"""The run id as DESIGN writes it, through the real `invoke` command on the fake cloud: `job.status RUN`,
`job.status --id=RUN`, `job.status` (the latest), `job.logs RUN --follow`, chained after a bare id, and help."""

from __future__ import annotations

import json

import pytest
from flows.test_job_flow import FAST, finished, kill_runs, pod_root, seed_cluster, wait_for

from nemo_rl_gke.tasks.job_views import RUN_FIELDS
from support.fake import FakeCloud


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    fake = FakeCloud(tmp_path_factory.mktemp("runid"), processes=True)  # the real `invoke` command
    fake.write_env()
    seed_cluster(fake)
    for run_id in ("first", "second"):  # submitted in this order: "second" is the latest
        done = fake.invoke("job.submit", "qwen2.5-1.5b-gsm8k", f"--id={run_id}", *FAST)
        assert done.code == 0, done.output
        wait_for(lambda run_id=run_id: finished(fake, run_id), f"run {run_id} to finish")
    yield fake
    kill_runs(fake)


def first_line(done) -> str:
    assert done.code == 0, done.output
    return done.stdout.splitlines()[0]


def test_cli_run_id_bare_and_flag_name_the_same_run(cloud):
    assert first_line(cloud.invoke("job.status", "first")).startswith("run first ")
    assert first_line(cloud.invoke("job.status", "--id=first")).startswith("run first ")
    assert first_line(cloud.invoke("job.status", "-i", "first")).startswith("run first ")


def test_cli_run_id_omitted_is_the_latest_run(cloud):
    assert first_line(cloud.invoke("job.status")).startswith("run second ")


def test_cli_run_id_bare_before_a_flag(cloud):
    done = cloud.invoke("job.logs", "first", "--follow")
    assert done.code == 0, done.output
    log = (pod_root(cloud) / "data" / "runs" / "first" / "driver.log").read_text()
    assert log.splitlines()[-1] in done.stdout
    assert "Step 1/4" in done.stdout


def test_cli_run_id_bare_then_another_task_runs_both(cloud):
    done = cloud.invoke("job.status", "first", "job.list")
    assert done.code == 0, done.output
    assert done.stdout.startswith("run first ")
    assert "second" in done.stdout.split("runs", 1)[1]  # job.list's table after the status


def test_cli_run_id_bare_with_json(cloud):
    done = cloud.invoke("job.status", "first", "--json")
    assert done.code == 0, done.output
    document = json.loads(done.stdout)  # the whole of stdout
    assert (document["version"], document["kind"], document["dry_run"]) == (1, "job.status", False)
    run = document["run"]
    assert set(run) == set(RUN_FIELDS) and (run["id"], run["state"], run["step"]) == ("first", "succeeded", 4)
    assert run["submitted"].endswith("Z") and run["run_dir"] == "/data/runs/first"


def test_cli_run_id_job_list_json_has_every_run_in_order(cloud):
    done = cloud.invoke("job.list", "--json")
    assert done.code == 0, done.output
    document = json.loads(done.stdout)
    assert document["kind"] == "job.list" and [run["id"] for run in document["runs"]] == ["first", "second"]
    assert all(set(run) == set(RUN_FIELDS) for run in document["runs"])


def test_cli_run_id_two_ids_is_a_usage_error(cloud):
    before = len(cloud.calls())
    done = cloud.invoke("job.status", "first", "second")
    assert done.code == 2 and done.stderr.startswith("error: ") and "second" in done.stderr
    assert len(cloud.calls()) == before


def test_cli_run_id_unknown_run_says_so(cloud):
    done = cloud.invoke("job.status", "nosuchrun")
    assert done.code == 1 and "nosuchrun" in done.stderr and "Traceback" not in done.output


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_cli_run_id_help_still_prints_usage(cloud, flag):
    before = len(cloud.calls())
    done = cloud.invoke("job.status", flag)
    assert done.code == 0, done.output
    assert done.stdout.startswith("Usage: inv[oke] [--core-opts] job.status ") and "--id=STRING" in done.stdout
    assert len(cloud.calls()) == before
