"""The GKE cluster (Standard or Autopilot), its credentials, the GPU node pool with nine extra NICs, the
NCCL RDMA installer (pinned), and the network mapping the Ray workers' interfaces refer to."""

from __future__ import annotations

import json
import re
from typing import Any

from .. import names, render
from ..commands import gcloud, kubectl
from ..runner import ALREADY_EXISTS, NOT_FOUND, TRANSIENT, Result, Runner
from ..settings import Settings
from ..steps import Action, Step
from ..tools import ToolError
from . import cluster_features
from . import net_steps as net
from .inventory import Inventory, KubeRef, has_endpoint, inventory_of
from .step_shapes import check, creator

CLUSTER = "cluster.cluster"
CREDENTIALS = "cluster.credentials"
GPU_POOL = "cluster.gpu-pool"
NCCL = "cluster.nccl-installer"
NETWORK_MAPPING = "cluster.network-mapping"


def _credentials(s: Settings, inv: Inventory) -> Action:
    def fetch(r: Runner) -> str | None:
        # The run's kubectl listings already answered through the kubeconfig context: nothing to refresh
        # (the auth plugin gets a fresh token on every kubectl call).
        if not r.dry and inv.kube_answered():
            return "exists"
        got = r.run(gcloud.get_credentials(s), accept=NOT_FOUND_OR_NO_ENDPOINT)
        if got.not_found:  # ray.deploy or cluster.credentials before the cluster: gcloud's 404 said plainly
            raise ToolError(f"cluster {s.CLUSTER_NAME} does not exist in project {s.PROJECT_ID} "
                            f"({s.CONTROL_PLANE_LOCATION}): `invoke net.create cluster.create` makes it, `invoke up` "
                            f"makes everything. Nothing was changed.", 2)
        if not got.ok:  # a create under way (an interrupted `up`): GKE gives the endpoint minutes into it
            raise ToolError(f"cluster {s.CLUSTER_NAME} is still being made (PROVISIONING) and has no endpoint yet, "
                            f"so there are no credentials to fetch: `invoke up` (or `invoke cluster.create`) waits "
                            f"for it. Nothing was changed.", 1)
        return None

    return fetch


def credentials_if_cluster(r: Runner, s: Settings, *, say: bool = True) -> bool:
    """This machine's credentials for our cluster, for the kubectl calls that follow: True if it has them (its
    context points at the cluster's endpoint already, or they were fetched). A context of an earlier cluster of
    the name (deleted, or re-created elsewhere) is replaced: dropped, kubectl would read everything in the new
    cluster as absent ("no such context"), and a teardown said nothing of ours was left in it and deleted the
    Lustre instance under its pods. Without a cluster its objects are gone already; a cluster with no endpoint yet
    (has_endpoint) holds none of ours either: said (say), and an earlier cluster's context is dropped, so that
    kubectl answers at once that there is none instead of dialing the old endpoint. False on a dry run."""
    from .. import kubeconfig
    from . import kube_context

    result = None if r.dry else r.query(gcloud.cluster_describe(s))
    if result is None:
        return False
    if result.not_found:  # no cluster: a context of its name is an earlier one's
        kube_context.drop_if_stale(r, s, None)
        return False
    if not result.ok:
        raise r.failure(result)
    cluster = json.loads(result.stdout or "{}")
    if has_endpoint(cluster):
        server = kubeconfig.server_of(s.kube_context)
        if not server or server not in kube_context.endpoints(cluster):
            r.run(gcloud.get_credentials(s))
        return True
    kube_context.drop_if_stale(r, s, cluster)
    if say:
        r.say(f"note: cluster {s.CLUSTER_NAME} is PROVISIONING and has no endpoint yet: nothing can have been "
              f"deployed in it, so nothing in it is deleted or read.", err=True)
    return False


# gcloud 528's get-credentials of a cluster GKE has given no endpoint yet (api_lib/container/util.py
# MissingEndpointError): "cluster NAME is missing endpoint. Is it still PROVISIONING?"
NO_ENDPOINT = re.compile(r"is missing endpoint\. Is it still PROVISIONING\?")
NOT_FOUND_OR_NO_ENDPOINT = re.compile(f"{NOT_FOUND.pattern}|{NO_ENDPOINT.pattern}", re.IGNORECASE)


