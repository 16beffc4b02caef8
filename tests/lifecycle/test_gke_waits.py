"""gcloud stops waiting on a GKE operation after its own limit (node-pools create 30 minutes, clusters resize 20,
clusters create 60) and exits 1 with "… is still running", while GKE goes on. A GPU pool waiting for capacity
takes longer than 30 minutes: `up` waits for it instead of failing. On the fake cloud, through invoke, with
gcloud's real limits and GKE taking longer (FAKECLOUD_GKE_OPERATION_SECONDS, typical seconds × the time scale)."""

from __future__ import annotations

from support.fake import FakeCloud


def _calls(cloud: FakeCloud, *words: str) -> list[dict]:
    return [c for c in cloud.calls() if c["tool"] == "gcloud" and c["argv"][:len(words)] == list(words)]


def test_cluster_create_waits_for_a_gpu_pool_gcloud_stopped_waiting_for(cloud):
    done = cloud.invoke("net.create", "cluster.create", runner={"poll_seconds": 0.1}, FAKECLOUD_TIME_SCALE="0.001",
                        FAKECLOUD_GKE_OPERATION_SECONDS="node-pools create=2400")  # gcloud gives up at 1800
    assert done.code == 0, done.output[-3000:]
    assert "GPU node pool" in done.stderr and "gcloud stopped waiting for it (its own limit)" in done.stderr
    (create,) = _calls(cloud, "container", "node-pools", "create")
    assert create["exit"] == 1
    described = [c for c in _calls(cloud, "container", "node-pools", "describe") if c["start"] > create["end"]]
    assert described and described[-1]["exit"] == 0
    assert _calls(cloud, "container", "clusters", "get-credentials")  # and the steps after the pool ran
    again = cloud.invoke("cluster.create")
    assert again.code == 0 and not _calls(cloud, "container", "node-pools", "create")[1:], again.output[-2000:]


def test_up_resize_goes_on_when_gcloud_stops_waiting_for_it(cloud):
    assert cloud.invoke("up", "--yes").code == 0
    done = cloud.invoke("up", "--yes", "--nodes=3", "--resize", FAKECLOUD_TIME_SCALE="0.0005",
                        FAKECLOUD_GKE_OPERATION_SECONDS="clusters resize=1500")  # gcloud gives up at 1200
    assert done.code == 0, done.output[-3000:]
    assert "gcloud stopped waiting for the GPU pool's resize to 3 nodes (its own limit); GKE goes on with it" \
           in done.stderr
    (resize,) = _calls(cloud, "container", "clusters", "resize")
    assert resize["exit"] == 1
    status = cloud.invoke("status", GPU_NODES="3")
    assert "Ray sees 24 of 24 GPUs" in status.stdout, status.output[-2000:]


def test_up_on_a_cluster_gke_is_still_deleting_says_to_wait_not_to_delete_it(cloud):
    # A `down` stopped mid-way (Ctrl-C, a closed laptop): GKE goes on deleting the cluster, STOPPING. The next `up`
    # meets it; `invoke clean.cluster` (the advice for a cluster in ERROR) would only be refused while GKE works.
    import json

    assert cloud.invoke("up", "--yes").code == 0
    state_file = cloud.state_dir / "resources.json"
    state = json.loads(state_file.read_text())
    (key,) = state["cluster"]
    state["cluster"][key]["status"] = "STOPPING"
    state_file.write_text(json.dumps(state))
    done = cloud.invoke("cluster.create")
    assert done.code == 1, done.output[-3000:]
    assert "cluster nemo-rl is STOPPING: GKE is deleting it" in done.stderr
    assert "`gcloud container operations list --project=my-nemo-project` shows the delete" in done.stderr
    assert "invoke clean.cluster" not in done.stderr
