"""Every resource we manage, as graph Steps, one module per layer. `all_steps` is the whole bring-up."""

from __future__ import annotations

from ..graph import Step
from ..settings import Settings


def all_steps(s: Settings) -> list[Step]:
    from . import cluster, net

    steps = net.steps(s) + cluster.steps(s)
    for layer in ("storage", "ray"):
        try:
            module = __import__(f"{__name__}.{layer}", fromlist=["steps"])
        except ModuleNotFoundError:
            continue
        steps += module.steps(s)
    return steps


def layer_steps(s: Settings, layer: str) -> list[Step]:
    return [step for step in all_steps(s) if step.layer == layer]
