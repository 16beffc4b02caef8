"""The GPU pool's size now. A node pool's describe keeps `initialNodeCount`, its size at creation: a resize does
not change it. The current size is the `targetSize` of the pool's managed instance groups (one per zone, named
in its `instanceGroupUrls`), read with `gcloud compute instance-groups managed describe`."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from ..commands import gcloud
from ..runner import Runner
from ..settings import Settings

# .../projects/P/zones/ZONE/instanceGroupManagers/NAME
_GROUP_URL = re.compile(r"/zones/(?P<zone>[a-z0-9-]+)/instanceGroupManagers/(?P<name>[a-z0-9-]+)$")


def group_sizes(r: Runner, s: Settings, pool: dict[str, Any]) -> list[int] | None:
    """targetSize of each of the pool's instance groups (in parallel); None if the pool names none, or one of
    them cannot be read."""
    groups = [_GROUP_URL.search(url) for url in pool.get("instanceGroupUrls") or [] if isinstance(url, str)]
    found = [g for g in groups if g is not None]
    if not groups or len(found) != len(groups):
        return None
    answers = r.parallel([functools.partial(r.query, gcloud.instance_group_describe(s, g["name"], g["zone"]))
                          for g in found])
    sizes = []
    for result in answers:
        if result is None or not result.ok:
            return None
        size = json.loads(result.stdout or "{}").get("targetSize")
        if not isinstance(size, int):
            return None
        sizes.append(size)
    return sizes


def pool_nodes(pool: dict[str, Any], sizes: list[int] | None) -> int | None:
    """The pool's node count now: its groups' sizes, else the initial count per zone × zones; None when the
    autoscaler decides (or nothing says)."""
    if (pool.get("autoscaling") or {}).get("enabled"):
        return None
    if sizes:
        return sum(sizes)
    if pool.get("initialNodeCount") is None:
        return None
    return int(pool["initialNodeCount"]) * max(1, len(pool.get("locations") or []))


def current_nodes(r: Runner, s: Settings, pool: dict[str, Any]) -> int | None:
    return pool_nodes(pool, group_sizes(r, s, pool))
