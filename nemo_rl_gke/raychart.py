"""Settings -> the Helm values of manifests/ray-cluster (pure).

Every decision about the Ray cluster's shape lives here, in one function per decision, so it can be
tested without helm: worker replicas = GPU_NODES, the GPU type's node selector and NCCL tuner file, the
Standard/Autopilot differences, the head's size and placement, the image and its Ray version, and the
names of what the storage layer created (Secret, service account, Lustre claim). Also the chart's head
Service (name, dashboard and client ports) and the `kubectl port-forward` to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import names, podpaths
from .commands import kubectl
from .render import NETWORK_MAPPING_NAMES
from .settings import REPO_ROOT, ConfigError, Settings

CHART_DIR: Path = REPO_ROOT / "manifests" / "ray-cluster"
WORKER_GROUP = "gpu-workers"

# Standard clusters get one CPU pool of n2-highmem-16 (16 vCPU, 128 GB) from `cluster.create`. What a pod
# can ask of such a node after GKE's reservations and the system DaemonSets, rounded down.
CPU_POOL = "default-pool"
CPU_POOL_MACHINE = "n2-highmem-16"
CPU_POOL_ALLOCATABLE_CPU = 15
CPU_POOL_ALLOCATABLE_MEMORY_GI = 104
HEAD_CPU = 12
HEAD_MEMORY_GI = 96
# Autopilot's general-purpose pods may ask at most 6.5 GiB of memory per vCPU; above that it silently
# raises the CPU request (and the bill). The head keeps 12 CPU and takes the most memory that allows.
AUTOPILOT_MEMORY_PER_CPU_GI = 6.5
AUTOPILOT_MAX_CPU = 28

HF_HOME = podpaths.HF_HOME  # one Hugging Face cache on /data, for the pods and the jobs' drivers alike
LOG_DIR = "/data/logs"
RAY_LOG_DIR = "/data/ray-logs"  # Ray's session logs of every pod, copied under the pod's name
RAY_TMP_DIR = "/tmp/ray"
LOG_SHIP_SECONDS = 30


def image(s: Settings) -> dict[str, str]:
    """nvcr.io/nvidia/nemo-rl:v0.5.0 -> repository + tag (or digest)."""
    if "@" in s.NEMO_RL_IMAGE:
        repository, digest = s.NEMO_RL_IMAGE.split("@", 1)
        return {"repository": repository, "digest": digest, "pullPolicy": "IfNotPresent"}
    repository, tag = s.NEMO_RL_IMAGE.rsplit(":", 1)
    return {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"}


def head_resources(s: Settings, cpu: int | None = None, memory_gi: int | None = None) -> tuple[int, int]:
    """(CPU, memory GiB) of the head: 12 / 96Gi on Standard, 12 / 78Gi on Autopilot unless given."""
    cpu = HEAD_CPU if cpu is None else cpu
    if s.autopilot:
        most = int(cpu * AUTOPILOT_MEMORY_PER_CPU_GI)
        memory_gi = min(HEAD_MEMORY_GI, most) if memory_gi is None else memory_gi
        if not 1 <= cpu <= AUTOPILOT_MAX_CPU:
            raise ConfigError("--head-cpu", cpu,
                              f"an Autopilot general-purpose pod takes 1 to {AUTOPILOT_MAX_CPU} CPU.")
        if not cpu <= memory_gi <= most:
            raise ConfigError("--head-memory", memory_gi,
                              f"on Autopilot, give {cpu} CPU {cpu} to {most} GiB (1 to 6.5 GiB per CPU).")
        return cpu, memory_gi
    memory_gi = HEAD_MEMORY_GI if memory_gi is None else memory_gi
    pool = f"the head runs on the {CPU_POOL} ({CPU_POOL_MACHINE}), which has"
    most_cpu, most_memory = CPU_POOL_ALLOCATABLE_CPU, CPU_POOL_ALLOCATABLE_MEMORY_GI
    if not 1 <= cpu <= most_cpu:
        raise ConfigError("--head-cpu", cpu, f"{pool} {most_cpu} CPU to give; use 1 to {most_cpu}.")
    if not 4 <= memory_gi <= most_memory:
        raise ConfigError("--head-memory", memory_gi,
                          f"{pool} {most_memory} GiB to give; use 4 to {most_memory}.")
    return cpu, memory_gi


def head_pool(s: Settings) -> str:
    # Standard: the CPU pool by name (the tutorial's head asked for 64 CPU / 500G there and never ran).
    # Autopilot: no pool; a general-purpose node is provisioned for the head (the chart ignores cpuPool).
    return "" if s.autopilot else CPU_POOL


def shm_gi(memory_gi: int) -> int:
    """/dev/shm for a pod: a third of its memory (Ray's object store takes 30% by default and lives there)."""
    return max(1, memory_gi // 3)


def worker_node_selector(s: Settings) -> dict[str, str]:
    """The GPU type's accelerator label; on Autopilot also what makes Autopilot provision the right node."""
    selector = dict(s.gpu.node_selector)
    if not s.autopilot:
        return selector
    selector["cloud.google.com/compute-class"] = "Performance"
    selector["cloud.google.com/gke-accelerator-count"] = str(s.gpu.gpus_per_node)
    if s.SPOT:
        selector["cloud.google.com/gke-spot"] = "true"
    if s.RESERVATION:
        parts = s.RESERVATION.split("/")
        selector["cloud.google.com/reservation-affinity"] = "specific"
        if s.RESERVATION.startswith("projects/"):
            selector["cloud.google.com/reservation-project"] = parts[1]
            selector["cloud.google.com/reservation-name"] = parts[3]
        else:
            selector["cloud.google.com/reservation-name"] = s.RESERVATION
    return selector


def interfaces() -> list[dict[str, str]]:
    """eth0 -> the pod network, eth1 -> gvnic-1, eth2..eth9 -> rdma-0..7 (manifests/network-mapping.yaml)."""
    networks = ["default", *NETWORK_MAPPING_NAMES]
    return [{"interfaceName": f"eth{n}", "network": network} for n, network in enumerate(networks)]


def values(s: Settings, *, head_cpu: int | None = None, head_memory_gi: int | None = None) -> dict[str, Any]:
    """The complete values for `helm upgrade --install` / `helm template` of manifests/ray-cluster."""
    gpu = s.gpu
    cpu, memory_gi = head_resources(s, head_cpu, head_memory_gi)
    out: dict[str, Any] = {
        "image": image(s),
        "rayVersion": s.ray_version,
        "mode": s.CLUSTER_MODE,
        "serviceAccountName": s.KSA_NAME,
        "secretName": names.SECRET_NAME,
        "data": {"claimName": names.LUSTRE_PVC, "mountPath": "/data", "hfHome": HF_HOME, "logDir": LOG_DIR,
                 "rayLogDir": RAY_LOG_DIR},
        "rayTmpDir": RAY_TMP_DIR,
        "logShipSeconds": LOG_SHIP_SECONDS,
        "head": {
            "cpuPool": head_pool(s),
            "nodeSelector": {},
            "tolerations": [],
            "cpu": str(cpu),
            "memory": f"{memory_gi}Gi",
            "shmSize": f"{shm_gi(memory_gi)}Gi",
            "rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": "0"},
        },
        "worker": {
            "groupName": WORKER_GROUP,
            "replicas": s.GPU_NODES,
            "gpus": gpu.gpus_per_node,
            "cpu": str(gpu.worker_cpu),
            "memory": f"{gpu.worker_memory_gi}Gi",
            "shmSize": f"{gpu.shm_gi}Gi",
            "nodeSelector": worker_node_selector(s),
            "ncclTunerConfig": gpu.tuner_config,
            "defaultInterface": "eth0",
            "interfaces": interfaces(),
        },
        "env": {"RAY_memory_monitor_refresh_ms": "0"},
    }
    out["podTemplateHash"] = pod_template_hash(s, out)
    return out


# On both pod templates (head and workers), so on every Ray pod: what its spec was made from. KubeRay v1.4.2 does
# not restart running pods when the RayCluster's templates change (only the worker count is reconciled), so
# `ray.deploy` compares this with the pods' own to find pods started from an older spec.
POD_TEMPLATE_HASH = "nemo-rl-gke/pod-template-hash"


def pod_template_hash(s: Settings, chart_values: dict[str, Any]) -> str:
    """16 hex digits over what the pods are made from: the values except the worker count (a count change is
    KubeRay's to reconcile, without a restart), the chart's templates, and the Secret's values (pods read them
    as environment variables at start only). A digest of the Secret's values, never the values."""
    import hashlib
    import json

    from .commands.kube_objects import secret_values

    shape = json.loads(json.dumps(chart_values))
    shape.pop("podTemplateHash", None)
    shape.get("worker", {}).pop("replicas", None)
    digest = hashlib.sha256(json.dumps(shape, sort_keys=True).encode())
    for template in sorted((CHART_DIR / "templates").iterdir()):
        if template.is_file():
            digest.update(template.name.encode() + b"\0" + template.read_bytes())
    digest.update(b"\0".join(f"{key}={value}".encode() for key, value in sorted(secret_values(s).items())))
    return digest.hexdigest()[:16]


def values_yaml(s: Settings, **head: int | None) -> str:
    from .render import go_yaml

    header = f"# Helm values for {names.RAY_RELEASE} from {s.source or 'settings'} (nemo_rl_gke.raychart)\n"
    return header + go_yaml(values(s, **head))


def expected_gpus(s: Settings) -> int:
    return s.GPU_NODES * s.gpu.gpus_per_node


def head_service(s: Settings) -> str:
    # KubeRay names the head's Service <RayCluster name>-head-svc; the RayCluster is named after the release.
    return f"{names.RAY_RELEASE}-head-svc"


DASHBOARD_PORT = 8265  # the head Service's dashboard port (manifests/ray-cluster)
CLIENT_PORT = 10001  # the head Service's Ray client port (ray://)


def port_forward_argv(s: Settings, ports: dict[int, int] | int = DASHBOARD_PORT) -> list[str]:
    """kubectl port-forward to the head Service; ports maps local port -> the Service's port."""
    if isinstance(ports, int):
        ports = {ports: DASHBOARD_PORT}
    return kubectl.base(s) + ["port-forward", f"service/{head_service(s)}",
                              *(f"{local}:{remote}" for local, remote in ports.items()),
                              f"--namespace={s.NAMESPACE}"]
