"""Drift: what exists but differs from the settings (cluster mode, GPU machine type, GPU node count, Spot or
reservation, the Ray cluster's GPU workers) or lacks what our steps need of the cluster (its Lustre driver, Ray
operator, multi-networking: resources/cluster_features.py). `plan` shows it; `up` refuses on it (exit 2) before
any change, except the counts, which `up --resize` applies: the GPU pool's nodes, and the Ray cluster's workers
(which `up` alone leaves as they are, with a note: `ray.deploy --nodes=N` runs fewer on purpose), and what only
a note names (Workload Identity off: nothing of ours needs it to run).

The GPU pool's current size is not its describe's `initialNodeCount` (the size at creation): see
resources/pool_size.py.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..settings import GPU_PROFILES, Settings

if TYPE_CHECKING:
    from ..resources.cluster_features import Feature
    from ..runner import Runner

# The graph's steps and the pool-size reader are imported where used: `invoke --list` imports this module.


@dataclass(frozen=True)
class Found:
    """What the cloud holds, from the describes (None: not there, or not known)."""

    mode: str | None = None  # standard | autopilot
    machine_type: str | None = None
    nodes: int | None = None  # current size of the GPU pool (None: unknown, or the autoscaler decides)
    spot: bool | None = None
    reservation: str | None = None  # "" when no specific reservation
    ray_workers: int | None = None  # the deployed RayCluster's GPU workers (None: no Ray cluster, or not known)
    cluster_off: tuple[Feature, ...] = ()  # what the cluster lacks that our steps need (or a note names)
    cluster_ours: bool = True  # False: the cluster has no managed-by label (made another way; teardowns keep it)
    pool_ours: bool = True  # the same for the GPU pool
    claim: dict[str, Any] | None = None  # the claimRef of our Lustre volume when another claim holds it


@dataclass(frozen=True)
class Difference:
    step: str
    field: str  # mode | gpu | nodes | capacity | workers | feature | advisory (a feature only a note names)
    have: str
    want: str
    feature: str = ""  # feature, advisory: what is off (cluster_features.Feature.key)
    fix: str = ""  # feature: how to turn on everything the cluster lacks (one text for all of them); mode,
    # gpu, capacity: how to rebuild what differs

    def text(self) -> str:
        if self.feature:
            from ..resources.cluster_features import BY_KEY

            return f"{BY_KEY[self.feature].title} is off ({BY_KEY[self.feature].needed_for})"
        if self.field == "mode":
            return f"it is {self.have}, the settings say {self.want}"
        if self.field == "nodes":
            return f"{self.have} nodes, the settings say {self.want}"
        if self.field == "workers":
            return f"{self.have} GPU worker(s), the settings say {self.want}"
        if self.field == "claim":
            return f"bound to the claim {self.have}, the settings say {self.want} (NAMESPACE)"
        return f"{self.have}, the settings say {self.want}"

    def document(self) -> dict[str, str]:
        from ..resources.cluster_steps import CLUSTER, GPU_POOL

        title = ("GKE cluster" if self.step == CLUSTER else "GPU node pool" if self.step == GPU_POOL else
                 "PersistentVolume" if self.field == "claim" else "Ray cluster")
        document = {"name": self.step, "title": title, "field": self.field, "have": self.have, "want": self.want}
        return {**document, "feature": self.feature} if self.feature else document


def _capacity_text(spot: bool | None, reservation: str | None) -> str:
    if reservation:
        return f"reservation {reservation}"
    return "Spot VMs" if spot else "on-demand VMs"


def _gpu_text(machine_type: str) -> str:
    short = next((p.short for p in GPU_PROFILES.values() if p.machine_type == machine_type), "")
    return f"{machine_type} ({short})" if short else machine_type


def read_cluster(s: Settings, body: dict[str, Any]) -> Found:
    from ..resources import cluster_features

    return Found(mode="autopilot" if (body.get("autopilot") or {}).get("enabled") else "standard",
                 cluster_off=tuple(cluster_features.missing(s, body)),
                 cluster_ours=cluster_features.made_by_us(body))


def read_pool(body: dict[str, Any], group_sizes: list[int] | None = None) -> Found:
    """The GPU pool from its describe; group_sizes: its instance groups' targetSize, when they were read."""
    from ..resources.pool_size import pool_nodes

    config = body.get("config") or {}
    affinity = config.get("reservationAffinity") or {}
    reservation = ""
    if affinity.get("consumeReservationType") == "SPECIFIC_RESERVATION":
        reservation = ",".join(affinity.get("values") or []) or "?"
    from ..resources.cluster_features import made_by_us

    return Found(machine_type=config.get("machineType"), nodes=pool_nodes(body, group_sizes),
                 spot=bool(config.get("spot")), reservation=reservation, pool_ours=made_by_us(body))