MAPPING_WORD = "gkenetworkparamsets.networking.gke.io"


def _wanted_mapping(s: Settings) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc["spec"] for doc in render.load_all(render.network_mapping(s))
            if doc["kind"] == "GKENetworkParamSet"}


def mapping_matches(s: Settings, items: list[dict[str, Any]]) -> bool:
    """All nine GKENetworkParamSets are among items and point at our VPCs and subnets."""
    found = {item["metadata"]["name"]: item.get("spec", {}) for item in items
             if item.get("kind") == "GKENetworkParamSet"}
    return all(found.get(name, {}).get(k) == v for name, spec in _wanted_mapping(s).items() for k, v in spec.items())


def network_mapping_present(r: Runner, s: Settings) -> bool:
    """All nine GKENetworkParamSets exist and point at our VPCs and subnets. A cluster without multi-networking
    does not serve the kind at all (kubectl: the server doesn't have a resource type "gkenetworkparamsets"):
    then none of them exists either."""
    result = r.query(kubectl.get(s, MAPPING_WORD, *_wanted_mapping(s)))
    if result is None:
        return False
    if not result.ok:
        unserved = f'doesn\'t have a resource type "{MAPPING_WORD.split(".", 1)[0]}"'
        if result.not_found or unserved in result.stderr:
            return False
        raise r.failure(result)
    body = json.loads(result.stdout or "{}")
    items = body.get("items", [body]) if body.get("kind", "").endswith("List") else [body]
    return mapping_matches(s, items)


def _apply_network_mapping(s: Settings) -> Action:
    def apply(r: Runner) -> None:
        text = render.network_mapping(s)
        r.run(kubectl.apply_stdin(s), stdin=text, stdin_label=f"manifests/network-mapping.yaml rendered "
                                                              f"({len(render.load_all(text))} objects)")

    return apply


def other_deployments(r: Runner, s: Settings, steps: list[Step] | None = None) -> list[str]:
    """The other deployments in the project, other than CLUSTER_NAME: clusters carrying our managed-by label,
    and clusters made another way (an adopted one: the tutorial's) with a node pool on our gVNIC or RDMA VPC,
    each named with what it uses ("NAME (made another way: node pool gpu-pool is on our VPCs)").

    They may share our VPCs, peering, Lustre instance and bucket: a teardown keeps those while any is left
    (deleting them would take the Lustre from under the other's Ray, then fail on the VPCs every time).
    steps: the teardown's steps, whose inventory lists the clusters (ours, those labelled, those on our VPCs)
    once."""
    from .inventory import pool_networks, short

    inv = inventory_of(steps or [])
    items = inv.listed(r, "cluster") if inv is not None else None
    incomplete = False
    if items is None:
        result = r.query(gcloud.clusters_list(s), ok_codes=range(256))
        if result is None or not result.ok:
            if result is not None and not result.not_found:
                raise r.failure(result)
            return []
        incomplete = not result.complete  # a location did not answer: a deployment there would go unseen
        try:
            items = json.loads(result.stdout or "[]")
        except json.JSONDecodeError:
            if not incomplete:
                return []
            items = []  # no answer from the locations that did answer either: the check below decides
    shared = set(pool_networks(s))
    gvnic = names.gvnic_network(s)
    found: dict[str, str] = {}  # deployment -> how it was found ("" for a labelled cluster)
    for item in items if isinstance(items, list) else []:
        name = str(item.get("name") or "")
        if not name or name == s.CLUSTER_NAME:
            continue
        if cluster_features.made_by_us(item):
            found[name] = ""
            continue
        pools = [str(pool.get("name")) for pool in item.get("nodePools") or [] if any(
            short(nic.get("network")) in shared
            for nic in (pool.get("networkConfig") or {}).get("additionalNodeNetworkConfigs") or [])]
        if pools:
            found[name] = (f"made another way: node pool{'s' if len(pools) > 1 else ''} "
                           f"{', '.join(sorted(pools))} {'are' if len(pools) > 1 else 'is'} on our VPCs")
    # Every deployment's `up` makes a firewall rule of its own on our gVNIC VPC, whatever its cluster (an adopted
    # Autopilot one has no node pool of ours to show): while it is there, that deployment shares the VPCs.
    from .leftovers import deployment_of

    rules = inv.listed(r, "firewall rule") if inv is not None else None
    # Not listed, or the listing failed: asked now, unless another deployment is known already (that is all a
    # teardown needs: it keeps what deployments share).
    if rules is None and not found and (steps is None or any(step.shared for step in steps)):
        rules = _firewall_rules(r, s)
    for rule in rules or []:
        owner = deployment_of(rule)
        if owner and owner != s.CLUSTER_NAME and owner not in found and short(rule.get("network")) == gvnic:
            found[owner] = f"its firewall rule {rule.get('name')} is on our gVNIC VPC"
    if incomplete and not found and (steps is None or any(step.shared for step in steps)):
        # None seen, one may be there: what it shares would be deleted. (One seen keeps what is shared anyway.)
        raise ToolError(f"GKE listed the clusters of {s.PROJECT_ID} without some locations (it warned: List results "
                        f"may be incomplete), so whether another deployment shares our VPCs, peering, Lustre and "
                        f"bucket cannot be told: nothing was deleted. Run it again in a minute; meanwhile `invoke "
                        f"clean.cluster --yes` deletes the cluster and its GPU nodes, which nothing shares.", 1)
    return sorted(f"{name} ({how})" if how else name for name, how in found.items())


