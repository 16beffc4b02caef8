"""The data guard through the real `invoke` on the fake cloud with the GCS emulator: every path to the Lustre
delete (down, clean, clean.storage, storage.delete) refuses runs that are not in the bucket; the bucket outlives
--delete-data; an export of nothing does not count; reports name only what exists."""

from __future__ import annotations

import os

import pytest

from support.fake import FakeCloud, in_a_terminal, lustre_runs, plant_run, read_env_example

PROJECT = read_env_example()["PROJECT_ID"]
BUCKET = f"nemo-rl-{PROJECT}"


def _up(cloud: FakeCloud) -> None:
    done = cloud.invoke("up", "--yes")
    assert done.code == 0, done.output[-3000:]


def buckets(cloud: FakeCloud) -> list[str]:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": cloud.env["STORAGE_EMULATOR_HOST"]})
    return [b.name for b in client.list_buckets()]


def _objects(cloud: FakeCloud) -> dict[str, int]:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": cloud.env["STORAGE_EMULATOR_HOST"]})
    return {b.name: b.size for b in client.list_blobs(BUCKET)}


def _delete_the_cluster_elsewhere(cloud: FakeCloud) -> None:
    """The cluster deleted outside nemo-rl-gke: no head pod to list /data, and no listing taken as Ray went."""
    import subprocess

    env = read_env_example()
    gone = subprocess.run(["gcloud", "container", "clusters", "delete", env["CLUSTER_NAME"], f"--project={PROJECT}",
                           f"--location={env['CONTROL_PLANE_LOCATION']}", "--quiet"], env=cloud.process_env(),
                          cwd=cloud.workdir, capture_output=True, text=True, timeout=60)
    assert gone.returncode == 0, gone.stderr


@pytest.fixture
def ran(cloud):
    """After `up`, with one finished run r1 on Lustre that is not in the bucket."""
    _up(cloud)
    plant_run(cloud, "r1")
    return cloud


@pytest.mark.parametrize("task", [("down",), ("clean",), ("clean.all",), ("clean.storage",), ("storage.delete",)])
def test_data_guard_every_delete_path_refuses_unexported_runs(ran, task):
    before = len(ran.calls())
    done = ran.invoke(*task, "--yes", "--delete-data")
    assert done.code == 1, done.output[-3000:]
    assert "r1" in done.stderr and "invoke storage.export" in done.stderr
    assert ran.resources().get("lustre") and ran.resources().get("cluster")
    assert ran.mutating_calls(before) == []


def test_data_guard_export_then_down_delete_data_leaves_the_bucket_with_every_export(ran):
    assert ran.invoke("storage.export").code == 0
    exported = _objects(ran)
    done = ran.invoke("down", "--yes", "--delete-data")
    assert done.code == 0, done.output[-3000:]
    assert {"runs/r1/step_10/model.pt", "runs/r1/driver.log"} <= set(exported)
    assert ({k: v for k, v in _objects(ran).items() if k.startswith("runs/")},
            {k: v for k, v in exported.items() if k.startswith("runs/")}) == (
        {k: v for k, v in exported.items() if k.startswith("runs/")},) * 2
    assert "lustre" not in ran.resources() and "cluster" not in ran.resources()
    assert f"left: bucket gs://{BUCKET}" in done.stderr and "/month" in done.stderr


def test_data_guard_an_export_of_nothing_does_not_count(cloud):
    _up(cloud)
    assert cloud.invoke("storage.export").code == 0  # Lustre empty: the export writes nothing
    plant_run(cloud, "late")
    done = cloud.invoke("down", "--yes", "--delete-data")
    assert done.code == 1 and "late" in done.stderr
    assert cloud.resources().get("lustre")


def test_data_guard_an_export_of_nothing_does_not_count_once_the_cluster_is_gone(cloud):
    _up(cloud)
    _delete_the_cluster_elsewhere(cloud)
    assert cloud.invoke("storage.export").code == 0
    done = cloud.invoke("storage.delete", "--yes", "--delete-data")
    assert done.code == 1 and "copied nothing" in done.stderr
    assert cloud.resources().get("lustre")


