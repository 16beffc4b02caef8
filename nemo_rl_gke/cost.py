"""What the setup costs per hour, from the list prices in data/prices.yaml (pure; no cloud calls).

The estimate is per resource, so `plan` and `status` can put a price next to each step: the cluster
(management fee and CPU pool), the GPU nodes, and the Lustre instance. Prices are list prices as of the
date in the file; the totals say so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from .settings import Settings

if TYPE_CHECKING:
    from .steps import Step

PRICES_FILE = Path(__file__).with_name("data") / "prices.yaml"
CPU_POOL_MACHINE = "n2-highmem-16"


class MachinePrice(TypedDict):
    on_demand: float
    spot: float


class Prices(TypedDict):
    """data/prices.yaml, the keys the estimate reads."""

    as_of: str
    region: str
    machines: dict[str, MachinePrice]
    lustre_per_gib_hour: dict[int, float]  # by throughput tier (MB/s per TiB)
    gke_management_fee_per_hour: float
    bucket_per_gib_month: float


@dataclass(frozen=True)
class CostLine:
    item: str  # what a person calls it: "GPU nodes"
    detail: str  # how it was computed: "2 × a4-highgpu-8g (Spot) at $57.00/h"
    hourly: float
    attach: str  # which resource it belongs to: cluster | gpu | lustre | bucket


@dataclass(frozen=True)
class Estimate:
    lines: tuple[CostLine, ...]
    as_of: str
    region: str

    @property
    def total(self) -> float:
        return sum(line.hourly for line in self.lines)

    def caveat(self) -> str:
        return (f"list prices for {self.region} as of {self.as_of} (nemo_rl_gke/data/prices.yaml); "
                f"check the Google Cloud pricing pages for your region")


@lru_cache(maxsize=4)
def load_prices(path: Path = PRICES_FILE) -> Prices:
    import yaml

    prices: Prices = yaml.safe_load(path.read_text())
    return prices


def money(amount: float) -> str:
    if amount and amount < 0.01:
        return "<$0.01"
    return f"${amount:,.2f}"


def _capacity(s: Settings) -> str:
    if s.RESERVATION:
        return "reservation"
    return "spot" if s.SPOT else "on_demand"


def estimate(s: Settings, prices: Prices | None = None) -> Estimate:
    """Hourly cost of everything `up` creates, per resource."""
    prices = prices or load_prices()
    machines = prices["machines"]
    capacity = _capacity(s)
    gpu_machine = s.gpu.machine_type
    gpu_prices = machines[gpu_machine]
    gpu_rate = float(gpu_prices["spot"] if capacity == "spot" else gpu_prices["on_demand"])
    how = {"spot": "Spot", "on_demand": "on-demand", "reservation": f"reservation {s.RESERVATION}, at the "
                                                                    "on-demand rate"}[capacity]
    lines = [
        CostLine("GKE management fee", f"1 {'Autopilot' if s.autopilot else 'Standard'} cluster",
                 float(prices["gke_management_fee_per_hour"]), "cluster"),
    ]
    cpu_rate = float(machines[CPU_POOL_MACHINE]["on_demand"])
    if s.autopilot:
        # Autopilot bills the pods' requests, not nodes; the Ray head and system pods are about one such node.
        lines.append(CostLine("CPU capacity", f"Ray head and system pods, about 1 × {CPU_POOL_MACHINE}",
                              cpu_rate, "cluster"))
    else:
        lines.append(CostLine("CPU pool", f"1 × {CPU_POOL_MACHINE} in {s.zone} (autoscales to 5)", cpu_rate,
                              "cluster"))
    lines.append(CostLine("GPU nodes", f"{s.GPU_NODES} × {gpu_machine} ({how}) at {money(gpu_rate)}/h",
                          s.GPU_NODES * gpu_rate, "gpu"))
    lustre_rate = float(prices["lustre_per_gib_hour"][s.LUSTRE_THROUGHPUT])
    lines.append(CostLine("Managed Lustre", f"{s.LUSTRE_CAPACITY_GIB} GiB at {s.LUSTRE_THROUGHPUT} MB/s/TiB",
                          s.LUSTRE_CAPACITY_GIB * lustre_rate, "lustre"))
    per_month = float(prices["bucket_per_gib_month"])
    lines.append(CostLine("bucket", f"{money(per_month)} per GiB-month of what it holds", 0.0, "bucket"))
    return Estimate(tuple(lines), str(prices["as_of"]), str(prices["region"]))


def bucket_monthly(size_bytes: int, prices: Prices | None = None) -> float:
    """What a bucket holding size_bytes costs per month (Standard class, approximate list price)."""
    prices = prices or load_prices()
    return size_bytes / 2**30 * float(prices["bucket_per_gib_month"])


def attach_step(attach: str, steps: Sequence[Step]) -> str | None:
    """The step a cost line belongs to, found by what the steps are (so new layers need no edit here)."""
    names = [step.name for step in steps]

    def first(predicate: Callable[[Step], bool]) -> str | None:
        return next((step.name for step in steps if predicate(step)), None)

    if attach == "cluster":
        return first(lambda st: st.name == "cluster.cluster")
    if attach == "gpu":
        if "cluster.gpu-pool" in names:
            return "cluster.gpu-pool"
        # Autopilot: GPU nodes appear when the Ray workers are scheduled.
        return first(lambda st: st.layer == "ray" and not st.always) or attach_step("cluster", steps)
    if attach == "lustre":
        return first(lambda st: st.holds_data and "lustre" in f"{st.name} {st.title}".lower())
    if attach == "bucket":
        return first(lambda st: st.holds_data and "bucket" in f"{st.name} {st.title}".lower())
    return None


def hourly_by_step(est: Estimate, steps: Sequence[Step]) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in est.lines:
        name = attach_step(line.attach, steps)
        if name is not None:
            out[name] = out.get(name, 0.0) + line.hourly
    return out


def summary_lines(est: Estimate) -> list[str]:
    """The estimate as text lines, for the plan printed by `up` and `plan`."""
    width = max(len(line.item) for line in est.lines)
    out = [f"{line.item:<{width}}  {money(line.hourly):>10}/h  {line.detail}" for line in est.lines]
    out.append(f"{'total':<{width}}  {money(est.total):>10}/h  ({money(est.total * 24)} a day; "
               f"{est.caveat()})")
    return out
