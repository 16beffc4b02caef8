"""manifests/ray-cluster with the real helm: lint, template for every variant, strict schemas, goldens, and
one test per tutorial defect the chart fixes (§4: 1, 2, 11, 13), each failing on the tutorial's behaviour.

Regenerate the goldens after a reviewed chart change:
    UPDATE_GOLDEN=1 pytest tests/manifests/test_ray_chart.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from nemo_rl_gke import raychart, render
from nemo_rl_gke import settings as settings_module
from support.schemas import crd_path, validate_builtin, validate_crd

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "manifests" / "ray-cluster"
GOLDEN = REPO / "tests" / "golden" / "ray"
GPUS = tuple(settings_module.GPU_PROFILES)  # each GPU profile
MODES = ("standard", "autopilot")
WORKERS = (1, 2, 4)
VARIANTS = [(g, m, n) for g in GPUS for m in MODES for n in WORKERS]
# What the tutorial's chart did, to show each test would fail on it.
TUTORIAL_HEAD = {"cpu": "64", "memory": "500G", "nodeSelector": {}}


def _helm() -> str:
    helm = shutil.which("helm")
    if helm is None:
        pytest.skip("needs helm >= 3.14 on PATH: `python scripts/fetch_helm.py` puts one in .tools/bin "
                    "(nox adds it)")
    return helm


def settings(gpu: str = "b200", mode: str = "standard", nodes: int = 2, **more):
    # environ={}: the test machine's own GPU_TYPE or PROJECT_ID must not leak into the renders.
    return settings_module.load(allow_example=True, environ={}, cwd=CHART, GPU_TYPE=gpu, CLUSTER_MODE=mode,
                                GPU_NODES=nodes, **more)


def helm_template(values: dict | None, *extra: str) -> subprocess.CompletedProcess:
    argv = [_helm(), "template", "nemo-rl", str(CHART), "--namespace=default", *extra]
    text = None
    if values is not None:
        argv.append("--values=-")
        text = render.go_yaml(values)  # as ray.deploy writes them
    return subprocess.run(argv, input=text, capture_output=True, text=True, check=False)


def rendered(gpu: str = "b200", mode: str = "standard", nodes: int = 2) -> str:
    done = helm_template(raychart.values(settings(gpu, mode, nodes)))
    assert done.returncode == 0, done.stderr
    return done.stdout


def objects(text: str) -> list[dict]:
    return [doc for doc in yaml.load_all(text, Loader=yaml.CSafeLoader) if doc]


def raycluster(text: str) -> dict:
    found = [o for o in objects(text) if o["kind"] == "RayCluster"]
    assert len(found) == 1, [o["kind"] for o in objects(text)]
    return found[0]


def worker_group(rc: dict) -> dict:
    (group,) = rc["spec"]["workerGroupSpecs"]
    return group


def _quantity_gi(text: str) -> float:
    units = {"Gi": 1, "G": 1e9 / 2**30, "Mi": 1 / 1024, "Ti": 1024}
    for unit, factor in sorted(units.items(), key=lambda kv: -len(kv[0])):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    return float(text) / 2**30


# ---- lint and schema --------------------------------------------------------------------------------
def test_ray_chart_passes_helm_lint_strict():
    done = subprocess.run([_helm(), "lint", "--strict", str(CHART)], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("gpu", "mode"), [(g, m) for g in GPUS for m in MODES])
def test_ray_chart_passes_helm_lint_strict_with_generated_values(gpu, mode, tmp_path):
    values = tmp_path / "values.yaml"
    values.write_text(raychart.values_yaml(settings(gpu, mode)))
    done = subprocess.run([_helm(), "lint", "--strict", str(CHART), f"--values={values}"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("gpu", "mode", "nodes"), VARIANTS)
def test_ray_chart_every_object_passes_its_strict_schema(gpu, mode, nodes):
    crd = crd_path("ray.io_rayclusters.yaml")
    docs = objects(rendered(gpu, mode, nodes))
    assert any(d["kind"] == "RayCluster" for d in docs)
    for doc in docs:
        if doc["apiVersion"].startswith("ray.io/"):
            validate_crd(doc, crd)
        else:
            validate_builtin(doc)


@pytest.mark.parametrize(("gpu", "mode", "nodes"), VARIANTS)
def test_ray_chart_pod_templates_are_valid_pod_specs(gpu, mode, nodes):
    """The CRD leaves the pod spec loosely typed; the Kubernetes schema of a Pod does not."""
    rc = raycluster(rendered(gpu, mode, nodes))
    for template in (rc["spec"]["headGroupSpec"]["template"], worker_group(rc)["template"]):
        validate_builtin({"apiVersion": "v1", "kind": "Pod", **template})


# ---- goldens ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("gpu", "mode", "nodes"), VARIANTS)
def test_ray_chart_render_matches_golden(gpu, mode, nodes):
    golden = GOLDEN / f"{gpu}-{mode}-{nodes}.yaml"
    text = rendered(gpu, mode, nodes)
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.is_file(), f"no golden {golden.name}: run with UPDATE_GOLDEN=1 and review the diff"
    assert text == golden.read_text(), f"{golden.name} differs: review, then UPDATE_GOLDEN=1 to accept"


# ---- tutorial defect 1: the replica override is a no-op ---------------------------------------------
@pytest.mark.parametrize("nodes", WORKERS)
def test_ray_chart_replicas_follow_gpu_nodes(nodes):
    """The tutorial's chart kept 4 replicas whatever REPLICA_COUNT said; ours must render GPU_NODES."""
    group = worker_group(raycluster(rendered(nodes=nodes)))
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (nodes, nodes, nodes)


