"""`net`: the three VPCs the GPU cluster needs (main, gVNIC, RDMA with its 8 subnets) and the firewall rule.

Examples:
    invoke net.create
    invoke --dry net.create        # print the gcloud commands, run nothing
    invoke net.delete --yes
"""

from invoke import Collection

from . import context


def _steps(s):
    from .steps import net

    return net.steps(s)


@context.task
def create(c):
    """Create the main, gVNIC and RDMA VPCs, subnets and firewall rule (skips what exists)."""
    s = context.settings(c)
    context.apply_steps(c, s, _steps(s))


@context.task
def status(c):
    """Show which of our networks, subnets and firewall rules exist."""
    s = context.settings(c)
    context.print_table("networks", ("resource", "state"), context.status_rows(c, s, _steps(s)))


@context.task(help={"yes": "Answer yes to the confirmation (needed without a terminal)."})
def delete(c, yes=False):
    """Delete our subnets, firewall rule and VPCs (never a VPC we did not create)."""
    s = context.settings(c)
    context.confirm(c, f"Delete the networks of {s.PROJECT_ID} ({s.GVNIC_NETWORK_PREFIX}-*, "
                       f"{s.RDMA_NETWORK_PREFIX}-*, {s.NETWORK} if ours)?", yes=yes)
    context.destroy_steps(c, s, _steps(s))


ns = Collection("net", create, status, delete)
