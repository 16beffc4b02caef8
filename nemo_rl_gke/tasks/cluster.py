"""`cluster`: the GKE cluster (Standard or Autopilot), the GPU node pool with RDMA NICs, the NCCL RDMA
installer, and the network mapping.

Examples:
    invoke cluster.create --gpu=h200 --nodes=2 --spot
    invoke cluster.create --mode=autopilot
    invoke --dry cluster.create --gpu=b200 --reservation=my-a4-reservation
"""

from __future__ import annotations

from typing import Any

from invoke.collection import Collection
from invoke.context import Context

from ..settings import GPU_PROFILES, Settings
from . import context

FLAG_HELP = {
    "gpu": f"{' or '.join(GPU_PROFILES)} (or {' / '.join(p.accelerator for p in GPU_PROFILES.values())}); "
           f"overrides GPU_TYPE.",
    "mode": "standard or autopilot; overrides CLUSTER_MODE.",
    "nodes": "GPU nodes (8 GPUs each); overrides GPU_NODES.",
    "spot": "Use Spot VMs for the GPU pool; overrides SPOT.",
    "reservation": "Consume this reservation for the GPU pool; overrides RESERVATION.",
}


def cluster_settings(c: Context, gpu: str | None = None, mode: str | None = None, nodes: int | None = None,
                     spot: bool = False, reservation: str | None = None) -> Settings:
    """Flags over .env. --spot and --reservation exclude each other; either one replaces the other's .env value."""
    from ..settings import ConfigError

    if spot and reservation:
        raise ConfigError("--reservation", reservation, "--spot and --reservation exclude each other: give one.")
    overrides: dict[str, Any] = {"GPU_TYPE": gpu, "CLUSTER_MODE": mode, "GPU_NODES": nodes}
    if spot:
        overrides.update(SPOT=True, RESERVATION="")
    if reservation:
        overrides.update(RESERVATION=reservation, SPOT=False)
    return context.settings(c, **overrides)


def _steps(s: Settings) -> list[Any]:
    from ..resources import layer_steps

    return layer_steps(s, "cluster")


@context.task(help={**FLAG_HELP, "force_unlock": context.UNLOCK_HELP})
def create(c: Context, gpu: str | None = None, mode: str | None = None, nodes: int | None = None,
           spot: bool = False, reservation: str | None = None, force_unlock: bool = False) -> None:
    """Create the cluster, GPU node pool, NCCL installer and network mapping (skips what exists)."""
    s = cluster_settings(c, gpu, mode, nodes, spot, reservation)
    context.require_tools(c, "cluster.create", ("gcloud", "kubectl", "gke-gcloud-auth-plugin"))
    with context.deployment_locked(c, s, "cluster.create", force=force_unlock):
        steps = _steps(s)
        r = context.runner(c, s)
        if not r.dry:  # an existing cluster or pool of another kind is not "created": refused, as `up` does
            from ..resources import cluster_features
            from . import drift

            found = drift.existing(r, s, context.present_map(r, steps), steps)
            drift.refuse_on(s, found, what="cluster.create", fields=("mode", "gpu", "nodes", "capacity", "feature"))
            cluster_features.say_note(r, s, found.cluster_off)
        context.apply_steps(c, s, steps, what="cluster.create")


@context.task
def credentials(c: Context) -> None:
    """Fetch kubectl credentials for the cluster."""
    from ..resources import cluster_steps as cluster

    s = context.settings(c)
    context.apply_steps(c, s, [step for step in _steps(s) if step.name == cluster.CREDENTIALS])


@context.task(help={"json_": context.JSON_HELP})
def status(c: Context, json_: bool = False) -> None:
    """Show whether the cluster, GPU pool, NCCL installer and network mapping exist."""
    context.status_task(c, "cluster {s.CLUSTER_NAME}", _steps, as_json=json_, kind="cluster.status",
                        reads="shows whether the cluster, GPU pool, NCCL installer and network mapping exist")


@context.task(help={"yes": context.YES_ONE_HELP,
                    "force_unlock": context.UNLOCK_HELP})
def delete(c: Context, yes: bool = False, force_unlock: bool = False) -> None:
    """Delete the cluster and everything in it (GPU pool, Ray, network mapping); Lustre and the bucket stay."""
    from .clean import clean_layer

    clean_layer(c, "cluster", yes=yes, force_unlock=force_unlock, what="cluster.delete")


ns = Collection("cluster", create, credentials, status, delete)