def test_ray_chart_rejects_the_tutorials_values_prefix():
    """`--set values.…replicas=N` was silently ignored; the values schema makes it an error."""
    done = helm_template(None, "--set", "values.worker.replicas=4")
    assert done.returncode != 0
    assert "values" in done.stderr and "not allowed" in done.stderr


def test_ray_chart_rejects_the_tutorials_worker_group_key():
    done = helm_template(None, "--set", "additionalWorkerGroups.worker-grp-0.replicas=2")
    assert done.returncode != 0
    assert "additionalWorkerGroups" in done.stderr


# ---- tutorial defect 2: worker network annotations never reach the pods -------------------------------
@pytest.mark.parametrize(("gpu", "mode"), [(g, m) for g in GPUS for m in MODES])
def test_ray_chart_worker_pods_get_all_ten_interfaces(gpu, mode):
    """Under template.metadata.annotations (where KubeRay copies them to the pods), not beside it."""
    template = worker_group(raycluster(rendered(gpu, mode)))["template"]
    annotations = template["metadata"]["annotations"]
    interfaces = json.loads(annotations["networking.gke.io/interfaces"])
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    assert [(i["interfaceName"], i["network"]) for i in interfaces] == (
        [("eth0", "default"), ("eth1", "gvnic-1")] + [(f"eth{n + 2}", f"rdma-{n}") for n in range(8)])


def test_ray_chart_interfaces_name_the_networks_of_the_network_mapping():
    s = settings()
    docs = render.load_all(render.network_mapping(s))
    mapping = {d["metadata"]["name"] for d in docs if d["kind"] == "Network"}
    annotations = worker_group(raycluster(rendered()))["template"]["metadata"]["annotations"]
    used = {i["network"] for i in json.loads(annotations["networking.gke.io/interfaces"])}
    assert used - {"default"} == mapping


def test_ray_chart_annotation_placement_is_what_the_strict_schema_checks():
    """The tutorial's placement (annotations beside template.spec) must fail our schema check."""
    from support.schemas import SchemaError

    rc = raycluster(rendered())
    template = worker_group(rc)["template"]
    template["annotations"] = template["metadata"].pop("annotations")
    with pytest.raises(SchemaError, match="annotations"):
        validate_crd(rc, crd_path("ray.io_rayclusters.yaml"))


