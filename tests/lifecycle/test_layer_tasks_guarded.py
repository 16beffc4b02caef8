"""The layer tasks that change things (net/cluster create and delete, ray.deploy and ray.delete) run under the
deployment's lock and with teardown's rules, through invoke on the fake cloud with the GCS emulator: a lease held
on another machine refuses each before any change and --force-unlock takes it over; net.delete keeps the main
VPC under a Lustre instance that is still CREATING and deletes it when there is none."""

from __future__ import annotations

import subprocess

import pytest
from test_data_reruns import _lustre_creating
from test_owner_lock import _plant_lease

from support.fake import FAKE_BIN, read_env_example

PROJECT = read_env_example()["PROJECT_ID"]
CHANGING = [("net.create",), ("cluster.create",), ("ray.deploy",), ("net.delete", "--yes"),
            ("cluster.delete", "--yes"), ("ray.delete", "--yes")]


def _up(cloud) -> None:
    done = cloud.invoke("up", "--yes")
    assert done.code == 0, done.output[-3000:]


@pytest.mark.parametrize("argv", CHANGING, ids=[a[0] for a in CHANGING])
def test_layer_task_refuses_while_another_machine_holds_the_lock(cloud, tmp_path, argv):
    _up(cloud)
    _plant_lease(cloud, expires_in=3600)
    before = len(cloud.calls())
    done = cloud.invoke(*argv, XDG_CACHE_HOME=str(tmp_path / "another-home"))
    assert done.code == 1, done.output[-3000:]
    assert "ci-runner-7" in done.stderr and "--force-unlock" in done.stderr
    assert cloud.mutating_calls(before) == []


def test_layer_task_force_unlock_takes_over_and_says_whose(cloud):
    _up(cloud)
    _plant_lease(cloud, expires_in=3600)
    done = cloud.invoke("ray.delete", "--yes", "--force-unlock")
    assert done.code == 0, done.output[-3000:]
    assert "--force-unlock: took over the live lock of `invoke up` on ci-runner-7" in done.stderr


def test_layer_net_delete_keeps_the_main_vpc_under_a_creating_lustre_instance(cloud):
    _up(cloud)
    for task in ("ray.delete", "cluster.delete"):
        assert cloud.invoke(task, "--yes").code == 0
    _lustre_creating(cloud)
    done = cloud.invoke("net.delete", "--yes")
    assert done.code == 0, done.output[-3000:]
    assert list(cloud.resources()["network"]) == [f"{PROJECT}/default"]
    assert "main VPC default" in done.stderr.split("will keep", 1)[1].splitlines()[0]


def test_layer_net_delete_without_lustre_deletes_the_main_vpc_too(cloud):
    assert cloud.invoke("net.create").code == 0
    done = cloud.invoke("net.delete", "--yes")
    assert done.code == 0, done.output[-3000:]
    assert "network" not in cloud.resources()


def test_layer_deletes_without_terminal_or_yes_exit_2_before_any_call(cloud):
    for task in ("net.delete", "cluster.delete", "ray.delete"):
        before = len(cloud.calls())
        done = cloud.invoke(task)
        assert done.code == 2 and "--yes" in done.stderr, done.output
        assert len(cloud.calls()) == before


