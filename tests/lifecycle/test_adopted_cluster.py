"""A GKE cluster made another way (the tutorial's: no Lustre driver, no Workload Identity) and adopted by name:
`up`, `plan` and every task that builds on the cluster name what it lacks and refuse (exit 2) before any change;
the `gcloud container clusters update` commands they print turn it on, after which `up` goes through. On the
fake cloud, through invoke; the fake GKE keeps addonsConfig and networkConfig as gcloud 528 sets them."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from support.fake import FakeCloud, gke_ends_creates_once, leave_gpu_pool_provisioning, read_env_example

ENV = read_env_example()
CHART = str(Path(__file__).resolve().parents[2] / "manifests" / "ray-cluster")
TUTORIAL_STANDARD = ["--enable-dataplane-v2", "--enable-ip-alias", "--enable-multi-networking", "--addons=RayOperator",
                     "--num-nodes=1"]
TUTORIAL_AUTOPILOT = ["--enable-multi-networking", "--enable-ray-operator"]


def _gcloud(cloud: FakeCloud, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=cloud.process_env(), cwd=cloud.workdir, capture_output=True, text=True,
                          timeout=60)


def _tutorial_cluster(cloud: FakeCloud, *, autopilot: bool = False) -> None:
    done = cloud.invoke("net.create")
    assert done.code == 0, done.output[-2000:]
    verb, flags = ("create-auto", TUTORIAL_AUTOPILOT) if autopilot else ("create", TUTORIAL_STANDARD)
    made = _gcloud(cloud, ["gcloud", "container", "clusters", verb, ENV["CLUSTER_NAME"],
                           f"--location={ENV['CONTROL_PLANE_LOCATION']}", f"--project={ENV['PROJECT_ID']}", *flags])
    assert made.returncode == 0, made.stderr


def _updates(text: str) -> list[list[str]]:
    return [command.split(" ") for command in re.findall(r"`(gcloud container clusters update [^`]*)`", text)]


def test_up_refuses_the_tutorials_cluster_and_its_updates_fix_it(cloud):
    _tutorial_cluster(cloud)
    before = len(cloud.calls())
    done = cloud.invoke("up", "--yes", process=True)  # the real `invoke` command
    assert done.code == 2, done.output[-3000:]
    assert "GKE cluster: the Managed Lustre CSI driver is off" in done.stderr
    assert "GKE cluster: the legacy Lustre port (6988) is off" in done.stderr
    assert "Workload Identity is off" in done.stderr and "nothing was changed" in done.stderr
    assert "Ray operator" not in done.stderr and "multi-networking" not in done.stderr  # the tutorial has them
    assert cloud.mutating_calls(since=before) == []
    updates = _updates(done.stderr)
    assert [argv[-1] for argv in updates] == ["--enable-legacy-lustre-port"]  # gcloud turns the driver on with it
    for argv in updates:
        ran = _gcloud(cloud, argv)
        assert ran.returncode == 0, ran.stderr
    again = cloud.invoke("up", "--yes")
    assert again.code == 0, again.output[-3000:]
    assert "note: Workload Identity is off" in again.stderr and "--workload-pool=" in again.stderr
    plan = cloud.invoke("plan")  # only the note is left: plan says how to turn it on, not "To resolve: ."
    assert "`invoke up` leaves them so. To resolve: `gcloud container clusters update" in plan.stdout, plan.output
    (cluster,) = cloud.resources()["cluster"].values()
    assert cluster["addonsConfig"]["lustreCsiDriverConfig"] == {"enabled": True, "enableLegacyLustrePort": True}


def test_layer_tasks_refuse_to_build_on_the_cluster_before_any_change(cloud):
    _tutorial_cluster(cloud)
    for task in (["cluster.create"], ["storage.create"], ["ray.deploy"]):
        before = len(cloud.calls())
        done = cloud.invoke(*task)
        assert done.code == 2, (task, done.output[-3000:])
        assert "the Managed Lustre CSI driver is off" in done.stderr, task
        assert "nothing was changed" in done.stderr.lower(), task
        assert "--enable-legacy-lustre-port`" in done.stderr and "Traceback" not in done.output
        assert cloud.mutating_calls(since=before) == [], task
    credentials = cloud.invoke("cluster.credentials")  # kubectl access to any cluster is still fine
    assert credentials.code == 0, credentials.output[-2000:]


def test_plan_names_what_the_cluster_lacks(cloud):
    _tutorial_cluster(cloud)
    plan = cloud.invoke("plan", "--json")
    assert plan.code == 0, plan.output[-2000:]
    drift = json.loads(plan.stdout)["drift"]
    assert [(d["field"], d["feature"]) for d in drift] == [("feature", "lustre-csi-driver"),
                                                            ("feature", "legacy-lustre-port"),
                                                            ("advisory", "workload-identity")]
    text = cloud.invoke("plan")
    assert "`invoke up` refuses until they agree" in text.stdout, text.output[-2000:]


def test_the_tutorials_autopilot_cluster_lacks_only_the_lustre_driver(cloud):
    cloud.write_env(CLUSTER_MODE="autopilot")
    _tutorial_cluster(cloud, autopilot=True)
    done = cloud.invoke("up", "--yes")
    assert done.code == 2, done.output[-3000:]
    assert [argv[-1] for argv in _updates(done.stderr)] == ["--enable-legacy-lustre-port"]
    assert "Workload Identity" not in done.stderr  # Autopilot always has it


def test_a_cluster_without_dataplane_v2_can_only_be_rebuilt(cloud):
    done = cloud.invoke("net.create")
    assert done.code == 0, done.output[-2000:]
    made = _gcloud(cloud, ["gcloud", "container", "clusters", "create", ENV["CLUSTER_NAME"],
                           f"--location={ENV['CONTROL_PLANE_LOCATION']}", f"--project={ENV['PROJECT_ID']}",
                           "--addons=RayOperator,LustreCsiDriver", "--enable-legacy-lustre-port",
                           f"--workload-pool={ENV['PROJECT_ID']}.svc.id.goog"])
    assert made.returncode == 0, made.stderr
    done = cloud.invoke("up", "--yes")
    assert done.code == 2, done.output[-3000:]
    assert "GKE Dataplane V2 is off" in done.stderr and "multi-networking is off" in done.stderr
    assert _updates(done.stderr) == [] and "only a new cluster has GKE Dataplane V2" in done.stderr
    # it is not ours, so our teardown would keep it: the hint is gcloud's delete, not `invoke clean.cluster`
    assert f"`gcloud container clusters delete {ENV['CLUSTER_NAME']} --location=" in done.stderr
    assert "invoke clean.cluster" not in done.stderr
    # as GKE answers: multi-networking needs Dataplane V2
    tried = _gcloud(cloud, ["gcloud", "container", "clusters", "update", ENV["CLUSTER_NAME"],
                            f"--location={ENV['CONTROL_PLANE_LOCATION']}", f"--project={ENV['PROJECT_ID']}",
                            "--enable-multi-networking"])
    assert tried.returncode == 1 and "Dataplane V2" in tried.stderr
    storage = cloud.invoke("storage.create")  # it needs only the Lustre driver and port, which this cluster has
    assert storage.code == 0, storage.output[-2000:]


def test_fake_cluster_without_the_ray_operator_or_multi_networking_lacks_their_kinds(cloud):
    # What our refusal spares the user, as the real tools answer it: helm cannot map a RayCluster without the
    # Ray operator's CRD, kubectl cannot map a GKENetworkParamSet without multi-networking's.
    done = cloud.invoke("net.create")
    assert done.code == 0, done.output[-2000:]
    where = [f"--location={ENV['CONTROL_PLANE_LOCATION']}", f"--project={ENV['PROJECT_ID']}"]
    made = _gcloud(cloud, ["gcloud", "container", "clusters", "create", ENV["CLUSTER_NAME"], *where,
                           "--addons=LustreCsiDriver", "--enable-legacy-lustre-port"])
    assert made.returncode == 0, made.stderr
    assert _gcloud(cloud, ["gcloud", "container", "clusters", "get-credentials", ENV["CLUSTER_NAME"],
                           *where]).returncode == 0
    context = f"--context=gke_{ENV['PROJECT_ID']}_{ENV['CONTROL_PLANE_LOCATION']}_{ENV['CLUSTER_NAME']}"
    helm = subprocess.run(["helm", "upgrade", "--install", "nemo-rl", CHART, "--kube-context=" + context[10:],
                           "--namespace=default", "--values=-"], input=_values(cloud),
                          env=cloud.process_env(), cwd=cloud.workdir, capture_output=True, text=True, timeout=60)
    assert helm.returncode == 1, helm.stderr
    assert 'Error: unable to build kubernetes objects from release manifest: resource ' \
           'mapping not found for name: "nemo-rl" namespace: "default" from "": no matches for kind "RayCluster" in ' \
           'version "ray.io/v1"' in helm.stderr
    mapping = ("apiVersion: networking.gke.io/v1\nkind: GKENetworkParamSet\nmetadata: {name: gvnic-1}\n"
               "spec: {vpc: v, vpcSubnet: s, deviceMode: NetDevice}\n---\n"
               "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: default}\n")
    kubectl = subprocess.run(["kubectl", context, "apply", "--filename=-"], input=mapping, env=cloud.process_env(),
                             cwd=cloud.workdir, capture_output=True, text=True, timeout=60)
    assert kubectl.returncode == 1 and "configmap/other created" in kubectl.stdout, kubectl.stderr
    assert 'no matches for kind "GKENetworkParamSet" in version "networking.gke.io/v1"' in kubectl.stderr
    # A get of a type the server does not serve fails whole, --ignore-not-found or not (kubectl drops NotFound
    # only), and prints nothing of what it found.
    got = subprocess.run(["kubectl", context, "get", "configmap/other", "rayclusters.ray.io/nemo-rl",
                          "--namespace=default", "--ignore-not-found", "--output=json"], env=cloud.process_env(),
                         cwd=cloud.workdir, capture_output=True, text=True, timeout=60)
    assert (got.returncode, got.stdout) == (1, ""), got
    assert got.stderr.strip() == 'error: the server doesn\'t have a resource type "rayclusters"'
    down = cloud.invoke("down", "--yes")  # our mapping cannot be there: absent, not kept for want of an answer
    assert down.code == 0, down.output[-3000:]
    assert "· network mapping gvnic-1, rdma-0..7: absent" in down.stderr, down.stderr[-3000:]
    assert cloud.invoke("net.create").code == 0
    up = cloud.invoke("up", "--yes")
    assert up.code == 2, up.output[-3000:]
    for feature in ("the Ray operator add-on is off", "GKE Dataplane V2 is off", "multi-networking is off"):
        assert feature in up.stderr, feature


def _values(cloud: FakeCloud, **worker: object) -> str:
    """The values ray.deploy sends (the fake's upgrade checks them with the real helm), the worker's changed."""
    from nemo_rl_gke import raychart, render
    from nemo_rl_gke.settings import load

    values = raychart.values(load(allow_example=False, cwd=cloud.workdir, environ={}))
    values["worker"].update(worker)
    return render.go_yaml(values)


def test_fake_gpu_workers_whose_selector_no_node_matches_never_schedule(cloud):
    # As the scheduler answers: a worker asking for H200 nodes on a B200 pool (or an Autopilot compute class on
    # a Standard cluster) stays Pending, Unschedulable.
    done = cloud.invoke("up", "--yes")
    assert done.code == 0, done.output[-2000:]
    context = f"gke_{ENV['PROJECT_ID']}_{ENV['CONTROL_PLANE_LOCATION']}_{ENV['CLUSTER_NAME']}"
    for selector in ({"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"},
                     {"cloud.google.com/gke-accelerator": "nvidia-b200",
                      "cloud.google.com/compute-class": "Performance"}):
        helm = subprocess.run(["helm", "upgrade", "--install", "other", CHART, f"--kube-context={context}",
                               "--namespace=default", "--values=-"],
                              input=_values(cloud, replicas=1, nodeSelector=selector),
                              env=cloud.process_env(), cwd=cloud.workdir, capture_output=True, text=True, timeout=60)
        assert helm.returncode == 0, helm.stderr
        pods = subprocess.run(["kubectl", f"--context={context}", "get", "pods", "--namespace=default",
                               "--selector=ray.io/cluster=other,ray.io/node-type=worker", "--output=json"],
                              env=cloud.process_env(), cwd=cloud.workdir, capture_output=True, text=True, timeout=60)
        (pod,) = json.loads(pods.stdout)["items"]
        (condition,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
        assert condition["reason"] == "Unschedulable" and "didn't match Pod's node affinity/selector" in \
            condition["message"], (selector, condition)
        subprocess.run(["helm", "uninstall", "other", f"--kube-context={context}", "--namespace=default"],
                       env=cloud.process_env(), cwd=cloud.workdir, capture_output=True, text=True, timeout=60)


def _up_then_turn_off(cloud: FakeCloud, addon: str) -> None:
    """`up`, then the add-on turned off by hand (gcloud container clusters update)."""
    done = cloud.invoke("up", "--yes")
    assert done.code == 0, done.output[-2000:]
    where = [f"--location={ENV['CONTROL_PLANE_LOCATION']}", f"--project={ENV['PROJECT_ID']}"]
    off = _gcloud(cloud, ["gcloud", "container", "clusters", "update", ENV["CLUSTER_NAME"], *where,
                          f"--update-addons={addon}=DISABLED"])
    assert off.returncode == 0, off.stderr


def test_lustre_driver_turned_off_later_is_refused_and_the_fakes_pods_cannot_mount(cloud):
    _up_then_turn_off(cloud, "LustreCsiDriver")
    before = len(cloud.calls())
    deploy = cloud.invoke("ray.deploy", "--timeout=30")
    assert deploy.code == 2 and "the Managed Lustre CSI driver is off" in deploy.stderr, deploy.output[-2000:]
    assert cloud.mutating_calls(since=before) == []
    # the fake, as a kubelet without the driver: a pod mounting the claim waits in ContainerCreating
    context = f"gke_{ENV['PROJECT_ID']}_{ENV['CONTROL_PLANE_LOCATION']}_{ENV['CLUSTER_NAME']}"
    helm = subprocess.run(["helm", "upgrade", "--install", "other", CHART, f"--kube-context={context}",
                           "--namespace=default", "--values=-"],
                          input=_values(cloud, replicas=1),
                          env=cloud.process_env(), cwd=cloud.workdir, capture_output=True, text=True, timeout=60)
    assert helm.returncode == 0, helm.stderr
    pods = subprocess.run(["kubectl", f"--context={context}", "get", "pods", "--namespace=default",
                           "--selector=ray.io/cluster=other", "--output=json"],
                          env=cloud.process_env(), cwd=cloud.workdir, capture_output=True, text=True, timeout=60)
    states = [status["state"] for pod in json.loads(pods.stdout)["items"]
              for status in pod["status"].get("containerStatuses", [])]
    assert states and all(s == {"waiting": {"reason": "ContainerCreating"}} for s in states), states


def _adopted(cloud: FakeCloud, *, autopilot: bool = False) -> None:
    """The tutorial's cluster, turned right by the commands `up` prints, then built on by `up`."""
    if autopilot:
        cloud.write_env(CLUSTER_MODE="autopilot")
    _tutorial_cluster(cloud, autopilot=autopilot)
    refused = cloud.invoke("up", "--yes")
    assert refused.code == 2, refused.output[-2000:]
    for argv in _updates(refused.stderr):
        assert _gcloud(cloud, argv).returncode == 0
    done = cloud.invoke("up", "--yes")
    assert done.code == 0, done.output[-3000:]


def test_down_keeps_a_cluster_made_another_way_and_deletes_only_what_we_added(cloud):
    _adopted(cloud)
    down = cloud.invoke("down", "--yes", process=True)  # the real `invoke` command
    assert down.code == 0, down.output[-3000:]
    assert "keeping cluster" in down.stderr and "no managed-by=nemo-rl-gke label" in down.stderr
    assert "the NCCL installer and the network mapping in it stay" in down.stderr
    assert f"`gcloud container clusters delete {ENV['CLUSTER_NAME']} " in down.stderr
    left = cloud.resources()
    assert [c["name"] for c in left["cluster"].values()] == [ENV["CLUSTER_NAME"]]
    assert "nodepool" not in left  # our GPU pool (about $114/h) went, with its own delete
    assert sorted(n["name"] for n in left["network"].values()) == [ENV["NETWORK"]]  # the VPC the cluster is on
    assert "helm:" not in " ".join(left)  # Ray (ours) went
    assert "nothing of ours is left except what is kept on purpose" in down.stderr
    assert "Also kept what they need: VPC peering" in down.stderr  # what the kept Lustre needs, not the cluster
    again = cloud.invoke("down", "--yes")  # a re-run keeps it again and deletes nothing
    assert again.code == 0 and "keeping cluster" in again.stderr, again.output[-2000:]
    assert [c["name"] for c in cloud.resources()["cluster"].values()] == [ENV["CLUSTER_NAME"]]


def test_down_beside_a_cluster_up_refused_says_only_what_is_in_it(cloud):
    """`up` refused the tutorial's cluster before any change: no NCCL installer, no network mapping of ours in it.
    down keeps the cluster and does not say they stay in it (it said so whatever was there)."""
    _tutorial_cluster(cloud)
    assert cloud.invoke("up", "--yes").code == 2
    down = cloud.invoke("down", "--yes")
    assert down.code == 0, down.output[-3000:]
    assert "keeping cluster" in down.stderr, down.stderr
    (kept,) = [line for line in down.stderr.splitlines() if line.startswith("keeping cluster")]
    assert "NCCL installer" not in kept and "network mapping" not in kept, kept
    layer = cloud.invoke("clean.cluster", "--yes")  # its own teardown: no "so does" after "no teardown deletes it"
    assert layer.code == 0, layer.output[-3000:]
    (kept,) = [line for line in layer.stderr.splitlines() if line.startswith("keeping cluster")]
    assert "so does" not in kept and "(Ray, the Lustre volume) stays too: `invoke down` deletes that" in kept, kept


def test_down_keeps_our_subnets_under_an_autopilot_cluster_made_another_way(cloud):
    """Its multi-network nodes sit on our gVNIC and RDMA subnets while it stands (the network mapping we applied
    in it names them): down keeps them with it rather than delete them from under its nodes (GCP refuses a
    subnet in use), and deletes the rest of ours."""
    _adopted(cloud, autopilot=True)
    down = cloud.invoke("down", "--yes")
    assert down.code == 0, down.output[-3000:]
    left = cloud.resources()
    assert [c["name"] for c in left["cluster"].values()] == [ENV["CLUSTER_NAME"]]
    assert {"nemo-gvnic-sub", "nemo-rdma-sub-0"} <= {n["name"] for n in left["subnet"].values()}, left["subnet"]
    assert "helm:" not in " ".join(left)  # Ray (ours) went


@pytest.mark.parametrize("mode", ["standard", "autopilot"])
def test_net_delete_beside_a_cluster_made_another_way_names_what_frees_our_networks(cloud, mode):
    """Standard: our subnets are held through our GPU pool only; once clean.cluster has deleted it, net.delete
    goes. Autopilot: its nodes sit on them while it stands; the refusal names the gcloud command that deletes it
    (it named `invoke down`, which keeps that cluster and so the subnets: a dead end)."""
    _adopted(cloud, autopilot=mode == "autopilot")
    refused = cloud.invoke("net.delete", "--yes")
    assert refused.code == 2, refused.output[-3000:]
    if mode == "autopilot":
        assert f"`gcloud container clusters delete {ENV['CLUSTER_NAME']} --location=" in refused.stderr
        return
    assert "`invoke clean.cluster --yes` deletes our GPU pool gpu-pool from it" in refused.stderr, refused.stderr
    assert cloud.invoke("clean.cluster", "--yes").code == 0
    done = cloud.invoke("net.delete", "--yes")
    assert done.code == 0, done.output[-3000:]
    assert "subnet" not in cloud.resources() and list(cloud.resources()["cluster"])


def test_clean_cluster_keeps_a_cluster_made_another_way_and_deletes_our_gpu_pool(cloud):
    _adopted(cloud)
    for task in ("clean.cluster", "cluster.delete"):
        done = cloud.invoke(task, "--yes")
        assert done.code == 0, (task, done.output[-3000:])
        assert "keeping cluster" in done.stderr, task
        assert "(Ray, the Lustre volume) stays too: `invoke down`" in done.stderr, task
        assert [c["name"] for c in cloud.resources()["cluster"].values()] == [ENV["CLUSTER_NAME"]], task
        assert "nodepool" not in cloud.resources(), task


def _replace_gpu_pool_without_labels(cloud: FakeCloud) -> None:
    """Our GPU pool in the adopted cluster, deleted and made again by hand the same way but without --labels."""
    where = [f"--cluster={ENV['CLUSTER_NAME']}", f"--location={ENV['CONTROL_PLANE_LOCATION']}",
             f"--project={ENV['PROJECT_ID']}"]
    (ours,) = cloud.resources()["nodepool"].values()
    gone = _gcloud(cloud, ["gcloud", "container", "node-pools", "delete", "gpu-pool", *where, "--quiet"])
    assert gone.returncode == 0, gone.stderr
    networks = [f"--additional-node-network=network={n['network']},subnetwork={n['subnetwork']}"
                for n in ours["networkConfig"]["additionalNodeNetworkConfigs"]]
    made = _gcloud(cloud, ["gcloud", "container", "node-pools", "create", "gpu-pool", *where, "--num-nodes=1",
                           f"--machine-type={ours['config']['machineType']}", *networks])  # no --labels
    assert made.returncode == 0, made.stderr


def test_a_gpu_pool_made_another_way_in_it_is_kept_too(cloud):
    _adopted(cloud)
    _replace_gpu_pool_without_labels(cloud)
    down = cloud.invoke("down", "--yes")
    assert down.code == 0, down.output[-3000:]
    assert "gpu-pool has no managed-by label either: kept" in down.stderr
    left = cloud.resources()
    assert list(left["nodepool"]) and len(left["subnet"]) >= 9  # the pool, and the subnets its NICs are on


def test_a_cluster_made_another_way_in_another_mode_is_rebuilt_with_gcloud(cloud):
    cloud.write_env(CLUSTER_MODE="autopilot")
    _tutorial_cluster(cloud, autopilot=True)
    cloud.write_env(CLUSTER_MODE="standard")
    for task in ("up", "cluster.create", "plan"):
        done = cloud.invoke(task, *(["--yes"] if task == "up" else []))
        assert done.code == (0 if task == "plan" else 2), (task, done.output[-3000:])
        assert "it is autopilot, the settings say standard" in done.output, task
        assert f"`gcloud container clusters delete {ENV['CLUSTER_NAME']} --location=" in done.output, task
        assert "invoke clean.cluster" not in done.output, task  # which keeps a cluster it did not create


@pytest.mark.parametrize("task", ["clean.cluster", "down"])
def test_our_gpu_pool_still_provisioning_in_a_cluster_made_another_way_is_deleted(cloud, task):
    """GKE refuses the pool's delete while its create goes on ("Operation … is currently creating a node pool for
    cluster …", words the cluster's delete never gets): the teardown waits for GKE, then deletes. It used to take
    them for a transient error, try five times in 30 s and fail, the pool billing."""
    from nemo_rl_gke.runner import Runner

    _adopted(cloud)
    leave_gpu_pool_provisioning(cloud)  # our pool, as an interrupted `up` leaves it

    def waiting(calls: list[dict]) -> bool:  # more refusals than the runner's own tries: the wait polls
        return len([c for c in calls if c["argv"][:3] == ["container", "node-pools", "delete"] and c["exit"]]) \
            > Runner.attempts

    with gke_ends_creates_once(cloud, waiting):
        done = cloud.invoke(task, "--yes", FAKECLOUD_TIME_SCALE="0.005")
    assert done.code == 0, done.output[-3000:]
    assert "GPU node pool gpu-pool: GKE is still working on it" in done.stderr, done.stderr[-3000:]
    assert "GPU node pool gpu-pool (2 × a4-highgpu-8g): deleted" in done.stderr, done.stderr[-3000:]
    assert "nodepool" not in cloud.resources() and list(cloud.resources()["cluster"])


def test_rebuild_hints_for_a_cluster_made_another_way_name_what_deletes_it(cloud):
    _adopted(cloud)
    both = cloud.invoke("plan", CLUSTER_MODE="autopilot", GPU_TYPE="h200")
    assert both.code == 0, both.output[-3000:]
    hint = both.stdout.split("To resolve:")[1]
    # another mode rebuilds the cluster (gcloud's delete: ours would keep it), and the pool with it
    assert "`gcloud container clusters delete" in hint and "invoke clean.cluster" not in hint, hint
    gpu = cloud.invoke("plan", GPU_TYPE="h200")
    hint = gpu.stdout.split("To resolve:")[1]
    # the pool alone: clean.cluster deletes only our pool here, and Ray's workers select the old GPU: Ray first
    assert "`invoke clean.ray --yes`, then `invoke clean.cluster --yes`" in hint, hint
    for task in ("clean.ray", "clean.cluster"):  # as the hint says, then up with the new GPU
        assert cloud.invoke(task, "--yes").code == 0, task
    again = cloud.invoke("up", "--yes", GPU_TYPE="h200")
    assert again.code == 0, again.output[-3000:]
    (pool,) = cloud.resources()["nodepool"].values()
    assert "h200" in pool["config"]["accelerators"]


def test_a_firewall_list_that_fails_is_asked_again_not_taken_for_no_other_deployment(cloud):
    _adopted(cloud, autopilot=True)
    assert cloud.invoke("up", "--yes", CLUSTER_NAME="other", CLUSTER_MODE="standard").code == 0
    lustre = sorted(cloud.resources()["lustre"])
    down = cloud.invoke("down", "--yes", "--delete-data", CLUSTER_NAME="other", CLUSTER_MODE="standard",
                        FAKECLOUD_FAIL="firewall-rules list:1:permanent")
    assert f"other deployment(s) {ENV['CLUSTER_NAME']} (its firewall rule" in down.stderr, down.output[-3000:]
    assert sorted(cloud.resources()["lustre"]) == lustre


@pytest.mark.parametrize("pool", ["ours", "made another way", "autopilot"])
def test_another_deployments_down_keeps_what_an_adopted_cluster_uses(cloud, pool):
    """An adopted cluster carries no managed-by label, but its GPU pool's NICs are on our VPCs (and its Ray on
    our Lustre): another deployment's `down --delete-data` keeps what deployments share, as for a labelled one,
    instead of deleting the Lustre under it and then failing on the VPCs every time. An Autopilot one has no
    node pool of its own: the firewall rule its `up` made on our gVNIC VPC names its deployment."""
    _adopted(cloud, autopilot=pool == "autopilot")
    if pool == "made another way":
        _replace_gpu_pool_without_labels(cloud)
    assert cloud.invoke("up", "--yes", CLUSTER_NAME="other", CLUSTER_MODE="standard").code == 0
    before = cloud.resources()
    down = cloud.invoke("down", "--yes", "--delete-data", process=True, CLUSTER_NAME="other",
                        CLUSTER_MODE="standard")
    assert down.code == 0, down.output[-3000:]
    why = ("its firewall rule nemo-gvnic-nemo-rl-internal is on our gVNIC VPC" if pool == "autopilot" else
           "made another way: node pool gpu-pool is on our VPCs")
    assert f"other deployment(s) {ENV['CLUSTER_NAME']} ({why})" in down.stderr, down.stderr
    assert "another deployment shares them (above), whatever the flags" in down.stderr, down.stderr
    assert "--delete-data` deletes" not in down.stderr and "--delete-bucket` deletes" not in down.stderr
    left = cloud.resources()
    assert [c["name"] for c in left["cluster"].values()] == [ENV["CLUSTER_NAME"]]
    for kind in ("lustre", "network", "subnet", "address"):
        assert sorted(left.get(kind, {})) == sorted(before.get(kind, {})), kind
    again = cloud.invoke("down", "--yes", "--delete-data", CLUSTER_NAME="other", CLUSTER_MODE="standard")
    assert again.code == 0, again.output[-3000:]


def test_ray_operator_turned_off_later_still_lets_clean_ray_and_down_remove_the_release(cloud):
    # GKE removes KubeRay's CRD with the add-on, and every RayCluster with it: helm 3.17 then cannot uninstall
    # the release ("failed to delete release", on every run). Nothing of it is left but helm's record.
    _up_then_turn_off(cloud, "RayOperator")
    clean = cloud.invoke("clean.ray", "--yes")
    assert clean.code == 0, clean.output[-3000:]
    assert "the cluster no longer serves RayCluster (its CRD is gone" in clean.stderr
    context = f"gke_{ENV['PROJECT_ID']}_{ENV['CONTROL_PLANE_LOCATION']}_{ENV['CLUSTER_NAME']}"
    assert "default/nemo-rl" not in cloud.resources().get(f"helm:{context}", {})
    down = cloud.invoke("down", "--yes", "--delete-data", "--delete-unexported")
    assert down.code == 0, down.output[-3000:]
