"""kubectl: a generic object store per cluster context (apply/get/delete/wait), and `exec` dispatching to
registered pod commands.

Objects live in state kind 'k8s:<context>' under 'Kind/namespace/name' (namespace '' for cluster-scoped
kinds). A pod is Ready once time passes its private '_ready_at' (set by whoever creates it)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from .. import kubeconfig
from ..core import POD_COMMANDS, Ctx, Fail, command, public

CLUSTER_SCOPED = {"Namespace", "PersistentVolume", "GKENetworkParamSet", "Network", "ClusterRole",
                  "ClusterRoleBinding", "CustomResourceDefinition", "StorageClass", "Node"}
ALIASES = {
    "pod": "Pod", "pods": "Pod", "po": "Pod",
    "daemonset": "DaemonSet", "daemonsets": "DaemonSet", "ds": "DaemonSet",
    "deployment": "Deployment", "deployments": "Deployment", "deploy": "Deployment",
    "service": "Service", "services": "Service", "svc": "Service",
    "serviceaccount": "ServiceAccount", "serviceaccounts": "ServiceAccount", "sa": "ServiceAccount",
    "secret": "Secret", "secrets": "Secret",
    "configmap": "ConfigMap", "configmaps": "ConfigMap", "cm": "ConfigMap",
    "persistentvolume": "PersistentVolume", "persistentvolumes": "PersistentVolume", "pv": "PersistentVolume",
    "persistentvolumeclaim": "PersistentVolumeClaim", "persistentvolumeclaims": "PersistentVolumeClaim",
    "pvc": "PersistentVolumeClaim",
    "namespace": "Namespace", "namespaces": "Namespace", "ns": "Namespace",
    "node": "Node", "nodes": "Node", "no": "Node",
    "gkenetworkparamset": "GKENetworkParamSet", "gkenetworkparamsets": "GKENetworkParamSet",
    "network": "Network", "networks": "Network",
    "raycluster": "RayCluster", "rayclusters": "RayCluster", "rayjob": "RayJob", "rayjobs": "RayJob",
    "customresourcedefinition": "CustomResourceDefinition", "customresourcedefinitions": "CustomResourceDefinition",
    "crd": "CustomResourceDefinition", "crds": "CustomResourceDefinition",
}
# Kinds with a life of their own (kubectl_jobs.py: Job): set up when created, status computed when read.
ON_CREATE: dict[str, Callable[[Ctx, dict[str, Any]], None]] = {}
STATUS_VIEWS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}
# What `kubectl apply -f <url>` of a known manifest creates.
KNOWN_URLS = {
    "nccl-rdma-installer-autopilot.yaml": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "rdma-system"}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {"name": "nccl-rdma-installer", "namespace": "rdma-system"}}],
    "nccl-rdma-installer.yaml": [
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {"name": "nccl-rdma-installer", "namespace": "kube-system"}}],
}


def kind_of(word: str) -> str:
    base = word.split(".", 1)[0].lower()
    if base in ALIASES:
        return ALIASES[base]
    raise Fail(1, f'error: the server doesn\'t have a resource type "{word}"')


def store_kind(ctx: Ctx) -> str:
    context = ctx.flag("--context")
    if not context:
        raise Fail(1, "error: no --context given (the fake insists, as our code always names one)")
    if kubeconfig.reachable(ctx, str(context)) is None:  # kubectl 1.27-1.33's words (helm says it its own way)
        # The namespace flag has kubectl read the kubeconfig early, and so do apply and wait: "does not exist";
        # otherwise (get, delete, exec without --namespace) client-go's "Error in configuration".
        if ctx.flag("--namespace") or (ctx.words and ctx.words[0] in ("apply", "wait")):
            raise Fail(1, f'error: context "{context}" does not exist')
        raise Fail(1, f"Error in configuration: context was not found for specified context: {context}")
    from .ray_pods import sweep_gone  # pods whose shutdown has ended are gone before anything reads them

    sweep_gone(ctx, f"k8s:{context}")
    bind_claims(ctx, f"k8s:{context}")  # the controller has bound (or released) what the last call changed
    return f"k8s:{context}"


def namespace_of(kind: str, obj_ns: str | None, ctx: Ctx) -> str:
    if kind in CLUSTER_SCOPED:
        return ""
    return obj_ns or str(ctx.flag("--namespace") or "default")


def key_of(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def _resource_word(kind: str, obj: dict[str, Any]) -> str:
    api = obj.get("apiVersion", "v1")
    group = api.split("/")[0] if "/" in api else ""
    return f"{kind.lower()}{'.' + group if group else ''}"


BUILT_IN_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease"}


def namespaces(ctx: Ctx, context: str) -> set[str]:
    """The namespaces of the context's cluster: the four every cluster has, and those applied."""
    with ctx.state.reading() as data:
        keys = list((data.get(f"k8s:{context}") or {}).keys())
    return BUILT_IN_NAMESPACES | {key.split("/", 2)[2] for key in keys if key.startswith("Namespace/")}


