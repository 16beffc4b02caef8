"""gcloud compute: networks, subnets, firewall rules (with the dependency errors the real API gives)."""

from __future__ import annotations

import re

from ..core import (
    Ctx,
    Fail,
    command,
    create_resource,
    delete_resource,
    gcloud_error,
    public,
    require,
    unscoped,
)
from .gcloud_filter import filtered

API = "https://www.googleapis.com/compute/v1"


def _net_path(ctx: Ctx, name: str) -> str:
    return f"projects/{ctx.project}/global/networks/{name}"


def _name(ctx: Ctx) -> str:
    if not ctx.positionals:
        raise Fail(2, gcloud_error(ctx, "argument NAME: Must be specified."))
    return ctx.positionals[0]


@command("gcloud", "compute", "networks", "create", mutating=True, latency=25)
def network_create(ctx: Ctx) -> None:
    name = _name(ctx)
    profile = ctx.flag("--network-profile")
    if profile and not re.fullmatch(r"[a-z]+-[a-z]+[0-9]+-[a-z]-vpc-roce", str(profile)):
        # The RoCE profile is zonal; a region here is the tutorial's mistake.
        raise Fail(1, gcloud_error(ctx, f"Invalid value for field 'resource.networkProfile': '{profile}'. "
                                        "The network profile was not found."))
    obj = {"name": name, "kind": "compute#network", "selfLink": _net_path(ctx, name),
           "description": ctx.flag("--description", ""), "autoCreateSubnetworks": ctx.flag("--subnet-mode") == "auto",
           "networkProfile": profile or ""}
    create_resource(ctx, "network", f"{ctx.project}/{name}", obj, _net_path(ctx, name))


def _network_view(network: dict) -> dict:
    """A network as the API shows it (compute v1 Network): selfLink and networkProfile as URLs; an unset
    networkProfile is left out, as the API leaves out every unset field."""
    out = {**public(network), "selfLink": f"{API}/{network['selfLink']}"}
    profile = out.pop("networkProfile", "")
    if profile:
        project = network["selfLink"].split("/")[1]
        out["networkProfile"] = f"{API}/projects/{project}/global/networkProfiles/{profile}"
    return out


@command("gcloud", "compute", "networks", "describe", latency=1)
def network_describe(ctx: Ctx) -> None:
    name = _name(ctx)
    network = require(ctx, "network", f"{ctx.project}/{name}", _net_path(ctx, name))
    ctx.work()
    ctx.emit(_network_view(network))


@command("gcloud", "compute", "networks", "list", latency=1)
def network_list(ctx: Ctx) -> None:
    ctx.work()
    ctx.emit(filtered(ctx, [_network_view(n) for key, n in ctx.state.items("network").items()
                            if key.startswith(f"{ctx.project}/")]))


@command("gcloud", "compute", "networks", "delete", mutating=True, latency=20)
def network_delete(ctx: Ctx) -> None:
    name = _name(ctx)
    users = [s["name"] for s in ctx.state.list("subnet") if s["network"] == name and s["project"] == ctx.project]
    users += [f["name"] for f in ctx.state.list("firewall") if f["network"] == name and f["project"] == ctx.project]
    users += [c["name"] for c in ctx.state.list("cluster") if c["network"] == name and c["project"] == ctx.project]
    users += [a["name"] for a in ctx.state.list("address") if a.get("network") == name]
    if users:
        raise Fail(1, gcloud_error(ctx, f"The network resource '{_net_path(ctx, name)}' is already being used by "
                                        f"'{users[0]}'"))
    delete_resource(ctx, "network", f"{ctx.project}/{name}", _net_path(ctx, name))


def additional_networks(pool: dict) -> list[dict]:
    """A node pool's extra NICs as GKE shows them: networkConfig.additionalNodeNetworkConfigs[{network,
    subnetwork}]."""
    return list((pool.get("networkConfig") or {}).get("additionalNodeNetworkConfigs") or [])


