"""`up` on what exists but differs from the settings: exit 2 before any change, naming what differs and what
to do; a node count is applied only with --resize (asked for, `--yes` answers), read back from the pool's
instance groups (not the stale initialNodeCount); `plan` prices what exists. On the fake cloud, through invoke."""

from __future__ import annotations

import json

from support.fake import FakeCloud


def _up(cloud: FakeCloud, *args: str) -> None:
    done = cloud.invoke("up", "--yes", *args)
    assert done.code == 0, done.output[-3000:]


def _pool(cloud: FakeCloud) -> dict:
    (pool,) = cloud.resources()["nodepool"].values()
    return pool


def test_up_drift_gpu_type_refused_before_any_change(cloud):
    _up(cloud)
    before = len(cloud.calls())
    done = cloud.invoke("up", "--yes", "--gpu=h200")
    assert done.code == 2, done.output[-2000:]
    assert "GPU node pool: a4-highgpu-8g (b200), the settings say a3-ultragpu-8g (h200)" in done.stderr
    assert "nothing was changed" in done.stderr and "invoke clean.cluster --yes" in done.stderr
    assert "GPU_TYPE / --gpu" in done.stderr and "Traceback" not in done.output
    assert cloud.mutating_calls(since=before) == []


def test_up_drift_spot_and_mode_are_named(cloud):
    _up(cloud)  # .env.example: Spot, standard
    done = cloud.invoke("up", "--yes", "--reservation=my-a4")
    assert done.code == 2, done.output[-2000:]
    assert "GPU node pool: Spot VMs, the settings say reservation my-a4" in done.stderr
    assert "SPOT, RESERVATION / --spot, --reservation" in done.stderr
    done = cloud.invoke("up", "--yes", "--mode=autopilot")
    assert done.code == 2, done.output[-2000:]
    assert "GKE cluster: it is standard, the settings say autopilot" in done.stderr


def test_up_drift_node_count_needs_resize(cloud):
    _up(cloud)
    before = len(cloud.calls())
    done = cloud.invoke("up", "--yes", "--nodes=3")
    assert done.code == 2, done.output[-2000:]
    assert "GPU node pool: 2 nodes, the settings say 3" in done.stderr
    assert "add --resize to resize the GPU pool to 3 nodes (`invoke up --nodes=3 --resize`" in done.stderr
    assert cloud.mutating_calls(since=before) == []


def test_up_resize_without_terminal_and_without_yes_exits_2_before_resizing(cloud):
    _up(cloud)
    before = len(cloud.calls())
    done = cloud.invoke("up", "--nodes=3", "--resize")
    assert done.code == 2 and "Resize the GPU pool to 3 nodes" in done.stderr, done.output[-2000:]
    assert cloud.mutating_calls(since=before) == []


def test_up_resize_applies_the_node_count_and_upgrades_ray(cloud):
    _up(cloud)
    before = len(cloud.calls())
    _up(cloud, "--nodes=3", "--resize")
    changes = [" ".join(c["argv"][:3]) for c in cloud.mutating_calls(since=before)]
    assert "container clusters resize" in changes and "upgrade --install nemo-rl" in " ".join(changes), changes
    pool = _pool(cloud)
    assert pool["initialNodeCount"] == 2  # the API keeps the creation size; the instance group has 3
    # read back from the instance group: no drift any more, and Ray sees 3 × 8 GPUs
    again = cloud.invoke("up", "--yes", "--nodes=3")
    assert again.code == 0, again.output[-2000:]
    status = cloud.invoke("status", GPU_NODES="3")
    assert "Ray sees 24 of 24 GPUs" in status.stdout, status.output[-2000:]
    priced = cloud.invoke("status", "--json")  # the .env says 2 nodes: status prices the 3 that run
    pool = next(row for row in json.loads(priced.stdout)["resources"] if row["name"] == "cluster.gpu-pool")
    assert pool["cost_per_hour"] == 171.0, pool
    plan = cloud.invoke("plan", "--json")  # the .env still says 2
    document = json.loads(plan.stdout)
    assert [(d["field"], d["have"], d["want"]) for d in document["drift"]] == [("nodes", "3", "2"),
                                                                               ("workers", "3", "2")]


def test_up_leaves_fewer_ray_workers_with_a_note_and_resize_upgrades_them(cloud):
    _up(cloud)
    done = cloud.invoke("ray.deploy", "--nodes=1")  # fewer workers than the pool, on purpose
    assert done.code == 0, done.output[-2000:]
    plan = cloud.invoke("plan")
    assert plan.code == 0, plan.output[-2000:]
    assert "leave, but it differs: 1 GPU worker(s), the settings say 2" in plan.stdout
    assert "`invoke up` leaves them so" in plan.stdout and "`invoke ray.deploy` upgrades" in plan.stdout
    before = len(cloud.calls())
    done = cloud.invoke("up", "--yes")  # not a refusal: the count is a choice ray.deploy offers
    assert done.code == 0, done.output[-2000:]
    assert "note: the Ray cluster has 1 GPU worker(s), the settings say 2; up leaves it so" in done.stderr
    assert cloud.mutating_calls(since=before) == []
    done = cloud.invoke("up", "--resize", "--yes")
    assert done.code == 0, done.output[-2000:]
    assert "will upgrade the Ray cluster from 1 to 2 GPU workers" in done.stderr
    changes = [" ".join(c["argv"][:3]) for c in cloud.mutating_calls(since=before)]
    assert changes == ["upgrade --install nemo-rl"], changes  # the pool has its 2 nodes: not resized
    status = cloud.invoke("status")
    assert "Ray sees 16 of 16 GPUs" in status.stdout, status.output[-2000:]
    assert json.loads(cloud.invoke("plan", "--json").stdout)["drift"] == []