def put_object(ctx: Ctx, obj: dict[str, Any]) -> str:
    """Store obj; returns 'created', 'configured' or 'unchanged' as kubectl apply says."""
    kind = obj["kind"]
    meta = obj.setdefault("metadata", {})
    namespace = namespace_of(kind, meta.get("namespace"), ctx)
    if namespace:
        meta["namespace"] = namespace
    key = key_of(kind, namespace, meta["name"])
    skind = store_kind(ctx)
    with ctx.state.locked():
        old = ctx.state.get(skind, key)
        if old is not None and public(old) == obj:
            return "unchanged"
        merged = dict(obj)
        if old is not None:
            merged.update({k: v for k, v in old.items() if k.startswith("_")})
            leaving = (old.get("metadata") or {}).get("deletionTimestamp")
            if leaving:  # an apply does not call a delete off: the object stays Terminating
                merged["metadata"] = {**merged.get("metadata", {}), "deletionTimestamp": leaving}
            merged.setdefault("status", old.get("status"))
        else:
            merged["_created"] = time.time()
            merged["_uid"] = str(uuid.uuid4())  # the API server's metadata.uid: a claim made again is another
            if kind in ON_CREATE:
                ON_CREATE[kind](ctx, merged)
        ctx.state.put(skind, key, merged)
    return "configured" if old is not None else "created"


def bind_claims(ctx: Ctx, skind: str) -> None:
    """Kubernetes' PersistentVolume controller, for a claim naming its volume (spec.volumeName, as ours does):
    the claim binds if the volume's claimRef names it (or there is none) and the volume is not bound to another
    claim already; binding records the claim's uid in the volume. A volume whose claim is gone (or made again:
    another uid) is Released, and with Retain stays so: a claim of the same name never binds it again ("volume
    already bound to a different claim", the claim Pending) until the volume is made anew or its claimRef
    cleared (an apply without claimRef: Available again). A volume whose delete waited for its claim
    (pv-protection) goes once it is no longer Bound. Run on every kubectl call (store_kind); the phases are kept
    in '_phase' for with_status."""
    with ctx.state.reading() as data:
        if not _bindings(data.get(skind) or {}):
            return
    with ctx.state.locked() as data:
        objects = data.setdefault(skind, {})
        for key, obj in _bindings(objects).items():
            if obj is None:
                objects.pop(key, None)
            else:
                objects[key] = obj