def _subnet_path(ctx: Ctx, region: str, name: str) -> str:
    return f"projects/{ctx.project}/regions/{region}/subnetworks/{name}"


def _region(ctx: Ctx) -> str:
    region = ctx.flag("--region")
    if not region:
        raise Fail(2, gcloud_error(ctx, "argument --region: Must be specified."))
    return str(region)


@command("gcloud", "compute", "networks", "subnets", "create", mutating=True, latency=15)
def subnet_create(ctx: Ctx) -> None:
    name, region = _name(ctx), _region(ctx)
    network = str(ctx.flag("--network", ""))
    if ctx.state.get("network", f"{ctx.project}/{network}") is None:
        raise Fail(1, gcloud_error(ctx, f"The resource '{_net_path(ctx, network)}' was not found"))
    obj = {"name": name, "project": ctx.project, "region": region, "network": network,
           "ipCidrRange": ctx.flag("--range"), "description": ctx.flag("--description", "")}
    create_resource(ctx, "subnet", f"{ctx.project}/{region}/{name}", obj, _subnet_path(ctx, region, name))


def _subnet_view(subnet: dict) -> dict:
    """A subnet as the API shows it: region and network as URLs, a selfLink."""
    project, region, name = subnet["project"], subnet["region"], subnet["name"]
    return {**unscoped(subnet), "region": f"{API}/projects/{project}/regions/{region}",
            "network": f"{API}/projects/{project}/global/networks/{subnet['network']}",
            "selfLink": f"{API}/projects/{project}/regions/{region}/subnetworks/{name}"}


@command("gcloud", "compute", "networks", "subnets", "describe", latency=1)
def subnet_describe(ctx: Ctx) -> None:
    name, region = _name(ctx), _region(ctx)
    subnet = require(ctx, "subnet", f"{ctx.project}/{region}/{name}", _subnet_path(ctx, region, name))
    ctx.work()
    ctx.emit(_subnet_view(subnet))


@command("gcloud", "compute", "networks", "subnets", "list", latency=1)
def subnet_list(ctx: Ctx) -> None:
    """Every region unless --regions names some; --network keeps one network's subnets."""
    ctx.work()
    regions = [r for r in str(ctx.flag("--regions") or "").split(",") if r]
    network = ctx.flag("--network")
    ctx.emit(filtered(ctx, [_subnet_view(s) for s in ctx.state.list("subnet") if s["project"] == ctx.project
                            and (not regions or s["region"] in regions) and (not network or s["network"] == network)]))


def _autopilot_node_on(ctx: Ctx, subnet: str) -> str:
    """The instance of an Autopilot cluster's node that has an interface on the subnet, or "": Autopilot makes
    a node for each pod that asks for additional networks (networking.gke.io/interfaces naming a Network whose
    GKENetworkParamSet is on the subnet), and the node's NIC holds the subnet while the pod is there. (A real
    node lingers minutes after its pod; the fake lets the subnet go with the pod.)"""
    import json

    from .gcloud_container import context_name

    for cluster in ctx.state.list("cluster"):
        if cluster.get("project") != ctx.project or not (cluster.get("autopilot") or {}).get("enabled"):
            continue
        objects = list(ctx.state.items(f"k8s:{context_name(ctx.project, cluster['location'], cluster['name'])}")
                       .values())
        params = {o["metadata"]["name"] for o in objects if o.get("kind") == "GKENetworkParamSet"
                  and (o.get("spec") or {}).get("vpcSubnet") == subnet}
        networks = {o["metadata"]["name"] for o in objects if o.get("kind") == "Network"
                    and ((o.get("spec") or {}).get("parametersRef") or {}).get("name") in params}
        for pod in (o for o in objects if o.get("kind") == "Pod" and networks):
            said = (pod.get("metadata") or {}).get("annotations", {}).get("networking.gke.io/interfaces") or "[]"
            try:
                interfaces = json.loads(said)
            except json.JSONDecodeError:
                continue
            if any(isinstance(i, dict) and i.get("network") in networks for i in interfaces):
                zone = (cluster.get("locations") or [cluster["location"]])[0]
                return (f"projects/{ctx.project}/zones/{zone}/instances/gk3-{cluster['name']}-nap-"
                        f"{pod['metadata']['name'][-5:]}")
    return ""