def test_data_guard_an_export_that_finds_nothing_new_counts_as_the_one_before(ran):
    # Managed Lustre's exports are incremental: an export with nothing new since the last copies nothing. Taken
    # for "an export of nothing", it no longer counted: with no head pod to list /data, every delete refused.
    assert ran.invoke("storage.export").code == 0
    again = ran.invoke("storage.export")
    assert again.code == 0 and "copied nothing new" in again.stderr and "(0 written" in again.stdout, again.output
    _delete_the_cluster_elsewhere(ran)
    done = ran.invoke("storage.delete", "--yes", "--delete-data", process=True)
    assert done.code == 0, done.output[-3000:]
    assert "lustre" not in ran.resources() and "runs/r1/step_10/model.pt" in _objects(ran)


def test_data_guard_an_export_that_finds_nothing_new_still_names_a_run_written_since(ran):
    assert ran.invoke("storage.export").code == 0
    plant_run(ran, "late")  # written after: the next export copies it
    again = ran.invoke("storage.export")
    assert again.code == 0 and "copied nothing" not in again.stderr, again.output
    assert "runs/late/driver.log" in _objects(ran)


def test_data_guard_an_export_of_nothing_after_ray_went_leaves_its_listing_to_answer(cloud):
    # clean.cluster recorded /data/runs (empty) as Ray went; an export after it copies nothing and proves
    # nothing, so the older listing answers: nothing on Lustre to lose.
    _up(cloud)
    assert cloud.invoke("clean.cluster", "--yes").code == 0
    assert cloud.invoke("storage.export").code == 0
    done = cloud.invoke("storage.delete", "--yes", "--delete-data")
    assert done.code == 0 and "the listing taken as Ray went away" in done.stderr, done.output[-3000:]
    assert "lustre" not in cloud.resources()


def test_data_guard_an_export_without_a_head_pod_is_held_to_the_listing_taken_as_ray_went(ran):
    # With no head pod, an export sees the bucket only, so it cannot show a file it left out; the listing taken
    # as Ray went away saw every file of r1. Each must be in the bucket, or Lustre stays.
    assert ran.invoke("clean.cluster", "--yes").code == 0
    assert ran.invoke("storage.export", FAKECLOUD_LUSTRE_EXPORT_UNSEEN="r1/step_10/*").code == 0
    assert "runs/r1/driver.log" in _objects(ran) and "runs/r1/step_10/model.pt" not in _objects(ran)
    before = len(ran.calls())
    done = ran.invoke("storage.delete", "--yes", "--delete-data")
    assert done.code == 1, done.output[-3000:]
    assert "r1: 1 file(s) not in the bucket (e.g. r1/step_10/model.pt), though on /data as Ray went away" in done.stderr
    assert ran.resources().get("lustre") and ran.mutating_calls(before) == []
    assert ran.invoke("storage.export").code == 0  # it copies the file this time
    done = ran.invoke("storage.delete", "--yes", "--delete-data")
    assert done.code == 0, done.output[-3000:]
    assert "and the listing taken as Ray went away" in done.stderr
    assert "lustre" not in ran.resources() and "runs/r1/step_10/model.pt" in _objects(ran)


def test_data_guard_a_lustre_made_again_is_not_held_to_the_listing_of_the_one_deleted(ran):
    # r1 deleted on purpose with the first instance; the one made again holds r2 only, exported in full.
    assert ran.invoke("clean.cluster", "--yes").code == 0  # the listing as Ray went: r1
    gone = ran.invoke("storage.delete", "--yes", "--delete-data", "--delete-unexported")
    assert gone.code == 0 and "lustre" not in ran.resources(), gone.output[-3000:]
    assert ran.invoke("cluster.create", "storage.create").code == 0  # no Ray: no head pod to list /data
    plant_run(ran, "r2")
    assert ran.invoke("storage.export").code == 0
    done = ran.invoke("storage.delete", "--yes", "--delete-data")
    assert done.code == 0, done.output[-3000:]
    assert "r1" not in done.stderr and "lustre" not in ran.resources()


def test_data_guard_refuses_a_run_still_running_even_after_an_export(cloud):
    _up(cloud)
    plant_run(cloud, "live", running=True)
    assert cloud.invoke("storage.export").code == 0
    done = cloud.invoke("down", "--yes", "--delete-data")
    assert done.code == 1 and "live: still running" in done.stderr


def test_data_guard_a_file_written_after_the_export_is_caught(ran):
    assert ran.invoke("storage.export").code == 0
    (lustre_runs(ran) / "r1" / "step_20").mkdir()
    (lustre_runs(ran) / "r1" / "step_20" / "model.pt").write_bytes(b"x")
    done = ran.invoke("storage.delete", "--yes", "--delete-data")
    assert done.code == 1 and "r1: 1 file(s) not in the bucket" in done.stderr


