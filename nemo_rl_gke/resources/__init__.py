"""Every resource we manage, as graph Steps, one module per layer. `all_steps` is the whole bring-up."""

from __future__ import annotations

from ..graph import Step
from ..settings import Settings

LAYERS = ("net", "cluster", "storage", "ray")


def all_steps(s: Settings) -> list[Step]:
    from . import cluster_steps as cluster
    from . import net_steps as net
    from . import prefetch_steps as prefetch
    from . import ray_steps as ray
    from . import storage_steps as storage

    return net.steps(s) + cluster.steps(s) + storage.steps(s) + prefetch.steps(s) + ray.steps(s)


def layer_steps(s: Settings, layer: str) -> list[Step]:
    return [step for step in all_steps(s) if step.layer == layer]