def _firewall_rules(r: Runner, s: Settings) -> list[dict[str, Any]]:
    """The firewall rules the inventory lists (ours by name, other deployments' by description), asked now;
    a list that cannot be read is a failure, never "no other deployment"."""
    from .inventory import listings, parse_items

    (listing,) = [item for item in listings(s) if item.kind == "firewall rule"]
    result = r.query(listing.argv, ok_codes=range(256))
    if result is None:
        return []
    if not result.complete:
        raise r.failure(result)
    return parse_items(result.stdout)


def gpu_pool_of(cluster: dict[str, Any]) -> dict[str, Any] | None:
    """Our GPU pool among a cluster body's node pools (as described or listed), or None."""
    return next((p for p in cluster.get("nodePools") or [] if p.get("name") == names.GPU_POOL), None)


def listed_bodies(r: Runner, s: Settings, steps: Any) -> dict[str, dict[str, Any]]:
    """The cluster and its GPU pool as this run's inventory listed them (a listed Cluster carries its node
    pools), by step name; empty without an inventory that could list them."""
    inv = inventory_of(steps or [])
    items = inv.listed(r, "cluster") if inv is not None else None
    found = inv.cluster(items) if inv is not None and items is not None else None
    if found is None:
        return {}
    pool = gpu_pool_of(found)
    return {CLUSTER: found, **({GPU_POOL: pool} if pool is not None else {})}


def networks_alone(steps: list[Step]) -> bool:
    """A teardown of the networks and nothing else (net.delete, clean.net)."""
    return bool(steps) and all(step.layer == "net" for step in steps)


def refuse_networks_under_the_cluster(r: Runner, s: Settings, steps: list[Step], what: str) -> None:
    """Exit 2 before a teardown of the networks alone (net.delete, clean.net) deletes anything while our cluster
    stands on them: on Standard it deleted the firewall rule, then failed on every subnet ("in use" by the GPU
    pool), the cluster left without its rule; on Autopilot it deleted the subnets and VPCs from under Ray's
    nodes and the network mapping. Read from the teardown's cluster listing (other_deployments reads it too), or
    from a describe when the listing gave no answer (a location missing from GKE's list).
    A Standard cluster made another way holds our subnets only through our GPU pool in it."""
    from invoke.exceptions import Exit

    if not networks_alone(steps):
        return
    inv = inventory_of(steps)
    items = inv.listed(r, "cluster") if inv is not None else None
    found = inv.cluster(items) if inv is not None and items is not None else _describe_status(
        r, gcloud.cluster_describe(s))
    if found is None:
        return
    ours = cluster_features.made_by_us(found)
    pool = gpu_pool_of(found)
    autopilot = bool((found.get("autopilot") or {}).get("enabled"))
    if not ours and not autopilot and (pool is None or not cluster_features.made_by_us(pool)):
        return  # nothing of ours sits on our subnets in it any more
    if str(found.get("status")) == "STOPPING":
        fix = (f"GKE is deleting it: wait until `gcloud container clusters describe {s.CLUSTER_NAME} "
               f"--location={s.region}` answers NOT_FOUND, then run this again")
    elif ours:
        fix = "`invoke cluster.delete --yes` first (Lustre and the bucket stay), or `invoke down --yes` for everything"
    elif autopilot:
        fix = (f"it was made another way, and its nodes sit on our subnets while it stands: "
               f"{cluster_features.delete_it_yourself(s)} first, then this again")
    else:
        fix = (f"it was made another way: `invoke clean.cluster --yes` deletes our GPU pool {names.GPU_POOL} from it "
               f"(the cluster stays), then this again")
    raise Exit(f"error: {what} would delete the networks cluster {s.CLUSTER_NAME} stands on (its nodes' subnets, "
               f"its network mapping, its VPC): {fix}. Nothing was deleted.", code=2)