def test_data_guard_delete_unexported_lists_the_loss_and_deletes(ran):
    done = ran.invoke("down", "--yes", "--delete-data", "--delete-unexported")
    assert done.code == 0, done.output[-3000:]
    assert "r1" in done.stderr and "lose" in done.stderr
    assert "lustre" not in ran.resources() and buckets(ran) == [BUCKET]


def test_data_guard_delete_unexported_without_a_terminal_or_yes_refuses(ran):
    done = ran.invoke("storage.delete", "--delete-data", "--delete-unexported")
    assert done.code == 2 and ran.resources().get("lustre")


def test_data_guard_delete_unexported_alone_is_a_usage_error(ran):
    # before any call, on every teardown path (storage.delete fetched credentials first, clean.storage listed)
    for task in ("down", "clean", "clean.storage", "storage.delete"):
        before = len(ran.calls())
        done = ran.invoke(task, "--yes", "--delete-unexported")
        assert done.code == 2 and "--delete-unexported" in done.stderr, (task, done.output[-1000:])
        assert ran.calls()[before:] == [], task


def test_data_guard_bucket_goes_only_with_delete_bucket(ran):
    assert ran.invoke("storage.export").code == 0
    done = ran.invoke("down", "--yes", "--delete-data", "--delete-bucket")
    assert done.code == 0, done.output[-3000:]
    assert f"gs://{BUCKET} holds" in done.stderr and buckets(ran) == []


def test_data_guard_second_down_reports_nothing_kept_when_nothing_is(ran):
    first = ran.invoke("down", "--yes", "--delete-data", "--delete-unexported", "--delete-bucket")
    assert first.code == 0, first.output[-3000:]
    again = ran.invoke("down", "--yes")
    assert again.code == 0, again.output[-3000:]
    assert "kept" not in again.stderr and "nothing of ours is left." in again.stderr


def test_data_guard_second_down_keeps_only_the_bucket_that_is_left(ran):
    assert ran.invoke("storage.export").code == 0
    assert ran.invoke("down", "--yes", "--delete-data").code == 0
    again = ran.invoke("down", "--yes")
    assert again.code == 0, again.output[-3000:]
    assert "kept bucket gs://" in again.stderr and "kept Lustre" not in again.stderr


def test_data_guard_down_lists_what_it_will_delete_before_deleting(ran):
    done = ran.invoke("down", "--yes")
    assert done.code == 0, done.output[-3000:]
    listed = done.stderr.index("down will delete")
    assert "cluster nemo-rl" in done.stderr[listed:].splitlines()[0]
    assert "will keep" in done.stderr and "Lustre instance" in done.stderr


def test_data_guard_that_asks_first_reads_the_runs_after_the_answer(ran):
    # With --yes nothing is asked between the listing round and the deletes, so the export check reads
    # /data/runs beside the lists. A question can wait for minutes (a job may start meanwhile): then the
    # guard reads after the answer, and still refuses what is not in the bucket.
    before = len(ran.calls())
    code, printed, answered = in_a_terminal(ran, ["down", "--delete-data"], "y")
    calls = ran.calls()[before:]
    pods = [c for c in calls if c["tool"] == "kubectl" and "pods" in c["argv"] and "get" in c["argv"]]
    assert (code, answered > 0, "refusing to delete Lustre instance" in printed) == (1, True, True), printed
    tick = 1 / os.sysconf("SC_CLK_TCK")  # `launched` is read from /proc in clock ticks
    assert pods and all(c["launched"] + tick >= answered for c in pods), (answered, [c["launched"] for c in pods])
    assert ran.mutating_calls(before) == []


def test_data_guard_with_yes_reads_the_runs_once_beside_the_lists(ran):
    before = len(ran.calls())
    done = ran.invoke("down", "--yes", "--delete-data")
    calls = ran.calls()[before:]
    reads = [" ".join(c["argv"][:3]) for c in calls if c["tool"] == "kubectl" and ("exec" in c["argv"] or (
        "get" in c["argv"] and "pods" in c["argv"]))]
    assert (done.code, "r1" in done.stderr, ran.mutating_calls(before)) == (1, True, []), done.output[-2000:]
    # One `get pods` (the claim guard's, where the head pod is found too), one exec: the guard used the read
    # taken ahead.
    assert len(reads) == 2, reads


