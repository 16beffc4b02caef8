"""The GKE cluster (Standard or Autopilot), its credentials, the GPU node pool with nine extra NICs, the
NCCL RDMA installer (pinned), and the network mapping the Ray workers' interfaces refer to."""

from __future__ import annotations

import json

from .. import names, render
from ..commands import gcloud, kubectl
from ..graph import Step
from ..runner import Runner
from ..settings import Settings
from . import net_steps as net
from .step_shapes import check, creator, deleter

CLUSTER = "cluster.cluster"
CREDENTIALS = "cluster.credentials"
GPU_POOL = "cluster.gpu-pool"
NCCL = "cluster.nccl-installer"
NETWORK_MAPPING = "cluster.network-mapping"


def _credentials(s: Settings):
    def fetch(r: Runner) -> None:
        r.run(gcloud.get_credentials(s))

    return fetch


def network_mapping_present(r: Runner, s: Settings) -> bool:
    """All nine GKENetworkParamSets exist and point at our VPCs and subnets."""
    wanted = {doc["metadata"]["name"]: doc["spec"] for doc in render.load_all(render.network_mapping(s))
              if doc["kind"] == "GKENetworkParamSet"}
    result = r.query(kubectl.get(s, "gkenetworkparamsets.networking.gke.io", *wanted))
    if result is None:
        return False
    if not result.ok:
        if result.not_found:
            return False
        raise r.failure(result)
    body = json.loads(result.stdout or "{}")
    items = body.get("items", [body]) if body.get("kind", "").endswith("List") else [body]
    found = {item["metadata"]["name"]: item.get("spec", {}) for item in items}
    return all(found.get(name, {}).get(k) == v for name, spec in wanted.items() for k, v in spec.items())


def _apply_network_mapping(s: Settings):
    def apply(r: Runner) -> None:
        text = render.network_mapping(s)
        r.run(kubectl.apply_stdin(s), stdin=text, stdin_label=f"manifests/network-mapping.yaml rendered "
                                                              f"({len(render.load_all(text))} objects)")

    return apply


def other_deployments(r: Runner, s: Settings) -> list[str]:
    """The other deployments in the project: clusters carrying our managed-by label, other than CLUSTER_NAME.

    They may share our VPCs, peering, Lustre instance and bucket: a teardown keeps those while any is left."""
    result = r.query(gcloud.clusters_list(s), ok_codes=range(256))
    if result is None or not result.ok:
        if result is not None and not result.not_found:
            raise r.failure(result)
        return []
    try:
        items = json.loads(result.stdout or "[]")
    except json.JSONDecodeError:
        return []
    found = []
    for item in items if isinstance(items, list) else []:
        labels = item.get("resourceLabels") or {}
        name = str(item.get("name") or "")
        if labels.get("managed-by") == names.MANAGED_BY and name and name != s.CLUSTER_NAME:
            found.append(name)
    return sorted(set(found))


def steps(s: Settings) -> list[Step]:
    mode = "Autopilot" if s.autopilot else "Standard"
    out = [
        Step(CLUSTER, f"{mode} cluster {s.CLUSTER_NAME}", check(gcloud.cluster_describe(s)),
             creator(gcloud.cluster_create(s), timeout=3600), deleter(gcloud.cluster_delete(s)),
             deps=(net.MAIN,), create_seconds=540 if s.autopilot else 420, delete_seconds=300),
        Step(CREDENTIALS, f"credentials for {s.CLUSTER_NAME}", lambda r: False, _credentials(s), None,
             deps=(CLUSTER,), always=True, mutating=False, parent=CLUSTER, create_seconds=2),
    ]
    if not s.autopilot:
        # Autopilot provisions GPU nodes from the pods' selectors; Standard needs the pool with its NICs.
        out.append(Step(GPU_POOL, f"GPU node pool {names.GPU_POOL} ({s.GPU_NODES} × {s.gpu.machine_type})",
                        check(gcloud.node_pool_describe(s)), creator(gcloud.node_pool_create(s), timeout=3600),
                        # Deleted with the cluster: a separate 4-minute pool delete first would only add time.
                        None, deps=(CLUSTER, *net.SUBNET_STEPS), parent=CLUSTER, create_seconds=600,
                        delete_seconds=240))
    out += [
        Step(NCCL, "NCCL RDMA installer (pinned)", check(kubectl.nccl_installer_get(s)),
             creator(kubectl.nccl_installer_apply(s)), None, deps=(CREDENTIALS,), parent=CLUSTER, create_seconds=2),
        Step(NETWORK_MAPPING, "network mapping gvnic-1, rdma-0..7", lambda r: network_mapping_present(r, s),
             _apply_network_mapping(s), None, deps=(CREDENTIALS,), parent=CLUSTER, create_seconds=2),
    ]
    return out