def _bindings(items: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """key -> the volume or claim as the controller leaves it (None: gone), for those it changes (pure)."""
    changed: dict[str, dict[str, Any] | None] = {}
    claims = {(o["metadata"].get("namespace"), o["metadata"]["name"]): (key, o) for key, o in items.items()
              if o.get("kind") == "PersistentVolumeClaim"}

    def uid(key: str, obj: dict[str, Any]) -> str:  # one planted without the fake's apply: its key and birth
        return str(obj.get("_uid") or f"{key}@{obj.get('_created', 0)}")

    volumes: dict[str, dict[str, Any]] = {}
    for key, pv in items.items():
        if pv.get("kind") != "PersistentVolume":
            continue
        name = pv["metadata"]["name"]
        ref = (pv.get("spec") or {}).get("claimRef") or pv.get("_bound_ref") or {}
        naming = [(k, c) for k, c in claims.values() if (c.get("spec") or {}).get("volumeName") == name
                  and not (c.get("metadata") or {}).get("deletionTimestamp")]
        found = claims.get((ref.get("namespace"), ref.get("name"))) if ref else (naming[0] if naming else None)
        bound = pv.get("_claim_uid")
        if bound is not None and not ref:
            bound = None  # its claimRef cleared (an apply without it): free of the old binding
        if bound is None and found is not None and found in naming:
            bound = uid(*found)
            if not ref:  # the claim becomes its claimRef
                ref = {"namespace": found[1]["metadata"].get("namespace"), "name": found[1]["metadata"]["name"]}
                pv = {**pv, "_bound_ref": ref}
        phase = ("Available" if bound is None else
                 "Bound" if found is not None and uid(*found) == bound else "Released")
        if (pv.get("metadata") or {}).get("deletionTimestamp") and phase != "Bound":
            changed[key] = None  # pv-protection lets go of a volume no claim is bound to
            continue
        if (bound, phase) != (pv.get("_claim_uid"), pv.get("_phase")) or pv is not items[key]:
            pv = {**pv, "_claim_uid": bound, "_phase": phase}
            changed[key] = pv
        volumes[name] = pv
    for key, claim in claims.values():
        pv = volumes.get(str((claim.get("spec") or {}).get("volumeName") or ""))
        phase = "Bound" if pv is not None and pv.get("_phase") == "Bound" and pv.get("_claim_uid") == uid(
            key, claim) else "Pending"
        if claim.get("_phase") != phase:
            changed[key] = {**claim, "_phase": phase}
    return changed


@command("kubectl", "apply", mutating=True, latency=2)
def apply(ctx: Ctx) -> None:
    import yaml

    source = str(ctx.flag("--filename", ""))
    if source == "-":
        docs = [d for d in yaml.safe_load_all(ctx.stdin()) if d]
    else:
        docs = next((objs for suffix, objs in KNOWN_URLS.items() if source.endswith("/" + suffix)), None)
        if docs is None:
            raise Fail(1, f"error: the path \"{source}\" does not exist (fakecloud knows no such manifest)")
        docs = [dict(d, metadata=dict(d["metadata"])) for d in docs]
    store_kind(ctx)
    # The namespaces as the call starts: an apply beside the one making the namespace fails, as a real one racing
    # it may (the API server checks the namespace when the object is created).
    known = namespaces(ctx, str(ctx.flag("--context")))
    ctx.work()
    unmapped = []
    for doc in docs:
        if doc.get("kind", "").endswith("List"):
            docs.extend(doc.get("items", []))
            continue
        if kubeconfig.missing_kind(ctx, str(ctx.flag("--context")), str(doc.get("apiVersion")), doc["kind"]):
            # kubectl applies the others, then fails naming each object of a kind the server lacks
            meta = doc.get("metadata") or {}
            unmapped.append("error: " + kubeconfig.no_mapping(str(meta.get("name")), str(meta.get("namespace", "")),
                                                              "STDIN" if source == "-" else source,
                                                              str(doc.get("apiVersion")), doc["kind"]))
            continue
        namespace = namespace_of(doc["kind"], (doc.get("metadata") or {}).get("namespace"), ctx)
        if namespace and namespace not in known:  # kubectl goes on with the others, then fails naming it
            unmapped.append(f'Error from server (NotFound): error when creating "{"STDIN" if source == "-" else source}'
                            f'": namespaces "{namespace}" not found')
            continue
        verdict = put_object(ctx, doc)
        if doc["kind"] == "Namespace":
            known.add(doc["metadata"]["name"])
        ctx.out(f"{_resource_word(doc['kind'], doc)}/{doc['metadata']['name']} {verdict}")
    if unmapped:
        raise Fail(1, "\n".join(unmapped))


def _selected(obj: dict[str, Any], selector: str) -> bool:
    labels = obj.get("metadata", {}).get("labels", {}) or {}
    for term in [t for t in selector.split(",") if t]:
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k) != v.lstrip("="):
                return False
        elif term not in labels:
            return False
    return True


