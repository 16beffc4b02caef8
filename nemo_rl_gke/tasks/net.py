"""`net`: the three VPCs the GPU cluster needs (main, gVNIC, RDMA with its 8 subnets) and the firewall rule.

Examples:
    invoke net.create
    invoke --dry net.create        # print the gcloud commands, run nothing
    invoke net.delete --yes
"""

from invoke import Collection

from . import context


def _steps(s):
    from ..resources import net_steps as net

    return net.steps(s)


@context.task
def create(c):
    """Create the main, gVNIC and RDMA VPCs, subnets and firewall rule (skips what exists)."""
    s = context.settings(c)
    context.apply_steps(c, s, _steps(s))


@context.task(help={"json_": context.JSON_HELP})
def status(c, json_=False):
    """Show which of our networks, subnets and firewall rules exist."""
    context.status_task(c, "networks", _steps, as_json=json_, kind="net.status")


@context.task(help={"yes": "Answer yes to the confirmation (needed without a terminal)."})
def delete(c, yes=False):
    """Delete our subnets, firewall rule and VPCs (never a VPC we did not create)."""
    s = context.settings(c)
    context.confirm(c, f"Delete the networks of {s.PROJECT_ID} ({s.GVNIC_NETWORK_PREFIX}-*, "
                       f"{s.RDMA_NETWORK_PREFIX}-*, {s.NETWORK} if ours)?", yes=yes)
    context.destroy_steps(c, s, _steps_keeping_live_data(c, s))


def _steps_keeping_live_data(c, s):
    """Our network steps, with those an existing data store still needs (the main VPC under a kept Lustre
    instance) marked to be kept: the API would refuse to delete them anyway, and the data stays reachable."""
    from dataclasses import replace

    from ..graph import needed_by
    from ..resources import all_steps

    steps = all_steps(s)
    everything = {step.name: step for step in steps}
    r = context.runner(c, s)
    # Only data stores that sit on our networks (Lustre), so no client library call is needed here.
    live = [step.name for step in steps if step.holds_data
            and any(everything[d].layer == "net" for d in needed_by(steps, [step.name])) and step.exists(r)]
    keep = needed_by(steps, live) - set(live)
    for name in sorted(keep & {step.name for step in _steps(s)}):
        r.say(f"kept {everything[name].title}: {', '.join(everything[n].title for n in live)} still uses it "
              f"(delete it with `invoke storage.delete --delete-data` first)", err=True)
    return [replace(step, holds_data=True) if step.name in keep else step for step in _steps(s)]


ns = Collection("net", create, status, delete)