def differences(s: Settings, found: Found) -> list[Difference]:
    """Each way what exists differs from the settings, in a fixed order (mode, gpu, nodes, capacity, workers)."""
    from ..resources import cluster_features
    from ..resources.cluster_steps import CLUSTER, GPU_POOL
    from ..resources.ray_steps import RELEASE

    out = []
    if found.mode is not None and found.mode != s.CLUSTER_MODE:
        out.append(Difference(CLUSTER, "mode", found.mode, s.CLUSTER_MODE,
                              fix=cluster_features.rebuild(s, ours=found.cluster_ours)))
    if found.mode is not None and found.mode == s.CLUSTER_MODE:  # another mode is rebuilt anyway
        fix = cluster_features.advice(s, list(found.cluster_off), ours=found.cluster_ours)
        out += [Difference(CLUSTER, "feature" if f.blocking else "advisory", "off", "on", f.key,
                           fix if f.blocking else cluster_features.turn_on_workload_identity(s))
                for f in found.cluster_off]
    # A pool differs: clean.cluster deletes the cluster with Ray in it. In a cluster made another way (which it
    # keeps) Ray is deleted on its own, its workers selecting the old pool's nodes; then our pool, or the user's.
    pool_fix = cluster_features.rebuild(s, ours=True)
    if not found.cluster_ours:
        pool_fix = ("`invoke clean.ray --yes`, then " + (
            "`invoke clean.cluster --yes` (in a cluster nemo-rl-gke did not create it deletes only our GPU pool)"
            if found.pool_ours else f"{cluster_features.delete_pool_yourself(s)} (nemo-rl-gke did not create this "
                                    f"pool either)") + ", then `invoke up`")
    if found.machine_type and found.machine_type != s.gpu.machine_type:
        out.append(Difference(GPU_POOL, "gpu", _gpu_text(found.machine_type), _gpu_text(s.gpu.machine_type),
                              fix=pool_fix))
    if found.nodes is not None and found.nodes != s.GPU_NODES:
        out.append(Difference(GPU_POOL, "nodes", str(found.nodes), str(s.GPU_NODES)))
    if found.machine_type:
        want_reservation = s.RESERVATION or ""
        have = _capacity_text(found.spot, found.reservation)
        want = _capacity_text(s.SPOT and not s.RESERVATION, want_reservation)
        if have != want and found.reservation != "?":
            out.append(Difference(GPU_POOL, "capacity", have, want, fix=pool_fix))
    if found.ray_workers is not None and found.ray_workers != s.GPU_NODES:
        out.append(Difference(RELEASE, "workers", str(found.ray_workers), str(s.GPU_NODES)))
    if found.claim is not None:  # a volume binds one claim: ours would stay Pending, and Ray with it
        from ..resources import storage_steps

        theirs, ours = storage_steps.claim_names(s, found.claim)
        out.append(Difference(storage_steps.PV, "claim", theirs, ours, fix=storage_steps.claim_fix(s, found.claim)))
    return out


RESIZED = ("nodes", "workers")  # the differences `up --resize` applies; `up` refuses on the others
NOTED = ("workers", "advisory")  # the differences `up` alone goes on with, saying them