def with_status(obj: dict[str, Any]) -> dict[str, Any]:
    """Public view of an object, with a pod's phase and Ready condition computed from its '_ready_at'."""
    if obj.get("kind") in STATUS_VIEWS:
        return STATUS_VIEWS[obj["kind"]](obj)
    view = public(obj)
    if obj.get("_uid"):
        view["metadata"] = {**(view.get("metadata") or {}), "uid": obj["_uid"]}
    if obj.get("kind") in ("PersistentVolume", "PersistentVolumeClaim"):
        pending = "Available" if obj["kind"] == "PersistentVolume" else "Pending"
        view["status"] = {**(view.get("status") or {}), "phase": obj.get("_phase") or pending}
        ref = (view.get("spec") or {}).get("claimRef") or obj.get("_bound_ref")
        if ref and obj.get("_claim_uid"):  # what binding wrote into it
            view["spec"] = {**view["spec"], "claimRef": {**ref, "uid": obj["_claim_uid"]}}
    if obj.get("kind") == "Pod" and "_ready_at" in obj:
        now = time.time()
        ready = now >= obj["_ready_at"] and not obj.get("_never_ready")
        # Running (its containers started) may come before Ready (a Ray pod: Ray starting, which KubeRay's
        # readiness probe asks): from '_running_at' when set.
        running = ready or (now >= float(obj.get("_running_at", obj["_ready_at"])) and not obj.get("_never_ready"))
        status = dict(view.get("status") or {})
        status["phase"] = "Running" if running else "Pending"
        # Other conditions (PodScheduled=False with the scheduler's message) are kept for diagnostics.
        others = [c for c in status.get("conditions") or [] if c.get("type") != "Ready"]
        status["conditions"] = others + [{"type": "Ready", "status": "True" if ready else "False"}]
        view["status"] = status
    return view


def pool_nodes(ctx: Ctx, context: str) -> list[dict[str, Any]]:
    """The Nodes of the cluster behind context, as GKE registers them: one per VM of each RUNNING node pool (its
    size now, in each of its zones), labelled with the pool, zone, machine type and accelerator; a GPU node
    offers its GPUs as nvidia.com/gpu. Read from the pools, so a resize or a delete shows at once."""
    from .gcloud_container import with_status
    from .gcloud_resize import pool_size

    record = ctx.state.get("kubecontext", context) or {}
    cluster = str(record.get("cluster") or "")
    nodes = []
    for key, pool in sorted(ctx.state.items("nodepool").items()):
        if key.rsplit("/", 1)[0] != cluster or with_status(pool).get("status") != "RUNNING":
            continue
        config = pool.get("config") or {}
        accelerator = dict(part.split("=", 1) for part in str(config.get("accelerators") or "").split(",")
                           if "=" in part)
        labels = {"cloud.google.com/gke-nodepool": pool["name"],
                  "node.kubernetes.io/instance-type": str(config.get("machineType") or "")}
        if accelerator.get("type"):
            labels["cloud.google.com/gke-accelerator"] = accelerator["type"]
        allocatable = {"nvidia.com/gpu": accelerator["count"]} if accelerator.get("count") else {}
        for zone in [z for z in pool.get("locations") or [] if z] or [""]:
            for index in range(pool_size(pool)):
                name = f"gke-{pool.get('cluster')}-{pool['name']}-0f1e2d3c-{zone[-1:] or 'x'}{index:03d}"[:63]
                nodes.append({"apiVersion": "v1", "kind": "Node",
                              "metadata": {"name": name, "labels": {**labels, "kubernetes.io/hostname": name,
                                                                    "topology.kubernetes.io/zone": zone}},
                              "status": {"allocatable": allocatable}})
    return nodes


