"""gcloud container: clusters (Standard and Autopilot), node pools, get-credentials.

Deleting a cluster removes its node pools, its kubectl context from the deleting machine's kubeconfig (others
keep theirs: kubeconfig.py) and every in-cluster object (state kinds
ending in ':<context>', such as 'k8s:<context>' and 'helm:<context>')."""

from __future__ import annotations

import time
from typing import Any

from .. import kubeconfig
from ..core import (
    Ctx,
    Fail,
    command,
    delete_resource,
    gcloud_error,
    public,
    require,
    time_scale,
    unscoped,
)
from .gcloud_filter import filtered


def context_name(project: str, location: str, cluster: str) -> str:
    return f"gke_{project}_{location}_{cluster}"


def _location(ctx: Ctx) -> str:
    location = ctx.flag("--location") or ctx.flag("--region") or ctx.flag("--zone")
    if not location:
        raise Fail(2, gcloud_error(ctx, "argument --location: Must be specified."))
    return str(location)


def _cluster_key(ctx: Ctx, name: str) -> str:
    return f"{ctx.project}/{_location(ctx)}/{name}"


def _cluster_path(ctx: Ctx, name: str) -> str:
    return f"projects/{ctx.project}/locations/{_location(ctx)}/clusters/{name}"


def _addons_config(ctx: Ctx, autopilot: bool) -> dict:
    """The API's addonsConfig as gcloud 528 builds it (surface/container/clusters/create.py, api_adapter): the
    add-ons of `--addons` (X or X=ENABLED on, X=DISABLED off), plus --enable-ray-operator and
    --enable-lustre-csi-driver; once any is given, every default add-on not named on (HttpLoadBalancing,
    HorizontalPodAutoscaling) is turned off, except on Autopilot. Without any, the defaults stay on."""
    addons = {a.split("=", 1)[0]: not a.upper().endswith("=DISABLED")
              for a in str(ctx.flag("--addons", "")).split(",") if a}
    if ctx.flag("--enable-ray-operator"):
        addons["RayOperator"] = True
    if ctx.flag("--enable-lustre-csi-driver"):
        addons["LustreCsiDriver"] = True
    config: dict = {}
    if addons:
        config["httpLoadBalancing"] = {"disabled": not addons.get("HttpLoadBalancing", False) and not autopilot}
        config["horizontalPodAutoscaling"] = {"disabled": not addons.get("HorizontalPodAutoscaling", False)
                                              and not autopilot}
    if addons.get("RayOperator"):
        config["rayOperatorConfig"] = {"enabled": True}
    if addons.get("LustreCsiDriver"):
        config["lustreCsiDriverConfig"] = {"enabled": True}
        if ctx.flag("--enable-legacy-lustre-port"):
            config["lustreCsiDriverConfig"]["enableLegacyLustrePort"] = True
    return config


def _network_config(ctx: Ctx, autopilot: bool) -> dict:
    """The API's networkConfig: Dataplane V2 (Autopilot always has it), multi-networking when asked."""
    config: dict = {}
    if autopilot or ctx.flag("--enable-dataplane-v2"):
        config["datapathProvider"] = "ADVANCED_DATAPATH"
    if ctx.flag("--enable-multi-networking"):
        config["enableMultiNetworking"] = True
    return config


def _workload_identity(pool: object) -> dict:
    return {"workloadIdentityConfig": {"workloadPool": str(pool)}} if pool else {}


# What GKE offers now (get-server-config): versions come and go; a pinned one that left is refused at create.
DEFAULT_VERSION = "1.33.5-gke.1000000"
OFFERED = ["1.34.1-gke.1200000", "1.33.5-gke.1000000", "1.33.4-gke.1172000"]


@command("gcloud", "container", "get-server-config", latency=1)
def server_config(ctx: Ctx) -> None:
    ctx.work()
    ctx.emit({"defaultClusterVersion": DEFAULT_VERSION, "defaultImageType": "COS_CONTAINERD",
              "validMasterVersions": OFFERED, "validNodeVersions": OFFERED,
              "channels": [{"channel": channel, "defaultVersion": DEFAULT_VERSION, "validVersions": OFFERED}
                           for channel in ("RAPID", "REGULAR", "STABLE")]})


