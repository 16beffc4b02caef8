"""`clean`: tear down everything (`invoke clean` = `clean.all`, the same as `down`) or one layer.

Each layer task deletes that layer's steps of the one graph (`layer_steps`), in parallel, then scans
that layer for leftovers. Data is kept unless --delete-data, and so is whatever kept data needs from
another layer's point of view (`clean.net` keeps the main VPC while the Lustre instance is kept).

Examples:
    invoke clean --yes                   # = invoke down --yes
    invoke clean.ray --yes               # only the Ray cluster
    invoke clean.storage --yes --delete-data
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from invoke import Collection

from . import context
from .lifecycle import DATA_HELP, YES_HELP

HELP = {"delete_data": DATA_HELP, "yes": YES_HELP}


def kept_for_data(steps: list[Any], delete_data: bool) -> set[str]:
    """Names of the steps a teardown keeps: the data (unless delete_data) and everything it depends on."""
    from ..graph import needed_by

    return set() if delete_data else needed_by(steps, [step.name for step in steps if step.holds_data])


def layer_teardown_steps(steps: list[Any], layer: str, delete_data: bool) -> list[Any]:
    """The layer's steps, with those that kept data needs (judged over the whole graph) marked as kept."""
    kept = kept_for_data(steps, delete_data)
    # holds_data=True makes graph.destroy keep the step (it never runs its delete) when delete_data is off.
    return [replace(step, holds_data=True) if step.name in kept else step for step in steps
            if step.layer == layer]


def _clean_layer(c: Any, layer: str, delete_data: bool, yes: bool) -> None:
    from ..resources import all_steps
    from .lifecycle import tear_down

    s = context.settings(c)
    steps = layer_teardown_steps(all_steps(s), layer, delete_data)
    tear_down(c, s, steps, delete_data=delete_data, yes=yes, what=f"clean.{layer}", layers=(layer,))


@context.task(name="all", default=True, help=HELP)
def all_(c, delete_data=False, yes=False):
    """Delete everything (same as `down`), then scan for leftovers; data kept unless --delete-data."""
    from ..resources import all_steps
    from .lifecycle import tear_down

    s = context.settings(c)
    tear_down(c, s, all_steps(s), delete_data=delete_data, yes=yes, what="clean")


@context.task(help=HELP)
def ray(c, delete_data=False, yes=False):
    """Delete the Ray cluster (Helm release) only."""
    _clean_layer(c, "ray", delete_data, yes)


@context.task(help=HELP)
def cluster(c, delete_data=False, yes=False):
    """Delete the GKE cluster with its GPU pool and everything inside it."""
    _clean_layer(c, "cluster", delete_data, yes)


@context.task(help=HELP)
def storage(c, delete_data=False, yes=False):
    """Delete the storage layer: PV/PVC, KSA, Secret, binding; Lustre and bucket only with --delete-data."""
    _clean_layer(c, "storage", delete_data, yes)


@context.task(help=HELP)
def net(c, delete_data=False, yes=False):
    """Delete our subnets, firewall rule and VPCs (the main VPC stays while kept Lustre needs it)."""
    _clean_layer(c, "net", delete_data, yes)


ns = Collection("clean", all_, ray, cluster, storage, net)