def keep_if_not_ours(r: Runner, s: Settings, steps: list[Step], present: dict[str, bool | None]) -> list[str]:
    """A cluster named CLUSTER_NAME without our managed-by label was made another way (the tutorial's, adopted
    by `up`): no teardown deletes it. What we added to it goes: our GPU pool gets a delete of its own (replaced
    in place in steps, with the cluster's guard: the record of /data/runs before Ray's workers go); a GPU pool
    without our label is the user's too, and stays. Says so; returns the steps to keep (the cluster, the objects
    we applied in it, a pool that is not ours), for `graph.destroy`'s keep."""
    from dataclasses import replace

    where = {step.name: index for index, step in enumerate(steps)}
    if r.dry or CLUSTER not in where or not present.get(CLUSTER):
        return []
    inv = inventory_of(steps)
    items = inv.listed(r, "cluster") if inv is not None else None
    body = inv.cluster(items) if inv is not None and items is not None else _describe_status(
        r, gcloud.cluster_describe(s))
    if body is None or cluster_features.made_by_us(body):
        return []
    keep = [name for name in (CLUSTER, CREDENTIALS, NCCL, NETWORK_MAPPING) if name in where]
    if NETWORK_MAPPING in where and not s.autopilot:
        # Kept with a Standard cluster, it holds none of our subnets in place (our pool, on them, goes). In
        # Autopilot it keeps them: the cluster's multi-network nodes sit on them while it stands.
        steps[where[NETWORK_MAPPING]] = replace(steps[where[NETWORK_MAPPING]], deps=(CREDENTIALS,))
    pool = gpu_pool_of(body)
    said = [f"keeping cluster {s.CLUSTER_NAME}: nemo-rl-gke did not create it (no managed-by={names.MANAGED_BY} "
            f"label), so no teardown deletes it"]
    if GPU_POOL in where:
        # In any state: a pool an interrupted `up` left PROVISIONING bills and holds the subnets too (the
        # bring-up's check counts only a usable pool).
        present[GPU_POOL] = pool is not None
    if GPU_POOL in where and (pool is None or cluster_features.made_by_us(pool)):
        title = f"GPU node pool {names.GPU_POOL}"
        steps[where[GPU_POOL]] = replace(steps[where[GPU_POOL]], delete=_delete_when_free(
            title, gcloud.node_pool_delete(s)), guard=steps[where[CLUSTER]].guard, present=lambda _r: pool is not None)
        if pool is not None:
            said.append(f"our GPU node pool {names.GPU_POOL} in it is deleted")
    elif GPU_POOL in where:
        keep.append(GPU_POOL)
        said.append(f"its GPU node pool {names.GPU_POOL} has no managed-by label either: kept (it bills while its "
                    f"nodes run; {cluster_features.delete_pool_yourself(s)} deletes it)")
    # Only what is there: a cluster `up` refused (it lacked a feature) has neither, and says nothing of them.
    applied = [what for name, what in ((NCCL, "the NCCL installer"), (NETWORK_MAPPING, "the network mapping"))
               if name in where and present.get(name)]
    if applied:
        said.append(f"{' and '.join(applied)} in it stay{'s' if len(applied) == 1 else ''}")
    if not any(step.layer == "ray" for step in steps):
        said.append("anything else we deployed in it (Ray, the Lustre volume) stays too: `invoke down` deletes that")
    r.say("; ".join(said) + f". {cluster_features.delete_it_yourself(s)} deletes the cluster itself.", err=True)
    return keep