def blocking(found: list[Difference], *, resize: bool = False) -> list[Difference]:
    """The differences `up` refuses on (with --resize, a node count is applied instead)."""
    return [d for d in found if d.field not in NOTED and not (resize and d.field == "nodes")]


def by_step(found: list[Difference]) -> dict[str, str]:
    """step name -> what differs there, in words."""
    out: dict[str, list[str]] = {}
    for difference in found:
        out.setdefault(difference.step, []).append(difference.text())
    return {step: "; ".join(texts) for step, texts in out.items()}


def advice(found: list[Difference], *, what: str = "up") -> str:
    """What to do about the differences: match the settings to what runs, resize, or rebuild that layer."""
    hints = []
    if any(d.field == "nodes" for d in found):
        nodes = next(d for d in found if d.field == "nodes")
        resize = f"`invoke up --nodes={nodes.want} --resize`; asks first"
        hints.append((f"add --resize to resize the GPU pool to {nodes.want} nodes ({resize})" if what == "up" else
                      f"resize the GPU pool to {nodes.want} nodes with {resize.replace('; ', ' (') + ')'}")
                     + f", or set GPU_NODES={nodes.have} / --nodes={nodes.have} to keep it")
    workers = next((d for d in found if d.field == "workers"), None)
    if workers is not None and not any(d.field == "nodes" for d in found):
        hints.append(f"`invoke up --resize` (asks first) or `invoke ray.deploy` upgrades the Ray cluster to "
                     f"{workers.want} GPU workers; `up` alone leaves it at {workers.have} (`ray.deploy "
                     f"--nodes={workers.have}` runs fewer on purpose)")
    feature = next((d for d in found if d.field == "feature"), None)
    if feature is not None:
        hints.append(f"the cluster lacks what our steps need: {feature.fix}")
    hints += [d.fix for d in found if d.field in ("advisory", "claim")]
    others = [d for d in found if d.field not in (*RESIZED, *NOTED, "feature", "claim")]
    if others:
        flags = {"mode": "CLUSTER_MODE / --mode", "gpu": "GPU_TYPE / --gpu", "capacity": "SPOT, RESERVATION / "
                 "--spot, --reservation"}
        keys = ", ".join(dict.fromkeys(flags[d.field] for d in others))
        # Every such difference carries its rebuild (`differences`); another mode rebuilds the cluster, and the
        # pool with it: its fix alone.
        fixes = [d.fix for d in others if d.field == "mode" or not any(o.field == "mode" for o in others)]
        rebuilds = "; or ".join(dict.fromkeys(fixes))
        hints.append(f"set {keys} to match what runs, or rebuild: {rebuilds}")
    return "To resolve: " + "; ".join(hints) + "."


def refusal(s: Settings, shown: list[Difference], refused: list[Difference], *, what: str) -> str:
    """Why `what` stops before any change: the differences shown, then what to do about the refused ones."""
    lines = "\n".join(f"  {d.document()['title']}: {d.text()}" for d in shown)
    return (f"what exists in {s.PROJECT_ID} does not match the settings (flags, then .env) or what our steps "
            f"need:\n{lines}\n{what} builds on what exists only as the settings say it, so it stops here; nothing "
            f"was changed. {advice(refused, what=what)}")


def refuse_on(s: Settings, found: Found, *, what: str, fields: tuple[str, ...]) -> None:
    """Exit 2 when what exists differs from the settings in one of fields (a task that would build on it)."""
    from invoke.exceptions import Exit

    refused = [d for d in differences(s, found) if d.field in fields]
    if refused:
        raise Exit(f"error: {refusal(s, refused, refused, what=what)}", code=2)


# ---- reading the cloud (read-only) -----------------------------------------------------------------
def existing(r: Runner, s: Settings, present: dict[str, bool | None], steps: Any = None, *,
             sizes: bool = True) -> Found:
    """Describe the cluster and the GPU pool (those present; steps: their inventory's listing answers instead),
    in parallel, then the pool's instance groups (sizes=False: not, the creation size stands in)."""
    return found_in(r, s, bodies_of(r, s, present, steps), present, steps, sizes=sizes)


