"""Networks: the main VPC (cluster and Lustre), the gVNIC VPC with its subnet and firewall rule, and the
RDMA VPC (zonal RoCE profile) with its 8 subnets. The VPCs and subnets are named by prefix, so deployments
(CLUSTER_NAMEs) in one project may share them (`shared`); the firewall rule is named per deployment."""

from __future__ import annotations

from .. import names
from ..commands import gcloud
from ..settings import Settings
from ..steps import Action, Check, Step
from .inventory import Inventory, named
from .step_shapes import check as _check
from .step_shapes import creator as _create
from .step_shapes import delete_if_ours as _delete_if_ours

MAIN = "net.network"
GVNIC_NET = "net.gvnic-network"
GVNIC_SUB = "net.gvnic-subnet"
GVNIC_FW = "net.gvnic-firewall"
RDMA_NET = "net.rdma-network"


def rdma_sub_step(index: int) -> str:
    return f"net.rdma-subnet-{index}"


SUBNET_STEPS = [GVNIC_SUB] + [rdma_sub_step(n) for n in range(names.RDMA_SUBNETS)]


def steps(s: Settings, inventory: Inventory | None = None) -> list[Step]:
    inv = inventory or Inventory(s)
    gvnic, rdma = names.gvnic_network(s), names.rdma_network(s)

    def network(step: str, name: str) -> Check:
        return inv.check(step, "network", named(name), _check(gcloud.network_describe(s, name)))

    def subnet(step: str, name: str) -> Check:
        return inv.check(step, "subnet", named(name, region=s.region), _check(gcloud.subnet_describe(s, name)))

    def ours(step: str, kind: str, describe: list[str], delete: list[str], what: str, name: str) -> Action:
        return _delete_if_ours(describe, delete, what, listed=lambda r: inv.item(r, kind, name))

    out = [
        Step(MAIN, f"main VPC {s.NETWORK}", network(MAIN, s.NETWORK),
             _create(gcloud.network_create(s, s.NETWORK, subnet_mode="auto")),
             ours(MAIN, "network", gcloud.network_describe(s, s.NETWORK), gcloud.network_delete(s, s.NETWORK),
                  f"VPC {s.NETWORK}", s.NETWORK),
             create_seconds=25, delete_seconds=20, shared=True),
        Step(GVNIC_NET, f"gVNIC VPC {gvnic}", network(GVNIC_NET, gvnic),
             _create(gcloud.network_create(s, gvnic, subnet_mode="custom")),
             ours(GVNIC_NET, "network", gcloud.network_describe(s, gvnic), gcloud.network_delete(s, gvnic),
                  f"VPC {gvnic}", gvnic),
             create_seconds=25, delete_seconds=20, shared=True),
        Step(GVNIC_SUB, f"gVNIC subnet {names.gvnic_subnet(s)}", subnet(GVNIC_SUB, names.gvnic_subnet(s)),
             _create(gcloud.subnet_create(s, names.gvnic_subnet(s), network=gvnic, ip_range=names.GVNIC_RANGE)),
             ours(GVNIC_SUB, "subnet", gcloud.subnet_describe(s, names.gvnic_subnet(s)),
                  gcloud.subnet_delete(s, names.gvnic_subnet(s)), f"subnet {names.gvnic_subnet(s)}",
                  names.gvnic_subnet(s)),
             deps=(GVNIC_NET,), create_seconds=15, delete_seconds=15, shared=True),
        Step(GVNIC_FW, f"firewall rule {names.gvnic_firewall(s)}",
             inv.check(GVNIC_FW, "firewall rule", named(names.gvnic_firewall(s)),
                       _check(gcloud.firewall_describe(s, names.gvnic_firewall(s)))),
             _create(gcloud.firewall_create(s)),
             ours(GVNIC_FW, "firewall rule", gcloud.firewall_describe(s, names.gvnic_firewall(s)),
                  gcloud.firewall_delete(s, names.gvnic_firewall(s)), f"firewall rule {names.gvnic_firewall(s)}",
                  names.gvnic_firewall(s)),
             deps=(GVNIC_NET,), create_seconds=10, delete_seconds=10),
        Step(RDMA_NET, f"RDMA VPC {rdma} (profile {names.rdma_profile(s)})", network(RDMA_NET, rdma),
             _create(gcloud.network_create(s, rdma, subnet_mode="custom", profile=names.rdma_profile(s))),
             ours(RDMA_NET, "network", gcloud.network_describe(s, rdma), gcloud.network_delete(s, rdma),
                  f"VPC {rdma}", rdma),
             create_seconds=25, delete_seconds=20, shared=True),
    ]
    for n in range(names.RDMA_SUBNETS):
        name, step = names.rdma_subnet(s, n), rdma_sub_step(n)
        out.append(Step(step, f"RDMA subnet {name}", subnet(step, name),
                        _create(gcloud.subnet_create(s, name, network=rdma, ip_range=names.rdma_range(n))),
                        ours(step, "subnet", gcloud.subnet_describe(s, name), gcloud.subnet_delete(s, name),
                             f"subnet {name}", name),
                        deps=(RDMA_NET,), create_seconds=15, delete_seconds=15, shared=True))
    return out if inventory is not None else inv.track(out)