# GKE goes on creating a cluster or node pool after the gcloud that asked is gone (Ctrl-C, a lost laptop): an
# interrupted `up` leaves it PROVISIONING. It exists only once it can be used; until then its create answers
# 409 "Already exists" and waits for it. RECONCILING (an upgrade) and DEGRADED still serve; ERROR never becomes
# ready by waiting, nor does STOPPING (GKE deleting it: said apart, as there is nothing to mend but to wait).
USABLE = {"cluster": ("RUNNING", "RECONCILING", "DEGRADED"), "node pool": ("RUNNING", "RUNNING_WITH_ERROR",
                                                                            "RECONCILING")}
HOPELESS_STATES = ("ERROR",)
SETTLE_TIMEOUT_SECONDS = 3600
# gcloud stops waiting on a GKE operation after its own limit, exits 1 and leaves it running in GKE (gcloud 528,
# api_lib/container/api_adapter.py WaitForOperation): "Operation [<Operation …>] is still running, check its
# status via 'gcloud container operations describe operation-…'". The limits: `clusters create` 60 minutes,
# `node-pools create` 30 (a GPU pool waiting for capacity takes longer), `clusters resize` 20.
STILL_RUNNING = re.compile(r"\] is still running, check its status via 'gcloud container operations describe")
GCLOUD_WAIT_SECONDS = 3600  # the longest of them: our own limit on a create comes after gcloud's
CREATED_OR_UNDER_WAY = re.compile(f"{ALREADY_EXISTS.pattern}|{STILL_RUNNING.pattern}", re.IGNORECASE)


def why_status(body: dict[str, Any]) -> str:
    """GKE's words for a cluster's or node pool's status: statusMessage (deprecated in v1: "Use conditions
    instead"), else the messages of its conditions[]."""
    said = str(body.get("statusMessage") or "")
    return said or "; ".join(str(c["message"]) for c in body.get("conditions") or []
                             if isinstance(c, dict) and c.get("message"))


def _usable(kind: str, body: dict[str, Any] | None) -> bool:
    return body is not None and str(body.get("status") or "RUNNING") in USABLE[kind]


def _describe_status(r: Runner, argv: list[str]) -> dict[str, Any] | None:
    result = r.query(argv)
    if result is None or result.not_found:
        return None
    if not result.ok:
        raise r.failure(result)
    body: dict[str, Any] = json.loads(result.stdout or "{}")
    return body


def _usable_check(kind: str, describe: list[str]) -> Any:
    return lambda r: _usable(kind, _describe_status(r, describe))


def created_in_error(title: str, stdout: str, fix: str) -> None:
    """Raise when the object a create printed (`--format=json`: a list of one) is in ERROR. gcloud 528 takes a
    GKE operation for failed only by its statusMessage (api_adapter.py WaitForOperation), which container v1
    deprecates for `error`: one that ended without it exits 0, "Created", for a cluster or GPU pool GKE put in
    ERROR (a stockout), and `up` went on to wait for Ray on nodes that never come."""
    try:
        printed = json.loads(stdout or "null")
    except ValueError:
        return
    body = printed[0] if isinstance(printed, list) and printed else printed
    if isinstance(body, dict) and str(body.get("status")) in HOPELESS_STATES:
        raise _state_error(title, str(body["status"]), body, fix)


def _state_error(title: str, status: str, body: dict[str, Any], fix: str) -> ToolError:
    """A cluster or node pool in a state waiting does not mend, with GKE's words for it and the fix."""
    said = why_status(body)
    return ToolError(f"{title} is {status}{': ' + said if said else ''}; {fix}", 1)