def bodies_of(r: Runner, s: Settings, present: dict[str, bool | None], steps: Any = None) -> dict[str, Any]:
    """The cluster's and the GPU pool's bodies by step name (those present and answered): from the inventory's
    listing (steps), else described in parallel."""
    from ..commands import gcloud
    from ..resources.cluster_steps import CLUSTER, GPU_POOL, listed_bodies

    asks = {CLUSTER: gcloud.cluster_describe(s), GPU_POOL: gcloud.node_pool_describe(s)}
    listed = listed_bodies(r, s, steps)
    wanted = [(name, argv) for name, argv in asks.items() if present.get(name) and name not in listed]
    answers = r.parallel([functools.partial(r.query, argv) for _, argv in wanted])
    bodies = {name: json.loads(result.stdout or "{}") for (name, _), result in zip(wanted, answers, strict=True)
              if result is not None and result.ok}
    # Listed in any state: a cluster or pool still PROVISIONING (an interrupted `up`) is compared too, before
    # `up` would wait for it as it is.
    bodies.update(listed)
    return bodies


def found_in(r: Runner, s: Settings, bodies: dict[str, Any], present: dict[str, bool | None], steps: Any = None, *,
             sizes: bool = True) -> Found:
    """What bodies_of read, as a Found (the pool's instance groups asked for its size now unless sizes=False)."""
    from ..resources.cluster_steps import CLUSTER, GPU_POOL
    from ..resources.pool_size import group_sizes
    from ..resources.ray_steps import RELEASE, listed_workers
    from ..resources.storage_steps import taken_claim

    cluster = read_cluster(s, bodies[CLUSTER]) if CLUSTER in bodies else Found()
    workers = listed_workers(r, s, steps) if present.get(RELEASE) else None
    claim = taken_claim(r, s, steps)
    pool = bodies.get(GPU_POOL)
    if pool is None:
        return Found(mode=cluster.mode, cluster_off=cluster.cluster_off, ray_workers=workers,
                     cluster_ours=cluster.cluster_ours, claim=claim)
    provisioning = str(pool.get("status") or "RUNNING") == "PROVISIONING"
    read = read_pool(pool, group_sizes(r, s, pool) if sizes and not provisioning else None)  # the size now
    if provisioning:
        read = Found(machine_type=read.machine_type, spot=read.spot, reservation=read.reservation,
                     pool_ours=read.pool_ours)  # no size yet
    return Found(mode=cluster.mode, machine_type=read.machine_type, nodes=read.nodes, spot=read.spot,
                 reservation=read.reservation, ray_workers=workers, cluster_off=cluster.cluster_off,
                 cluster_ours=cluster.cluster_ours, pool_ours=read.pool_ours, claim=claim)


def as_found(s: Settings, found: Found) -> Settings:
    """The settings of what exists (for pricing it): the settings with the found mode, GPU, nodes, capacity."""
    from dataclasses import replace

    changes: dict[str, Any] = {}
    if found.mode:
        changes["CLUSTER_MODE"] = found.mode
    short = next((p.short for p in GPU_PROFILES.values() if p.machine_type == found.machine_type), None)
    if short:
        changes["GPU_TYPE"] = short
    if found.nodes is not None:
        changes["GPU_NODES"] = found.nodes
    if found.machine_type:
        changes["SPOT"] = bool(found.spot) and not found.reservation
        changes["RESERVATION"] = "" if found.reservation in (None, "?") else found.reservation
    return replace(s, **changes)


def cost_now(s: Settings, found: Found, steps: list[Any], present: dict[str, bool | None]) -> float:
    """The hourly cost of what exists: priced as it is (a B200 pool stays B200 whatever the settings say)."""
    from .. import cost

    hourly = cost.hourly_by_step(cost.estimate(as_found(s, found)), steps)
    return sum(hourly.get(name, 0.0) for name, here in present.items() if here)