def test_layer_creating_lustre_fixture_really_is_creating(cloud):
    _up(cloud)
    _lustre_creating(cloud)
    out = subprocess.run([str(FAKE_BIN / "gcloud"), "lustre", "instances", "describe", "nemo-lustre",
                          "--location=us-central1-b", f"--project={PROJECT}", "--format=value(state)"],
                         env=cloud.process_env(), capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "CREATING"


@pytest.mark.parametrize("argv", [("clean.storage", "--yes"), ("storage.delete", "--yes")])
def test_storage_teardown_with_ray_still_mounting_the_claim_refuses_before_any_change(cloud, argv):
    # kubectl's delete of a claim a pod still mounts waits for the pod (pvc-protection): up to a week.
    _up(cloud)
    before = len(cloud.calls())
    done = cloud.invoke(*argv)
    assert done.code == 1, done.output[-3000:]
    assert "the Lustre claim lustre-pvc is in use by 3 pod(s): nemo-rl-" in done.stderr
    assert "`invoke clean.ray --yes` first" in done.stderr and "Nothing was deleted" in done.stderr
    assert cloud.mutating_calls(since=before) == []
    assert cloud.invoke("clean.ray", "--yes").code == 0
    after = cloud.invoke(*argv)
    assert after.code == 0, after.output[-3000:]
    assert not any(k.startswith("PersistentVolumeClaim/") for k in
                   cloud.resources().get("k8s:gke_my-nemo-project_us-central1_nemo-rl", {}))


def test_down_deletes_the_claim_after_ray_without_refusing(cloud):
    _up(cloud)
    done = cloud.invoke("down", "--yes")
    assert done.code == 0 and "in use by" not in done.stderr, done.output[-3000:]


@pytest.mark.parametrize("argv", [("clean.ray", "--yes"), ("ray.delete", "--yes")])
def test_ray_teardown_on_a_machine_without_the_context_fetches_it_and_uninstalls(cloud, argv):
    # helm: 'Kubernetes cluster unreachable: context "X" does not exist' reads as "not found": clean.ray said
    # "nothing of ours is left" while the release (and its GPUs) ran on. The cluster stays, so the layer
    # teardown fetches the context first, as storage.delete did.
    _up(cloud)
    context = "gke_my-nemo-project_us-central1_nemo-rl"
    gone = subprocess.run([str(FAKE_BIN / "kubectl"), "config", "delete-context", context], env=cloud.process_env(),
                          capture_output=True, text=True, check=False)
    assert gone.returncode == 0, gone.stderr
    done = cloud.invoke(*argv)
    assert done.code == 0, done.output[-2000:]
    assert "get-credentials" in done.stderr and "will delete (1): Ray cluster nemo-rl" in done.stderr
    assert not cloud.resources().get(f"helm:{context}")


@pytest.mark.parametrize("argv", [("clean.ray", "--yes"), ("ray.delete", "--yes"), ("ray.status",)])
def test_ray_tasks_on_a_machine_without_the_auth_plugin_fail_saying_so_and_never_call_ray_gone(cloud, argv):
    # helm and kubectl without gke-gcloud-auth-plugin: "getting credentials: exec: executable
    # gke-gcloud-auth-plugin not found" read as "not found": clean.ray and ray.delete counted the release absent
    # and said "nothing of ours is left" while Ray (and its GPUs) ran on; ray.status said "not deployed".
    _up(cloud)
    context = f"gke_{PROJECT}_us-central1_nemo-rl"
    done = cloud.invoke(*argv, process=True, FAKECLOUD_NO_AUTH_PLUGIN="1")
    assert done.code == 1, done.output[-3000:]
    assert "install gke-gcloud-auth-plugin (`gcloud components install gke-gcloud-auth-plugin`" in done.stderr
    assert "nothing of ours is left" not in done.stderr and "not deployed" not in done.output, done.output[-3000:]
    assert cloud.resources().get(f"helm:{context}"), "the release must still be there"
    assert cloud.invoke("ray.status").code == 0  # with the plugin, all is as it was


def test_storage_teardown_of_an_object_a_finalizer_holds_ends_with_what_holds_it(cloud):
    # kubectl's delete waits up to a week for an object a finalizer holds (here a controller that is gone): the
    # teardown must end, after our --timeout, saying what holds it.
    from fakecloud.core import State

    _up(cloud)
    assert cloud.invoke("clean.ray", "--yes").code == 0
    state, kind = State(cloud.state_dir), f"k8s:gke_{PROJECT}_us-central1_nemo-rl"
    key = "Secret/default/nemo-rl-secrets"
    secret = state.get(kind, key)
    secret["metadata"]["finalizers"] = ["example.com/gone-controller"]
    state.put(kind, key, secret)
    done = cloud.invoke("clean.storage", "--yes")
    assert done.code == 1, done.output[-3000:]
    assert "timed out waiting for the condition on secrets/nemo-rl-secrets" in done.stderr
    assert ("secrets/nemo-rl-secrets is marked for deletion but something holds it: its finalizers say what "
            f"(`kubectl --context=gke_{PROJECT}_us-central1_nemo-rl --namespace=default get secrets/nemo-rl-secrets "
            "'--output=jsonpath={.metadata.finalizers}'`)") in done.stderr


def test_storage_teardown_refused_for_a_jobs_pod_names_the_job_to_delete_not_the_pod(cloud):
    # A Job's pod mounting the claim (a model download of a PREFETCH_MODELS emptied since, or the user's own):
    # `kubectl delete pod` would only have the Job make it again.
    from fakecloud.core import State

    _up(cloud)
    assert cloud.invoke("clean.ray", "--yes").code == 0
    state, kind = State(cloud.state_dir), f"k8s:gke_{PROJECT}_us-central1_nemo-rl"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "old-download-x7k2p", "namespace": "default",
                        "labels": {"batch.kubernetes.io/job-name": "old-download", "job-name": "old-download"}},
           "spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "lustre-pvc"}}]},
           "status": {"phase": "Running"}}
    with state.locked():
        state.put(kind, "Pod/default/old-download-x7k2p", pod)
    done = cloud.invoke("clean.storage", "--yes")
    assert done.code == 1, done.output[-3000:]
    assert "in use by 1 pod(s): old-download-x7k2p" in done.stderr
    assert "delete their Job first (`kubectl delete job old-download --namespace=default`" in done.stderr
    assert "kubectl delete pod" not in done.stderr


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_storage_teardown_refused_for_a_pod_that_ended_but_still_holds_the_claim(cloud, phase):
    """Kubernetes' claim protection counts every pod placed on a node that mounts the claim, whatever its phase
    (pvc_protection_controller.go podUsesPVC): a user's evaluation pod that finished holds it until deleted. The
    guard left ended pods out, so the claim's delete waited its 10 minutes and the teardown failed half done."""
    from fakecloud.core import State

    _up(cloud)
    assert cloud.invoke("clean.ray", "--yes").code == 0
    state, kind = State(cloud.state_dir), f"k8s:gke_{PROJECT}_us-central1_nemo-rl"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "my-eval", "namespace": "default"},
           "spec": {"nodeName": "gke-nemo-rl-default-pool-1", "volumes": [
               {"name": "data", "persistentVolumeClaim": {"claimName": "lustre-pvc"}}]},
           "status": {"phase": phase}}
    with state.locked():
        state.put(kind, "Pod/default/my-eval", pod)
    before = len(cloud.calls())
    done = cloud.invoke("clean.storage", "--yes", process=True)  # the real `invoke` command
    assert done.code == 1, done.output[-3000:]
    assert "in use by 1 pod(s): my-eval" in done.stderr and "Nothing was deleted" in done.stderr, done.stderr[-3000:]
    assert "`kubectl delete pod NAME --namespace=default`; one that has ended holds the claim too" in done.stderr
    assert cloud.mutating_calls(since=before) == []