def _create_and_settle(s: Settings, kind: str, title: str, create: list[str], describe: list[str],
                       fix: str) -> Action:
    """Create; when it already exists (an earlier run's create goes on in GKE), or gcloud stopped waiting for it
    (its own limit), wait until it can be used. A create that ended in ERROR fails with GKE's reason."""
    def run(r: Runner) -> str | None:
        result = r.run(create, accept=CREATED_OR_UNDER_WAY, timeout=GCLOUD_WAIT_SECONDS + 300)
        if result.ok:
            created_in_error(title, result.stdout, fix)
            return None
        ours = not result.already_exists  # this run's create, which gcloud stopped waiting for
        seen: dict[str, str] = {}

        def usable() -> bool:
            body = _describe_status(r, describe)
            seen["status"] = status = str((body or {}).get("status") or "NOT_FOUND")
            if status == "STOPPING":  # being deleted: a teardown's delete goes on in GKE after its gcloud went
                raise ToolError(f"{title} is STOPPING: GKE is deleting it (a teardown's delete goes on after its "
                                f"gcloud was stopped). Wait until it is gone (`gcloud container operations list "
                                f"--project={s.PROJECT_ID}` shows the delete), then run `invoke up` again.", 1)
            if status in HOPELESS_STATES or body is None:
                raise _state_error(title, status, body or {}, fix)
            return _usable(kind, body)

        if not usable():
            why = ("gcloud stopped waiting for it (its own limit), and its create goes on in GKE" if ours else
                   "an earlier run's create goes on in GKE")
            r.say(f"{title} is {seen['status']}: {why}; waiting for it", err=True)
            if not r.poll(f"{title} ready", usable, timeout=SETTLE_TIMEOUT_SECONDS):
                raise ToolError(f"{title} still {seen['status']} after {SETTLE_TIMEOUT_SECONDS // 60} minutes; "
                                f"run `invoke up` again to keep waiting.", 1)
        return None if ours else "exists"

    return run


# GKE refuses to delete a cluster or a node pool while an operation runs on the cluster, and does not queue the
# delete: "Operation operation-… is currently creating cluster X. Please wait and try again once it is done." (the
# create of an interrupted `up` goes on for minutes), "Operation operation-… is currently creating a node pool for
# cluster X. Please wait …" (a pool's delete while a pool's create or delete runs: hashicorp/terraform-provider-
# google#10366 quotes it), "Cluster is running incompatible operation operation-…" (a node pool's create, an
# upgrade). The runner's retries last 30 s; the delete then waits for GKE.
CLUSTER_BUSY = re.compile(r"is currently \w+ (a )?(cluster|node pool)|running incompatible operation",
                          re.IGNORECASE)


GONE_OR_BUSY = re.compile(f"{NOT_FOUND.pattern}|{CLUSTER_BUSY.pattern}", re.IGNORECASE)
# While waiting, one try per poll: a refusal or a transient error only means "not yet" (the runner's own retries
# would spend 30 s and five gcloud processes on each poll).
GONE_BUSY_OR_TRANSIENT = re.compile(f"{GONE_OR_BUSY.pattern}|{TRANSIENT.pattern}", re.IGNORECASE)


def _delete_when_free(title: str, delete: list[str]) -> Action:
    """Delete; while GKE is busy with the cluster, wait for it and delete again."""
    def run(r: Runner) -> str | None:
        said: dict[str, Result] = {}

        def answered(first: bool = True) -> bool:
            said["last"] = result = r.run(delete, accept=GONE_OR_BUSY if first else GONE_BUSY_OR_TRANSIENT,
                                          echo=first, retry=first)
            return result.ok or not (CLUSTER_BUSY.search(result.stderr) or TRANSIENT.search(result.stderr))

        if not answered():
            r.say(f"{title}: GKE is still working on it (an interrupted create goes on); deleting it once that "
                  f"ends", err=True)
            if not r.poll(f"{title} free to delete", lambda: answered(first=False), timeout=SETTLE_TIMEOUT_SECONDS):
                raise ToolError(f"{title}: GKE was still working on it after {SETTLE_TIMEOUT_SECONDS // 60} "
                                f"minutes (`gcloud container operations list` says on what); run the teardown "
                                f"again to keep waiting.", 1)
        return "absent" if said["last"].not_found else None

    return run


