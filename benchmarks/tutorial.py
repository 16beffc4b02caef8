"""The tutorial's bring-up and its cleanup, one command at a time, for the benchmark's baseline.

The tutorial (shared/seed, French) runs its commands in this order: the gVNIC VPC, its subnet and firewall
rule; the RDMA VPC and its 8 subnets (the tutorial starts those 8 with `&` and `wait`, and so do we); the
Standard cluster, get-credentials, the GPU node pool, the NCCL RDMA installer; the network mapping; the
bucket, the KSA and the bucket's IAM binding; Managed Lustre as its linked guide does it (address range,
VPC peering, instance, PV/PVC); then `helm install` and `kubectl get pods` until the Ray pods are Ready.
Those are the same commands our steps run, so each is taken from our pure builders (the step's own
`create`), not retyped; the existence checks our `up` makes are not part of the tutorial and are skipped.

Three additions so the baseline ends in the same state as `up` (the benchmark checks it does): the main
VPC (the tutorial assumes the project's `default` network; the fake cloud starts empty), and the Ray
Secret, which our chart reads and the tutorial replaces by exporting HF_TOKEN inside the head pod.

Cleanup: the tutorial's is `helm delete`, `clusters delete`, `gcloud storage rm -r`, which leaves the
Lustre instance, the peering, the range, the subnets, the firewall rule and the VPCs. Made complete in
the tutorial's spirit, one at a time: helm → cluster (its node pool and in-cluster objects go with it) →
bucket → Lustre → peering → range → subnets → firewall → networks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

UP_ORDER: tuple[str | tuple[str, ...], ...] = (
    "net.network",  # addition: the tutorial assumes the `default` VPC exists
    "net.gvnic-network", "net.gvnic-subnet", "net.gvnic-firewall",
    "net.rdma-network",
    tuple(f"net.rdma-subnet-{n}" for n in range(8)),  # `for N in $(seq 0 7); do ... & done; wait`
    "cluster.cluster", "cluster.credentials", "cluster.gpu-pool", "cluster.nccl-installer",
    "cluster.network-mapping",
    "storage.bucket", "storage.ksa", "storage.bucket-binding",
    "storage.range", "storage.peering", "storage.lustre", "storage.pv", "storage.pvc",
    "storage.secret",  # addition: our chart reads the tokens from a Secret
    "ray.release",  # helm install, then `kubectl get pods` until Ready
)

DOWN_ORDER: tuple[str | tuple[str, ...], ...] = (
    "ray.release",  # helm delete ray-cluster
    "cluster.cluster",  # gcloud container clusters delete (GPU pool and in-cluster objects with it)
    "storage.bucket-binding", "storage.bucket",  # gcloud storage rm -r gs://...
    # What the tutorial leaves behind, in the order that works:
    "storage.lustre", "storage.peering", "storage.range",
    "net.gvnic-subnet", tuple(f"net.rdma-subnet-{n}" for n in range(8)),
    "net.gvnic-firewall",
    "net.gvnic-network", "net.rdma-network", "net.network",
)


@dataclass
class Timed:
    name: str
    seconds: float


def bound_seconds(steps, order: Sequence[str | tuple[str, ...]], attr: str) -> float:
    """The tutorial's wall time from the typical latencies alone: a sum over the order (a group: its max)."""
    by_name = {s.name: s for s in steps}
    total = 0.0
    for item in order:
        group = [by_name[n] for n in ((item,) if isinstance(item, str) else item) if n in by_name]
        if attr == "delete_seconds":
            group = [s for s in group if s.delete is not None]
        total += max((getattr(s, attr) for s in group), default=0.0)
    return total


def run(runner, steps, order: Sequence[str | tuple[str, ...]], action: str,
        clock: Callable[[], float] = time.monotonic) -> list[Timed]:
    """Run each named step's create (or delete) in the given order, one at a time (a tuple: at once)."""
    by_name = {s.name: s for s in steps}
    timed = []
    for item in order:
        group = [by_name[n] for n in ((item,) if isinstance(item, str) else item) if n in by_name]
        actions = [getattr(s, action) for s in group if getattr(s, action) is not None]
        if not actions:
            continue
        started = clock()
        runner.parallel([lambda a=a: a(runner) for a in actions])
        timed.append(Timed(",".join(s.name for s in group), clock() - started))
    return timed
