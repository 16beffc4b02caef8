"""gcloud compute addresses (the global VPC_PEERING range) and gcloud services vpc-peerings (the private
services connection), with the real API's rule that `connect` cannot change the ranges of an existing
connection ("use UpdateConnection") and that `update` removing a range needs --force."""

from __future__ import annotations

import time

from ..core import Ctx, Fail, command, create_resource, delete_resource, require, unscoped
from ..core import gcloud_error as _error
from .gcloud_compute import API
from .gcloud_filter import filtered

SERVICE = "servicenetworking.googleapis.com"


def _name(ctx: Ctx) -> str:
    if not ctx.positionals:
        raise Fail(2, _error(ctx, "argument NAME: Must be specified."))
    return ctx.positionals[0]


def _address_path(ctx: Ctx, name: str) -> str:
    return f"projects/{ctx.project}/global/addresses/{name}"


def _require_global(ctx: Ctx) -> None:
    if not ctx.flag("--global"):
        # Without --global gcloud asks for a region (and the range would be the wrong kind).
        raise Fail(1, _error(ctx, "Underspecified resource: a peering range needs --global"))


@command("gcloud", "compute", "addresses", "create", mutating=True, latency=30)
def address_create(ctx: Ctx) -> None:
    name = _name(ctx)
    _require_global(ctx)
    network = str(ctx.flag("--network", ""))
    if ctx.state.get("network", f"{ctx.project}/{network}") is None:
        raise Fail(1, _error(ctx, f"The resource 'projects/{ctx.project}/global/networks/{network}' was not "
                                  "found"))
    prefix = int(ctx.flag("--prefix-length", "16"))
    index = len(ctx.state.list("address"))
    obj = {"name": name, "kind": "compute#address", "selfLink": _address_path(ctx, name), "network": network,
           "project": ctx.project, "purpose": ctx.flag("--purpose", ""), "addressType": "INTERNAL",
           "prefixLength": prefix, "address": f"10.{90 + index}.0.0",
           "description": ctx.flag("--description", "")}
    create_resource(ctx, "address", f"{ctx.project}/{name}", obj, _address_path(ctx, name))


def address_view(address: dict) -> dict:
    """An address as the API shows it (compute v1 Address): its network and selfLink as URLs; no project field."""
    project = address["project"]
    return {**unscoped(address),
            "selfLink": f"{API}/{address['selfLink']}",
            "network": f"{API}/projects/{project}/global/networks/{address['network']}"}


@command("gcloud", "compute", "addresses", "describe", latency=1)
def address_describe(ctx: Ctx) -> None:
    name = _name(ctx)
    _require_global(ctx)
    address = require(ctx, "address", f"{ctx.project}/{name}", _address_path(ctx, name))
    ctx.work()
    ctx.emit(address_view(address))


@command("gcloud", "compute", "addresses", "list", latency=1)
def address_list(ctx: Ctx) -> None:
    ctx.work()
    # The fake keeps global ranges only: --regions lists none of them, --global or no scope all of them.
    scope = [a for a in ctx.state.list("address") if a["project"] == ctx.project and not ctx.flag("--regions")]
    ctx.emit(filtered(ctx, [address_view(a) for a in scope]))


@command("gcloud", "compute", "addresses", "delete", mutating=True, latency=10)
def address_delete(ctx: Ctx) -> None:
    name = _name(ctx)
    _require_global(ctx)
    for connection in ctx.state.list("peering"):
        if connection["project"] == ctx.project and name in connection["reservedPeeringRanges"]:
            raise Fail(1, _error(ctx, f"The address resource '{_address_path(ctx, name)}' is already being "
                                      f"used by a private services connection"))
    delete_resource(ctx, "address", f"{ctx.project}/{name}", _address_path(ctx, name))


def _network(ctx: Ctx) -> str:
    network = ctx.flag("--network")
    if not network:
        raise Fail(2, _error(ctx, "argument --network: Must be specified."))
    if ctx.state.get("network", f"{ctx.project}/{network}") is None:
        raise Fail(1, _error(ctx, f"Network projects/{ctx.project}/global/networks/{network} not found"))
    return str(network)


def _ranges(ctx: Ctx) -> list[str]:
    ranges = [r for r in str(ctx.flag("--ranges", "")).split(",") if r]
    for name in ranges:
        if ctx.state.get("address", f"{ctx.project}/{name}") is None:
            raise Fail(1, _error(ctx, f"Allocated IP range '{name}' not found in network"))
    return ranges


