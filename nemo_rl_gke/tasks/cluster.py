"""`cluster`: the GKE cluster (Standard or Autopilot), the GPU node pool with RDMA NICs, the NCCL RDMA
installer, and the network mapping.

Examples:
    invoke cluster.create --gpu=h200 --nodes=2 --spot
    invoke cluster.create --mode=autopilot
    invoke --dry cluster.create --gpu=b200 --reservation=my-a4-reservation
"""

from invoke import Collection

from . import context

FLAG_HELP = {
    "gpu": "b200 or h200 (or nvidia-b200 / nvidia-h200-141gb); overrides GPU_TYPE.",
    "mode": "standard or autopilot; overrides CLUSTER_MODE.",
    "nodes": "GPU nodes (8 GPUs each); overrides GPU_NODES.",
    "spot": "Use Spot VMs for the GPU pool; overrides SPOT.",
    "reservation": "Consume this reservation for the GPU pool; overrides RESERVATION.",
}


def cluster_settings(c, gpu=None, mode=None, nodes=None, spot=False, reservation=None):
    """Flags over .env. --spot and --reservation exclude each other; either one replaces the other's .env value."""
    from ..settings import ConfigError

    if spot and reservation:
        raise ConfigError("--reservation", reservation, "--spot and --reservation exclude each other: give one.")
    overrides = {"GPU_TYPE": gpu, "CLUSTER_MODE": mode, "GPU_NODES": nodes}
    if spot:
        overrides.update(SPOT=True, RESERVATION="")
    if reservation:
        overrides.update(RESERVATION=reservation, SPOT=False)
    return context.settings(c, **overrides)


def _steps(s):
    from ..resources import cluster_steps as cluster

    return cluster.steps(s)


@context.task(help=FLAG_HELP)
def create(c, gpu=None, mode=None, nodes: int | None = None, spot=False, reservation=None):
    """Create the cluster, GPU node pool, NCCL installer and network mapping (skips what exists)."""
    s = cluster_settings(c, gpu, mode, nodes, spot, reservation)
    context.apply_steps(c, s, _steps(s))


@context.task
def credentials(c):
    """Fetch kubectl credentials for the cluster."""
    from ..resources import cluster_steps as cluster

    s = context.settings(c)
    context.apply_steps(c, s, [step for step in _steps(s) if step.name == cluster.CREDENTIALS])


@context.task(help={"json_": context.JSON_HELP})
def status(c, json_=False):
    """Show whether the cluster, GPU pool, NCCL installer and network mapping exist."""
    context.status_task(c, "cluster {s.CLUSTER_NAME}", _steps, as_json=json_, kind="cluster.status")


@context.task(help={"yes": "Answer yes to the confirmation (needed without a terminal)."})
def delete(c, yes=False):
    """Delete the cluster and everything in it (GPU pool, Ray, network mapping)."""
    s = context.settings(c)
    context.confirm(c, f"Delete cluster {s.CLUSTER_NAME} in {s.region} with its GPU nodes?", yes=yes)
    context.destroy_steps(c, s, _steps(s))


ns = Collection("cluster", create, credentials, status, delete)