def _create(ctx: Ctx, autopilot: bool) -> None:
    name = ctx.positionals[0]
    version = ctx.flag("--cluster-version")
    if version and version not in OFFERED:
        raise Fail(1, gcloud_error(ctx, f'ResponseError: code=400, message=Master version "{version}" is unsupported.'))
    network = str(ctx.flag("--network", "default"))
    if ctx.state.get("network", f"{ctx.project}/{network}") is None:
        raise Fail(1, gcloud_error(ctx, f"ResponseError: code=400, message=Network \"{network}\" does not exist."))
    obj = {"name": name, "project": ctx.project, "location": _location(ctx), "network": network,
           "autopilot": {"enabled": autopilot}, "status": "RUNNING",
           "currentMasterVersion": version or DEFAULT_VERSION,
           "resourceLabels": dict(kv.split("=", 1) for kv in str(ctx.flag("--labels", "")).split(",") if "=" in kv),
           "addonsConfig": _addons_config(ctx, autopilot),
           "networkConfig": _network_config(ctx, autopilot),
           **_workload_identity(ctx.flag("--workload-pool", f"{ctx.project}.svc.id.goog" if autopilot else None)),
           "endpoint": kubeconfig.new_endpoint(ctx, _cluster_key(ctx, name))}
    _create_provisioning(ctx, "cluster", _cluster_key(ctx, name), obj, _cluster_path(ctx, name))


# How long gcloud waits on a GKE operation before it gives up, the operation going on (gcloud 528: the hidden
# --timeout of `clusters create` and `node-pools create`, WaitForOperation's default for `clusters resize`).
GCLOUD_WAITS = {("container", "clusters", "create"): 3600, ("container", "clusters", "create-auto"): 3600,
                ("container", "node-pools", "create"): 1800, ("container", "clusters", "resize"): 1200}
OPERATION_TYPES = {"create": "CREATE_CLUSTER, 1", "create-auto": "CREATE_CLUSTER, 1",
                   "resize": "SET_NODE_POOL_SIZE, 14"}  # container v1's OperationTypeValueValuesEnum


def operation_seconds(ctx: Ctx) -> float:
    """How long GKE takes over this command's operation, in typical seconds (× FAKECLOUD_TIME_SCALE): its
    latency, or FAKECLOUD_GKE_OPERATION_SECONDS="node-pools create=2400,…" (a GPU pool waiting for capacity)."""
    import os

    for entry in os.environ.get("FAKECLOUD_GKE_OPERATION_SECONDS", "").split(","):
        words, _, seconds = entry.partition("=")
        if seconds and tuple(["container", *words.split()]) == ctx.words:
            return float(seconds)
    return ctx.latency


def wait_like_gcloud(ctx: Ctx, seconds: float) -> None:
    """gcloud's wait on an operation of that many typical seconds: the whole of it, or its own limit, after which
    it says so and exits 1, the operation going on in GKE (api_adapter.py WaitForOperation's words)."""
    limit = GCLOUD_WAITS.get(ctx.words, seconds)
    ctx.work(min(seconds, limit))
    if seconds > limit:
        operation = f"operation-{int(time.time() * 1000)}-fake"
        kind = "CREATE_NODE_POOL, 7" if ctx.words[1] == "node-pools" else OPERATION_TYPES[ctx.words[2]]
        op = (f"<Operation\n name: '{operation}'\n operationType: OperationTypeValueValuesEnum({kind})"
              f"\n status: StatusValueValuesEnum(RUNNING, 2)>")
        ctx.err(f"Timed out waiting for operation {op}")
        raise Fail(1, gcloud_error(ctx, f"Operation [{op}] is still running, check its status via 'gcloud "
                                        f"container operations describe {operation}'"))