def list_objects(ctx: Ctx, kind: str, namespace: str | None, selector: str = "") -> list[dict[str, Any]]:
    skind = store_kind(ctx)
    out = []
    if kind == "Node":
        out += [node for node in pool_nodes(ctx, skind.split(":", 1)[1]) if _selected(node, selector)]
    for key, obj in sorted(ctx.state.items(skind).items()):
        okind, ons, _ = key.split("/", 2)
        if okind == kind and (namespace is None or ons == namespace) and _selected(obj, selector):
            out.append(obj)
    return out


def delete_targets(ctx: Ctx, kind: str) -> tuple[str, list[str]]:
    """(namespace, names) of `kubectl delete KIND NAME…` or `kubectl delete KIND --selector=S` (one of the two)."""
    namespace = namespace_of(kind, None, ctx)
    selector = str(ctx.flag("--selector", ""))
    if not ctx.positionals and not selector:
        raise Fail(1, "error: resource(s) were provided, but no name was specified")
    return namespace, list(ctx.positionals) or [o["metadata"]["name"] for o in list_objects(ctx, kind, namespace,
                                                                                              selector)]


def _named_targets(ctx: Ctx) -> list[tuple[str, str]]:
    """(kind, name) pairs from `get KIND NAME…` or `get KIND/NAME KIND/NAME…` (kubectl refuses mixing them)."""
    words = ctx.positionals
    if any("/" in w for w in words):
        if not all("/" in w for w in words):
            raise Fail(1, "error: there is no need to specify a resource type as a separate argument when "
                          "passing arguments in resource/name form (e.g. 'kubectl get resource/<resource_name>' "
                          "instead of 'kubectl get resource resource/<resource_name>'")
        return [(kind_of(w.split("/", 1)[0]), w.split("/", 1)[1]) for w in words]
    kind = kind_of(words[0])
    return [(kind, name) for name in words[1:]]


# The API group of the kinds a CRD brings (the Ray operator add-on's, multi-networking's): kubeconfig.missing_kind.
CRD_GROUPS = {"RayCluster": "ray.io/v1", "RayJob": "ray.io/v1", "GKENetworkParamSet": "networking.gke.io/v1",
              "Network": "networking.gke.io/v1"}


def _unserved(ctx: Ctx, words: list[str]) -> None:
    """kubectl's answer when a type asked for is one the API server does not serve (its CRD is not installed):
    the whole command fails before it asks for anything, --ignore-not-found or not (it drops NotFound only)."""
    context = str(ctx.flag("--context"))
    for word in words:
        base = word.split("/", 1)[0]
        kind = kind_of(base)
        if kind in CRD_GROUPS and kubeconfig.missing_kind(ctx, context, CRD_GROUPS[kind], kind):
            raise Fail(1, f'error: the server doesn\'t have a resource type "{base.split(".", 1)[0].lower()}"')


# A GET's round trip to the API server, for each name after the first (an assumption, as the 0.3 s of a call is).
GET_SECONDS = 0.05