# ---- tutorial defect 11: a head that cannot schedule ----------------------------------------------------
def _head(rc: dict) -> dict:
    spec = rc["spec"]["headGroupSpec"]["template"]["spec"]
    resources = spec["containers"][0]["resources"]
    return {"cpu": resources["requests"]["cpu"], "memory": resources["requests"]["memory"],
            "nodeSelector": spec.get("nodeSelector", {})}


def _fits_cpu_pool(head: dict) -> bool:
    return (head["nodeSelector"] == {"cloud.google.com/gke-nodepool": raychart.CPU_POOL}
            and float(head["cpu"]) <= raychart.CPU_POOL_ALLOCATABLE_CPU
            and _quantity_gi(head["memory"]) <= raychart.CPU_POOL_ALLOCATABLE_MEMORY_GI)


@pytest.mark.parametrize("gpu", GPUS)
def test_ray_chart_standard_head_fits_the_cpu_pool(gpu):
    head = _head(raycluster(rendered(gpu, "standard")))
    assert _fits_cpu_pool(head), head
    assert (head["cpu"], head["memory"]) == ("12", "96Gi")
    assert not _fits_cpu_pool(TUTORIAL_HEAD)


def test_ray_chart_autopilot_head_keeps_autopilots_memory_ratio():
    head = _head(raycluster(rendered("b200", "autopilot")))
    assert head["nodeSelector"] == {}
    assert _quantity_gi(head["memory"]) / float(head["cpu"]) <= raychart.AUTOPILOT_MEMORY_PER_CPU_GI


def test_ray_chart_head_shm_fits_inside_head_memory():
    spec = raycluster(rendered())["spec"]["headGroupSpec"]["template"]["spec"]
    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")["emptyDir"]
    assert shm["medium"] == "Memory"
    memory = spec["containers"][0]["resources"]["limits"]["memory"]
    assert 0 < _quantity_gi(shm["sizeLimit"]) < _quantity_gi(memory)


# ---- tutorial defect 13: H200 keeps the B200 selector and a4 tuner -------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_ray_chart_h200_selects_h200_nodes_and_the_a3u_tuner(mode):
    text = rendered("h200", mode)
    spec = worker_group(raycluster(text))["template"]["spec"]
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert spec["nodeSelector"]["cloud.google.com/gke-accelerator"] == "nvidia-h200-141gb"
    assert env["NCCL_TUNER_CONFIG_PATH"] == "/usr/local/gib/configs/tuner_config_a3u.txtpb"
    assert "nvidia-b200" not in text and "tuner_config_a4" not in text


@pytest.mark.parametrize("mode", MODES)
def test_ray_chart_b200_selects_b200_nodes_and_the_a4_tuner(mode):
    text = rendered("b200", mode)
    spec = worker_group(raycluster(text))["template"]["spec"]
    assert spec["nodeSelector"]["cloud.google.com/gke-accelerator"] == "nvidia-b200"
    assert "tuner_config_a4.txtpb" in text and "a3u" not in text


# ---- modes ----------------------------------------------------------------------------------------------
def _worker_container(rc: dict) -> dict:
    return worker_group(rc)["template"]["spec"]["containers"][0]


def test_ray_chart_standard_workers_are_privileged_with_writable_host_paths():
    container = _worker_container(raycluster(rendered("b200", "standard")))
    assert container["securityContext"] == {"privileged": True}
    assert not any(m.get("readOnly") for m in container["volumeMounts"])


def test_ray_chart_autopilot_workers_are_unprivileged_with_read_only_host_paths():
    rc = raycluster(rendered("b200", "autopilot"))
    container = _worker_container(rc)
    spec = worker_group(rc)["template"]["spec"]
    assert "securityContext" not in container
    host = {v["name"] for v in spec["volumes"] if "hostPath" in v}
    assert host == {"nvidia", "gib"}
    assert all(m.get("readOnly") for m in container["volumeMounts"] if m["name"] in host)
    assert spec["nodeSelector"]["cloud.google.com/compute-class"] == "Performance"
    assert spec["nodeSelector"]["cloud.google.com/gke-accelerator-count"] == "8"