@pytest.mark.parametrize("gone", [("clean.ray",), ("clean.cluster",), ("ray.delete",), ("down",)])
def test_data_guard_runs_written_after_the_export_are_seen_once_ray_is_gone(ran, gone):
    # storage.export, training goes on, Ray goes (its head pod with it), then --delete-data within 24 h: the
    # export's record alone said "verified" and Lustre went with the new checkpoints. The Ray release's guard
    # now records /data/runs as Ray goes, and that newer listing answers.
    assert ran.invoke("storage.export").code == 0
    plant_run(ran, "r2")  # written after the export
    (lustre_runs(ran) / "r1" / "step_20").mkdir()
    (lustre_runs(ran) / "r1" / "step_20" / "model.pt").write_bytes(b"w" * 4096)
    removed = ran.invoke(*gone, "--yes")
    assert removed.code == 0, removed.output[-3000:]
    for task in (("storage.delete",), ("down",)):
        before = len(ran.calls())
        done = ran.invoke(*task, "--yes", "--delete-data")
        assert done.code == 1, (task, done.output[-3000:])
        assert "r2" in done.stderr and "r1" in done.stderr and "taken as Ray went away" in done.stderr, task
        assert ran.resources().get("lustre") and ran.mutating_calls(before) == [], task


def test_data_guard_ray_gone_without_a_listing_trusts_no_older_export(ran):
    # Ray went away while its head could not be read (not Running): nothing it wrote last is known, so an
    # older export does not answer either.
    assert ran.invoke("storage.export").code == 0
    done = ran.invoke("clean.ray", "--yes", FAKECLOUD_FAIL="exec:9:permanent")  # every exec into the head fails
    assert done.code == 0, done.output[-3000:]
    refused = ran.invoke("storage.delete", "--yes", "--delete-data")
    assert refused.code == 1 and "without a listing of /data/runs" in refused.stderr, refused.output[-3000:]



@pytest.mark.parametrize("task", [("clean.ray",), ("ray.delete",), ("down",)])
def test_a_teardown_that_takes_ray_away_names_the_runs_it_stops(ran, task):
    """clean.ray, ray.delete and down stopped a training run without naming it (ray.deploy names it and asks;
    the transitional-states audit): they say which runs go with Ray, and how each resumes."""
    plant_run(ran, "live", running=True)
    done = ran.invoke(*task, "--yes")
    assert done.code == 0, done.output[-3000:]
    assert "note: this stops the running run(s) live with Ray; each resumes from its latest checkpoint with " \
           "`invoke job.submit JOB --id=ID` once Ray is back." in done.stderr, done.output[-3000:]


def test_ray_deploy_with_fewer_workers_asks_before_stopping_a_running_run(ran):
    # `ray.deploy --nodes=1` under a running run: KubeRay deletes a worker, and the run on it stops. It used to
    # go on without a word (the pods' spec hash leaves the count out, so nothing looked "stale").
    plant_run(ran, "live", running=True)
    before = len(ran.calls())
    refused = ran.invoke("ray.deploy", "--nodes=1", "--timeout=60")  # no terminal, no --yes: nobody to ask
    assert refused.code == 2, refused.output[-3000:]
    assert "from 2 to 1 GPU worker(s)" in refused.stderr and "live" in refused.stderr
    assert ran.mutating_calls(before) == []
    done = ran.invoke("ray.deploy", "--nodes=1", "--timeout=60", "--yes")
    assert done.code == 0 and "from 2 to 1 GPU worker(s)" in done.stderr, done.output[-3000:]


def test_data_guard_a_listing_taken_as_ray_went_no_longer_answers_once_ray_is_back(ran):
    # export, clean.ray (listing recorded), ray.deploy, a new run writes, the cluster goes outside the tool:
    # the earlier listing answered "verified" and Lustre went with the new run.
    assert ran.invoke("storage.export").code == 0
    assert ran.invoke("clean.ray", "--yes").code == 0
    deployed = ran.invoke("ray.deploy", "--timeout=60")
    assert deployed.code == 0, deployed.output[-3000:]
    plant_run(ran, "r2")
    _delete_the_cluster_elsewhere(ran)
    done = ran.invoke("storage.delete", "--yes", "--delete-data")
    assert done.code == 1 and "Ray was deployed again" in done.stderr, done.output[-3000:]
    assert ran.resources().get("lustre")