@command("kubectl", "get", latency=0.3)
def get(ctx: Ctx) -> int:
    """One object (printed as itself), several (a List), or a whole kind; with --ignore-not-found what is
    missing is left out (exit 0, nothing printed if nothing is found), as kubectl does. A type the cluster does
    not serve fails the whole command."""
    if not ctx.positionals:
        raise Fail(1, "error: you must specify the type of resource to get")
    targets = _named_targets(ctx)
    _unserved(ctx, [w for w in ctx.positionals if "/" in w] or ctx.positionals[:1])
    by_name = any("/" in w for w in ctx.positionals) or len(ctx.positionals) > 1
    if by_name and ctx.flag("--all-namespaces"):
        raise Fail(1, "error: a resource cannot be retrieved by name across all namespaces")
    skind = store_kind(ctx)
    ctx.work()
    if by_name:  # one GET per name, one after the other: kubectl's builder makes an Info per name and visits them
        ctx.work(GET_SECONDS * (len(targets) - 1))  # in order (cli-runtime resource/builder.go, EagerVisitorList)
    selector = str(ctx.flag("--selector", ""))
    missing = []
    if by_name:
        found = []
        for kind, name in targets:
            obj = ctx.state.get(skind, key_of(kind, namespace_of(kind, None, ctx), name))
            if obj is None:
                missing.append((kind, name))
            else:
                found.append(obj)
    else:
        kind = kind_of(ctx.positionals[0])
        namespace = None if ctx.flag("--all-namespaces") else namespace_of(kind, None, ctx)
        found = list_objects(ctx, kind, namespace, selector)
    views = [with_status(o) for o in found]
    ignore = bool(ctx.flag("--ignore-not-found"))
    if len(targets) == 1 and by_name and views:
        ctx.emit(views[0])
    elif views or (not by_name and not ignore):
        ctx.emit({"apiVersion": "v1", "kind": "List", "items": views})
    if ignore:
        return 0
    for kind, name in missing:
        ctx.err(f'Error from server (NotFound): {kind.lower()}s "{name}" not found')
    return 1 if missing else 0


@command("kubectl", "delete", mutating=True, latency=2)
def delete(ctx: Ctx) -> int:
    skind = store_kind(ctx)
    source = ctx.flag("--filename")
    targets: list[tuple[str, str, str]] = []
    if source:
        import yaml

        docs = ([d for d in yaml.safe_load_all(ctx.stdin()) if d] if source == "-" else
                next((objs for suffix, objs in KNOWN_URLS.items() if str(source).endswith("/" + suffix)), []))
        for doc in docs:
            kind = doc["kind"]
            targets.append((kind, namespace_of(kind, doc["metadata"].get("namespace"), ctx), doc["metadata"]["name"]))
    else:
        kind = kind_of(ctx.positionals[0])
        targets = [(kind, namespace_of(kind, None, ctx), name) for name in ctx.positionals[1:]]
        selector = dict(kv.split("=", 1) for kv in str(ctx.flag("--selector", "")).split(",") if "=" in kv)
        if kind == "Secret" and selector.get("owner") == "helm" and selector.get("name"):
            # helm keeps each release's revisions as Secrets labelled owner=helm, name=RELEASE (its default
            # storage driver); the fake keeps the release itself in its helm state: the same record.
            ctx.work()
            namespace = namespace_of(kind, None, ctx)
            gone = ctx.state.delete(f"helm:{ctx.flag('--context')}", f"{namespace}/{selector['name']}")
            ctx.out(f'secret "sh.helm.release.v1.{selector["name"]}.v1" deleted' if gone else "No resources found")
            return 0
    ctx.work()
    code = 0
    for kind, namespace, name in targets:
        _held(ctx, skind, kind, namespace, name)
        if ctx.state.delete(skind, key_of(kind, namespace, name)):
            ctx.out(f'{kind.lower()} "{name}" deleted')
        elif not ctx.flag("--ignore-not-found"):
            ctx.err(f'Error from server (NotFound): {kind.lower()}s "{name}" not found')
            code = 1
    return code


LEAVING_POD_SECONDS = 10  # a deleted pod's shutdown within its grace period (ours; FACTS §6 has no figure)


def _leaving(ctx: Ctx, skind: str, namespace: str, pod: str) -> bool:
    return bool(((ctx.state.get(skind, key_of("Pod", namespace, pod)) or {}).get("metadata") or {})
                .get("deletionTimestamp"))