def test_up_resize_on_autopilot_upgrades_the_ray_workers(cloud):
    _up(cloud, "--mode=autopilot", "--nodes=1")
    done = cloud.invoke("up", "--mode=autopilot", "--nodes=2", "--yes")
    assert done.code == 0, done.output[-2000:]  # no pool to differ: Autopilot's node count is Ray's workers
    assert "note: the Ray cluster has 1 GPU worker(s), the settings say 2" in done.stderr
    before = len(cloud.calls())
    _up(cloud, "--mode=autopilot", "--nodes=2", "--resize")
    changes = [" ".join(c["argv"][:3]) for c in cloud.mutating_calls(since=before)]
    assert changes == ["upgrade --install nemo-rl"], changes
    status = cloud.invoke("status", CLUSTER_MODE="autopilot", GPU_NODES="2")
    assert "Ray sees 16 of 16 GPUs" in status.stdout, status.output[-2000:]


def test_plan_prices_what_exists_not_the_settings(cloud):
    from nemo_rl_gke import cost
    from nemo_rl_gke.settings import load

    _up(cloud)
    done = cloud.invoke("plan", "--json", "--gpu=h200")
    assert done.code == 0, done.output[-2000:]
    document = json.loads(done.stdout)
    s = load(allow_example=False, cwd=cloud.workdir, environ={})
    b200_now = cost.estimate(s).total  # what runs: the B200 setup of .env
    assert abs(document["cost_per_hour"]["now"] - b200_now) < 0.01, document["cost_per_hour"]
    assert document["cost_per_hour"]["all_up"] != document["cost_per_hour"]["now"]
    assert [d["field"] for d in document["drift"]] == ["gpu"]


def test_up_resize_leaves_pods_of_an_older_spec_with_a_note_and_ray_deploy_restarts_them(cloud):
    # KubeRay v1.4.2 reconciles the worker count only: the upgrade adds a worker from the new spec and leaves
    # the head and the first worker on the spec of `ray.deploy --head-cpu=10`. `up` says so; ray.deploy restarts.
    _up(cloud)
    done = cloud.invoke("ray.deploy", "--nodes=1", "--head-cpu=10")
    assert done.code == 0, done.output[-2000:]  # restarts `up`'s pods: their head had the default size
    before = len(cloud.calls())
    done = cloud.invoke("up", "--resize", "--yes")
    assert done.code == 0, done.output[-2000:]
    assert "note: 2 Ray pod(s) run an older spec than the settings'" in done.stderr
    assert "`invoke ray.deploy` restarts Ray with the new one" in done.stderr
    assert not any(c["argv"][1:3] == ["delete", "pods"] for c in cloud.calls()[before:] if c["tool"] == "kubectl")
    restarted = cloud.invoke("ray.deploy", "--yes")
    assert restarted.code == 0, restarted.output[-2000:]
    assert "2 of Ray's pods were started from another spec" in restarted.stderr
    again = cloud.invoke("up", "--resize", "--yes")
    assert again.code == 0 and "older spec" not in again.stderr, again.output[-2000:]


def test_cluster_create_refuses_another_gpu_mode_or_count_before_any_change(cloud):
    # It used to say "GPU node pool (2 × a3-ultragpu-8g): exists" over a b200 pool, and with --mode=autopilot
    # applied the Autopilot NCCL installer into the Standard cluster.
    _up(cloud)
    for flags, says in ((["--gpu=h200"], "GPU node pool: a4-highgpu-8g (b200), the settings say a3-ultragpu-8g"),
                        (["--mode=autopilot"], "GKE cluster: it is standard, the settings say autopilot"),
                        (["--nodes=3"], "GPU node pool: 2 nodes, the settings say 3")):
        before = len(cloud.calls())
        done = cloud.invoke("cluster.create", *flags, process=flags == ["--mode=autopilot"])
        assert done.code == 2, (flags, done.output[-2000:])
        assert says in done.stderr and "nothing was changed" in done.stderr, flags
        assert cloud.mutating_calls(since=before) == [], flags
        if flags == ["--nodes=3"]:  # cluster.create has no --resize: the hint names the command that has it
            assert "resize the GPU pool to 3 nodes with `invoke up --nodes=3 --resize` (asks first)" in done.stderr
            assert "add --resize" not in done.stderr
    assert cloud.invoke("cluster.create").code == 0  # as set: everything exists