def test_data_guard_a_run_running_as_ray_went_blocks_until_an_export_after_it(ran):
    # What a run writes between the listing and its pod's end (a checkpoint on SIGTERM) is in no record.
    plant_run(ran, "live", running=True)
    assert ran.invoke("storage.export").code == 0
    assert ran.invoke("clean.ray", "--yes").code == 0
    (lustre_runs(ran) / "live" / "step_20").mkdir()
    (lustre_runs(ran) / "live" / "step_20" / "model.pt").write_bytes(b"w" * 512)
    done = ran.invoke("storage.delete", "--yes", "--delete-data")
    assert done.code == 1 and "live: running as Ray went away" in done.stderr, done.output[-3000:]
    assert ran.invoke("storage.export").code == 0  # an export after Ray went copies it all: that answers
    again = ran.invoke("storage.delete", "--yes", "--delete-data")
    assert again.code == 0, again.output[-3000:]


def test_data_guard_ctrl_c_at_its_question_mid_teardown_ends_the_run_and_keeps_the_data(ran):
    # The question is asked by a step of the teardown while its board is paused. Ctrl-C there ends the run (130)
    # with Lustre and the cluster kept, and the screen keeps the question: the board is not drawn again over it
    # (it restarted as the question ended, on the prompt's line, then was erased by the run's end).
    from support.fake import on_screen

    before = len(ran.calls())
    code, printed, _ = in_a_terminal(ran, ["down", "--delete-data", "--delete-unexported"], ["y", "^C"])
    screen = on_screen(printed)
    asked = screen.index("Delete Lustre instance nemo-lustre and lose the 1 run(s) listed above? [y/N]")
    assert (code, "interrupted" in screen[asked:], "step state elapsed" in screen[asked:]) == (130, True, False), \
        screen[-3000:]
    assert ran.resources().get("lustre") and ran.resources().get("cluster")
    assert not [c for c in ran.mutating_calls(before) if "lustre" in c["argv"]]


def test_data_guard_an_export_whose_objects_failed_to_copy_counts_for_nothing(ran):
    # A transfer can end done, without an error, with objects it failed to write (its counters, its error
    # summaries). Taken for "nothing new" after an export that wrote, it counted as that export, and the listing
    # taken as Ray went (naming r2, not exported) no longer answered: the delete went ahead.
    assert ran.invoke("storage.export").code == 0
    plant_run(ran, "r2")
    assert ran.invoke("clean.ray", "--yes").code == 0  # its listing as Ray went names r2
    failed = ran.invoke("storage.export", process=True, FAKECLOUD_LUSTRE_EXPORT_FAILS="1")
    assert failed.code == 1 and "objects failed to copy" in failed.stderr and "runs/r2/" in failed.stderr, \
        failed.output[-2000:]
    done = ran.invoke("storage.delete", "--yes", "--delete-data")
    assert done.code == 1 and "r2" in done.stderr, done.output[-2000:]
    assert ran.resources().get("lustre")


@pytest.mark.parametrize("edit", [b"not json", b'{"time": "2026-01-01T00:00:00"}', b"", b"\xff\xfe"])
def test_data_guard_a_check_record_it_cannot_read_trusts_nothing_until_an_export_after_it(ran, edit):
    # The record written as Ray was deployed again says no earlier listing or export answers for its runs. Edited
    # (by hand, another version), emptied or not UTF-8, it was dropped like a missing one, and the export before
    # it answered: r2, written since, went with Lustre. (Refusing for good left no way out but --delete-unexported:
    # nothing rewrites that record without a cluster.)
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    assert ran.invoke("storage.export").code == 0
    assert ran.invoke("clean.ray", "--yes").code == 0
    assert ran.invoke("ray.deploy", "--timeout=60").code == 0
    plant_run(ran, "r2")
    _delete_the_cluster_elsewhere(ran)
    client = storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": ran.env["STORAGE_EMULATOR_HOST"]})
    blob = client.bucket(BUCKET).blob("nemo-rl-gke/last-check.json")
    written = blob.download_as_text()
    assert '"deployed": true' in written
    blob.upload_from_string(edit)
    done = ran.invoke("storage.delete", "--yes", "--delete-data")
    assert done.code == 1 and "is not a record this tool can read" in done.stderr, done.output[-3000:]
    assert ran.resources().get("lustre")
    # What the refusal says to do works: an export after the unreadable record answers for every run.
    assert ran.invoke("storage.export").code == 0
    again = ran.invoke("storage.delete", "--yes", "--delete-data")
    assert again.code == 0 and not ran.resources().get("lustre"), again.output[-3000:]