def _held(ctx: Ctx, skind: str, kind: str, namespace: str, name: str) -> None:
    """Kubernetes keeps an object a finalizer holds: its own (a claim a pod still mounts: pvc-protection) or any in
    metadata.finalizers (a controller's, say one that is gone). The delete marks it (deletionTimestamp) and
    `kubectl delete` waits for it to go: up to --timeout (wall clock), else a week. The fake does not wait: with
    --timeout it answers at once what kubectl says at its end; without, it fails loudly instead of hanging."""
    obj = ctx.state.get(skind, key_of(kind, namespace, name))
    if obj is None:
        return
    holders = [str(f) for f in (obj.get("metadata") or {}).get("finalizers") or []]
    users = [o["metadata"]["name"] for o in ctx.state.list(skind)
             if kind == "PersistentVolumeClaim" and o.get("kind") == "Pod"
             and o["metadata"].get("namespace") == namespace
             and any((v.get("persistentVolumeClaim") or {}).get("claimName") == name
                     for v in (o.get("spec") or {}).get("volumes") or [])]
    going = [u for u in users if _leaving(ctx, skind, namespace, u)]
    if going and len(going) == len(users):
        # Pods on their way out let go within their grace period, which kubectl's delete waits for.
        ends = [float(ctx.state.get(skind, key_of("Pod", namespace, u)).get("_gone_at", 0)) for u in going]
        if all(ends):
            time.sleep(max(0.0, max(ends) - time.time()))
        else:
            ctx.work(LEAVING_POD_SECONDS)
        for name_ in going:
            ctx.state.delete(skind, key_of("Pod", namespace, name_))
        users = []
    if users:
        holders.append(f"pvc-protection: still mounted by pod(s) {', '.join(sorted(users))}")
    if kind == "PersistentVolume" and obj.get("_phase") == "Bound":  # pv-protection: a bound volume stays
        ref = (obj.get("spec") or {}).get("claimRef") or obj.get("_bound_ref") or {}
        holders.append(f"kubernetes.io/pv-protection: bound to claim {ref.get('namespace')}/{ref.get('name')}")
    if not holders:
        return
    plural = f"{kind.lower()}s"
    if not ctx.flag("--timeout"):
        raise Fail(3, f"fakecloud: `kubectl delete` would wait here for up to a week: {kind.lower()} \"{name}\" is "
                      f"held by {'; '.join(holders)}")
    obj.setdefault("metadata", {})["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ctx.state.put(skind, key_of(kind, namespace, name), obj)
    ctx.out(f'{kind.lower()} "{name}" deleted')
    raise Fail(1, f"error: timed out waiting for the condition on {plural}/{name}")


@command("kubectl", "wait", latency=0.3)
def wait(ctx: Ctx) -> int:
    """`kubectl wait --for=condition=Ready pod -l SEL --timeout=Ns`: until every matching pod (those there at the
    start) is Ready, or N seconds pass. N is wall-clock time, as kubectl's own: not scaled (our runner passes
    its poll interval, already at the cloud's time scale). Ready is the pod's Ready condition, not its phase: a
    Running pod whose readiness probe fails (Ray still starting) is waited for; one line per pod that timed out,
    as kubectl 1.32 says it."""
    kind = kind_of(ctx.positionals[0]) if ctx.positionals else "Pod"
    timeout = float(str(ctx.flag("--timeout", "30s")).rstrip("s") or 30)
    deadline = time.time() + timeout
    selector = str(ctx.flag("--selector", ""))
    while True:
        objs = list_objects(ctx, kind, namespace_of(kind, None, ctx), selector)
        if not objs:
            ctx.err("error: no matching resources found")
            return 1
        pending = [o for o in objs if not any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in with_status(o).get("status", {}).get("conditions") or [])]
        if not pending:
            for o in objs:
                ctx.out(f"{kind.lower()}/{o['metadata']['name']} condition met")
            return 0
        if time.time() >= deadline or any(o.get("_never_ready") for o in pending):
            for o in pending:
                ctx.err(f"timed out waiting for the condition on {kind.lower()}s/{o['metadata']['name']}")
            return 1
        time.sleep(min(0.05, max(deadline - time.time(), 0.001)))


LUSTRE_CSI_DRIVER = "lustre.csi.storage.gke.io"


