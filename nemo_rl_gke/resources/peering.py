"""The VPC peering to Service Networking that Managed Lustre needs (storage layer): its existence, and a create
and delete that share it with other services' ranges on the same VPC (ours added or removed, theirs kept)."""

from __future__ import annotations

import json
import re
from typing import Any

from .. import names
from ..commands import lustre
from ..runner import NOT_FOUND, Runner
from ..settings import Settings
from ..steps import Action, Check
from ..tools import ToolError
from .inventory import Decide, Inventory

KIND = "VPC peering"  # the inventory's listing of the network's Service Networking connections


def existing_peering_ranges(r: Runner, s: Settings) -> list[str] | None:
    """Our network's Service Networking ranges; None without a peering, or without the network itself (after a
    complete `down`, `vpc-peerings list --network=…` lists nothing, or if Service Networking answers 404, says
    "not found": either way there is no peering)."""
    result = r.query(lustre.peering_list(s), ok_codes=range(256))
    if result is None or result.not_found:
        return None
    if not result.ok:
        raise r.failure(result)
    return lustre.peering_ranges(result.stdout)


def exists(s: Settings) -> Check:
    def exists(r: Runner) -> bool:
        ranges = existing_peering_ranges(r, s)
        return ranges is not None and names.lustre_range(s) in ranges

    return exists


def listed(s: Settings) -> Decide:
    def decide(items: list[dict[str, Any]]) -> bool:
        ranges = lustre.peering_ranges(json.dumps(items))
        return ranges is not None and names.lustre_range(s) in ranges

    return decide


def create(s: Settings, inv: Inventory) -> Action:
    def create(r: Runner) -> str | None:
        listed = inv.as_listed(r, KIND)
        if listed is not None and lustre.peering_ranges(json.dumps(listed)) is None:
            # No peering on the network in this run's listing: connect without asking again. A peering another
            # service made since makes `connect` fail, changing nothing ("Cannot modify allocated ranges in
            # CreateConnection. Please use UpdateConnection."): then read it and add our range to its ranges.
            try:
                r.run(lustre.peering_connect(s), timeout=1800)
                return None
            except ToolError as exc:
                if "UpdateConnection" not in str(exc):
                    raise
        action, ranges = lustre.peering_plan(existing_peering_ranges(r, s), names.lustre_range(s))
        if action == "connect":
            r.run(lustre.peering_connect(s), timeout=1800)
        elif action == "update":
            # Another service's peering on this VPC: keep its ranges and add ours.
            r.run(lustre.peering_update(s, ranges), timeout=1800)
        else:
            return "exists"
        return None

    return create


# Service Networking refuses to delete a connection a producer still uses, and may count the Lustre instance
# for a while after its delete has ended: "Failed to delete connection; Producer services (e.g. CloudSQL, Cloud
# Memstore, etc.) are still using this connection." (terraform-provider-google#18834 for Cloud SQL).
PRODUCER_HOLDS = re.compile(r"Producer services .{0,60}still using this connection", re.IGNORECASE)
# What Service Networking answers (a 400, not a 404) to the delete of a connection that is not there, e.g.
# removed since our read (terraform-provider-google#9105: "Error 400: There is no peering
# (servicenetworking-googleapis-com) for the network."): gone already.
NO_PEERING = re.compile(r"There is no peering\b", re.IGNORECASE)
RELEASE_POLLS = 60  # wait that many poll intervals (10 minutes at the default 10 s) for the producer to let go
GONE_OR_HELD = re.compile(f"{NOT_FOUND.pattern}|{NO_PEERING.pattern}|{PRODUCER_HOLDS.pattern}", re.IGNORECASE)


def _delete_when_released(r: Runner, s: Settings) -> None:
    """The peering's delete, waiting while Service Networking still counts the deleted Lustre instance."""
    def deleted(echo: bool = True) -> bool:
        result = r.run(lustre.peering_delete(s), accept=GONE_OR_HELD, timeout=1800, echo=echo)
        if NO_PEERING.search(result.stderr) and not result.ok:
            # The VPC side of the peering is gone; the connection may not be (removing the VPC peering by hand
            # leaves it, terraform-provider-google#18834): gone only if Service Networking lists it no more.
            ranges = existing_peering_ranges(r, s)
            if ranges is not None and names.lustre_range(s) in ranges:
                raise ToolError(f"Service Networking still lists the private connection of {s.NETWORK} with our "
                                f"range {names.lustre_range(s)}, but its delete says there is no VPC peering (it was "
                                f"removed from the VPC by hand?): `gcloud services vpc-peerings delete` cannot remove "
                                f"it then. Remove the private service connection in the Cloud console (VPC network "
                                f"> Private services access), then run the teardown again.", 1)
            return True
        return result.ok or result.not_found

    if deleted():
        return
    r.say("the VPC peering is still held by Service Networking after the Lustre delete (it counts a deleted "
          "producer for a while): waiting for it to let go", err=True)
    wait = RELEASE_POLLS * r.poll_seconds
    if not r.poll("VPC peering released by Service Networking", lambda: deleted(echo=False), timeout=wait):
        raise ToolError(f"Service Networking still says a producer uses the VPC peering of {s.NETWORK} after "
                        f"{wait / 60:.0f} minutes, though our Lustre instance is deleted: Google releases it later "
                        f"(for some services, hours). The range and the main VPC wait for it; run `invoke down` "
                        f"again later (it skips what is gone).", 1)


def delete(s: Settings) -> Action:
    def delete(r: Runner) -> str | None:
        if r.dry:
            r.run(lustre.peering_delete(s))
            return None
        action, remaining = lustre.peering_teardown(existing_peering_ranges(r, s), names.lustre_range(s))
        if action == "delete":
            _delete_when_released(r, s)
        elif action == "update":
            # Others still use the peering: remove only our range (removing one needs --force).
            r.run(lustre.peering_update(s, remaining, force=True), timeout=1800)
        else:
            return "absent"
        return None

    return delete
