"""`net`: the three VPCs the GPU cluster needs (main, gVNIC, RDMA with its 8 subnets) and the firewall rule.

Examples:
    invoke net.create
    invoke --dry net.create        # print the gcloud commands, run nothing
    invoke net.delete --yes        # the main VPC stays while the Lustre instance is kept on it
"""

from typing import Any

from invoke.collection import Collection
from invoke.context import Context

from ..settings import Settings
from . import context


def _steps(s: Settings) -> list[Any]:
    from ..resources import layer_steps

    return layer_steps(s, "net")


@context.task(help={"force_unlock": context.UNLOCK_HELP})
def create(c: Context, force_unlock: bool = False) -> None:
    """Create the main, gVNIC and RDMA VPCs, subnets and firewall rule (skips what exists)."""
    s = context.settings(c)
    with context.deployment_locked(c, s, "net.create", force=force_unlock):
        context.apply_steps(c, s, _steps(s))


@context.task(help={"json_": context.JSON_HELP})
def status(c: Context, json_: bool = False) -> None:
    """Show which of our networks, subnets and firewall rules exist."""
    context.status_task(c, "networks", _steps, as_json=json_, kind="net.status",
                        reads="shows which of our networks, subnets and firewall rules exist")


@context.task(help={"yes": context.YES_ONE_HELP,
                    "force_unlock": context.UNLOCK_HELP})
def delete(c: Context, yes: bool = False, force_unlock: bool = False) -> None:
    """Delete our subnets, firewall rule and VPCs (never one we did not create; the main VPC stays under Lustre)."""
    from .clean import clean_layer

    # clean.net's teardown: what goes is listed, the lock is taken, a Lustre instance still CREATING counts
    # as present (its VPC is kept), what another deployment shares is kept, leftovers are scanned.
    clean_layer(c, "net", yes=yes, force_unlock=force_unlock, what="net.delete")


ns = Collection("net", create, status, delete)
