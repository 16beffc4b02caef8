"""Data safety: without --delete-data no task deletes the Lustre instance or the bucket (nor the files on
Lustre); `down` keeps unexported checkpoints and says how to export them; storage.delete --delete-data
refuses while checkpoints have no recent export."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from reliability.cloud import buckets, call_line, make_cloud, run

# Every task that deletes something, most local first, each run with --yes and without --delete-data.
DESTRUCTIVE = [["clean.ray"], ["ray.delete"], ["clean.storage"], ["storage.delete"], ["clean.cluster"],
               ["cluster.delete"], ["clean.net"], ["net.delete"], ["clean.all"], ["clean"], ["down"]]
CHECKPOINT = "runs/grpo-1/checkpoints/step_10/training_info.json"
DATA_DELETES = ("lustre instances delete", "storage buckets delete", "storage rm")


@pytest.fixture(scope="module")
def after_every_destructive_task(tmp_path_factory):
    with ExitStack() as stack:
        fake = make_cloud(stack, tmp_path_factory.mktemp("data"))
        assert run(fake, "up", "--yes").code == 0
        planted = fake.state_dir / "lustre" / "nemo-lustre" / CHECKPOINT
        planted.parent.mkdir(parents=True, exist_ok=True)
        planted.write_text('{"step": 10}')
        outputs = {" ".join(argv): run(fake, *argv, "--yes") for argv in DESTRUCTIVE}
        yield {"fake": fake, "outputs": outputs, "planted": planted, "buckets": buckets(fake)}


def test_destructive_tasks_without_delete_data_make_no_data_delete_call(after_every_destructive_task):
    fake = after_every_destructive_task["fake"]
    assert [call_line(c) for c in fake.calls() if any(d in call_line(c) for d in DATA_DELETES)] == []


def test_destructive_tasks_without_delete_data_keep_the_lustre_instance(after_every_destructive_task):
    assert len(after_every_destructive_task["fake"].resources().get("lustre", {})) == 1


def test_destructive_tasks_without_delete_data_keep_the_checkpoint_files(after_every_destructive_task):
    assert after_every_destructive_task["planted"].read_text() == '{"step": 10}'


def test_destructive_tasks_without_delete_data_keep_the_bucket(after_every_destructive_task):
    assert after_every_destructive_task["buckets"] == ["nemo-rl-my-nemo-project"]


def test_destructive_tasks_without_delete_data_print_no_traceback(after_every_destructive_task):
    outputs = after_every_destructive_task["outputs"]
    assert [k for k, d in outputs.items() if "Traceback" in d.output] == []


def test_destructive_tasks_without_delete_data_succeed(after_every_destructive_task):
    outputs = after_every_destructive_task["outputs"]
    assert {k: d.code for k, d in outputs.items() if d.code != 0} == {}


def test_net_delete_without_delete_data_keeps_the_main_vpc_the_kept_lustre_needs(after_every_destructive_task):
    done = after_every_destructive_task["outputs"]["net.delete"]
    networks = sorted(after_every_destructive_task["fake"].resources().get("network", {}))
    # The gVNIC and RDMA VPCs went; the main VPC stays under the kept Lustre instance, and the run says so.
    assert (done.code, networks) == (0, ["my-nemo-project/default"]), done.output[-2000:]
    assert "main VPC default" in done.stderr and "kept" in done.stderr, done.stderr[-2000:]


def test_down_without_delete_data_says_checkpoints_were_kept_and_how_to_export(after_every_destructive_task):
    stderr = after_every_destructive_task["outputs"]["down"].stderr
    assert "kept" in stderr and "invoke storage.export" in stderr


def test_storage_delete_with_delete_data_refuses_unexported_checkpoints(tmp_path):
    with ExitStack() as stack:
        fake = make_cloud(stack, tmp_path)
        assert run(fake, "up", "--yes").code == 0, "up failed"
        planted = fake.state_dir / "lustre" / "nemo-lustre" / CHECKPOINT
        planted.parent.mkdir(parents=True, exist_ok=True)
        planted.write_text("{}")
        done = run(fake, "storage.delete", "--delete-data", "--yes")
        deletes = [call_line(c) for c in fake.calls() if "lustre instances delete" in call_line(c)]
        assert (done.code, "refusing" in done.output, "Traceback" in done.output, deletes) == (1, True, False, [])