def test_ray_deploy_refuses_another_gpu_or_mode_before_any_change(cloud):
    # Ray's workers select nodes by the settings' GPU and mode: on a b200 pool, h200 workers never start.
    _up(cloud)
    for env, says in (({"GPU_TYPE": "h200"}, "GPU node pool: a4-highgpu-8g (b200), the settings say a3-ultragpu-8g"),
                      ({"CLUSTER_MODE": "autopilot"}, "GKE cluster: it is standard, the settings say autopilot")):
        before = len(cloud.calls())
        done = cloud.invoke("ray.deploy", "--timeout=30", **env)
        assert done.code == 2, (env, done.output[-2000:])
        assert says in done.stderr and "nothing was changed" in done.stderr, env
        assert cloud.mutating_calls(since=before) == [], env
    fewer = cloud.invoke("ray.deploy", "--nodes=1", "--timeout=30", GPU_TYPE="h200")
    assert fewer.code == 2 and "the settings say a3-ultragpu-8g" in fewer.stderr, fewer.output[-2000:]
    assert "nodes, the settings say" not in fewer.stderr  # fewer workers on purpose: not a difference it names


def test_up_and_cluster_create_compare_a_pool_still_provisioning(cloud):
    # An interrupted `up` leaves a B200 pool PROVISIONING (GKE goes on creating it). `up --gpu=h200` used to skip
    # the comparison (the pool was not "there" yet), wait for it, then deploy H200 workers no node could take.
    from support.fake import leave_gpu_pool_provisioning

    _up(cloud)
    leave_gpu_pool_provisioning(cloud)  # the client goes (Ctrl-C); GKE goes on: PROVISIONING for 10 minutes
    for task in (["up", "--yes", "--gpu=h200"], ["cluster.create", "--gpu=h200"]):
        before = len(cloud.calls())
        done = cloud.invoke(*task, timeout=60)
        assert done.code == 2, (task, done.output[-2000:])
        assert "GPU node pool: a4-highgpu-8g (b200), the settings say a3-ultragpu-8g (h200)" in done.stderr, task
        assert cloud.mutating_calls(since=before) == [], task
    plan = cloud.invoke("plan", "--json")  # same GPU, still PROVISIONING: no node count to compare yet
    assert plan.code == 0 and '"field": "nodes"' not in plan.stdout, plan.output[-2000:]


def test_status_and_plan_count_a_pool_still_provisioning_and_what_it_bills(cloud):
    """A GPU pool an interrupted `up` left PROVISIONING bills its VMs, yet status showed it absent, without cost:
    "now: about $9.54/hour" for a deployment at $123.54, and plan's "what exists now" the same (the
    transitional-states audit)."""
    import json

    from support.fake import leave_gpu_pool_provisioning

    _up(cloud)
    leave_gpu_pool_provisioning(cloud)
    done = cloud.invoke("status", "--json")
    assert done.code == 0, done.output[-2000:]
    document = json.loads(done.stdout)
    pool = next(row for row in document["resources"] if row["name"] == "cluster.gpu-pool")
    assert pool["state"] == "present" and pool["cost_per_hour"] == 114.0, pool
    assert document["cost_per_hour_now"] > 120, document["cost_per_hour_now"]
    plan = cloud.invoke("plan", "--json")
    assert plan.code == 0, plan.output[-2000:]
    assert json.loads(plan.stdout)["cost_per_hour"]["now"] > 120, plan.stdout[-2000:]


def test_up_again_after_ray_never_became_ready_waits_for_it_again(cloud):
    """An `up` whose Ray never became Ready (stopped in its wait by a Ctrl-C, a timeout, or workers a quota refused)
    left the RayCluster: the next `up` counted it as done ("29 exists ... up: done") with the head Pending and no
    worker, and the job that followed failed (the transitional-states audit). KubeRay says whether a RayCluster's
    pods were all Ready once (state "ready", RayClusterProvisioned): until then `up` deploys it again and waits."""
    quota = "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=4"
    first = cloud.invoke("up", "--yes", FAKECLOUD_RAY_WORKERS_REFUSED=quota)
    assert first.code == 1 and "KubeRay cannot create its pods" in first.stderr, first.output[-3000:]
    before = len(cloud.calls())
    again = cloud.invoke("up", "--yes")  # the quota raised meanwhile
    assert again.code == 0, again.output[-3000:]
    assert "Ray cluster nemo-rl (2 × 8 b200 GPUs): created" in again.stderr, again.output[-3000:]
    assert [c for c in cloud.mutating_calls(since=before) if c["tool"] == "helm"], "Ray was not deployed again"
    status = cloud.invoke("status", "--json")
    assert status.code == 0 and json.loads(status.stdout)["ray"]["ready_pods"] == 3, status.output[-3000:]
    before = len(cloud.calls())
    third = cloud.invoke("up", "--yes")  # Ready once: done, whatever comes later
    assert third.code == 0 and cloud.mutating_calls(since=before) == [], third.output[-3000:]