@pytest.mark.parametrize("argv", [("clean.storage", "--yes"), ("storage.delete", "--yes")])
def test_storage_teardown_right_after_clean_ray_waits_for_pods_on_their_way_out(cloud, argv):
    # helm's uninstall does not wait for the Ray pods: right after `clean.ray` they are still there, being
    # deleted, mounting the claim. `clean.storage` must not refuse for them (the error would say to run
    # `clean.ray`, just run); the claim's delete waits for them to let go.
    from fakecloud.core import State

    _up(cloud)
    assert cloud.invoke("clean.ray", "--yes").code == 0
    state, kind = State(cloud.state_dir), f"k8s:gke_{PROJECT}_us-central1_nemo-rl"
    going = {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "nemo-rl-head-going", "namespace": "default",
                          "deletionTimestamp": "2026-12-03T23:00:00Z",
                          "labels": {"ray.io/cluster": "nemo-rl", "ray.io/node-type": "head"}},
             "spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "lustre-pvc"}}]},
             "status": {"phase": "Running"}}
    state.put(kind, "Pod/default/nemo-rl-head-going", going)
    done = cloud.invoke(*argv)
    assert done.code == 0, done.output[-3000:]
    assert "in use by" not in done.stderr
    assert not any(k.startswith(("PersistentVolumeClaim/", "Pod/")) for k in cloud.resources().get(kind, {}))


SHUTDOWN = {"FAKECLOUD_TIME_SCALE": "0.01", "FAKECLOUD_POD_SHUTDOWN_SECONDS": "400"}  # Ray pods go 4 s later


def _pods(cloud) -> dict[str, dict]:
    kind = f"k8s:gke_{PROJECT}_us-central1_nemo-rl"
    return {k: v for k, v in cloud.resources().get(kind, {}).items() if k.startswith("Pod/")}


def test_fake_helm_uninstall_leaves_the_ray_pods_going_for_their_shutdown(cloud):
    _up(cloud)
    assert cloud.invoke("clean.ray", "--yes", **SHUTDOWN).code == 0
    going = _pods(cloud)
    assert going and all(p["metadata"].get("deletionTimestamp") for p in going.values())


def test_clean_ray_then_clean_storage_at_once_deletes_the_claim_once_the_pods_are_gone(cloud):
    # What our own refusal tells users to do, run as they would: `clean.ray --yes && clean.storage --yes`.
    _up(cloud)
    assert cloud.invoke("clean.ray", "--yes", **SHUTDOWN).code == 0
    assert _pods(cloud)
    done = cloud.invoke("clean.storage", "--yes", FAKECLOUD_TIME_SCALE="0.01")
    assert done.code == 0, done.output[-3000:]
    assert "in use by" not in done.stderr
    assert _pods(cloud) == {}
    kind = f"k8s:gke_{PROJECT}_us-central1_nemo-rl"
    assert not any(k.startswith("PersistentVolumeClaim/") for k in cloud.resources().get(kind, {}))


