"""Re-runs finish and reports stay true, through the real `invoke` on the fake cloud with the GCS emulator:
a second teardown after a complete one exits 0; a Lustre instance still CREATING is kept (and reported) or
deleted like a ready one; an unreachable Cloud Storage endpoint fails in seconds, named, without a traceback."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from support.fake import FAKE_BIN, FakeCloud, plant_run, read_env_example

PROJECT = read_env_example()["PROJECT_ID"]


def _up(cloud: FakeCloud) -> None:
    done = cloud.invoke("up", "--yes")
    assert done.code == 0, done.output[-3000:]


@contextlib.contextmanager
def _refusing_port() -> Iterator[int]:
    """A port bound and not listening, for as long as the block runs: connections to it are refused, and no other
    process (another worker's emulator) can be handed it meanwhile, as it could once closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.mark.parametrize("task", [("down",), ("clean.storage",), ("storage.delete",)])
def test_data_second_teardown_with_delete_data_after_a_complete_one_exits_0(cloud, task):
    _up(cloud)
    first = cloud.invoke("down", "--yes", "--delete-data", "--delete-bucket")
    assert first.code == 0, first.output[-3000:]
    again = cloud.invoke(*task, "--yes", "--delete-data", "--delete-bucket")
    assert again.code == 0, again.output[-3000:]
    assert "Traceback" not in again.output and "kept" not in again.stderr


def _lustre_creating(cloud: FakeCloud) -> None:
    """Replace the instance by one that stays CREATING (as an interrupted `up` leaves it)."""
    gcloud = [str(FAKE_BIN / "gcloud"), "lustre", "instances"]
    where = ["nemo-lustre", "--location=us-central1-b", f"--project={PROJECT}"]
    env = cloud.process_env()
    subprocess.run([*gcloud, "delete", *where, "--quiet"], env=env, check=True, capture_output=True)
    subprocess.run([*gcloud, "create", *where, "--capacity-gib=18000", "--per-unit-storage-throughput=500",
                    "--filesystem=lustrefs", f"--network=projects/{PROJECT}/global/networks/default", "--async",
                    "--labels=managed-by=nemo-rl-gke,deployment=nemo-rl"],
                   env={**env, "FAKECLOUD_TIME_SCALE": "1"}, check=True, capture_output=True)


def test_data_down_keeps_a_creating_lustre_instance_and_says_so(cloud):
    _up(cloud)
    _lustre_creating(cloud)
    done = cloud.invoke("down", "--yes")
    assert done.code == 0, done.output[-3000:]
    (kept,) = [line for line in done.stderr.splitlines() if line.startswith("kept ")]
    assert "Lustre instance nemo-lustre" in kept and "main VPC default" in kept
    assert cloud.resources().get("lustre") and cloud.resources().get("network")


def test_data_down_delete_data_deletes_a_creating_lustre_instance(cloud):
    _up(cloud)
    _lustre_creating(cloud)
    done = cloud.invoke("down", "--yes", "--delete-data")
    assert done.code == 0, done.output[-3000:]
    assert "lustre" not in cloud.resources()


def test_data_a_creating_lustre_instance_needs_no_export_and_cannot_make_one(cloud):
    """An instance still CREATING (an interrupted `up`) was never ACTIVE, so never mounted: `down --delete-data`
    asked for `invoke storage.export` first, and the export failed with Lustre's bare FAILED_PRECONDITION (the
    transitional-states audit): a dead end but for --delete-unexported. The export now says the state and why; the
    guard deletes the instance without asking for one."""
    _up(cloud)
    plant_run(cloud, "r1")  # what a listing of /data/runs would name as unexported
    _lustre_creating(cloud)
    export = cloud.invoke("storage.export")
    assert export.code == 1, export.output[-3000:]
    assert ("Lustre instance nemo-lustre is CREATING, not ACTIVE: it is still being made (an interrupted `up`): it "
            "holds nothing yet") in export.stderr, export.output[-3000:]
    done = cloud.invoke("down", "--yes", "--delete-data")
    assert done.code == 0, done.output[-3000:]
    assert "Lustre instance nemo-lustre is still CREATING: it was never ready" in done.stderr
    assert "lustre" not in cloud.resources()


@pytest.mark.parametrize("task", [("storage.status",), ("storage.export",), ("down", "--yes", "--delete-data")])
def test_data_unreachable_storage_endpoint_fails_in_seconds_naming_it(cloud, task):
    _up(cloud)
    with _refusing_port() as port:
        endpoint = f"http://127.0.0.1:{port}"
        before = len(cloud.calls())
        started = time.monotonic()
        done = cloud.invoke(*task, STORAGE_EMULATOR_HOST=endpoint)
        seconds = time.monotonic() - started
    assert (done.code, "Traceback" in done.output) == (1, False), done.output[-3000:]
    assert f"Cloud Storage at {endpoint} did not answer" in done.stderr and seconds < 30
    assert [c for c in cloud.mutating_calls(before) if "delete" in " ".join(c["argv"])] == []


def test_data_status_shows_a_creating_lustre_instance_as_present(cloud):
    _up(cloud)
    _lustre_creating(cloud)
    done = cloud.invoke("status")
    assert done.code == 0, done.output[-3000:]
    (row,) = [line for line in done.stdout.splitlines() if "Lustre instance nemo-lustre" in line]
    assert "present" in row and "absent" not in row


def _lustre_delete_stopped(cloud: FakeCloud, scale: str) -> None:
    """gcloud's delete of the instance stopped (Ctrl-C, a closed laptop) after Google Cloud took it: the instance
    is DELETING for the delete's time (480 s × scale)."""
    import json

    where = ["nemo-lustre", "--location=us-central1-b", f"--project={PROJECT}"]
    gcloud = [str(FAKE_BIN / "gcloud"), "lustre", "instances"]
    deleting = subprocess.Popen([*gcloud, "delete", *where, "--quiet"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env={**cloud.process_env(), "FAKECLOUD_TIME_SCALE": scale})

    def state() -> str:
        done = subprocess.run([*gcloud, "describe", *where, "--format=json"], env=cloud.process_env(),
                              capture_output=True, text=True, check=True)
        return str(json.loads(done.stdout)["state"])

    deadline = time.monotonic() + 30
    while state() != "DELETING" and time.monotonic() < deadline:  # Google Cloud took the delete
        time.sleep(0.05)
    deleting.kill()
    deleting.wait()
    assert state() == "DELETING"


def test_up_after_a_lustre_delete_stopped_mid_way_says_google_cloud_is_deleting_it(cloud):
    """The instance is DELETING, and its files go with it. The next `up` said "waiting will not change that", as
    for a SUSPENDED instance: waiting is all there is to do (then it makes a new one)."""
    _up(cloud)
    _lustre_delete_stopped(cloud, "1")
    done = cloud.invoke("up", "--yes")
    assert done.code == 1, done.output[-3000:]
    assert "Lustre instance nemo-lustre is DELETING: Google Cloud is deleting it" in done.stderr, done.stderr
    assert "`gcloud lustre instances describe nemo-lustre --location=us-central1-b` answers NOT_FOUND" in done.stderr
    assert "waiting will not change that" not in done.stderr


def test_down_delete_data_after_a_lustre_delete_stopped_mid_way_ends_it_without_asking_for_an_export(cloud):
    """The instance is DELETING: its files are going whatever the run does, and an export of it fails (not
    ACTIVE). The guard asked for `invoke storage.export` first, a dead end; the teardown now ends the delete."""
    _up(cloud)
    plant_run(cloud, "r1")  # not in the bucket
    _lustre_delete_stopped(cloud, "0.03")  # DELETING for 14 s: down lists it before that, under load too
    done = cloud.invoke("down", "--yes", "--delete-data")
    assert done.code == 0, done.output[-3000:]
    assert "Lustre instance nemo-lustre is DELETING already" in done.stderr and "storage.export" not in done.stderr
    assert "lustre" not in cloud.resources()
