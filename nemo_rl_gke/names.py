"""Names of everything we create, derived from Settings in one place."""

from __future__ import annotations

from .settings import Settings

# Written into the description of networks, subnets and firewall rules (which have no labels) and as a
# label where labels exist: `down` deletes only what carries it, and the leftover scan looks for it.
MANAGED_BY = "nemo-rl-gke"
DESCRIPTION = f"managed-by={MANAGED_BY}"
LABELS = f"managed-by={MANAGED_BY}"
# A deployment is one CLUSTER_NAME. What belongs to one deployment alone (its cluster, its firewall rule, the
# Lustre instance and bucket it created) also carries `deployment=<CLUSTER_NAME>`: another deployment's `down`
# never deletes it. What deployments share (the VPCs and subnets, the peering, Lustre, the bucket) is deleted
# only when no other deployment's cluster is left in the project.
DEPLOYMENT_KEY = "deployment"


def deployment_labels(s: Settings) -> str:
    """`--labels=` value for what one deployment creates: our marker and the deployment's name."""
    return f"{LABELS},{DEPLOYMENT_KEY}={s.CLUSTER_NAME}"


def deployment_description(s: Settings) -> str:
    """Description for label-less resources that belong to one deployment (its firewall rule)."""
    return f"{DESCRIPTION} {DEPLOYMENT_KEY}={s.CLUSTER_NAME}"

GPU_POOL = "gpu-pool"
RDMA_SUBNETS = 8
GVNIC_RANGE = "192.168.0.0/24"
GVNIC_SOURCE_RANGES = "192.168.0.0/16"
FIREWALL_RULES = "tcp:0-65535,udp:0-65535,icmp"
SECRET_NAME = "nemo-rl-secrets"
LUSTRE_PV = "lustre-pv"
LUSTRE_PVC = "lustre-pvc"
LUSTRE_FILESYSTEM = "lustrefs"
RAY_RELEASE = "nemo-rl"


def gvnic_network(s: Settings) -> str:
    return f"{s.GVNIC_NETWORK_PREFIX}-net"


def gvnic_subnet(s: Settings) -> str:
    return f"{s.GVNIC_NETWORK_PREFIX}-sub"


def gvnic_firewall(s: Settings) -> str:
    # One rule per deployment (two deployments may share the gVNIC VPC): named with the cluster.
    return f"{s.GVNIC_NETWORK_PREFIX}-{s.CLUSTER_NAME}-internal"


def rdma_network(s: Settings) -> str:
    return f"{s.RDMA_NETWORK_PREFIX}-net"


def rdma_subnet(s: Settings, index: int) -> str:
    return f"{s.RDMA_NETWORK_PREFIX}-sub-{index}"


def rdma_range(index: int) -> str:
    return f"192.168.{index + 1}.0/24"


def rdma_profile(s: Settings) -> str:
    # The RoCE network profile is zonal: the zone that has the GPUs (the tutorial wrongly writes the region).
    return f"{s.NODE_LOCATION}-vpc-roce"


def lustre_range(s: Settings) -> str:
    return f"{s.LUSTRE_NAME}-range"


def additional_networks(s: Settings) -> list[tuple[str, str]]:
    """(network, subnetwork) for the GPU nodes' extra NICs: the gVNIC one, then RDMA 0..7."""
    return [(gvnic_network(s), gvnic_subnet(s))] + [(rdma_network(s), rdma_subnet(s, n)) for n in range(RDMA_SUBNETS)]

# The Ray head pod's container (manifests/ray-cluster): every `kubectl exec` into the head names it.
HEAD_CONTAINER = "ray-head"
