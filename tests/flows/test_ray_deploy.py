"""ray.deploy / status / delete / render on the fake cloud: the helm argv, the wait loop, the GPU check.

The network and a Standard B200 cluster with a 2-node GPU pool are made once per module; each test starts
from a copy of that state, with the storage layer's Secret and Lustre claim seeded (or not) in the cluster.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from support.fake import FAKE_BIN, REPO, TEST_HF_TOKEN, TEST_WANDB_KEY, FakeCloud

CONTEXT = "gke_my-nemo-project_us-central1_nemo-rl"
STORE = f"k8s:{CONTEXT}"
STORAGE_OBJECTS = """
apiVersion: v1
kind: Secret
metadata: {name: nemo-rl-secrets, namespace: default}
type: Opaque
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: lustre-pv}
spec: {capacity: {storage: 18000Gi}, accessModes: [ReadWriteMany], persistentVolumeReclaimPolicy: Retain,
       storageClassName: "", claimRef: {namespace: default, name: lustre-pvc}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: lustre-pvc, namespace: default}
spec: {volumeName: lustre-pv, accessModes: [ReadWriteMany], resources: {requests: {storage: 18000Gi}}}
"""


@pytest.fixture(scope="module")
def base_state(tmp_path_factory) -> Path:
    cloud = FakeCloud(tmp_path_factory.mktemp("ray-base"))
    cloud.write_env()
    done = cloud.invoke("net.create", "cluster.create")  # .env.example: b200, standard, GPU_NODES=2
    assert done.code == 0, done.output
    return cloud.state_dir


def _kubectl(fake: FakeCloud, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(FAKE_BIN / "kubectl"), f"--context={CONTEXT}", *argv], input=stdin,
                          env=fake.process_env(), capture_output=True, text=True, check=False)


def _cloud(tmp_path: Path, base_state: Path, *, storage: bool = True) -> FakeCloud:
    fake = FakeCloud(tmp_path)
    fake.write_env()
    shutil.copytree(base_state, fake.state_dir)
    if storage:
        done = _kubectl(fake, "apply", "--filename=-", stdin=STORAGE_OBJECTS)
        assert done.returncode == 0, done.stderr
    return fake


@pytest.fixture
def cloud(tmp_path, base_state) -> FakeCloud:
    return _cloud(tmp_path, base_state)


def _helm_calls(fake: FakeCloud, verb: str) -> list[list[str]]:
    return [c["argv"] for c in fake.calls() if c["tool"] == "helm" and c["argv"][:1] == [verb]]


def _pods(fake: FakeCloud) -> dict[str, dict]:
    return {k: v for k, v in fake.resources().get(STORE, {}).items() if k.startswith("Pod/")}


def test_ray_deploy_runs_helm_upgrade_install_with_context_and_values_on_stdin(cloud):
    done = cloud.invoke("ray.deploy")
    assert done.code == 0, done.output
    (argv,) = _helm_calls(cloud, "upgrade")
    assert argv[:3] == ["upgrade", "--install", "nemo-rl"]
    assert Path(argv[3]).name == "ray-cluster"
    assert f"--kube-context={CONTEXT}" in argv and "--namespace=default" in argv and "--values=-" in argv
    assert not any(a.startswith("--set") for a in argv)


# 16 hex digits that Go's YAML (helm's) reads unquoted as a finite number: digits with a leading 0 and an 8 or 9
# (not octal, so a float), or digits, e, digits. PyYAML writes both unquoted.
GO_NUMBER = re.compile(r"0[0-9]*[89][0-9]*|[0-9]+e[0-9]+")


def _wandb_key_for_a_numeric_hash(cloud: FakeCloud) -> tuple[str, str]:
    """A WANDB_API_KEY (its digest is in the pod-template hash) that gives this checkout's settings a hash Go
    reads as a number: about one key in 5,000."""
    import dataclasses

    from nemo_rl_gke import raychart
    from nemo_rl_gke.settings import load

    s = load(allow_example=False, cwd=cloud.workdir, environ={})
    values = raychart.values(s)
    for n in range(200_000):
        key = f"wandb{n:035d}"
        digest = raychart.pod_template_hash(dataclasses.replace(s, WANDB_API_KEY=key), values)
        if GO_NUMBER.fullmatch(digest) and math.isfinite(float(digest)):
            return key, digest
    raise AssertionError("no key in 200,000 gives a hash Go reads as a number")


def test_ray_deploy_sends_a_hash_go_would_read_as_a_number_as_a_string(cloud):
    """Unquoted, such a hash reached helm as a number, which the chart's schema refuses: for about one set of
    settings in 5,000, ray.deploy (and up) failed on every re-run, on a value the user never set."""
    key, digest = _wandb_key_for_a_numeric_hash(cloud)
    done = cloud.invoke("ray.deploy", WANDB_API_KEY=key)
    assert done.code == 0, done.output[-3000:]
    release = cloud.resources()[f"helm:{CONTEXT}"]["default/nemo-rl"]
    assert release["values"]["podTemplateHash"] == digest


def test_fake_helm_upgrade_reads_and_checks_values_as_helm_does(cloud):
    """The fake's upgrade hands the values to the real helm (Go's YAML, the chart's schema) and fails in its
    words, leaving no release."""
    chart = str(REPO / "manifests" / "ray-cluster")
    done = subprocess.run([str(FAKE_BIN / "helm"), "upgrade", "--install", "nemo-rl", chart,
                           f"--kube-context={CONTEXT}", "--namespace=default", "--values=-"],
                          input="podTemplateHash: 0123456789012345\n",
                          env=cloud.process_env(), capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("Error: values don't meet the specifications of the schema")  # upgrade --install
    assert "podTemplateHash: Invalid type. Expected: string" in done.stderr
    assert "default/nemo-rl" not in cloud.resources().get(f"helm:{CONTEXT}", {})


def test_ray_deploy_installs_gpu_nodes_workers_from_settings(cloud):
    assert cloud.invoke("ray.deploy").code == 0
    (release,) = cloud.resources()[f"helm:{CONTEXT}"].values()
    assert release["values"]["worker"]["replicas"] == 2
    assert release["values"]["worker"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-b200"}
    workers = [p for p in _pods(cloud).values() if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    assert len(workers) == 2


def test_ray_deploy_reports_the_gpus_ray_sees(cloud):
    done = cloud.invoke("ray.deploy")
    assert done.code == 0, done.output
    assert "Ray sees 16 GPUs" in done.stderr


def test_ray_deploy_twice_upgrades_the_same_release(cloud):
    assert cloud.invoke("ray.deploy").code == 0
    pods = set(_pods(cloud))
    again = cloud.invoke("ray.deploy")
    assert again.code == 0, again.output
    (release,) = cloud.resources()[f"helm:{CONTEXT}"].values()
    assert release["version"] == 2
    assert set(_pods(cloud)) == pods


def test_ray_deploy_again_describes_the_pool_once_and_reads_at_once_before_helm(cloud):
    # ray.deploy described the GPU pool twice (the mode/GPU check, then the size check) and asked the
    # credentials, the describes, the Nodes, the Secret, the claim and the pods one after the other: 10 rounds
    # before helm's and its wait's. Now: credentials beside the describes, then the Nodes, Secret and claim.
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    from rounds import call_rounds

    assert cloud.invoke("ray.deploy").code == 0
    before = len(cloud.calls())
    # Typical latencies (kubectl get 0.3 s: a loaded machine's slow process start cannot pass for a wait); helm's
    # upgrade is then refused at once (an injected fault): what matters is what was read before it.
    again = cloud.invoke("ray.deploy", process=True, FAKECLOUD_TIME_SCALE="1",
                         FAKECLOUD_FAIL="helm upgrade:1:refused")
    assert again.code == 1 and "injected permanent failure" in again.stderr, again.output
    calls = cloud.calls()[before:]
    words = [" ".join([c["tool"], *c["argv"]]) for c in calls]
    assert sum("node-pools describe" in w for w in words) == 1, words
    first_helm = next(i for i, w in enumerate(words) if w.startswith("helm upgrade"))
    ahead = [c for c in calls if c["end"] <= calls[first_helm]["launched"]]
    assert len(ahead) == 7 and call_rounds(ahead) <= 3, [(w[:70], c["launched"], c["end"])
                                                          for w, c in zip(words, calls, strict=True)]


def test_ray_deploy_polls_until_every_pod_is_ready(cloud):
    # Pods become Ready after 600 s × 0.005 = 3 s; the loop must keep asking, then succeed.
    done = cloud.invoke("ray.deploy", FAKECLOUD_TIME_SCALE="0.005", NRG_POLL_SECONDS="0.2")
    assert done.code == 0, done.output
    gets = [c for c in cloud.calls() if c["tool"] == "kubectl" and "get" in c["argv"] and "pods" in c["argv"]]
    assert len(gets) >= 2
    assert "head starting, 0/2 GPU workers Ready" in done.stderr
    assert "head Ready, 2/2 GPU workers Ready" in done.stderr


def test_ray_deploy_ends_its_wait_when_kubectl_says_every_pod_is_ready(cloud):
    # The pods take 3 s; the poll interval is a minute. The wait ends on `kubectl wait`'s answer (the pods it
    # waits for are all there), not at the next poll, which would outlast this invoke's timeout.
    done = cloud.invoke("ray.deploy", timeout=40, runner={"poll_seconds": 60}, FAKECLOUD_TIME_SCALE="0.005")
    assert done.code == 0, done.output
    asked = [" ".join(c["argv"][1:3]) for c in cloud.calls() if c["tool"] == "kubectl"]
    waited = asked.index("wait pods")
    assert asked[waited - 1] == "get pods" and asked[waited + 1] == "get pods", asked
    assert "head Ready, 2/2 GPU workers Ready" in done.stderr


def test_ray_deploy_refuses_at_once_when_the_pool_is_smaller_than_gpu_nodes(cloud):
    seen = len(cloud.calls())
    done = cloud.invoke("ray.deploy", "--nodes=4")  # the default 1800 s wait: the refusal must not wait at all
    assert done.code == 2, done.output
    assert ("GPU_NODES=4 is not valid: the GPU node pool gpu-pool has 2 node(s) (Kubernetes nodes in the pool)"
            in done.stderr)
    assert "--nodes=2" in done.stderr and "clusters resize nemo-rl --node-pool=gpu-pool --num-nodes=4" in done.stderr
    assert "✓" not in done.output and "Traceback" not in done.output
    assert _helm_calls(cloud, "upgrade") == []
    assert all(not c["mutating"] for c in cloud.calls()[seen:] if c["tool"] != "gcloud" or "get-credentials"
               not in c["argv"])


def test_ray_deploy_timeout_fails_with_the_reasons_and_never_prints_a_check_mark(cloud):
    # Pods become Ready only after 600 s × 0.01 = 6 s; a 0 s timeout gives up after the first look.
    done = cloud.invoke("ray.deploy", "--timeout=0", FAKECLOUD_TIME_SCALE="0.01")
    assert done.code == 1, done.output
    assert "Ray cluster nemo-rl is not Ready: timed out after 0 s." in done.stderr
    assert "of the 16 GPUs wanted" in done.stderr
    assert "✓" not in done.output and "Traceback" not in done.output


def test_ray_deploy_with_a_gpu_node_short_says_so_in_the_schedulers_words(cloud):
    """One GPU node of two can take a worker (the other's GPUs taken, or it is gone): the second worker stays
    Pending with kube-scheduler's "Insufficient nvidia.com/gpu", and the timeout's message says what to check.
    The fake used to word it "didn't have free nvidia.com/gpu", which no scheduler prints."""
    done = cloud.invoke("ray.deploy", "--timeout=0", FAKECLOUD_TIME_SCALE="0.01", FAKECLOUD_GPU_NODES="1")
    assert done.code == 1, done.output
    assert "1 Insufficient nvidia.com/gpu" in done.stderr, done.stderr[-3000:]
    assert "not enough free GPU nodes: see `invoke cluster.status`" in done.stderr, done.stderr[-3000:]


@pytest.mark.parametrize(("restarts", "hopeless"), [(5, True), (4, False)])
def test_ray_deploy_stops_on_a_worker_that_keeps_exiting_and_names_its_logs(cloud, restarts, hopeless):
    """A worker whose start script exits (its node lacks the NCCL installer's files, or the GPU type's tuner file)
    crash-loops: the deploy waited its 30 minutes and said "back-off ... restarting failed container". Once the
    container has exited CRASH_LOOP_RESTARTS times (about 5 minutes of the kubelet's back-off, past a fresh node's
    installer) it stops, with the exit code and the `kubectl logs --previous` that shows why. Through the real
    `invoke` command; fewer restarts are waited for (here until the deploy's own timeout of 2 s)."""
    done = cloud.invoke("ray.deploy", "--yes", "--timeout=2", process=True, FAKECLOUD_TIME_SCALE="0.001",
                        FAKECLOUD_WORKER_CRASHLOOP=str(restarts))
    assert done.code == 1, done.output[-3000:]
    why = f"CrashLoopBackOff (it exited with code 1, restarted {restarts} times)"
    assert (f"cannot start ({why})" in done.stderr) == hopeless, done.stderr[-3000:]
    assert ("timed out after 2 s" in done.stderr) == (not hopeless), done.stderr[-3000:]
    assert f"(worker): {why}: back-off 5m0s restarting failed container=ray-worker" in done.stderr
    assert re.search(r"`kubectl logs nemo-rl-gpu-workers-worker-\S+ --previous --namespace=default "
                     rf"--context={CONTEXT}` shows why", done.stderr), done.stderr[-3000:]


def test_ray_deploy_stops_when_kuberay_says_the_api_refuses_its_pods(cloud):
    """A ResourceQuota (or an admission webhook) refuses the GPU workers: no pod exists, so no pod can say why, and
    the deploy waited 30 minutes for "0 of 2 GPU workers". KubeRay says it on the RayCluster (ReplicaFailure):
    read while pods are missing, and taken as final once seen at three looks in a row."""
    quota = ("exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=0, "
             "limited: requests.nvidia.com/gpu=4")
    done = cloud.invoke("ray.deploy", "--yes", "--timeout=20", process=True, FAKECLOUD_TIME_SCALE="0.001",
                        FAKECLOUD_RAY_WORKERS_REFUSED=quota)
    assert done.code == 1, done.output[-3000:]
    assert ("Ray cluster nemo-rl is not Ready: KubeRay cannot create its pods (FailedCreateWorkerPod: "
            f'FailedCreateWorkerPod pods "nemo-rl-gpu-workers-worker-" is forbidden: {quota})') in done.stderr, \
        done.stderr[-3000:]
    assert "`kubectl describe raycluster nemo-rl --namespace=default" in done.stderr
    assert "timed out" not in done.stderr
    looks = [c for c in cloud.calls() if c["argv"][1:4] == ["get", "rayclusters.ray.io", "nemo-rl"]]
    assert len(looks) == 3, len(looks)


def test_fake_cluster_registers_a_node_per_vm_of_its_pools_as_gke_does(cloud):
    # What ray.deploy's pool check counts on a real cluster: Nodes labelled with their pool, GPUs allocatable;
    # a resize shows at once.
    def gpu_nodes() -> list[dict]:
        out = _kubectl(cloud, "get", "nodes", "--selector=cloud.google.com/gke-nodepool=gpu-pool", "--output=json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["items"]

    nodes = gpu_nodes()
    assert len(nodes) == 2
    assert {n["metadata"]["labels"]["cloud.google.com/gke-accelerator"] for n in nodes} == {"nvidia-b200"}
    assert {n["status"]["allocatable"]["nvidia.com/gpu"] for n in nodes} == {"8"}
    subprocess.run([str(FAKE_BIN / "gcloud"), "container", "clusters", "resize", "nemo-rl", "--node-pool=gpu-pool",
                    "--num-nodes=3", "--location=us-central1", "--project=my-nemo-project", "--quiet"],
                   env=cloud.process_env(), capture_output=True, text=True, check=True)
    assert len(gpu_nodes()) == 3


def test_ray_deploy_with_the_pool_resized_counts_the_pool_not_its_initial_size(cloud):
    # gcloud container clusters resize changes the pool (the fake's node count) without a new describe shape.
    state_file = cloud.state_dir / "resources.json"
    state = json.loads(state_file.read_text())
    (key,) = [k for k in state["nodepool"] if k.endswith("/gpu-pool")]
    state["nodepool"][key]["initialNodeCount"] = 3
    state_file.write_text(json.dumps(state))
    done = cloud.invoke("ray.deploy", "--nodes=3")
    assert done.code == 0, done.output
    assert "Ray sees 24 GPUs" in done.stderr


def test_ray_deploy_gpu_check_fails_when_ray_counts_fewer_gpus_than_ready_pods(cloud):
    assert cloud.invoke("ray.deploy").code == 0
    state_file = cloud.state_dir / "resources.json"
    state = json.loads(state_file.read_text())
    worker = next(k for k in state[STORE] if k.startswith("Pod/") and "-worker-" in k)
    state[STORE][worker]["_ray_gpus"] = 0  # the pod is Ready, but its raylet registered no GPU
    state_file.write_text(json.dumps(state))
    done = cloud.invoke("ray.deploy", NRG_POLL_SECONDS="0.01")
    assert done.code == 1
    assert "Ray sees 8 of the 16 GPUs wanted" in done.stderr
    assert "every worker pod is Ready but Ray counts fewer GPUs" in done.stderr


def test_ray_deploy_refuses_at_once_without_the_secret(tmp_path, base_state):
    fake = _cloud(tmp_path, base_state, storage=False)
    _kubectl(fake, "apply", "--filename=-", stdin="---".join(STORAGE_OBJECTS.split("---")[1:]))  # no Secret
    done = fake.invoke("ray.deploy")
    assert done.code == 2, done.output
    assert "Secret nemo-rl-secrets" in done.stderr and "invoke storage.create" in done.stderr
    assert "PersistentVolumeClaim" not in done.stderr
    assert _helm_calls(fake, "upgrade") == []


def test_ray_deploy_refuses_at_once_without_secret_and_claim(tmp_path, base_state):
    fake = _cloud(tmp_path, base_state, storage=False)
    done = fake.invoke("ray.deploy")
    assert done.code == 2, done.output
    assert "Secret nemo-rl-secrets and PersistentVolumeClaim lustre-pvc, which do not exist" in done.stderr


def test_ray_deploy_rejects_an_oversized_head_before_any_call(cloud):
    seen = len(cloud.calls())
    done = cloud.invoke("ray.deploy", "--head-cpu=64")
    assert done.code == 2
    assert "--head-cpu" in done.stderr
    assert cloud.calls()[seen:] == []


def test_ray_deploy_output_never_shows_a_secret(cloud):
    # The chart takes the tokens from the Secret by name (envFrom): the values never reach helm or the output.
    done = cloud.invoke("ray.deploy")
    assert done.code == 0, done.output[-2000:]
    argvs = " ".join(" ".join(c["argv"]) for c in cloud.calls())
    for secret in (TEST_HF_TOKEN, TEST_WANDB_KEY):
        assert secret not in done.output and secret not in argvs


def test_ray_dry_deploy_prints_helm_upgrade_install_and_runs_nothing(cloud):
    seen = len(cloud.calls())
    done = cloud.invoke("--dry", "ray.deploy")
    assert done.code == 0, done.output
    lines = [line for line in done.stdout.splitlines() if line.startswith("$ ")]
    helm = [line for line in lines if line.startswith("$ helm upgrade --install nemo-rl ")]
    assert len(helm) == 1 and "--values=-" in helm[0]
    assert cloud.calls()[seen:] == []


def test_ray_status_lists_pods_and_gpus(cloud):
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    from rounds import call_rounds

    assert cloud.invoke("ray.deploy").code == 0
    before = len(cloud.calls())
    done = cloud.invoke("ray.status", process=True, FAKECLOUD_TIME_SCALE="1")
    assert done.code == 0, done.output
    assert "Ray sees 16 of 16 GPUs" in done.stdout
    assert "nemo-rl-head-" in done.stdout
    # helm's release and the pods at once, then Ray's GPUs in the head: 2 rounds (the pods waited for helm).
    calls = cloud.calls()[before:]
    assert len(calls) == 3 and call_rounds(calls) == 2, [(c["argv"][:3], c["launched"], c["end"]) for c in calls]


def test_ray_status_says_when_nothing_is_deployed(cloud):
    done = cloud.invoke("ray.status")
    assert done.code == 0, done.output
    assert "not deployed" in done.stdout


def test_ray_delete_uninstalls_the_release_and_its_pods(cloud):
    assert cloud.invoke("ray.deploy").code == 0
    done = cloud.invoke("ray.delete", "--yes")
    assert done.code == 0, done.output
    (argv,) = _helm_calls(cloud, "uninstall")
    assert argv[:2] == ["uninstall", "nemo-rl"] and f"--kube-context={CONTEXT}" in argv
    assert _pods(cloud) == {} and not cloud.resources().get(f"helm:{CONTEXT}")


def test_ray_delete_without_terminal_or_yes_refuses(cloud):
    done = cloud.invoke("ray.delete")
    assert done.code == 2
    assert _helm_calls(cloud, "uninstall") == []


def _real_helm_path() -> str | None:
    tools = REPO / ".tools" / "bin"
    return str(tools) if (tools / "helm").is_file() else (None if shutil.which("helm") is None else "")


@pytest.mark.parametrize(("env", "expected"), [
    ({"GPU_TYPE": "h200"}, ["cloud.google.com/gke-accelerator: nvidia-h200-141gb", "tuner_config_a3u.txtpb",
                            "networking.gke.io/interfaces: |",
                            '{"interfaceName":"eth9","network":"rdma-7"}']),
    ({"GPU_NODES": "4"}, ["      replicas: 4\n"]),
    ({"GPU_NODES": "1"}, ["      replicas: 1\n"]),
])
def test_ray_render_prints_the_manifests_for_the_settings(cloud, env, expected):
    extra = _real_helm_path()
    if extra is None:
        pytest.skip("needs a real helm: `python scripts/fetch_helm.py`")
    path = cloud.process_env()["PATH"] + (f":{extra}" if extra else "")
    done = cloud.invoke("ray.render", PATH=path, **env)
    assert done.code == 0, done.output
    for text in expected:
        assert text in done.stdout
    assert not done.stdout.startswith("$ ")


def test_ray_dry_render_prints_the_helm_template_command(cloud):
    done = cloud.invoke("--dry", "ray.render")
    assert done.code == 0, done.output
    assert done.stdout.startswith("$ helm template nemo-rl ")


def test_ray_render_values_prints_the_generated_values(cloud):
    done = cloud.invoke("ray.render", "--values", "--nodes=3")
    assert done.code == 0, done.output
    assert "replicas: 3" in done.stdout and "secretName: nemo-rl-secrets" in done.stdout


def test_ray_dashboard_client_forwards_the_ray_client_port_too(cloud):
    done = cloud.invoke("--dry", "ray.dashboard", "--client")
    assert done.code == 0, done.output
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("$ kubectl")]
    assert "port-forward service/nemo-rl-head-svc 8265:8265 10001:10001 --namespace=default" in line
    assert 'ray.init("ray://localhost:10001")' in done.stderr
    moved = cloud.invoke("--dry", "ray.dashboard", "--port=9000", "--client", "--client-port=11001")
    assert "9000:8265 11001:10001" in moved.stdout


@pytest.mark.parametrize("argv", [("--port=0",), ("--port=70000",), ("--client", "--client-port=8265")])
def test_ray_dashboard_refuses_a_bad_port_with_exit_2(cloud, argv):
    done = cloud.invoke("--dry", "ray.dashboard", *argv)
    assert done.code == 2, done.output
    assert "port" in done.stderr and "$ kubectl" not in done.stdout


def test_ray_deploy_a_failing_gpu_query_says_so_instead_of_a_count(cloud):
    done = cloud.invoke("ray.deploy", FAKECLOUD_FAIL="ray.init:1000:permanent")
    assert done.code == 1, done.output
    assert "Ray could not be asked (the query in the head pod failed" in done.stderr
    assert "of the 16 GPUs wanted" in done.stderr and "Ray sees 16 of" not in done.stderr
    assert "✓ Ray reports" not in done.stderr and "Traceback" not in done.output


# ---- a new pod spec: KubeRay v1.4.2 leaves running pods as they are, so ray.deploy restarts them -------------
HASH = "nemo-rl-gke/pod-template-hash"


def _made_from(fake: FakeCloud) -> dict[str, str]:
    """pod name -> the pod-template hash it was made from."""
    return {key.split("/")[-1]: (pod["metadata"].get("annotations") or {}).get(HASH, "")
            for key, pod in _pods(fake).items()}


def _kubectl_verbs(fake: FakeCloud, since: int = 0) -> list[str]:
    return [" ".join(c["argv"][1:3]) if c["tool"] == "kubectl" else " ".join([c["tool"], *c["argv"][:1]])
            for c in fake.calls()[since:]]


def _plant_running_run(fake: FakeCloud, run: str) -> None:
    """A run whose driver is alive (this test's own pid) and has no exit code: what the runs listing calls running."""
    import os

    root = fake.state_dir / "podfs" / CONTEXT / "data" / "runs" / run
    root.mkdir(parents=True)
    (root / "pid").write_text(f"{os.getpid()}\n")
    (root / "driver.log").write_text("Step 3/100\n")


def test_fake_kuberay_keeps_running_pods_when_only_the_template_changes(cloud):
    """The fake as KubeRay v1.4.2 (reconcilePods compares counts, not templates): `helm upgrade` with a new
    spec leaves every pod, and its annotation, as it was."""
    assert cloud.invoke("ray.deploy").code == 0
    before = _made_from(cloud)
    values = {**cloud.resources()[f"helm:{CONTEXT}"]["default/nemo-rl"]["values"], "podTemplateHash": "0" * 16}
    done = subprocess.run([str(FAKE_BIN / "helm"), "upgrade", "--install", "nemo-rl", str(REPO / "manifests" /
                          "ray-cluster"), f"--kube-context={CONTEXT}", "--namespace=default", "--values=-"],
                          input=json.dumps(values), env=cloud.process_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _made_from(cloud) == before


def test_ray_deploy_with_a_new_spec_restarts_every_pod_from_it(cloud):
    assert cloud.invoke("ray.deploy").code == 0
    before = _made_from(cloud)
    since = len(cloud.calls())
    done = cloud.invoke("ray.deploy", "--head-cpu=10")
    assert done.code == 0, done.output
    after = _made_from(cloud)
    assert len(after) == 3 and not set(after) & set(before)  # the head and both workers made again
    assert len(set(after.values())) == 1 and set(after.values()) != set(before.values())
    assert "KubeRay does not restart running pods" in done.stderr and "✓ Ray cluster nemo-rl" in done.stderr
    verbs = _kubectl_verbs(cloud, since)
    assert verbs.index("get pods") < verbs.index("helm upgrade") < verbs.index("delete pods"), verbs


def test_ray_deploy_with_the_same_spec_or_another_worker_count_restarts_nothing(cloud):
    assert cloud.invoke("ray.deploy").code == 0
    head = {name for name in _made_from(cloud) if "-head-" in name}
    assert cloud.invoke("ray.deploy").code == 0
    smaller = cloud.invoke("ray.deploy", "--nodes=1")
    assert smaller.code == 0, smaller.output
    after = _made_from(cloud)
    assert {name for name in after if "-head-" in name} == head and len(after) == 2  # KubeRay dropped a worker
    assert "delete pods" not in _kubectl_verbs(cloud) and "restart" not in smaller.stderr


def test_ray_deploy_with_a_new_hf_token_restarts_the_pods_so_they_read_it(cloud):
    # The pods read the Secret's values as environment variables when they start, and only then.
    assert cloud.invoke("ray.deploy").code == 0
    before = _made_from(cloud)
    cloud.write_env(HF_TOKEN="hf_another_token_for_the_pods")
    done = cloud.invoke("ray.deploy")
    assert done.code == 0, done.output
    assert not set(_made_from(cloud)) & set(before)
    assert "hf_another_token_for_the_pods" not in done.output + json.dumps(_pods(cloud))


def test_ray_deploy_new_spec_with_a_run_running_refuses_without_yes_and_changes_nothing(cloud):
    assert cloud.invoke("ray.deploy").code == 0
    before = _made_from(cloud)
    _plant_running_run(cloud, "live-run")
    done = cloud.invoke("ray.deploy", "--head-cpu=10")
    assert done.code == 2, done.output
    assert "live-run" in done.stderr and "Re-run with --yes" in done.stderr
    assert cloud.resources()[f"helm:{CONTEXT}"]["default/nemo-rl"]["version"] == 1  # no upgrade either
    assert _made_from(cloud) == before

    agreed = cloud.invoke("ray.deploy", "--head-cpu=10", "--yes")
    assert agreed.code == 0, agreed.output
    assert not set(_made_from(cloud)) & set(before)


def test_ray_dry_deploy_shows_the_restart_it_would_do_for_a_new_spec(cloud):
    done = cloud.invoke("--dry", "ray.deploy")
    lines = done.stdout.splitlines()
    assert done.code == 0 and lines[-1] == (f"$ kubectl --context={CONTEXT} delete pods --selector=ray.io/cluster="
                                            "nemo-rl --namespace=default --ignore-not-found --timeout=10m")
    assert lines[-2].startswith("# only if Ray's pods were started from another spec")


def test_ray_deploy_on_a_release_left_pending_says_how_to_roll_it_back(cloud):
    # helm's "another operation is in progress" is retried (a concurrent helm may end), but we hold the lock:
    # when it lasts, an interrupted helm left the release pending, and waiting will not mend it.
    done = cloud.invoke("ray.deploy", FAKECLOUD_FAIL="helm upgrade:99:inprogress")
    assert done.code == 1, done.output[-2000:]
    assert "stuck in a pending state left by an interrupted helm" in done.stderr
    assert f"`helm rollback nemo-rl --kube-context={CONTEXT} --namespace=default`" in done.stderr


@pytest.mark.parametrize(("status", "says", "mend"), [
    ("pending-install", "stuck in pending-install: its first install was stopped mid-way", "clean.ray"),
    ("pending-upgrade", "stuck in a pending state (pending-upgrade)", None),
    ("uninstalling", "stuck in uninstalling: an uninstall was stopped mid-way", "clean.ray")])
def test_ray_deploy_on_a_release_an_interrupted_helm_left_says_what_mends_it(cloud, status, says, mend):
    # helm 3.17 refuses to upgrade a pending release, and one whose uninstall was cut short ("has no deployed
    # releases"); `helm rollback` of a first install cut short fails ("release has no 0 version"): the advice
    # follows the release's status, and following it works.
    assert cloud.invoke("ray.deploy").code == 0
    state_file = cloud.state_dir / "resources.json"
    state = json.loads(state_file.read_text())
    state[f"helm:{CONTEXT}"]["default/nemo-rl"]["status"] = status
    state_file.write_text(json.dumps(state))
    done = cloud.invoke("ray.deploy", process=True)
    assert done.code == 1, done.output[-2000:]
    assert says in done.stderr, done.stderr[-2000:]
    assert ("helm rollback" in done.stderr) == (mend is None), done.stderr[-2000:]
    if mend:
        assert cloud.invoke(mend, "--yes").code == 0
        again = cloud.invoke("ray.deploy")
        assert again.code == 0, again.output[-2000:]


def test_job_submit_while_ray_is_still_starting_in_a_running_head_is_refused_then_works(cloud):
    # The head's container runs (phase Running) for a while before Ray in it answers KubeRay's readiness probe:
    # a submit in that window (a deploy whose wait was cut short) is refused, and works once the head is Ready.
    import time

    slow = {"FAKECLOUD_TIME_SCALE": "0.01", "FAKECLOUD_RAY_START_SECONDS": "590"}  # Running at 0.1 s, Ready at 6 s
    assert cloud.invoke("ray.deploy", "--timeout=0", **slow).code == 1
    early = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=early", **slow)
    assert early.code == 1, early.output[-2000:]
    assert "is Running but not Ready: Ray in it is still starting" in early.stderr
    deadline = time.monotonic() + 30
    while "head Ready" not in cloud.invoke("ray.status").output and time.monotonic() < deadline:
        time.sleep(0.5)
    from test_job_flow import kill_runs

    try:
        later = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=later", NRG_STANDIN_STEP_SECONDS="0.2")
        assert later.code == 0, later.output[-2000:]
    finally:
        kill_runs(cloud)


def test_fake_kubectl_get_by_names_asks_one_name_after_the_other(cloud):
    # kubectl's builder makes one GET per name and visits them in order: five names cost four round trips more
    # than the call's own 0.3 s (an inventory listing names fifteen objects).
    from fakecloud.handlers.kubectl_objects import GET_SECONDS

    before = len(cloud.calls())
    subprocess.run([str(FAKE_BIN / "kubectl"), f"--context={CONTEXT}", "get", *(f"secret/n{i}" for i in range(5)),
                    "--namespace=default", "--ignore-not-found", "--output=json"], capture_output=True, check=True,
                   env={**cloud.process_env(), "FAKECLOUD_TIME_SCALE": "1"})
    (call,) = cloud.calls()[before:]
    assert call["end"] - call["start"] >= 0.3 + 4 * GET_SECONDS


def test_fake_kubectl_wait_waits_for_the_ready_condition_not_the_running_phase(cloud):
    # kubectl wait --for=condition=Ready reads the Ready condition: a pod whose container runs while Ray in it
    # still starts (readiness probe failing) is waited for, and each pod still waited for is named at the end.
    slow = {"FAKECLOUD_TIME_SCALE": "0.01", "FAKECLOUD_RAY_START_SECONDS": "5990"}  # Running at 0.1 s, Ready at 60 s
    assert cloud.invoke("ray.deploy", "--timeout=0", **slow).code == 1
    import time

    time.sleep(0.3)  # every pod Running, none Ready
    env = {**cloud.process_env(), **slow}
    phases = subprocess.run([str(FAKE_BIN / "kubectl"), f"--context={CONTEXT}", "get", "pods",
                             "--selector=ray.io/cluster=nemo-rl", "--output=json"], env=env, capture_output=True,
                            text=True, check=True)
    pods = json.loads(phases.stdout)["items"]
    assert {p["status"]["phase"] for p in pods} == {"Running"}
    waited = subprocess.run([str(FAKE_BIN / "kubectl"), f"--context={CONTEXT}", "wait", "--for=condition=Ready",
                             "pods", "--selector=ray.io/cluster=nemo-rl", "--namespace=default", "--timeout=0.2s"],
                            env=env, capture_output=True, text=True, check=False)
    assert waited.returncode == 1, waited
    assert sorted(waited.stderr.splitlines()) == sorted(
        f"timed out waiting for the condition on pods/{p['metadata']['name']}" for p in pods)


def test_ray_deploy_with_the_claim_unbound_says_why_and_what_repairs_it(tmp_path, base_state):
    """A volume bound to another claim (another NAMESPACE's): ours stays Pending, and the scheduler keeps every
    Ray pod with "pod has unbound immediate PersistentVolumeClaims", which is not a missing claim."""
    fake = _cloud(tmp_path, base_state, storage=False)
    elsewhere = STORAGE_OBJECTS.replace("claimRef: {namespace: default", "claimRef: {namespace: team-a")
    assert _kubectl(fake, "apply", "--filename=-", stdin=elsewhere).returncode == 0
    claim = json.loads(_kubectl(fake, "get", "pvc", "lustre-pvc", "--namespace=default", "--output=json").stdout)
    assert claim["status"]["phase"] == "Pending"
    done = fake.invoke("ray.deploy", "--timeout=2", NRG_POLL_SECONDS="0.2")
    assert done.code == 1, done.output
    assert "pod has unbound immediate PersistentVolumeClaims" in done.stderr
    assert "the Lustre claim lustre-pvc is not bound to its volume (`kubectl describe pvc lustre-pvc " \
           "--namespace=default` says why)" in done.stderr and "is missing" not in done.stderr, done.stderr
