"""net.create and cluster.create against the fake cloud: idempotent re-runs and recovery from failures."""

from __future__ import annotations

import pytest

from support.fake import TEST_HF_TOKEN, TEST_WANDB_KEY, FakeCloud, end_gke_creates, gke_ends_creates_once

MUTATING_STEPS = [
    "gcloud compute networks create default",
    "gcloud compute networks create nemo-gvnic-net",
    "gcloud compute networks subnets create nemo-gvnic-sub",
    "gcloud compute firewall-rules create",
    "gcloud compute networks create nemo-rdma-net",
    "gcloud compute networks subnets create nemo-rdma-sub-3",
    "gcloud container clusters create",
    "gcloud container node-pools create",
    "kubectl --context=gke_my-nemo-project_us-central1_nemo-rl apply --filename=https",
    "kubectl --context=gke_my-nemo-project_us-central1_nemo-rl apply --filename=-",
]


def bring_up(fake, *extra, **env):
    return fake.invoke("net.create", "cluster.create", "--gpu=b200", *extra, **env)


def test_create_twice_second_run_makes_no_create_call(fake):
    first = bring_up(fake)
    assert first.code == 0, first.output
    assert len(fake.mutating_calls()) == 1 + 1 + 1 + 1 + 1 + 8 + 1 + 1 + 2  # 17: every resource once
    seen = len(fake.calls())
    second = bring_up(fake)
    assert second.code == 0, second.output
    assert fake.mutating_calls(since=seen) == []


def test_create_builds_the_whole_cluster_in_the_fake_cloud(fake):
    assert bring_up(fake, "--nodes=3").code == 0
    state = fake.resources()
    assert len(state["subnet"]) == 9 and len(state["firewall"]) == 1 and len(state["network"]) == 3
    (pool,) = state["nodepool"].values()
    assert pool["initialNodeCount"] == 3 and len(pool["networkConfig"]["additionalNodeNetworkConfigs"]) == 9
    k8s = state["k8s:gke_my-nemo-project_us-central1_nemo-rl"]
    assert sum(key.startswith("GKENetworkParamSet/") for key in k8s) == 9
    assert "DaemonSet/kube-system/nccl-rdma-installer" in k8s


@pytest.fixture(scope="module")
def clean_resources(tmp_path_factory):
    """What a clean bring-up leaves in the fake cloud, computed once."""
    clean = FakeCloud(tmp_path_factory.mktemp("clean"))
    clean.write_env()
    assert bring_up(clean).code == 0
    return clean.resources()


@pytest.mark.parametrize("pattern", MUTATING_STEPS)
def test_failure_at_a_step_then_rerun_completes_without_duplicates(fake, pattern, clean_resources):
    failed = bring_up(fake, FAKECLOUD_FAIL=f"{pattern}:1:permanent")
    assert failed.code != 0
    assert "Traceback" not in failed.output and "injected permanent failure" in failed.stderr
    again = bring_up(fake)
    assert again.code == 0, again.output
    creates = [" ".join(c["argv"][:5]) for c in fake.calls() if c["mutating"] and c["exit"] == 0]
    assert len(creates) == len(set(creates)), "a resource was created twice"
    assert fake.resources() == clean_resources


def test_transient_failure_is_retried_and_succeeds(fake):
    done = bring_up(fake, FAKECLOUD_FAIL="gcloud container node-pools create:2:transient")
    assert done.code == 0, done.output
    assert "retrying" in done.stderr
    attempts = [c for c in fake.calls() if c["argv"][:3] == ["container", "node-pools", "create"]]
    assert [c["exit"] for c in attempts] == [1, 1, 0]


def test_delete_removes_everything_it_created(fake):
    assert bring_up(fake).code == 0
    done = fake.invoke("cluster.delete", "--yes")
    assert done.code == 0, done.output
    done = fake.invoke("net.delete", "--yes")
    assert done.code == 0, done.output
    assert fake.resources() == {}


def test_net_delete_keeps_a_network_we_did_not_create(fake):
    fake.write_env(NETWORK="users-own-vpc")
    import subprocess

    env = fake.process_env()
    subprocess.run(["gcloud", "compute", "networks", "create", "users-own-vpc", "--project=my-nemo-project",
                    "--subnet-mode=auto"], env=env, check=True, capture_output=True)
    assert fake.invoke("net.create").code == 0
    done = fake.invoke("net.delete", "--yes")
    assert done.code == 0, done.output
    assert "kept VPC users-own-vpc" in done.stderr
    assert list(fake.resources()["network"]) == ["my-nemo-project/users-own-vpc"]


def test_delete_without_terminal_or_yes_refuses_with_exit_2(fake):
    assert bring_up(fake).code == 0
    seen = len(fake.calls())
    done = fake.invoke("cluster.delete")
    assert done.code == 2 and "--yes" in done.stderr
    assert fake.mutating_calls(since=seen) == []


