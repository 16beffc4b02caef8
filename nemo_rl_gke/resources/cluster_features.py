"""What the steps built on the GKE cluster need it to have, read from its describe (or this run's listing of
clusters, which carries the same Cluster body).

`cluster.create` turns all of them on. A cluster made another way lacks some: the tutorial's has no Lustre
driver, an older cluster may predate the legacy Lustre port. Without them nothing fails at once: the PV applies,
then the Ray pods wait in ContainerCreating for a driver that is not there (or mount nothing on port 988); the
Ray release finds no RayCluster kind; the network mapping finds no GKENetworkParamSet kind. So every task that
builds on an existing cluster checks it first and refuses (exit 2) before any change, naming what is off and
the `gcloud container clusters update` that turns it on (GKE runs one update at a time, so one per change).

The Cluster fields (container/v1, as gcloud 528 sets them): addonsConfig.lustreCsiDriverConfig.{enabled,
enableLegacyLustrePort}, addonsConfig.rayOperatorConfig.enabled, networkConfig.{enableMultiNetworking,
datapathProvider}, workloadIdentityConfig.workloadPool.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..runner import Runner
from ..settings import Settings
from ..steps import Step

Body = dict[str, Any]


@dataclass(frozen=True)
class Feature:
    key: str
    title: str  # what it is, in words
    needed_for: str  # what breaks without it
    change: str  # the `gcloud container clusters update` flag that turns it on; "": only a new cluster has it
    blocking: bool = True  # False: said, never refused on (nothing of ours fails without it)


def _addon(body: Body, name: str) -> Body:
    return (body.get("addonsConfig") or {}).get(name) or {}


def _network(body: Body) -> Body:
    return body.get("networkConfig") or {}


def _workload_pool(s: Settings) -> str:
    return f"{s.PROJECT_ID}.svc.id.goog"


LUSTRE = Feature("lustre-csi-driver", "the Managed Lustre CSI driver",
                 "the Ray pods mount Lustre at /data through it", "--update-addons=LustreCsiDriver=ENABLED")
LUSTRE_PORT = Feature("legacy-lustre-port", "the legacy Lustre port (6988)",
                      "our Lustre instance is created --gke-support-enabled, which GKE nodes reach on that port",
                      "--enable-legacy-lustre-port")
RAY = Feature("ray-operator", "the Ray operator add-on", "the Ray cluster is a RayCluster object it runs",
              "--update-addons=RayOperator=ENABLED")
MULTI_NETWORKING = Feature("multi-networking", "multi-networking",
                           "the GPU nodes' nine extra NICs and the network mapping (GKENetworkParamSet)",
                           "--enable-multi-networking")
DATAPLANE_V2 = Feature("dataplane-v2", "GKE Dataplane V2", "multi-networking needs it; only a new cluster has it",
                       "")
WORKLOAD_IDENTITY = Feature("workload-identity", "Workload Identity",
                            "pods act as the KSA, which holds the bucket role; nothing of ours needs it to run", "",
                            blocking=False)

BY_KEY = {f.key: f for f in (LUSTRE, LUSTRE_PORT, RAY, MULTI_NETWORKING, DATAPLANE_V2, WORKLOAD_IDENTITY)}


def _checks(s: Settings) -> list[tuple[Feature, Callable[[Body], bool]]]:
    """(feature, is it on?) in the order they are said and turned on."""
    return [
        (LUSTRE, lambda b: bool(_addon(b, "lustreCsiDriverConfig").get("enabled"))),
        (LUSTRE_PORT, lambda b: bool(_addon(b, "lustreCsiDriverConfig").get("enableLegacyLustrePort"))),
        (RAY, lambda b: bool(_addon(b, "rayOperatorConfig").get("enabled"))),
        (DATAPLANE_V2, lambda b: bool(_network(b).get("enableMultiNetworking"))
         or _network(b).get("datapathProvider") == "ADVANCED_DATAPATH"),
        (MULTI_NETWORKING, lambda b: bool(_network(b).get("enableMultiNetworking"))),
        (WORKLOAD_IDENTITY, lambda b: (b.get("workloadIdentityConfig") or {}).get("workloadPool")
         == _workload_pool(s)),
    ]


def missing(s: Settings, body: Body) -> list[Feature]:
    """What the cluster (its describe) lacks, in order."""
    return [feature for feature, on in _checks(s) if not on(body)]


def fixes(s: Settings, off: list[Feature]) -> list[list[str]]:
    """The `gcloud container clusters update` commands that turn on what is off, one change each (the
    add-ons in one), in order; none when one of them can only come with a new cluster."""
    from ..commands import gcloud

    if any(not f.change and f.blocking for f in off):
        return []
    # gcloud's --enable-legacy-lustre-port sends the driver enabled with the port (ModifyLegacyLustrePortEnabled):
    # one update for both.
    port = LUSTRE_PORT in off
    addons = [f.change.split("=", 1)[1] for f in off
              if f.change.startswith("--update-addons=") and not (port and f is LUSTRE)]
    changes = ([f"--update-addons={','.join(addons)}"] if addons else []) + [
        f.change for f in off if f.change and not f.change.startswith("--update-addons=")]
    return [gcloud.cluster_update(s, change) for change in changes]


def made_by_us(body: Body | None) -> bool:
    """The cluster (or node pool: its config's labels) carries our managed-by label; one made another way does
    not, and no teardown of ours deletes it."""
    from .. import names

    if body is None:
        return True
    labels = body.get("resourceLabels", (body.get("config") or {}).get("resourceLabels")) or {}
    return isinstance(labels, dict) and labels.get("managed-by") == names.MANAGED_BY


def delete_it_yourself(s: Settings) -> str:
    """The command that deletes a cluster we did not create (gcloud asks before it deletes)."""
    return f"`gcloud container clusters delete {s.CLUSTER_NAME} --location={s.region} --project={s.PROJECT_ID}`"


def delete_pool_yourself(s: Settings) -> str:
    """The command that deletes a GPU pool we did not create."""
    from .. import names

    return (f"`gcloud container node-pools delete {names.GPU_POOL} --cluster={s.CLUSTER_NAME} --location={s.region} "
            f"--project={s.PROJECT_ID}`")


def rebuild(s: Settings, *, ours: bool = True) -> str:
    """How to rebuild the cluster: our teardown, or, for a cluster made another way (which it keeps), gcloud."""
    if ours:
        return "`invoke clean.cluster --yes` (keeps Lustre and the bucket), then `invoke up`"
    return (f"{delete_it_yourself(s)} (nemo-rl-gke did not create this cluster, so its teardowns keep it), then "
            f"`invoke up`")


def blocking(off: list[Feature]) -> list[Feature]:
    return [f for f in off if f.blocking]


def described(off: list[Feature]) -> str:
    return "; ".join(f"{f.title} is off ({f.needed_for})" for f in off)


def advice(s: Settings, off: list[Feature], *, ours: bool = True) -> str:
    """How to turn on what is off: the update commands (a few minutes each, nothing recreated), or a new
    cluster when Dataplane V2 is missing (ours: the cluster carries our label, `made_by_us`)."""
    commands = fixes(s, blocking(off))
    if not commands:
        return f"only a new cluster has GKE Dataplane V2: {rebuild(s, ours=ours)}"
    how = ("one update after the other (GKE runs one at a time, a few minutes each; nodes are not recreated)"
           if len(commands) > 1 else "one update (a few minutes; nodes are not recreated)")
    return (f"turn it on, {how}: " + "; ".join(f"`{' '.join(argv)}`" for argv in commands)
            + f"; or rebuild it: {rebuild(s, ours=ours)}")


def turn_on_workload_identity(s: Settings) -> str:
    from ..commands import gcloud

    update = " ".join(gcloud.cluster_update(s, f"--workload-pool={_workload_pool(s)}"))
    return (f"`{update}` turns on Workload Identity; node pools made before it need "
            f"`--workload-metadata=GKE_METADATA` (`gcloud container node-pools update`, which recreates their nodes)")


def note(s: Settings, off: Sequence[Feature]) -> str:
    """What is off but refused on by nothing ("" if none), with how to turn it on."""
    if WORKLOAD_IDENTITY not in off:
        return ""
    return f"note: {described([WORKLOAD_IDENTITY])}. {turn_on_workload_identity(s)}."


def say_note(r: Runner, s: Settings, off: Sequence[Feature]) -> None:
    """Say the note, if any (a task that goes on building on the cluster)."""
    text = note(s, off)
    if text:
        r.say(text, err=True)


def refusal(s: Settings, off: list[Feature], *, ours: bool = True) -> str:
    """The message of a task that will not build on the cluster (exit 2)."""
    return (f"the GKE cluster {s.CLUSTER_NAME} lacks what our steps need of it: {described(blocking(off))}. "
            f"Nothing was changed. To resolve: {advice(s, off, ours=ours)}.")


# ---- reading the cluster (read-only) ---------------------------------------------------------------
def cluster_body(r: Runner, s: Settings, steps: Sequence[Step] = ()) -> Body | None:
    """The cluster as this run's inventory (of steps) listed it before any change, else its describe; None when
    it is not there (or cannot be read: the step that needs it says why). A cluster this run made is not in
    the listing: it has what `cluster.create` turns on."""
    from ..commands import gcloud
    from .inventory import inventory_of

    inv = inventory_of(steps)
    if inv is not None:
        items = inv.as_listed(r, "cluster")
        if items is not None:
            return inv.cluster(items)
    result = r.query(gcloud.cluster_describe(s))
    if result is None or not result.ok:
        return None
    body: Body = json.loads(result.stdout or "{}")
    return body


LUSTRE_NEEDS = (LUSTRE.key, LUSTRE_PORT.key)  # what the storage layer's steps need of the cluster


def require(r: Runner, s: Settings, steps: Sequence[Step] = (), needs: Sequence[str] = ()) -> None:
    """Refuse (exit 2, before any change) to build on a cluster that lacks what our steps need (needs: only
    these features' keys); say what only a note names."""
    from ..tools import ToolError

    if r.dry:
        return
    body = cluster_body(r, s, steps)
    off = missing(s, body) if body is not None else []
    refused = [f for f in blocking(off) if not needs or f.key in needs]
    if refused:
        raise ToolError(refusal(s, refused, ours=made_by_us(body)), 2)
    say_note(r, s, off)
