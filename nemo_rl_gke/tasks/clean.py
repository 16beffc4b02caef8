"""`clean`: tear down everything (`invoke clean` = `clean.all`, the same as `down`) or one layer.

Each layer task deletes that layer's steps of the one graph (`layer_steps`), in parallel, then scans
that layer for leftovers. Data is kept, and so is whatever kept data needs from another layer's point of view
(`clean.net` keeps the main VPC while the Lustre instance is kept). Only `clean.storage` and `clean` (= `down`)
take --delete-data / --delete-unexported / --delete-bucket: the other layers hold no data.

Examples:
    invoke clean --yes                   # = invoke down --yes
    invoke clean.ray --yes               # only the Ray cluster
    invoke clean.storage --yes --delete-data
    invoke clean.net --yes --force-unlock   # only when the run holding the lock is gone
"""

from __future__ import annotations

import functools
import sys
from dataclasses import replace
from typing import Any

from invoke.collection import Collection
from invoke.context import Context

from ..settings import Settings
from . import context
from .teardown import TEARDOWN_HELP as HELP

# Layers without data (ray, cluster, net) take no data flags: Lustre and the bucket are storage's.
LAYER_HELP = {key: HELP[key] for key in ("yes", "force_unlock")}


def kept_for_data(steps: list[Any], delete_data: bool, delete_bucket: bool = False,
                  live: set[str] | None = None) -> set[str]:
    """Names of the steps a teardown keeps: data without its consent, and everything that data depends on.

    live: the data steps that exist (in any state); the others keep nothing (None: every data step counts)."""
    from ..graph import kept_steps
    from ..steps import Consent

    absent = {step.name for step in steps if step.holds_data and live is not None and step.name not in live}
    return kept_steps([step for step in steps if step.name not in absent],
                      Consent(delete_data=delete_data, delete_bucket=delete_bucket))


def layer_teardown_steps(steps: list[Any], layer: str, delete_data: bool, delete_bucket: bool = False,
                         live: set[str] | None = None) -> list[Any]:
    """The layer's steps, with those that kept data needs (judged over the whole graph) marked as kept; with
    the inventory of steps (`all_steps`), restricted to what they ask: the teardown's plan then reads the other
    deployments from its cluster listing and takes the guards' reads beside it, as `down` does."""
    from ..resources.inventory import StepList, inventory_of

    kept = kept_for_data(steps, delete_data, delete_bucket, live)
    # holds_data=True (consent "delete_data") makes graph.destroy keep a step the kept data needs, unless
    # delete_data; the data steps keep their own consent.
    chosen = [replace(step, holds_data=True) if step.name in kept and not step.needs() else step for step in steps
              if step.layer == layer]
    inv = inventory_of(steps)
    if inv is None:
        return chosen
    inv.restrict(chosen)
    return StepList(chosen, inv)


def live_data(c: Context, s: Settings, steps: list[Any], layer: str) -> set[str] | None:
    """The data stores that exist in any state (a Lustre instance still CREATING is there) among those that
    need this layer, asked in parallel; None on a dry run (it assumes nothing, so it keeps what data needs)."""
    from ..graph import needed_by

    r = context.runner(c, s)
    if r.dry:
        return None
    ours = {step.name for step in steps if step.layer == layer}
    data = [step for step in steps if step.holds_data and needed_by(steps, [step.name]) & ours]
    found = r.parallel([functools.partial(step.is_present, r) for step in data])
    return {step.name for step, here in zip(data, found, strict=True) if here}


def clean_layer(c: Context, layer: str, *, yes: bool, delete_data: bool = False, delete_unexported: bool = False,
                delete_bucket: bool = False, force_unlock: bool = False, what: str = "") -> None:
    """One layer's teardown (clean.<layer>, and <layer>.delete): the list of what goes, the lock, the data guard
    and the shared-resource rules of `tear_down`, the board, the leftover scan of that layer."""
    from ..resources import all_steps
    from ..resources.inventory import inventory_of
    from .teardown import check_flags, tear_down

    check_flags(delete_data=delete_data, delete_unexported=delete_unexported)  # before any call
    s = context.settings(c)
    if layer in ("ray", "storage") and (yes or sys.stdin.isatty()) and not context.is_dry(c):
        from .. import kubeconfig
        from ..resources import cluster_steps

        # The cluster stays: without this machine's context, its objects would read as absent ("nothing of
        # ours is left" with the release still running), and kubectl's deletes need it anyway. A context of an
        # earlier cluster of the name is replaced by the teardown's listing (Inventory.fetch_when_recreated).
        if kubeconfig.server_of(s.kube_context) is None:
            cluster_steps.credentials_if_cluster(context.runner(c, s), s)
    everything = all_steps(s)
    inv = inventory_of(everything)
    if inv is not None:  # its first listing (live_data's) replaces a context of an earlier cluster of the name
        inv.fetch_when_recreated = True
    live = live_data(c, s, everything, layer) if (yes or sys.stdin.isatty()) else None
    steps = layer_teardown_steps(everything, layer, delete_data, delete_bucket, live)
    tear_down(c, s, steps, delete_data=delete_data, yes=yes, what=what or f"clean.{layer}", layers=(layer,),
              delete_unexported=delete_unexported, delete_bucket=delete_bucket, force_unlock=force_unlock)


@context.task(name="all", default=True, help=HELP)
def all_(c: Context, delete_data: bool = False, delete_unexported: bool = False, delete_bucket: bool = False,
         yes: bool = False, force_unlock: bool = False) -> None:
    """Delete everything (same as `down`), then scan for leftovers; Lustre and bucket kept by default."""
    from ..resources import all_steps
    from .teardown import tear_down

    s = context.settings(c)
    tear_down(c, s, all_steps(s), delete_data=delete_data, yes=yes, what="clean",
              delete_unexported=delete_unexported, delete_bucket=delete_bucket, force_unlock=force_unlock)


@context.task(help=LAYER_HELP)
def ray(c: Context, yes: bool = False, force_unlock: bool = False) -> None:
    """Delete the Ray cluster (Helm release) only."""
    clean_layer(c, "ray", yes=yes, force_unlock=force_unlock)


@context.task(help=LAYER_HELP)
def cluster(c: Context, yes: bool = False, force_unlock: bool = False) -> None:
    """Delete the GKE cluster with its GPU pool and everything inside it."""
    clean_layer(c, "cluster", yes=yes, force_unlock=force_unlock)


@context.task(help=HELP)
def storage(c: Context, delete_data: bool = False, delete_unexported: bool = False, delete_bucket: bool = False,
            yes: bool = False, force_unlock: bool = False) -> None:
    """Delete the storage layer: PV/PVC, KSA, Secret, binding; Lustre and bucket only with their own flags."""
    clean_layer(c, "storage", yes=yes, delete_data=delete_data, delete_unexported=delete_unexported,
                delete_bucket=delete_bucket, force_unlock=force_unlock)


@context.task(help=LAYER_HELP)
def net(c: Context, yes: bool = False, force_unlock: bool = False) -> None:
    """Delete our subnets, firewall rule and VPCs (the main VPC stays while kept Lustre needs it)."""
    clean_layer(c, "net", yes=yes, force_unlock=force_unlock)


ns = Collection("clean", all_, ray, cluster, storage, net)
