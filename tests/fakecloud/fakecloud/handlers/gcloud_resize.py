"""gcloud: a GPU pool's size after creation. A node pool's describe keeps `initialNodeCount` (its size at
creation); its current size is the `targetSize` of its managed instance groups (one per zone, named in the pool's
`instanceGroupUrls`), which `gcloud container clusters resize --node-pool` changes. The fake keeps that size in
the pool's private `_size` (per zone), so deleting the pool or the cluster takes it along."""

from __future__ import annotations

import time
from typing import Any

from ..core import Ctx, Fail, command, gcloud_error


def group_url(project: str, zone: str, cluster: str, pool: str) -> str:
    return (f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}/instanceGroupManagers/"
            f"gke-{cluster}-{pool}-0f1e2d3c-grp")[:200]


def target_size(pool: dict[str, Any]) -> int:
    """The pool's size per zone as its instance groups' targetSize says it: a resize's, at once."""
    return int(pool.get("_size", pool.get("initialNodeCount", 0)))


def pool_size(pool: dict[str, Any]) -> int:
    """The nodes the pool has per zone now: during a resize that grows it, its old size until the resize's
    operation ends (the new VMs come up meanwhile); a shrink takes them away at once."""
    if time.time() < float(pool.get("_resized_at") or 0):
        return min(target_size(pool), int(pool.get("_size_before", target_size(pool))))
    return target_size(pool)


@command("gcloud", "container", "clusters", "resize", mutating=True, latency=300)
def cluster_resize(ctx: Ctx) -> None:
    cluster = ctx.positionals[0]
    location = ctx.flag("--location") or ctx.flag("--region") or ctx.flag("--zone")
    pool_name = ctx.flag("--node-pool")
    nodes = ctx.flag("--num-nodes")
    if not location or nodes is None:
        raise Fail(2, gcloud_error(ctx, "argument --num-nodes and --location: Must be specified."))
    if not str(nodes).isdigit():
        raise Fail(2, gcloud_error(ctx, f"argument --num-nodes: invalid int value: '{nodes}'"))
    key = f"{ctx.project}/{location}/{cluster}/{pool_name}"
    what = f"projects/{ctx.project}/locations/{location}/clusters/{cluster}/nodePools/{pool_name}"
    with ctx.state.locked():
        pool = ctx.state.get("nodepool", key)
        if pool is None:
            raise Fail(1, gcloud_error(ctx, f"ResponseError: code=404, message=Not found: {what}."))
        from ..core import time_scale
        from .gcloud_container import operation_seconds, wait_like_gcloud

        seconds = operation_seconds(ctx)
        # The instance group's target at once; its new nodes when the operation ends (FAKECLOUD_TIME_SCALE).
        pool.update(_size_before=pool_size(pool), _size=int(nodes), _resized_at=time.time() + seconds * time_scale())
        ctx.state.put("nodepool", key, pool)
    wait_like_gcloud(ctx, seconds)
    ctx.err(f"Resizing {cluster}...\n...done.\nUpdated [https://container.googleapis.com/v1/{what}].")


@command("gcloud", "compute", "instance-groups", "managed", "describe", latency=1)
def group_describe(ctx: Ctx) -> None:
    name, zone = ctx.positionals[0], ctx.flag("--zone")
    for pool in ctx.state.list("nodepool"):
        urls = pool.get("instanceGroupUrls") or []
        if any(url.endswith(f"/zones/{zone}/instanceGroupManagers/{name}") for url in urls):
            ctx.work()
            ctx.emit({"name": name, "baseInstanceName": name.removesuffix("-grp"), "targetSize": target_size(pool),
                      "zone": f"https://www.googleapis.com/compute/v1/projects/{ctx.project}/zones/{zone}",
                      "status": {"isStable": True}})
            return
    raise Fail(1, gcloud_error(ctx, f"Could not fetch resource:\n - The resource 'projects/{ctx.project}/zones/"
                                    f"{zone}/instanceGroupManagers/{name}' was not found"))