@command("gcloud", "compute", "networks", "subnets", "delete", mutating=True, latency=15)
def subnet_delete(ctx: Ctx) -> None:
    name, region = _name(ctx), _region(ctx)
    for pool in ctx.state.list("nodepool"):
        if any(net.get("subnetwork") == name for net in additional_networks(pool)):
            raise Fail(1, gcloud_error(ctx, f"The subnetwork resource '{_subnet_path(ctx, region, name)}' is already "
                                            f"being used by node pool '{pool['name']}'"))
    node = _autopilot_node_on(ctx, name)
    if node:
        raise Fail(1, gcloud_error(ctx, f"The subnetwork resource '{_subnet_path(ctx, region, name)}' is already "
                                        f"being used by '{node}'"))
    delete_resource(ctx, "subnet", f"{ctx.project}/{region}/{name}", _subnet_path(ctx, region, name))


def _fw_path(ctx: Ctx, name: str) -> str:
    return f"projects/{ctx.project}/global/firewalls/{name}"


@command("gcloud", "compute", "firewall-rules", "create", mutating=True, latency=10)
def firewall_create(ctx: Ctx) -> None:
    name = _name(ctx)
    network = str(ctx.flag("--network", "default"))
    if ctx.state.get("network", f"{ctx.project}/{network}") is None:
        raise Fail(1, gcloud_error(ctx, f"The resource '{_net_path(ctx, network)}' was not found"))
    obj = {"name": name, "project": ctx.project, "network": network, "allowed": ctx.flag("--rules"),
           "sourceRanges": ctx.flag("--source-ranges"), "description": ctx.flag("--description", "")}
    create_resource(ctx, "firewall", f"{ctx.project}/{name}", obj, _fw_path(ctx, name))


@command("gcloud", "compute", "firewall-rules", "describe", latency=1)
def firewall_describe(ctx: Ctx) -> None:
    name = _name(ctx)
    rule = require(ctx, "firewall", f"{ctx.project}/{name}", _fw_path(ctx, name))
    ctx.work()
    ctx.emit(_firewall_view(rule))


def _firewall_view(rule: dict) -> dict:
    """A rule as gcloud prints it (compute v1 Firewall): its network as the VPC's URL (the state keeps the name),
    `allowed` as [{IPProtocol, ports}] and `sourceRanges` as a list (the state keeps the flags' text)."""
    allowed: dict[str, list[str]] = {}
    for rule_text in str(rule.get("allowed") or "").split(","):
        if rule_text:
            protocol, _, ports = rule_text.partition(":")
            allowed.setdefault(protocol, []).extend([ports] if ports else [])
    return {**unscoped(rule), "network": f"{API}/projects/{rule['project']}/global/networks/{rule['network']}",
            "allowed": [{"IPProtocol": p, **({"ports": ports} if ports else {})} for p, ports in allowed.items()],
            "sourceRanges": [r for r in str(rule.get("sourceRanges") or "").split(",") if r]}


@command("gcloud", "compute", "firewall-rules", "list", latency=1)
def firewall_list(ctx: Ctx) -> None:
    ctx.work()
    ctx.emit(filtered(ctx, [_firewall_view(f) for f in ctx.state.list("firewall") if f["project"] == ctx.project]))


@command("gcloud", "compute", "firewall-rules", "delete", mutating=True, latency=10)
def firewall_delete(ctx: Ctx) -> None:
    name = _name(ctx)
    delete_resource(ctx, "firewall", f"{ctx.project}/{name}", _fw_path(ctx, name))