def _create_provisioning(ctx: Ctx, kind: str, key: str, obj: dict, what: str) -> None:
    """GKE's create: the object exists at once, PROVISIONING, and becomes RUNNING when its operation ends,
    whether or not the gcloud that asked is still there to wait (Ctrl-C, or gcloud's own limit: it does not stop
    GKE). A second create answers 409, as GKE does. FAKECLOUD_GKE_CREATE_ERROR="message": the create ends in
    ERROR instead, the reason in conditions[] only (v1's statusMessage is deprecated), and gcloud, which reads
    only statusMessage, still exits 0 with "Created". With --format, gcloud 528 then prints what it made (a list
    of one: `return [cluster]`, `return [pool]` in surface/container/.../create.py), as the API shows it."""
    import os

    seconds = operation_seconds(ctx)
    with ctx.state.locked():
        if ctx.state.get(kind, key) is not None:
            raise Fail(1, gcloud_error(ctx, f"ResponseError: code=409, message=Already exists: {what}."))
        obj.update(status="PROVISIONING", _ready_at=time.time() + seconds * time_scale(), _created=time.time(),
                   _error=os.environ.get("FAKECLOUD_GKE_CREATE_ERROR", ""))
        if kind == "cluster":  # GKE's Cluster says when in createTime (RFC 3339, +00:00); a NodePool does not
            obj["createTime"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
        ctx.state.put(kind, key, obj)
    wait_like_gcloud(ctx, seconds)
    ctx.err(f"Created [{what}].")
    if ctx.flags.get("--format"):
        made = ctx.state.get(kind, key)
        ctx.emit([_cluster_view(ctx, key, made) if kind == "cluster" else pool_view(made)])


def with_status(obj: dict) -> dict:
    """The object as the API shows it now: RUNNING once its create's operation has ended."""
    import time

    if obj.get("status") == "PROVISIONING" and time.time() >= float(obj.get("_ready_at") or 0):
        if obj.get("_error"):
            return {**obj, "status": "ERROR", "conditions": [{"code": "GCE_STOCKOUT", "canonicalCode":
                                                               "RESOURCE_EXHAUSTED", "message": obj["_error"]}]}
        return {**obj, "status": "RUNNING"}
    return obj


@command("gcloud", "container", "clusters", "create", mutating=True, latency=420)
def cluster_create(ctx: Ctx) -> None:
    _create(ctx, autopilot=False)


@command("gcloud", "container", "clusters", "create-auto", mutating=True, latency=540)
def cluster_create_auto(ctx: Ctx) -> None:
    _create(ctx, autopilot=True)


def pool_view(pool: dict) -> dict:
    """A node pool as the API shows it (container v1 NodePool): config.accelerators as [AcceleratorConfig] (the
    state keeps the --accelerator text), int64 counts as the strings gcloud prints; without the fake's own
    `cluster` and `reservation` keys (the reservation is in config.reservationAffinity)."""
    out = {k: v for k, v in public(with_status(pool)).items() if k not in ("cluster", "reservation")}
    config = dict(out.get("config") or {})
    text = config.pop("accelerators", "") or ""
    parts = dict(kv.split("=", 1) for kv in str(text).split(",") if "=" in kv)
    if parts:
        accelerator: dict[str, Any] = {"acceleratorCount": str(parts.get("count", "1")),
                                       "acceleratorType": parts.get("type", "")}
        if "gpu-driver-version" in parts:
            accelerator["gpuDriverInstallationConfig"] = {"gpuDriverVersion": parts["gpu-driver-version"].upper()}
        config["accelerators"] = [accelerator]
    return {**out, "config": config}


def _cluster_view(ctx: Ctx, key: str, cluster: dict) -> dict:
    """A cluster as the API shows it: with its node pools (GKE's Cluster carries `nodePools`); no `project`
    field (the state keeps it for scoping); no `endpoint` while PROVISIONING (GKE gives one a few minutes into the
    create; the fake none until it ends, as its get-credentials)."""
    pools = [pool_view(p) for k, p in sorted(ctx.state.items("nodepool").items()) if k.startswith(key + "/")]
    shown = with_status(cluster)
    if shown["status"] == "PROVISIONING":
        shown = {k: v for k, v in shown.items() if k != "endpoint"}
    return {**unscoped(shown), "nodePools": pools,
            "selfLink": f"https://container.googleapis.com/v1/projects/{cluster['project']}/locations/"
                        f"{cluster['location']}/clusters/{cluster['name']}"}


@command("gcloud", "container", "clusters", "describe", latency=1)
def cluster_describe(ctx: Ctx) -> None:
    name = ctx.positionals[0]
    key = _cluster_key(ctx, name)
    cluster = require(ctx, "cluster", key, _cluster_path(ctx, name))
    ctx.work()
    ctx.emit(_cluster_view(ctx, key, cluster))


@command("gcloud", "container", "clusters", "list", latency=1)
def cluster_list(ctx: Ctx) -> None:
    """Every location unless --location/--region/--zone names one; each cluster with its node pools."""
    ctx.work()
    location = ctx.flag("--location") or ctx.flag("--region") or ctx.flag("--zone")
    ctx.emit(filtered(ctx, [_cluster_view(ctx, key, c) for key, c in sorted(ctx.state.items("cluster").items())
                            if c["project"] == ctx.project and (not location or location in ("-", c["location"]))]))


def _creating(cluster: dict) -> str:
    return (f"Operation operation-{int(cluster['_created'])}-fake is currently creating cluster {cluster['name']}. "
            f"Please wait and try again once it is done.")


def _running_operation(ctx: Ctx, key: str, cluster: dict) -> str:
    """What GKE says when an operation still runs on the cluster: its create, or a node pool's create (GKE's
    generic words for any other operation); "" when none runs."""
    if with_status(cluster)["status"] == "PROVISIONING":
        return _creating(cluster)
    for pool_key, pool in ctx.state.items("nodepool").items():
        if pool_key.startswith(key + "/") and with_status(pool)["status"] == "PROVISIONING":
            return f"Cluster is running incompatible operation operation-{int(pool['_created'])}-fake."
    return ""


@command("gcloud", "container", "clusters", "delete", mutating=True, latency=300)
def cluster_delete(ctx: Ctx) -> None:
    name = ctx.positionals[0]
    key = _cluster_key(ctx, name)
    what = _cluster_path(ctx, name)
    busy = _running_operation(ctx, key, require(ctx, "cluster", key, what))
    if busy:
        # gcloud's delete of a cluster GKE is still working on (an interrupted create goes on): refused, and
        # not waited for (inspektor-gadget#2535, elastic/cloud-on-k8s#9098 quote these lines).
        raise Fail(1, gcloud_error(ctx, f"Some requests did not succeed:\n - ResponseError: code=400, "
                                        f"message={busy}"))
    ctx.work()
    context = context_name(ctx.project, _location(ctx), name)
    # One state change, as the API's one operation: a client killed at any moment (its stderr gone, so the
    # message below may kill this process) leaves the cluster whole or gone with its pools, never half.
    with ctx.state.locked():
        if not ctx.state.delete("cluster", key):
            raise Fail(1, gcloud_error(ctx, f"NOT_FOUND: The resource '{what}' was not found"))
        for pool_key in [k for k in ctx.state.items("nodepool") if k.startswith(key + "/")]:
            ctx.state.delete("nodepool", pool_key)
        kubeconfig.remove(ctx, context, cluster_and_user=True)  # this machine's only: others keep theirs
        for kind in ctx.state.kinds():
            if kind.endswith(f":{context}"):
                ctx.state.drop_kind(kind)
    ctx.err(f"Deleted [{what}].")


_ADDON_KEYS = {"HttpLoadBalancing": "httpLoadBalancing", "HorizontalPodAutoscaling": "horizontalPodAutoscaling",
               "LustreCsiDriver": "lustreCsiDriverConfig", "RayOperator": "rayOperatorConfig"}
_UPDATES = ("--update-addons", "--enable-legacy-lustre-port", "--enable-multi-networking", "--workload-pool")


@command("gcloud", "container", "clusters", "update", mutating=True, latency=120)
def cluster_update(ctx: Ctx) -> None:
    """One change per call, as gcloud's update takes (its flags are one mutually exclusive group): add-ons on or
    off, the legacy Lustre port, multi-networking (GKE Dataplane V2 needed), Workload Identity."""
    name = ctx.positionals[0]
    key = _cluster_key(ctx, name)
    what = _cluster_path(ctx, name)
    given = [flag for flag in _UPDATES if ctx.flag(flag)]
    if len(given) != 1:
        raise Fail(2, gcloud_error(ctx, f"fakecloud knows one change per update, of {', '.join(_UPDATES)}"))
    busy = _running_operation(ctx, key, require(ctx, "cluster", key, what))
    if busy:
        raise Fail(1, gcloud_error(ctx, f"ResponseError: code=400, message={busy}"))
    ctx.work()  # the change lands when GKE's operation ends
    with ctx.state.locked():
        cluster = require(ctx, "cluster", key, what)
        addons = cluster.setdefault("addonsConfig", {})
        network = cluster.setdefault("networkConfig", {})
        if given[0] == "--update-addons":
            for item in str(ctx.flag("--update-addons")).split(","):
                addon, _, state = item.partition("=")
                on = state.upper() == "ENABLED"
                if addon not in _ADDON_KEYS or state.upper() not in ("ENABLED", "DISABLED"):
                    raise Fail(2, gcloud_error(ctx, f"argument --update-addons: invalid {item}"))
                field = _ADDON_KEYS[addon]
                if field.endswith("Config"):
                    addons[field] = {**addons.get(field, {}), "enabled": on}
                else:
                    addons[field] = {"disabled": not on}
        elif given[0] == "--enable-legacy-lustre-port":
            # gcloud sends the driver enabled with the port (api_adapter.ModifyLegacyLustrePortEnabled)
            addons["lustreCsiDriverConfig"] = {"enabled": True, "enableLegacyLustrePort": True}
        elif given[0] == "--enable-multi-networking":
            if network.get("datapathProvider") != "ADVANCED_DATAPATH":
                # (GKE's exact words not verified: multi-networking needs Dataplane V2, set at creation only)
                raise Fail(1, gcloud_error(ctx, "ResponseError: code=400, message=Multi-networking requires "
                                                "GKE Dataplane V2 to be enabled on the cluster."))
            network["enableMultiNetworking"] = True
        else:
            cluster.update(_workload_identity(ctx.flag("--workload-pool")))
        ctx.state.put("cluster", key, cluster)
        if not (addons.get("rayOperatorConfig") or {}).get("enabled"):
            _without_kuberay(ctx, key)
    ctx.err(f"Updating {name}...done.\nUpdated [https://container.googleapis.com/v1/{what}].")


def _without_kuberay(ctx: Ctx, cluster_key: str) -> None:
    """The Ray operator add-on off: its CRD goes, and with it every RayCluster, whose pods Kubernetes' garbage
    collector deletes (they are theirs); what helm recorded of a release stays."""
    for kube, entry in ctx.state.items("kubecontext").items():
        if entry.get("cluster") != cluster_key:
            continue
        skind = f"k8s:{kube}"
        for obj_key, obj in list(ctx.state.items(skind).items()):
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if obj.get("kind") == "RayCluster" or (obj.get("kind") == "Pod" and labels.get("ray.io/cluster")):
                ctx.state.delete(skind, obj_key)


@command("gcloud", "container", "clusters", "get-credentials", latency=2)
def get_credentials(ctx: Ctx) -> None:
    name = ctx.positionals[0]
    cluster = ctx.state.get("cluster", _cluster_key(ctx, name))
    if cluster is None:
        raise Fail(1, gcloud_error(ctx, f"ResponseError: code=404, message=Not found: {_cluster_path(ctx, name)}."))
    ctx.work()
    if with_status(cluster)["status"] == "PROVISIONING":
        # gcloud 528 (surface/container/clusters/get_credentials.py, api_lib/container/util.py MissingEndpointError):
        # a cluster GKE has not given an endpoint yet. GKE gives it a few minutes into the create; the fake has
        # none until the create ends (stricter: a task that fetches credentials of a cluster being made fails).
        ctx.err(f"WARNING: cluster {name} is not RUNNING. The kubernetes API may or may not be available. Check "
                f"the cluster status for more information.")
        raise Fail(1, gcloud_error(ctx, f"cluster {name} is missing endpoint. Is it still PROVISIONING?"))
    context = context_name(ctx.project, _location(ctx), name)
    kubeconfig.write(ctx, context, _cluster_key(ctx, name), cluster)
    ctx.err(f"Fetching cluster endpoint and auth data.\nkubeconfig entry generated for {name}.")


def _pool_key(ctx: Ctx, name: str) -> str:
    return f"{ctx.project}/{_location(ctx)}/{ctx.flag('--cluster')}/{name}"


@command("gcloud", "container", "node-pools", "create", mutating=True, latency=600)
def node_pool_create(ctx: Ctx) -> None:
    name = ctx.positionals[0]
    cluster = ctx.state.get("cluster", _cluster_key(ctx, str(ctx.flag("--cluster"))))
    if cluster is None:
        raise Fail(1, gcloud_error(ctx, f"ResponseError: code=404, message=Not found: cluster {ctx.flag('--cluster')}"))
    if cluster["autopilot"]["enabled"]:
        raise Fail(1, gcloud_error(ctx, "ResponseError: code=400, message=This operation is not supported on "
                                        "Autopilot clusters."))
    if with_status(cluster)["status"] == "PROVISIONING":
        raise Fail(1, gcloud_error(ctx, f"ResponseError: code=400, message={_creating(cluster)}"))
    networks = []
    for spec in ctx.multi.get("--additional-node-network", []):
        parts = dict(kv.split("=", 1) for kv in spec.split(","))
        subnet_key = f"{ctx.project}/{_location(ctx)}/{parts.get('subnetwork')}"
        if ctx.state.get("subnet", subnet_key) is None:
            raise Fail(1, gcloud_error(ctx, f"ResponseError: code=400, message=Subnetwork "
                                            f"\"{parts.get('subnetwork')}\" not found."))
        networks.append({"network": parts.get("network"), "subnetwork": parts.get("subnetwork")})
    obj = {"name": name, "cluster": ctx.flag("--cluster"), "status": "RUNNING",
           "initialNodeCount": int(ctx.flag("--num-nodes", 3)),  # GKE's default is 3 nodes
           # --labels: the pool's own resource labels (gcloud 528 sets NodeConfig.resourceLabels).
           "config": {"machineType": ctx.flag("--machine-type"), "accelerators": ctx.flag("--accelerator"),
                      "spot": bool(ctx.flag("--spot")),
                      "resourceLabels": dict(kv.split("=", 1) for kv in str(ctx.flag("--labels", "")).split(",")
                                             if "=" in kv)},
           "reservation": ctx.flag("--reservation"), "locations": str(ctx.flag("--node-locations", "")).split(","),
           # NodePool.networkConfig (NodeNetworkConfig): its extra NICs, by VPC and subnet name.
           "networkConfig": {"additionalNodeNetworkConfigs": networks}}
    if ctx.flag("--reservation"):  # the API's shape (the top-level "reservation" is the fake's shorthand)
        obj["config"]["reservationAffinity"] = {"consumeReservationType": "SPECIFIC_RESERVATION",
                                                "key": "compute.googleapis.com/reservation-name",
                                                "values": [ctx.flag("--reservation")]}
    from .gcloud_resize import group_url  # one managed instance group per zone holds the nodes

    obj["instanceGroupUrls"] = [group_url(ctx.project, z, str(ctx.flag("--cluster")), name) for z in obj["locations"]]
    _create_provisioning(ctx, "nodepool", _pool_key(ctx, name), obj,
                         f"{_cluster_path(ctx, str(ctx.flag('--cluster')))}/nodePools/{name}")


@command("gcloud", "container", "node-pools", "describe", latency=1)
def node_pool_describe(ctx: Ctx) -> None:
    name = ctx.positionals[0]
    pool = require(ctx, "nodepool", _pool_key(ctx, name), f"nodePools/{name}")
    ctx.work()
    ctx.emit(pool_view(pool))


@command("gcloud", "container", "node-pools", "list", latency=1)
def node_pool_list(ctx: Ctx) -> None:
    ctx.work()
    cluster = str(ctx.flag("--cluster") or "")
    require(ctx, "cluster", _cluster_key(ctx, cluster), _cluster_path(ctx, cluster))
    prefix = f"{ctx.project}/{_location(ctx)}/{cluster}/"
    ctx.emit(filtered(ctx, [pool_view(p) for k, p in ctx.state.items("nodepool").items()
                            if k.startswith(prefix)]))


def _pool_operation(ctx: Ctx, cluster_key: str, cluster: dict) -> str:
    """What GKE says to a node pool's delete while an operation still runs on the cluster: its create, or a
    pool's create (the pool itself too: an interrupted `up` leaves it PROVISIONING); "" when none runs."""
    if with_status(cluster)["status"] == "PROVISIONING":
        return _creating(cluster)
    for pool_key, pool in ctx.state.items("nodepool").items():
        if pool_key.startswith(cluster_key + "/") and with_status(pool)["status"] == "PROVISIONING":
            return (f"Operation operation-{int(pool['_created'])}-fake is currently creating a node pool for "
                    f"cluster {cluster['name']}. Please wait and try again once it is done.")
    return ""


@command("gcloud", "container", "node-pools", "delete", mutating=True, latency=240)
def node_pool_delete(ctx: Ctx) -> None:
    name = ctx.positionals[0]
    cluster = str(ctx.flag("--cluster") or "")
    found = ctx.state.items("cluster").get(_cluster_key(ctx, cluster))
    busy = _pool_operation(ctx, _cluster_key(ctx, cluster), found) if found else ""
    if busy:
        # Refused, not queued nor waited for (hashicorp/terraform-provider-google#10366 quotes the words).
        raise Fail(1, gcloud_error(ctx, f"ResponseError: code=400, message={busy}"))
    delete_resource(ctx, "nodepool", _pool_key(ctx, name), f"nodePools/{name}")