def mount_lustre(ctx: Ctx) -> None:
    """/data in the cluster's pods is the Lustre volume, as the CSI mount makes it: the pod root's `data`
    becomes a link to the instance's files ($FAKECLOUD_STATE/lustre/<name>/, named by the PV's volumeHandle
    PROJECT/ZONE/NAME), and stops being one when the PV or the instance is gone. Files found in a plain `data`
    directory (a state copied with its links followed) move into the volume first."""
    import os
    import shutil

    context = str(ctx.flag("--context"))
    podfs = ctx.state.root / "podfs" / "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in context)
    data = podfs / "data"
    target = None
    for obj in ctx.state.items(store_kind(ctx)).values():
        csi = (obj.get("spec") or {}).get("csi") or {}
        if obj.get("kind") == "PersistentVolume" and csi.get("driver") == LUSTRE_CSI_DRIVER:
            root = ctx.state.root / "lustre" / str(csi.get("volumeHandle", "")).rsplit("/", 1)[-1]
            target = root if root.is_dir() else None
            break
    if data.is_symlink():
        if target is not None and data.resolve() == target.resolve():
            return
        data.unlink()
    if target is None:
        return
    podfs.mkdir(parents=True, exist_ok=True)
    if data.is_dir():
        for item in data.iterdir():
            dest = target / item.name
            if item.is_dir():
                shutil.copytree(item, dest, dirs_exist_ok=True, symlinks=True)
            elif not dest.exists():
                shutil.copy2(item, dest)
        shutil.rmtree(data)
    os.symlink(os.path.relpath(target, podfs), data)


@command("kubectl", "exec", latency=0.5)
def exec_(ctx: Ctx) -> int:
    if not ctx.positionals:
        raise Fail(1, "error: expected 'exec POD -- COMMAND [args...]'")
    pod_name = ctx.positionals[0]
    skind = store_kind(ctx)
    namespace = namespace_of("Pod", None, ctx)
    pod = ctx.state.get(skind, key_of("Pod", namespace, pod_name))
    if pod is None:
        raise Fail(1, f'Error from server (NotFound): pods "{pod_name}" not found')
    container = str(ctx.flag("--container", ""))
    containers = [c["name"] for c in pod.get("spec", {}).get("containers", [])]
    phase = with_status(pod).get("status", {}).get("phase")
    if phase in ("Succeeded", "Failed"):  # kubectl's own check, before it opens any stream (pkg/cmd/exec)
        raise Fail(1, f"error: cannot exec into a container in a completed pod; current phase is {phase}")
    if container and containers and container not in containers:  # named: the API server refuses it
        raise Fail(1, f"Error from server (BadRequest): container {container} is not valid for pod {pod_name}")
    if phase not in (None, "Running"):
        raise Fail(1, f"error: unable to upgrade connection: pod {pod_name} is not running")
    if not ctx.after_dashdash:
        raise Fail(1, "error: you must specify at least one command for the container")
    program = ctx.after_dashdash[0].rsplit("/", 1)[-1]
    mount_lustre(ctx)
    handler = POD_COMMANDS.get(program)
    if handler is None:
        raise Fail(126, f"fakecloud: no pod command registered for {program!r}\ncommand terminated with exit code 126")
    code = handler(ctx, pod, container, ctx.after_dashdash) or 0
    if code < 0:  # ended by a signal: the container runtime reports 128 + its number, as a shell does
        code = 128 - code
    if code:  # kubectl's own last line for a remote command that failed (client-go's CodeExitError)
        ctx.err(f"command terminated with exit code {code}")
    return code


@command("kubectl", "config", "delete-context", latency=0)
def config_delete_context(ctx: Ctx) -> None:
    """The context out of the caller's kubeconfig (kubeconfig.py), in kubectl's words."""
    context = str(ctx.positionals[0]) if ctx.positionals else ""
    if not context or not kubeconfig.remove(ctx, context, cluster_and_user=False):
        raise Fail(1, f"error: cannot delete context {context}, not in {kubeconfig.kubeconfig_file()}")
    ctx.out(f"deleted context {context} from {kubeconfig.kubeconfig_file()}")


@command("kubectl", "version", latency=0)
def version(ctx: Ctx) -> None:
    ctx.out("Client Version: v1.32.4 (fakecloud)\nKustomize Version: v5.5.0")
