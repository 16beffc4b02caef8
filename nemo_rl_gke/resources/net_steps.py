"""Networks: the main VPC (cluster and Lustre), the gVNIC VPC with its subnet and firewall rule, and the
RDMA VPC (zonal RoCE profile) with its 8 subnets. The VPCs and subnets are named by prefix, so deployments
(CLUSTER_NAMEs) in one project may share them (`shared`); the firewall rule is named per deployment."""

from __future__ import annotations

from .. import names
from ..commands import gcloud
from ..graph import Step
from ..settings import Settings
from .step_shapes import check as _exists
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


def steps(s: Settings) -> list[Step]:
    gvnic, rdma = names.gvnic_network(s), names.rdma_network(s)
    out = [
        Step(MAIN, f"main VPC {s.NETWORK}", _exists(gcloud.network_describe(s, s.NETWORK)),
             _create(gcloud.network_create(s, s.NETWORK, subnet_mode="auto")),
             _delete_if_ours(gcloud.network_describe(s, s.NETWORK), gcloud.network_delete(s, s.NETWORK),
                             f"VPC {s.NETWORK}"),
             create_seconds=25, delete_seconds=20, shared=True),
        Step(GVNIC_NET, f"gVNIC VPC {gvnic}", _exists(gcloud.network_describe(s, gvnic)),
             _create(gcloud.network_create(s, gvnic, subnet_mode="custom")),
             _delete_if_ours(gcloud.network_describe(s, gvnic), gcloud.network_delete(s, gvnic), f"VPC {gvnic}"),
             create_seconds=25, delete_seconds=20, shared=True),
        Step(GVNIC_SUB, f"gVNIC subnet {names.gvnic_subnet(s)}",
             _exists(gcloud.subnet_describe(s, names.gvnic_subnet(s))),
             _create(gcloud.subnet_create(s, names.gvnic_subnet(s), network=gvnic, ip_range=names.GVNIC_RANGE)),
             _delete_if_ours(gcloud.subnet_describe(s, names.gvnic_subnet(s)),
                             gcloud.subnet_delete(s, names.gvnic_subnet(s)), f"subnet {names.gvnic_subnet(s)}"),
             deps=(GVNIC_NET,), create_seconds=15, delete_seconds=15, shared=True),
        Step(GVNIC_FW, f"firewall rule {names.gvnic_firewall(s)}",
             _exists(gcloud.firewall_describe(s, names.gvnic_firewall(s))),
             _create(gcloud.firewall_create(s)),
             _delete_if_ours(gcloud.firewall_describe(s, names.gvnic_firewall(s)),
                             gcloud.firewall_delete(s, names.gvnic_firewall(s)),
                             f"firewall rule {names.gvnic_firewall(s)}"),
             deps=(GVNIC_NET,), create_seconds=10, delete_seconds=10),
        Step(RDMA_NET, f"RDMA VPC {rdma} (profile {names.rdma_profile(s)})",
             _exists(gcloud.network_describe(s, rdma)),
             _create(gcloud.network_create(s, rdma, subnet_mode="custom", profile=names.rdma_profile(s))),
             _delete_if_ours(gcloud.network_describe(s, rdma), gcloud.network_delete(s, rdma), f"VPC {rdma}"),
             create_seconds=25, delete_seconds=20, shared=True),
    ]
    for n in range(names.RDMA_SUBNETS):
        subnet = names.rdma_subnet(s, n)
        out.append(Step(rdma_sub_step(n), f"RDMA subnet {subnet}", _exists(gcloud.subnet_describe(s, subnet)),
                        _create(gcloud.subnet_create(s, subnet, network=rdma, ip_range=names.rdma_range(n))),
                        _delete_if_ours(gcloud.subnet_describe(s, subnet), gcloud.subnet_delete(s, subnet),
                                        f"subnet {subnet}"),
                        deps=(RDMA_NET,), create_seconds=15, delete_seconds=15, shared=True))
    return out
