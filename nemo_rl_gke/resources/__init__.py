"""Every resource we manage, as graph Steps, one module per layer. `all_steps` is the whole bring-up."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the package is imported by `invoke --list` (tasks import head_pod): the graph comes later
    from ..settings import Settings
    from ..steps import Step

LAYERS = ("net", "cluster", "storage", "ray")


def all_steps(s: Settings) -> list[Step]:
    """The whole graph, its existence checks sharing one inventory (one listing per kind, for this run)."""
    from dataclasses import replace

    from . import cluster_steps as cluster
    from . import net_steps as net
    from . import prefetch_steps as prefetch
    from . import ray_steps as ray
    from . import storage_steps as storage
    from .inventory import Inventory, StepList

    inv = Inventory(s)
    steps = (net.steps(s, inv) + cluster.steps(s, inv) + storage.steps(s, inv) + prefetch.steps(s, inv)
             + ray.steps(s, inv))
    # The cluster's delete takes Ray with it: the same record of /data/runs first (ray_steps' release guard).
    release = next(step for step in steps if step.name == ray.RELEASE)
    steps = [replace(step, guard=release.guard) if step.name == cluster.CLUSTER else step for step in steps]
    return StepList(inv.track(steps), inv)


def layer_steps(s: Settings, layer: str, *also: str) -> list[Step]:
    """A layer's steps (and the steps named in also), sharing one inventory that lists only what they ask."""
    from .inventory import StepList, inventory_of

    steps = all_steps(s)
    inv = inventory_of(steps)
    assert inv is not None
    chosen = [step for step in steps if step.layer == layer or step.name in also]
    inv.restrict(chosen)
    return StepList(chosen, inv, steps)
