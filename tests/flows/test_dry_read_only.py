"""`invoke --dry` on the read-only tasks, through the real `invoke` command, with everything up in the fake cloud:
a dry run asks nothing, so it cannot know what exists. Each task shows what it would ask (`$ …`) and says that
nothing was asked; it never reports a state ("absent") or a cost of what exists ("$0.00/hour") it did not read."""

from __future__ import annotations

import json
import shlex

import pytest

from support.fake import TEST_HF_TOKEN, FakeCloud

NOTHING_ASKED = "dry run: nothing was asked"
READ_ONLY = [("net.status",), ("cluster.status",), ("storage.status",), ("status",), ("plan",), ("ray.status",),
             ("job.list",), ("job.status",), ("job.checkpoints",), ("job.metrics",), ("job.logs", "--ray")]
WITH_JSON = [("net.status",), ("cluster.status",), ("status",), ("plan",), ("job.list",), ("job.status",)]


@pytest.fixture(scope="module")
def cloud(tmp_path_factory) -> FakeCloud:
    fake = FakeCloud(tmp_path_factory.mktemp("dryread"))
    fake.write_env()
    done = fake.invoke("up", "--yes")  # networks, cluster, Lustre, the bucket, Ray: all there
    assert done.code == 0, done.output[-3000:]
    return fake


def dry(cloud: FakeCloud, *args: str):
    before = len(cloud.calls())
    done = cloud.invoke("--dry", *args, process=True)  # the real `invoke` command
    assert done.code == 0, done.output[-3000:]
    assert cloud.calls()[before:] == []  # nothing asked of gcloud, kubectl or helm
    assert TEST_HF_TOKEN not in done.output
    return done


@pytest.mark.parametrize("args", READ_ONLY, ids=[" ".join(a) for a in READ_ONLY])
def test_dry_read_only_task_says_nothing_was_asked_and_makes_up_no_state(cloud, args):
    done = dry(cloud, *args)
    assert f"# {NOTHING_ASKED}; without --dry, {args[0]} " in done.stdout
    assert "\n$ " in done.stdout  # what it would ask
    assert "absent" not in done.output and "$0.00/hour" not in done.output and "not deployed" not in done.output


@pytest.mark.parametrize("args", WITH_JSON, ids=[a[0] for a in WITH_JSON])
def test_dry_read_only_json_is_one_document_that_says_nothing_was_asked(cloud, args):
    done = dry(cloud, *args, "--json")
    document = json.loads(done.stdout)  # the whole of stdout is one document
    assert document["dry_run"] is True and document["note"].startswith(f"{NOTHING_ASKED}; without --dry, {args[0]} ")
    assert "absent" not in done.stdout
    assert f"# {NOTHING_ASKED}" in done.stderr and "\n$ " in done.stderr  # the lines a dry run prints: stderr


def test_dry_status_json_leaves_every_state_and_figure_unknown(cloud):
    document = json.loads(dry(cloud, "status", "--json").stdout)
    assert document["resources"] and {row["state"] for row in document["resources"]} == {None}
    assert {row["cost_per_hour"] for row in document["resources"]} == {None}
    assert document["cost_per_hour_now"] is None and document["ray"] is None and document["latest_job"] is None


def test_dry_layer_status_json_leaves_every_state_unknown(cloud):
    document = json.loads(dry(cloud, "net.status", "--json").stdout)
    assert len(document["resources"]) == 13 and {row["state"] for row in document["resources"]} == {None}


def test_dry_plan_is_the_offline_plan_and_says_it_assumes_nothing_exists(cloud):
    done = dry(cloud, "plan")
    assert "plan (dry run: assuming nothing exists)" in done.stdout
    assert "this plan assumes nothing exists yet, as `invoke --dry up` does" in done.stdout
    assert "what exists now" not in done.stdout and "leave 0" not in done.stdout
    document = json.loads(dry(cloud, "plan", "--json").stdout)
    assert {row["action"] for row in document["resources"]} == {"create", "run"}
    assert document["cost_per_hour"]["now"] is None and document["cost_per_hour"]["all_up"] > 100
    assert document["drift"] is None and "assumes nothing exists" in document["note"]


def test_dry_job_list_json_has_no_runs_to_show_not_an_empty_list(cloud):
    assert json.loads(dry(cloud, "job.list", "--json").stdout)["runs"] is None


def test_dry_layer_status_shows_the_listings_a_real_run_asks(cloud):
    done = dry(cloud, "net.status")
    shown = [shlex.split(line[2:]) for line in done.stdout.splitlines() if line.startswith("$ ")]
    before = len(cloud.calls())
    assert cloud.invoke("net.status").code == 0
    asked = [[call["tool"], *call["argv"]] for call in cloud.calls()[before:]]
    assert len(shown) == 3 and sorted(shown) == sorted(asked)