def test_ray_delete_then_deploy_at_once_sends_jobs_to_the_new_head(cloud):
    _up(cloud)
    old = {p["metadata"]["name"] for p in _pods(cloud).values()}
    # The old pods outlive the new deploy's wait (30 s against 6 s).
    assert cloud.invoke("ray.delete", "--yes", **{**SHUTDOWN, "FAKECLOUD_POD_SHUTDOWN_SECONDS": "3000"}).code == 0
    deployed = cloud.invoke("ray.deploy", FAKECLOUD_TIME_SCALE="0.01")
    assert deployed.code == 0, deployed.output[-3000:]
    new = {p["metadata"]["name"] for p in _pods(cloud).values() if not p["metadata"].get("deletionTimestamp")}
    assert new and not new & old
    assert {p["metadata"]["name"] for p in _pods(cloud).values()} & old  # still going
    before = len(cloud.calls())
    assert cloud.invoke("job.list").code == 0
    execs = [c["argv"] for c in cloud.calls()[before:] if c["tool"] == "kubectl" and "exec" in c["argv"]]
    assert execs and all(not set(argv) & old for argv in execs), execs
    status = cloud.invoke("ray.status")
    assert status.code == 0 and not any(name in status.stdout for name in old), status.stdout


@pytest.mark.parametrize("mode", ["standard", "autopilot"])
@pytest.mark.parametrize("task", ["net.delete", "clean.net"])
def test_the_networks_alone_are_not_deleted_from_under_the_cluster(cloud, task, mode):
    """Standard: it deleted the firewall rule, then failed on every subnet (in use by the GPU pool), exit 1, the
    cluster left without its rule. Autopilot: it deleted the subnets and VPCs from under Ray's nodes and the
    network mapping, exit 0. Now: exit 2 before any delete, naming the way that works."""
    done = cloud.invoke("up", "--yes", CLUSTER_MODE=mode)
    assert done.code == 0, done.output[-3000:]
    before = len(cloud.mutating_calls())
    dry = cloud.invoke("--dry", task, "--yes", CLUSTER_MODE=mode)  # asks nothing, so says what a real run does
    assert dry.code == 0 and "a real run first refuses (exit 2, nothing deleted) while cluster nemo-rl" in dry.stdout
    refused = cloud.invoke(task, "--yes", CLUSTER_MODE=mode)
    assert refused.code == 2, refused.output[-3000:]
    assert (f"error: {task} would delete the networks cluster nemo-rl stands on" in refused.stderr
            and "`invoke cluster.delete --yes` first" in refused.stderr), refused.stderr[-3000:]
    assert len(cloud.mutating_calls()) == before
    assert cloud.invoke("cluster.delete", "--yes", CLUSTER_MODE=mode).code == 0
    done = cloud.invoke(task, "--yes", CLUSTER_MODE=mode)  # the cluster gone: the networks go (the main VPC stays
    assert done.code == 0, done.output[-3000:]              # under the kept Lustre)
    assert sorted(n["name"] for n in cloud.resources()["network"].values()) == ["default"]


def test_autopilot_down_deletes_the_subnets_only_once_the_cluster_and_its_nodes_are_gone(cloud):
    """Autopilot makes a node for each Ray worker that asks for our networks, and its NICs hold our subnets (the
    fake refuses their delete as GCP does: "already being used by" the node). down deleted them beside the
    cluster's delete, from under those nodes; now after it."""
    assert cloud.invoke("up", "--yes", CLUSTER_MODE="autopilot").code == 0
    held = subprocess.run([str(FAKE_BIN / "gcloud"), "compute", "networks", "subnets", "delete", "nemo-gvnic-sub",
                           f"--project={PROJECT}", "--region=us-central1", "--quiet"], env=cloud.process_env(),
                          cwd=cloud.workdir, capture_output=True, text=True, timeout=60)
    assert held.returncode == 1 and "is already being used by 'projects/" in held.stderr, held.stderr
    done = cloud.invoke("down", "--yes", CLUSTER_MODE="autopilot")
    assert done.code == 0, done.output[-3000:]
    left = cloud.resources()
    assert "cluster" not in left and "subnet" not in left, sorted(left)


def test_the_networks_are_not_deleted_under_the_cluster_when_gkes_list_misses_a_location(cloud):
    """An incomplete cluster list is no answer: the cluster is asked by name instead (the guard let the delete
    through, and it failed on every subnet after deleting the firewall rule)."""
    assert cloud.invoke("up", "--yes").code == 0
    before = len(cloud.mutating_calls())
    refused = cloud.invoke("net.delete", "--yes", FAKECLOUD_FAIL="container clusters list:1:partial")
    assert refused.code == 2, refused.output[-3000:]
    assert "would delete the networks cluster nemo-rl stands on" in refused.stderr, refused.stderr[-3000:]
    assert len(cloud.mutating_calls()) == before