def test_real_run_secrets_never_reach_argv_or_output(fake):
    # The run loads the tokens with the rest of .env (net and cluster never need them): none may leak into a
    # command line or the output, e.g. through a settings summary.
    env_file = (fake.workdir / ".env").read_text()
    assert TEST_HF_TOKEN in env_file and TEST_WANDB_KEY in env_file
    done = bring_up(fake)
    assert done.code == 0, done.output[-2000:]
    logged = " ".join(" ".join(c["argv"]) for c in fake.calls())
    for secret in (TEST_HF_TOKEN, TEST_WANDB_KEY):
        assert secret not in done.output and secret not in logged


def test_fake_cluster_delete_whose_client_is_gone_removes_cluster_and_pool_together(fake):
    import os
    import subprocess

    from support.fake import FAKE_BIN

    assert bring_up(fake).code == 0
    read, write = os.pipe()
    os.close(read)  # the client is gone: the fake's stderr is a broken pipe, as after a SIGKILL of invoke
    try:
        subprocess.run([str(FAKE_BIN / "gcloud"), "container", "clusters", "delete", "nemo-rl",
                        "--project=my-nemo-project", "--location=us-central1", "--quiet"],
                       env=fake.process_env(), stdout=subprocess.DEVNULL, stderr=write, check=False, timeout=120)
    finally:
        os.close(write)
    state = fake.resources()
    assert ("cluster" in state, "nodepool" in state) == (False, False)


SCALE = {"FAKECLOUD_TIME_SCALE": "0.005"}  # the tasks' commands
# The interrupted create's own scale: 7 minutes (cluster), 10 (pool) of PROVISIONING, which GKE ends when the test
# says (`gke_ends_creates_once`): the run meets it PROVISIONING however loaded the machine, and waits no longer.
CREATE_SCALE = {"FAKECLOUD_TIME_SCALE": "1"}


def _gke(call, group, verb):
    return call["tool"] == "gcloud" and call["argv"][:3] == ["container", group, verb]


def described_after_a_refused_create(group):
    """The run met GKE's create: its own create was refused (it exists), then a describe found it PROVISIONING."""
    def met(calls):
        refused = next((i for i, c in enumerate(calls) if _gke(c, group, "create") and c["exit"]), None)
        return refused is not None and any(_gke(c, group, "describe") for c in calls[refused + 1:])

    return met


def polled_after_refused_deletes(calls):
    """The teardown waits on GKE's create: GKE refused more deletes (it is still working on the cluster) than the
    runner's own tries of one call, so the wait has begun and polls."""
    from nemo_rl_gke.runner import Runner

    refused = [c for c in calls if (_gke(c, "clusters", "delete") or _gke(c, "node-pools", "delete")) and c["exit"]]
    return len(refused) > Runner.attempts


GROUPS = {"cluster": "clusters", "node pool": "node-pools"}  # gcloud's