def steps(s: Settings, inventory: Inventory | None = None) -> list[Step]:
    inv = inventory or Inventory(s)
    mode = "Autopilot" if s.autopilot else "Standard"

    def listed_pool(items: list[dict[str, Any]]) -> dict[str, Any] | None:
        found = inv.cluster(items)
        return gpu_pool_of(found or {})

    def pool_listed(items: list[dict[str, Any]]) -> bool:
        return _usable("node pool", listed_pool(items))

    nccl_word, nccl_namespace = "daemonset", kubectl.NCCL_INSTALLER[s.CLUSTER_MODE][1]
    out = [
        Step(CLUSTER, f"{mode} cluster {s.CLUSTER_NAME}",
             inv.check(CLUSTER, "cluster", lambda items: _usable("cluster", inv.cluster(items)),
                       _usable_check("cluster", gcloud.cluster_describe(s))),
             _create_and_settle(s, "cluster", f"cluster {s.CLUSTER_NAME}", gcloud.cluster_create(s),
                                gcloud.cluster_describe(s), "`invoke clean.cluster` deletes it (`gcloud container "
                                "operations list` says what went wrong), then `invoke up`"),
             _delete_when_free(f"cluster {s.CLUSTER_NAME}", gcloud.cluster_delete(s)), deps=(net.MAIN,),
             present=inv.check(CLUSTER, "cluster", lambda items: inv.cluster(items) is not None,
                               check(gcloud.cluster_describe(s))),
             create_seconds=540 if s.autopilot else 420, delete_seconds=300),
        Step(CREDENTIALS, f"credentials for {s.CLUSTER_NAME}", lambda r: False, _credentials(s, inv), None,
             deps=(CLUSTER,), always=True, mutating=False, parent=CLUSTER, create_seconds=2),
    ]
    if not s.autopilot:
        # Autopilot provisions GPU nodes from the pods' selectors; Standard needs the pool with its NICs.
        out.append(Step(GPU_POOL, f"GPU node pool {names.GPU_POOL} ({s.GPU_NODES} × {s.gpu.machine_type})",
                        inv.check(GPU_POOL, "cluster", pool_listed,
                                  _usable_check("node pool", gcloud.node_pool_describe(s))),
                        _create_and_settle(s, "node pool", f"GPU node pool {names.GPU_POOL}",
                                           gcloud.node_pool_create(s),
                                           gcloud.node_pool_describe(s), "`gcloud container node-pools delete "
                                           f"{names.GPU_POOL} --cluster={s.CLUSTER_NAME} --location={s.region}` "
                                           "deletes it, then `invoke up`"),
                        # Deleted with the cluster: a separate 4-minute pool delete first would only add time.
                        None, deps=(CLUSTER, *net.SUBNET_STEPS), parent=CLUSTER,
                        # In any state: a pool still PROVISIONING (an interrupted `up`) or in ERROR bills its VMs.
                        present=inv.check(GPU_POOL, "cluster", lambda items: listed_pool(items) is not None,
                                          check(gcloud.node_pool_describe(s))),
                        create_seconds=600, delete_seconds=240))
    mapping = [KubeRef(MAPPING_WORD, "GKENetworkParamSet", name, s.NAMESPACE) for name in _wanted_mapping(s)]
    mapping_check = inv.in_cluster(NETWORK_MAPPING, mapping, lambda items: mapping_matches(s, items),
                                   lambda r: network_mapping_present(r, s))
    out += [
        Step(NCCL, "NCCL RDMA installer (pinned)",
             inv.in_cluster(NCCL, KubeRef(nccl_word, "DaemonSet", kubectl.NCCL_DAEMONSET, nccl_namespace), None,
                            check(kubectl.nccl_installer_get(s))),
             creator(kubectl.nccl_installer_apply(s)), None, deps=(CREDENTIALS,), parent=CLUSTER, create_seconds=2),
        # Its GKENetworkParamSets name our VPCs and subnets: without them no pod gets its interfaces (Autopilot's
        # cluster stands on the main VPC alone, so this is where cluster.create learns they are missing).
        Step(NETWORK_MAPPING, "network mapping gvnic-1, rdma-0..7", mapping_check,
             _apply_network_mapping(s), None, deps=(CREDENTIALS, *net.SUBNET_STEPS), parent=CLUSTER,
             create_seconds=2),
    ]
    return out if inventory is not None else inv.track(out)