def _key(ctx: Ctx, network: str) -> str:
    return f"{ctx.project}/{network}/{ctx.flag('--service', SERVICE)}"


def _connection(ctx: Ctx, network: str, ranges: list[str]) -> dict:
    from .gcloud_projects import project_number

    # Service Networking names the consumer's network with the project's number, not its id.
    return {"network": f"projects/{project_number(ctx.project)}/global/networks/{network}",
            "peering": "servicenetworking-googleapis-com",
            "reservedPeeringRanges": ranges, "service": f"services/{ctx.flag('--service', SERVICE)}",
            "project": ctx.project, "_network": network}


@command("gcloud", "services", "vpc-peerings", "connect", mutating=True, latency=90)
def peering_connect(ctx: Ctx) -> None:
    network = _network(ctx)
    ranges = _ranges(ctx)
    existing = ctx.state.get("peering", _key(ctx, network))
    if existing is not None and sorted(existing["reservedPeeringRanges"]) != sorted(ranges):
        raise Fail(1, _error(ctx, "Cannot modify allocated ranges in CreateConnection. Please use "
                                        "UpdateConnection."))
    ctx.work()
    ctx.state.put("peering", _key(ctx, network), _connection(ctx, network, ranges))
    ctx.err("Operation finished successfully.")


@command("gcloud", "services", "vpc-peerings", "update", mutating=True, latency=60)
def peering_update(ctx: Ctx) -> None:
    network = _network(ctx)
    ranges = _ranges(ctx)
    existing = ctx.state.get("peering", _key(ctx, network))
    if existing is None:
        raise Fail(1, _error(ctx, f"NOT_FOUND: no private connection on network {network}"))
    removed = set(existing["reservedPeeringRanges"]) - set(ranges)
    if removed and not ctx.flag("--force"):
        raise Fail(1, _error(ctx, f"Removing allocated ranges {sorted(removed)} needs --force"))
    ctx.work()
    ctx.state.put("peering", _key(ctx, network), _connection(ctx, network, ranges))
    ctx.err("Operation finished successfully.")


@command("gcloud", "services", "vpc-peerings", "list", latency=1)
def peering_list(ctx: Ctx) -> None:
    # Of a network that is gone, an empty list: gcloud sends the name without checking it, and Service Networking
    # lists no connection for it (terraform-provider-google's acceptance tests list the connections of their
    # deleted VPC and fail on any error). A 404 would read "not found" too (gcloud re-raises 403 and 404 as its
    # ListConnectionsPermissionDeniedException, with the API's message); we take either as no peering.
    network = str(ctx.flag("--network") or "")
    if not network:
        raise Fail(2, _error(ctx, "argument --network: Must be specified."))
    ctx.work()
    ctx.emit([unscoped(c) for c in ctx.state.list("peering")
              if c["project"] == ctx.project and c["_network"] == network
              and c["service"] == f"services/{ctx.flag('--service', SERVICE)}"])


@command("gcloud", "services", "vpc-peerings", "delete", mutating=True, latency=60)
def peering_delete(ctx: Ctx) -> None:
    network = _network(ctx)
    key = _key(ctx, network)
    if ctx.state.get("peering", key) is None:
        # Service Networking's 400 (gcloud catches only 403 and 404 here, and prints the API's message); seen
        # in terraform-provider-google#9105.
        raise Fail(1, _error(ctx, "There is no peering (servicenetworking-googleapis-com) for the network."))
    users = [i["name"] for i in ctx.state.list("lustre") if i.get("_network") == network]
    held = float((ctx.state.get("_peering_hold", network) or {}).get("until", 0))
    if users or time.time() < held:
        # Service Networking's words (gcloud prints a failed operation so); it may count a producer for a while
        # after its delete (FAKECLOUD_PEERING_HOLD_SECONDS, wall clock, set by gcloud_lustre's delete).
        ctx.work(10)
        raise Fail(1, _error(ctx, 'The operation "operations/pssn.p24-123456789012-fake" resulted in a '
                                        'failure "Failed to delete connection; Producer services (e.g. CloudSQL, '
                                        'Cloud Memstore, etc.) are still using this connection."'))
    ctx.work()
    ctx.state.delete("peering", key)
    ctx.err("Operation finished successfully.")