# ---- the rest of the issue's list ------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_ray_chart_every_ray_pod_takes_the_secret_and_data_on_lustre(mode):
    rc = raycluster(rendered("b200", mode))
    for template in (rc["spec"]["headGroupSpec"]["template"], worker_group(rc)["template"]):
        spec = template["spec"]
        container = spec["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert container["envFrom"] == [{"secretRef": {"name": "nemo-rl-secrets"}}]
        assert spec["serviceAccountName"] == "generic-ksa"
        assert env["HF_HOME"].startswith("/data/") and env["NRG_LOG_DIR"].startswith("/data/")
        assert env["RAY_memory_monitor_refresh_ms"] == "0"
        assert {"name": "data", "persistentVolumeClaim": {"claimName": "lustre-pvc"}} in spec["volumes"]
        assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]
        assert template["metadata"]["annotations"]["ray.io/overwrite-container-cmd"] == "true"


def test_ray_chart_ray_version_and_image_come_from_settings():
    rc = raycluster(rendered())
    assert rc["spec"]["rayVersion"] == "2.49.2"
    assert rc["metadata"]["name"] == "nemo-rl"
    images = {c["image"] for t in (rc["spec"]["headGroupSpec"]["template"], worker_group(rc)["template"])
              for c in t["spec"]["containers"]}
    assert images == {"nvcr.io/nvidia/nemo-rl:v0.5.0"}


def test_ray_chart_names_follow_the_release():
    done = helm_template(raychart.values(settings()))
    other = subprocess.run([_helm(), "template", "other", str(CHART), "--values=-"],
                           input=raychart.values_yaml(settings()), capture_output=True, text=True,
                           check=False)
    assert raycluster(done.stdout)["metadata"]["name"] == "nemo-rl"
    assert raycluster(other.stdout)["metadata"]["name"] == "other"
    assert "kuberay" not in done.stdout


def test_ray_chart_images_are_pinned():
    done = helm_template(None, "--set", "image.tag=latest")
    assert done.returncode != 0


def test_ray_chart_start_commands_install_nothing():
    text = rendered()
    assert "apt-get" not in text and "pip install" not in text and "git pull" not in text