def interrupted_create(fake, kind, **gke):
    """Net and cluster as `up` leaves them when Ctrl-C hits the cluster's or the pool's create after GKE took it:
    that create goes on in GKE, PROVISIONING. Returns the settings. gke: the fake's environment for that create."""
    import signal
    import subprocess
    import time

    from nemo_rl_gke.commands import gcloud
    from nemo_rl_gke.settings import load
    from support.fake import FAKE_BIN

    assert fake.invoke("net.create", **SCALE).code == 0
    if kind == "node pool":
        assert fake.invoke("cluster.create", "--gpu=b200", FAKECLOUD_FAIL="node-pools create:1:permanent",
                           **SCALE).code != 0
    s = load(allow_example=False, cwd=fake.workdir, environ={})
    argv = gcloud.cluster_create(s) if kind == "cluster" else gcloud.node_pool_create(s)
    asked = subprocess.Popen([str(FAKE_BIN / "gcloud"), *argv[1:]], env={**fake.process_env(), **CREATE_SCALE, **gke},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    states = {"cluster": "cluster", "node pool": "nodepool"}  # the fake's kinds
    deadline = time.monotonic() + 30
    while not fake.resources().get(states[kind]) and time.monotonic() < deadline:  # GKE took the create
        time.sleep(0.05)
    asked.send_signal(signal.SIGKILL)
    asked.wait()
    (made,) = fake.resources()[states[kind]].values()
    assert made["status"] == "PROVISIONING"
    return s


@pytest.mark.parametrize("kind", ["cluster", "node pool"])
def test_rerun_after_an_interrupted_create_waits_for_gke_instead_of_failing(fake, kind):
    """A create interrupted after GKE took it (Ctrl-C, a closed laptop) goes on in GKE: the cluster or pool is
    PROVISIONING when `up` runs again. That run must wait for it, not count it done and fail on the next step
    ("Operation ... is currently creating cluster") nor create it twice."""
    s = interrupted_create(fake, kind)
    with gke_ends_creates_once(fake, described_after_a_refused_create(GROUPS[kind])):
        done = fake.invoke("cluster.create", "--gpu=b200", **SCALE)
    assert done.code == 0, done.output[-3000:]
    title = f"cluster {s.CLUSTER_NAME}" if kind == "cluster" else "GPU node pool gpu-pool"
    assert f"{title} is PROVISIONING: an earlier run's create goes on in GKE; waiting for it" in done.stderr
    assert len(fake.resources()["cluster"]) == 1 and len(fake.resources()["nodepool"]) == 1


@pytest.mark.parametrize("ended", ["before the re-run", "while it waits"])
@pytest.mark.parametrize("kind", ["cluster", "node pool"])
def test_rerun_after_an_interrupted_create_that_failed_in_gke_says_gkes_reason(fake, kind, ended):
    """The create went on in GKE and ended in ERROR: the re-run says so with GKE's words, which v1 puts in the
    conditions (statusMessage is deprecated), and stops instead of waiting an hour: at its first look, or at the
    poll that finds it."""
    why = "Instances in zone us-central1-b are currently unavailable (injected stockout)"
    s = interrupted_create(fake, kind, FAKECLOUD_GKE_CREATE_ERROR=why)
    if ended == "before the re-run":
        end_gke_creates(fake)
        done = fake.invoke("cluster.create", "--gpu=b200", **SCALE)
    else:
        with gke_ends_creates_once(fake, described_after_a_refused_create(GROUPS[kind])):
            done = fake.invoke("cluster.create", "--gpu=b200", **SCALE)
    assert done.code == 1, done.output[-3000:]
    title = f"cluster {s.CLUSTER_NAME}" if kind == "cluster" else "GPU node pool gpu-pool"
    assert f"{title} is ERROR: {why};" in done.stderr, done.stderr[-3000:]
    assert ("waiting for it" in done.stderr) == (ended == "while it waits"), done.stderr[-3000:]


@pytest.mark.parametrize("kind", ["cluster", "node pool"])
def test_a_create_gke_ended_in_error_fails_with_gkes_reason_though_gcloud_exits_0(fake, kind):
    """gcloud 528 takes a GKE operation for failed only by its statusMessage, which v1 deprecates: a create GKE
    ended in ERROR (a stockout) with its reason in the conditions only exits 0, "Created". `up` counted the
    cluster or pool made and went on to wait for Ray on nodes that never come; now that create fails with GKE's
    words, and nothing is built on it. Through the real `invoke` command."""
    why = "Instances in zone us-central1-b are currently unavailable (injected stockout)"
    assert fake.invoke("net.create", **SCALE).code == 0
    if kind == "node pool":  # the cluster made as usual, the pool not yet
        assert fake.invoke("cluster.create", "--gpu=b200", FAKECLOUD_FAIL="node-pools create:1:permanent",
                           **SCALE).code != 0
    before = len(fake.calls())
    done = fake.invoke("up", "--yes", FAKECLOUD_GKE_CREATE_ERROR=why, process=True, **SCALE)
    assert done.code == 1, done.output[-3000:]
    title = "cluster nemo-rl" if kind == "cluster" else "GPU node pool gpu-pool"
    assert f"{title} is ERROR: {why};" in done.stderr, done.stderr[-3000:]
    creates = [c["argv"][:3] for c in fake.calls()[before:] if c["argv"][:1] == ["container"] and "create" in c["argv"]]
    assert creates == [["container", GROUPS[kind], "create"]], creates  # made once, not asked again
    assert not [c for c in fake.calls()[before:] if c["tool"] == "helm"]  # no Ray on it


@pytest.mark.parametrize(("kind", "teardown"), [("cluster", ("down", "--yes")), ("node pool", ("down", "--yes")),
                                                ("cluster", ("clean.cluster", "--yes")),
                                                ("node pool", ("cluster.delete", "--yes"))])
def test_teardown_after_an_interrupted_create_waits_for_gke_then_deletes(fake, kind, teardown):
    """GKE refuses a cluster's delete while it still creates the cluster or a pool ("Operation ... is currently
    creating cluster", "Cluster is running incompatible operation"), for minutes: the runner's 30 s of retries
    are not enough. The teardown waits for GKE, then deletes, instead of failing with the cluster billing."""
    s = interrupted_create(fake, kind)
    with gke_ends_creates_once(fake, polled_after_refused_deletes):
        done = fake.invoke(*teardown, **SCALE)
    assert done.code == 0, done.output[-3000:]
    waiting = done.stderr.split(f"cluster {s.CLUSTER_NAME}: GKE is still working on it", 1)
    assert len(waiting) == 2, done.stderr[-3000:]
    # While waiting: one delete per poll, not the runner's five tries (30 s each poll on a real machine).
    assert "transient error from gcloud" not in waiting[1]
    state = fake.resources()
    assert "cluster" not in state and "nodepool" not in state


def test_cluster_keeps_gke_default_addons_beside_ray_and_lustre(fake):
    # gcloud's --addons enables what it names and disables every other add-on, GKE's defaults included: naming
    # only RayOperator and LustreCsiDriver turned off HTTP load balancing and the Horizontal Pod Autoscaler.
    assert bring_up(fake).code == 0
    (cluster,) = fake.resources()["cluster"].values()
    addons = cluster["addonsConfig"]
    assert addons["httpLoadBalancing"] == {"disabled": False}
    assert addons["horizontalPodAutoscaling"] == {"disabled": False}
    assert addons["rayOperatorConfig"] == {"enabled": True}
    assert addons["lustreCsiDriverConfig"] == {"enabled": True, "enableLegacyLustrePort": True}
