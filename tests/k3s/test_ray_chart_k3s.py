"""The chart installed on a real API server: testcontainers' K3s, the pinned RayCluster CRD applied, our
release installed with helm, and the stored RayCluster read back (a real server prunes unknown fields, so
what comes back is what KubeRay would see).

`nox -s k3s` (not default). Needs Docker and the rancher/k3s image; without either, every test here skips
and says which is missing. No image can be pulled on our CI machine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from nemo_rl_gke import raychart
from nemo_rl_gke import settings as settings_module
from support.schemas import crd_path

pytestmark = pytest.mark.k3s
K3S_IMAGE = "rancher/k3s:v1.31.6-k3s1"  # the Kubernetes minor our schemas check against
CHART = Path(raychart.CHART_DIR)


def _docker_client():
    try:
        import docker
    except ImportError:
        pytest.skip("needs the docker Python package (installed with testcontainers)")
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any reason Docker cannot be reached is a skip reason
        pytest.skip(f"needs a reachable Docker daemon for testcontainers' K3s: {exc}")
    return client


def _ensure_image(client) -> None:
    try:
        client.images.get(K3S_IMAGE)
        return
    except Exception:  # noqa: BLE001 - not present locally: try to pull it
        pass
    try:
        client.images.pull(K3S_IMAGE)
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cannot pull {K3S_IMAGE} (no registry access here?): {exc}")


def _tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        pytest.skip(f"needs {name} on PATH")
    return found


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory) -> Path:
    crd = crd_path("ray.io_rayclusters.yaml")
    _tool("kubectl")
    _tool("helm")
    client = _docker_client()
    _ensure_image(client)
    from testcontainers.community.k3s import K3SContainer

    with K3SContainer(image=K3S_IMAGE) as k3s:
        path = tmp_path_factory.mktemp("k3s") / "kubeconfig.yaml"
        path.write_text(k3s.config_yaml())
        # Server-side: the CRD is too large for the last-applied annotation of a client-side apply.
        _run(["kubectl", f"--kubeconfig={path}", "apply", "--server-side", f"--filename={crd}"])
        _run(["kubectl", f"--kubeconfig={path}", "wait", "--for=condition=Established",
              "crd/rayclusters.ray.io", "--timeout=120s"])
        yield path


def _run(argv: list[str], stdin: str | None = None) -> str:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, f"{argv}: {done.stderr}"
    return done.stdout


@pytest.mark.parametrize(("gpu", "mode", "nodes"), [("b200", "standard", 2), ("h200", "autopilot", 4)])
def test_k3s_accepts_the_raycluster_with_its_annotations(kubeconfig, gpu, mode, nodes):
    s = settings_module.load(allow_example=True, environ={}, cwd=CHART, GPU_TYPE=gpu, CLUSTER_MODE=mode,
                             GPU_NODES=nodes)
    namespace = f"{gpu}-{mode}"
    _run(["kubectl", f"--kubeconfig={kubeconfig}", "create", "namespace", namespace])
    _run(["helm", "upgrade", "--install", "nemo-rl", str(CHART), f"--kubeconfig={kubeconfig}",
          f"--namespace={namespace}", "--values=-"], stdin=raychart.values_yaml(s))
    stored = json.loads(_run(["kubectl", f"--kubeconfig={kubeconfig}", "get", "raycluster", "nemo-rl",
                              f"--namespace={namespace}", "--output=json"]))
    (group,) = stored["spec"]["workerGroupSpecs"]
    annotations = group["template"]["metadata"]["annotations"]
    assert group["replicas"] == nodes
    assert len(json.loads(annotations["networking.gke.io/interfaces"])) == 10
    assert annotations["ray.io/overwrite-container-cmd"] == "true"
    selector = group["template"]["spec"]["nodeSelector"]
    assert selector["cloud.google.com/gke-accelerator"] == s.gpu.accelerator