# ---- the start scripts, run for real under bash -----------------------------------------------------------
def _worker_script(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """The rendered worker command, its host folders pointed at tmp_path, and a stub ldconfig on PATH."""
    values = raychart.values(settings())
    values["hostPaths"] = {"nvidia": {"path": "/host/nvidia", "mountPath": str(tmp_path / "nvidia")},
                           "gib": {"path": "/host/gib", "mountPath": str(tmp_path / "gib")}}
    values["worker"]["ncclTunerConfig"] = str(tmp_path / "gib" / "configs" / "tuner_config_a4.txtpb")
    done = helm_template(values)
    assert done.returncode == 0, done.stderr
    container = _worker_container(raycluster(done.stdout))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ldconfig").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "ldconfig").chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "KUBERAY_GEN_RAY_START_CMD": "echo RAY-START --block"}
    return container["command"] + container["args"], env


def _gib(tmp_path: Path, nccl_env: str = "export NCCL_NET=gIB\n", tuner: bool = True) -> None:
    (tmp_path / "gib" / "scripts").mkdir(parents=True)
    (tmp_path / "gib" / "configs").mkdir(parents=True)
    (tmp_path / "gib" / "scripts" / "set_nccl_env.sh").write_text(nccl_env)
    if tuner:
        (tmp_path / "gib" / "configs" / "tuner_config_a4.txtpb").write_text("")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ray_chart_worker_script_execs_ray_start_when_the_plugin_is_there(tmp_path):
    argv, env = _worker_script(tmp_path)
    _gib(tmp_path)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("RAY-START --block")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ray_chart_worker_script_stops_before_ray_without_the_nccl_plugin(tmp_path):
    argv, env = _worker_script(tmp_path)  # no gib folder: the NCCL installer has not run on this node
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "RAY-START" not in done.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ray_chart_worker_script_stops_before_ray_when_the_nccl_env_script_fails(tmp_path):
    argv, env = _worker_script(tmp_path)
    _gib(tmp_path, nccl_env="false\n")
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "RAY-START" not in done.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ray_chart_worker_script_stops_before_ray_without_the_tuner_file(tmp_path):
    argv, env = _worker_script(tmp_path)
    _gib(tmp_path, tuner=False)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "tuner file" in done.stderr and "RAY-START" not in done.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ray_chart_worker_script_keeps_our_tuner_file_over_the_plugins(tmp_path):
    argv, env = _worker_script(tmp_path)
    _gib(tmp_path, nccl_env="export NCCL_TUNER_CONFIG_PATH=/elsewhere/tuner_config_other.txtpb\n")
    env["KUBERAY_GEN_RAY_START_CMD"] = 'echo "TUNER=$NCCL_TUNER_CONFIG_PATH"'
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(f"TUNER={tmp_path}/gib/configs/tuner_config_a4.txtpb")


# ---- Ray's session logs outlive the pod (issue 12) ----------------------------------------------------------
FAKE_RAY = """\
mkdir -p "$RAY_TMP/session_2026-01-01_00-00-00_000000_1/logs"
ln -sfn "$RAY_TMP/session_2026-01-01_00-00-00_000000_1" "$RAY_TMP/session_latest"
printf 'Traceback (most recent call last):\\nValueError: boom in an actor\\n' \\
  > "$RAY_TMP/session_latest/logs/worker-abc-01000000-4121.err"
trap 'echo "raylet: received SIGTERM" >> "$RAY_TMP/session_latest/logs/raylet.out"; exit 0' TERM
echo RAY-STARTED
while true; do sleep 0.05; done
"""


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_ray_chart_worker_error_log_is_on_data_after_the_pod_is_deleted(tmp_path):
    import signal
    import time

    argv, env = _worker_script(tmp_path)
    _gib(tmp_path)
    values_dir, pod_tmp = tmp_path / "data", tmp_path / "pod-tmp" / "ray"
    pod_tmp.parent.mkdir()
    # Same render, with the pod's /tmp/ray and /data pointed into tmp_path.
    values = raychart.values(settings())
    values["hostPaths"] = {"nvidia": {"path": "/host/nvidia", "mountPath": str(tmp_path / "nvidia")},
                           "gib": {"path": "/host/gib", "mountPath": str(tmp_path / "gib")}}
    values["worker"]["ncclTunerConfig"] = str(tmp_path / "gib" / "configs" / "tuner_config_a4.txtpb")
    values["data"]["rayLogDir"] = str(values_dir / "ray-logs")
    values["rayTmpDir"] = str(pod_tmp)
    done = helm_template(values)
    assert done.returncode == 0, done.stderr
    container = _worker_container(raycluster(done.stdout))
    env.update({"KUBERAY_GEN_RAY_START_CMD": FAKE_RAY, "RAY_TMP": str(pod_tmp), "HOSTNAME": "worker-abcde"})
    pod = subprocess.Popen(container["command"] + container["args"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not (pod_tmp / "session_latest" / "logs" / "worker-abc-01000000-4121.err").exists():
        assert time.monotonic() < deadline and pod.poll() is None, pod.stderr.read() if pod.poll() else ""
        time.sleep(0.05)
    pod.send_signal(signal.SIGTERM)  # the kubelet stops the pod: a Spot node taken back
    out, err = pod.communicate(timeout=20)
    assert pod.returncode == 0, err
    shutil.rmtree(pod_tmp.parent)  # the pod, and its /tmp, are gone
    shipped = list((values_dir / "ray-logs").glob("*/worker-abc-01000000-4121.err"))
    assert len(shipped) == 1 and "ValueError: boom in an actor" in shipped[0].read_text()
    assert "received SIGTERM" in (shipped[0].parent / "raylet.out").read_text()  # the last copy, after Ray stopped


def test_ray_chart_head_and_workers_ship_their_ray_logs_to_data():
    rc = raycluster(rendered())
    head = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["args"][0]
    worker = _worker_container(rc)["args"][0]
    for script in (head, worker):
        assert 'RAY_LOGS_DST="/data/ray-logs/$(hostname)"' in script and "ship_ray_logs\nexit" in script
        assert "exec /bin/bash" not in script  # Ray runs as a child, so the pod's SIGTERM reaches the trap


def test_ray_chart_one_hugging_face_cache_for_pods_and_jobs():
    from nemo_rl_gke import podpaths

    assert raychart.values(settings())["data"]["hfHome"] == podpaths.HF_HOME == "/data/huggingface"


# ---- the pod-template hash: what ray.deploy compares to find pods KubeRay left on an older spec ------------
# Strings that Go's YAML (helm's and kubectl's) may read as something else when written plain.
GO_AMBIGUOUS = ["0123456789012345", "123456789012e123", "0e12345678901234", "1e5", "1_000", "0x1F", "0o17", ".5",
                "+1", "-2", "12:30", "-.inf", ".NaN", "y", "N", "yes", "On", "off", "TRUE", "null", "~", "",
                "1234567890123456", "10.0.0.0/8"]


def test_go_yaml_strings_are_strings_to_helms_yaml(tmp_path):
    """render.go_yaml (the Helm values and every manifest we apply) read by Go's YAML, in the real helm:
    every string stays a string; PyYAML's plain dump turns some of them into numbers or booleans."""
    from nemo_rl_gke.render import go_yaml

    chart = tmp_path / "kinds"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: kinds\nversion: 0.1.0\n")
    (chart / "templates" / "kinds.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kinds}\ndata:\n"
        "{{- range $i, $v := .Values.items }}\n  k{{ $i }}: {{ kindOf $v | quote }}\n{{- end }}\n")

    def kinds(text: str) -> list[str]:
        done = subprocess.run([_helm(), "template", "k", str(chart), "--values=-"], input=text,
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        data = objects(done.stdout)[0]["data"]
        return [data[f"k{i}"] for i in range(len(GO_AMBIGUOUS))]

    assert kinds(go_yaml({"items": GO_AMBIGUOUS})) == ["string"] * len(GO_AMBIGUOUS)
    assert kinds(yaml.safe_dump({"items": GO_AMBIGUOUS})) != ["string"] * len(GO_AMBIGUOUS)  # what it mends


@pytest.mark.parametrize("digest", ["0123456789012345", "123456789012e123", "0e12345678901234",
                                    "1234567890123456", "abcdef0123456789"])
def test_ray_chart_takes_the_values_text_we_send_whatever_the_hash_looks_like(monkeypatch, digest):
    """values_yaml, the very text ray.deploy pipes to helm, read by the real helm (Go's YAML, the schema)."""
    monkeypatch.setattr(raychart, "pod_template_hash", lambda s, values: digest)
    done = subprocess.run([_helm(), "template", "nemo-rl", str(CHART), "--namespace=default", "--values=-"],
                          input=raychart.values_yaml(settings()), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    rc = raycluster(done.stdout)
    assert rc["spec"]["headGroupSpec"]["template"]["metadata"]["annotations"][raychart.POD_TEMPLATE_HASH] == digest


@pytest.mark.parametrize(("gpu", "mode", "nodes"), VARIANTS)
def test_ray_chart_every_pod_template_carries_the_values_hash(gpu, mode, nodes):
    rc = raycluster(rendered(gpu, mode, nodes))
    wanted = raychart.values(settings(gpu, mode, nodes))["podTemplateHash"]
    for template in (rc["spec"]["headGroupSpec"]["template"], worker_group(rc)["template"]):
        assert template["metadata"]["annotations"][raychart.POD_TEMPLATE_HASH] == wanted
