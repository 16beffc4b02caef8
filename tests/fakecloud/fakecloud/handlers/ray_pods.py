"""What KubeRay would make of our chart's release: a RayCluster object, one head pod and `replicas` worker
pods with KubeRay's labels, Ready after the install latency; and `python -c <Ray GPU query>` in the head.

Realism that our wait loop and GPU check must cope with:
- Standard clusters schedule at most one GPU worker per node of the GPU pool (its node count, or
  FAKECLOUD_GPU_NODES); the rest stay Pending with the scheduler's message, as on GKE.
- A missing Secret or PersistentVolumeClaim keeps the pods from starting, with Kubernetes' own reasons.
- Ray in the head reports the GPUs of the Ready workers (a pod's private '_ray_gpus' overrides its count).
- preempt_worker(): GKE takes a Spot node back. The worker pod is gone at once (its Ray logs stay on /data, as
  the chart's log shipping leaves them) and KubeRay's replacement, with a new name, is Ready after a delay.
  The NeMo RL stand-in calls it for FAKECLOUD_PREEMPT_AT_STEP.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

from .. import kubeconfig
from ..core import Ctx, Fail, command, pod_command, time_scale
from .kubectl_objects import bind_claims, key_of, pool_nodes, with_status

GPU = "nvidia.com/gpu"


def _suffix(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:5]


def _labels(cluster: str, node_type: str, group: str) -> dict[str, str]:
    return {
        "ray.io/cluster": cluster,
        "ray.io/node-type": node_type,
        "ray.io/group": group,
        "ray.io/is-ray-node": "yes",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }


def cluster_name(release: str, values: dict[str, Any]) -> str:
    return str(values.get("fullnameOverride") or release)[:50]


def _gpu_pool(ctx: Ctx, context: str) -> tuple[bool, dict[str, Any] | None]:
    """(Autopilot, the Standard cluster's GPU pool or None) of the cluster behind a kubeconfig context."""
    kube = ctx.state.get("kubecontext", context) or {}
    return bool(kube.get("autopilot")), ctx.state.get("nodepool", f"{kube.get('cluster')}/gpu-pool")


def _zones(pool: dict[str, Any]) -> int:
    return max(1, len(pool.get("locations") or []))


def gpu_capacity(ctx: Ctx, context: str) -> int | None:
    """How many 8-GPU workers can schedule: None = unlimited (Autopilot provisions nodes on demand)."""
    if os.environ.get("FAKECLOUD_GPU_NODES"):
        return int(os.environ["FAKECLOUD_GPU_NODES"])
    autopilot, pool = _gpu_pool(ctx, context)
    if autopilot:
        return None
    from .gcloud_resize import target_size  # the size a resize asked for (not initialNodeCount)

    return target_size(pool) * _zones(pool) if pool else 0


def gpu_nodes_now(ctx: Ctx, context: str) -> tuple[int, float]:
    """(the GPU nodes up now, when the rest a resize asked for come up): a worker past them stays Pending until
    then, and the scheduler places it once they register."""
    autopilot, pool = _gpu_pool(ctx, context)
    if autopilot or pool is None:
        return 1 << 30, 0.0
    from .gcloud_resize import pool_size

    return pool_size(pool) * _zones(pool), float(pool.get("_resized_at") or 0)


def unmatched_nodes(ctx: Ctx, context: str, selector: dict[str, str]) -> int:
    """How many of a Standard cluster's nodes (its CPU node and GPU pool) a GPU worker's nodeSelector rules out
    when it rules them all out (0: some node matches, or Autopilot, which makes the node the pod asks for): the
    pool's nodes carry its accelerator's label, and no node of ours carries an Autopilot compute class."""
    autopilot, pool = _gpu_pool(ctx, context)
    if autopilot or pool is None:
        return 0
    accelerator = dict(kv.split("=", 1) for kv in str((pool.get("config") or {}).get("accelerators") or "")
                       .split(",") if "=" in kv).get("type")
    wanted = selector.get("cloud.google.com/gke-accelerator")
    if "cloud.google.com/compute-class" in selector or (wanted and accelerator and wanted != accelerator):
        from .gcloud_resize import pool_size

        return 1 + pool_size(pool) * _zones(pool)
    return 0


def _blocker(ctx: Ctx, skind: str, namespace: str, values: dict[str, Any]) -> dict[str, Any] | None:
    """Why no Ray pod can start, as Kubernetes would say it (None: nothing blocks)."""
    claim = (values.get("data") or {}).get("claimName")
    pvc = ctx.state.get(skind, key_of("PersistentVolumeClaim", namespace, claim)) if claim else None
    if claim and pvc is None:
        return {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": f'persistentvolumeclaim "{claim}" not found',
                }
            ]
        }
    if pvc is not None and pvc.get("_phase") != "Bound":  # its volume bound to another claim, or Released
        nodes = len(pool_nodes(ctx, skind.split(":", 1)[1]))
        return {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": f"0/{nodes} nodes are available: pod has unbound immediate PersistentVolumeClaims. "
                       f"preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for "
                       f"scheduling."}]}
    lustre = ((kubeconfig.cluster_of(ctx, skind.split(":", 1)[1]).get("addonsConfig") or {})
              .get("lustreCsiDriverConfig") or {})
    if claim and not (lustre.get("enabled") and lustre.get("enableLegacyLustrePort")):
        # No Lustre CSI driver on the nodes (or not on the port a --gke-support-enabled instance answers): the
        # kubelet cannot mount the claim, and the pod waits in ContainerCreating (the why is in its events:
        # "driver name lustre.csi.storage.gke.io not found in the list of registered CSI drivers").
        return {"containerStatuses": [{"name": "ray", "ready": False,
                                       "state": {"waiting": {"reason": "ContainerCreating"}}}]}
    secret = values.get("secretName")
    if secret and ctx.state.get(skind, key_of("Secret", namespace, secret)) is None:
        return {
            "containerStatuses": [
                {
                    "name": "ray",
                    "ready": False,
                    "state": {
                        "waiting": {
                            "reason": "CreateContainerConfigError",
                            "message": f'secret "{secret}" not found',
                        }
                    },
                }
            ]
        }
    return None


def scheduler_says(counts: dict[str, int], preemption: dict[str, int]) -> dict[str, str]:
    """kube-scheduler's PodScheduled condition for a pod no node fits, in its words (FitError.Error in
    pkg/scheduler/framework: "0/N nodes are available: " then "count reason" per reason, sorted and joined by
    ", "; NodeResourcesFit says "Insufficient <resource>"; then the preemption's own tally)."""
    nodes = sum(counts.values())

    def tally(reasons: dict[str, int]) -> str:
        return ", ".join(sorted(f"{n} {why}" for why, n in reasons.items()))

    message = (f"0/{nodes} nodes are available: {tally(counts)}. preemption: 0/{nodes} nodes are available: "
               f"{tally(preemption)}.")
    return {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}


NO_VICTIMS, NOT_HELPFUL = "No preemption victims found for incoming pod", "Preemption is not helpful for scheduling"
UNMATCHED = "node(s) didn't match Pod's node affinity/selector"


INTERFACES = "networking.gke.io/interfaces"


def _replica_failure(cluster: str, namespace: str, group: str) -> dict[str, Any]:
    """FAKECLOUD_RAY_WORKERS_REFUSED="the API's error": the API refuses the GPU workers' creation (a ResourceQuota,
    an admission webhook), so no worker pod exists, and KubeRay v1.4.2 says so on the RayCluster only: a
    ReplicaFailure condition whose message joins its reason and the API's error (errors.Join in reconcilePods)."""
    refused = os.environ.get("FAKECLOUD_RAY_WORKERS_REFUSED")
    if not refused:
        return {}
    return {"status": {"conditions": [{
        "type": "ReplicaFailure", "status": "True", "reason": "FailedCreateWorkerPod",
        "message": f'FailedCreateWorkerPod\npods "{cluster}-{group}-worker-" is forbidden: {refused}',
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]}}


def crash_loop(pod: dict[str, Any], restarts: int) -> dict[str, Any]:
    """FAKECLOUD_WORKER_CRASHLOOP=N: a GPU worker placed on its node whose start script exits (a node without the
    NCCL installer's files, say), restarted N times: the kubelet's status then (Running, the container waiting
    in CrashLoopBackOff with its back-off, its last run's end in lastState)."""
    name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
    return {"phase": "Running", "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
            "containerStatuses": [{
                "name": "ray-worker", "ready": False, "started": False, "restartCount": restarts,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": (
                    f"back-off 5m0s restarting failed container=ray-worker pod={name}_{namespace}"
                    f"({_suffix(name, 'uid')})")}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}


def unschedulable(capacity: int) -> dict[str, str]:
    """A GPU worker past the GPU nodes' capacity: each GPU node is full, the CPU node lacks the selector."""
    return scheduler_says({f"Insufficient {GPU}": capacity, UNMATCHED: 1}, {NO_VICTIMS: capacity, NOT_HELPFUL: 1})


def _pod(name: str, namespace: str, labels: dict[str, str], container: str, gpus: int,
         annotations: dict[str, str], claim: str = "") -> dict[str, Any]:
    limits = {GPU: str(gpus)} if gpus else {}
    spec: dict[str, Any] = {"containers": [{"name": container, "resources": {"limits": limits}}]}
    if claim:  # the chart mounts /data from the Lustre claim in every Ray pod
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": dict(annotations)},
        "spec": spec,
    }


# The chart's pod templates carry it (tests/manifests checks the rendered chart); KubeRay copies a template's
# annotations to the pods it makes from it.
POD_TEMPLATE_HASH = "nemo-rl-gke/pod-template-hash"
RESTART_DELETE_SECONDS = 10  # a Ray pod's shutdown after the delete (ours; FACTS §6 has no figure)
# A Ray pod is Running that long before Ready: Ray starting in it (ours; FACTS §6 has no figure).
# FAKECLOUD_RAY_START_SECONDS sets it.
RAY_START_SECONDS = 15
RESTART_READY_SECONDS = 120  # a recreated Ray pod Ready again: its node and image are already there (ours)


def sync(
    ctx: Ctx,
    context: str,
    namespace: str,
    release: str,
    values: dict[str, Any],
    *,
    ready_in: float,
) -> None:
    """Make the RayCluster and its pods match the release's values as KubeRay v1.4.2 does: only the worker count
    is reconciled (workers added, or the extra ones deleted); a running pod is never restarted for a new
    template (image, resources, annotations), so it keeps the spec it was made with. A missing head or worker
    is made from the current template, Ready after ready_in × scale. (Our simplification: a pod that can never
    start, for a missing Secret or claim or no free GPU node, is made again at each sync instead of being
    scheduled later by Kubernetes.)"""
    skind = f"k8s:{context}"
    cluster = cluster_name(release, values)
    worker = values.get("worker") or {}
    group = str(worker.get("groupName", "workers"))
    replicas = int(worker.get("replicas", 1))
    gpus = int(worker.get("gpus", 8))
    capacity = gpu_capacity(ctx, context)
    up_now, coming_at = gpu_nodes_now(ctx, context)
    unmatched = unmatched_nodes(ctx, context, dict(worker.get("nodeSelector") or {}))
    ready_at = time.time() + ready_in * time_scale()
    annotations = {POD_TEMPLATE_HASH: str(values["podTemplateHash"])} if values.get("podTemplateHash") else {}
    sweep_gone(ctx, skind)
    bind_claims(ctx, skind)
    with ctx.state.locked():
        key = key_of("RayCluster", namespace, cluster)
        before = ctx.state.get(skind, key) or {}
        generation = int(before.get("_generation", 0))
        template = {"metadata": {"annotations": annotations}}
        ctx.state.put(
            skind,
            key,
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayCluster",
                "metadata": {
                    "name": cluster,
                    "namespace": namespace,
                    "labels": {"app.kubernetes.io/instance": release},
                },
                "spec": {
                    "rayVersion": values.get("rayVersion"),
                    "headGroupSpec": {"template": template},
                    "workerGroupSpecs": [{"groupName": group, "replicas": replicas, "template": template}],
                },
                "_release": release,
                "_generation": generation,
                # KubeRay's status is its own (the status subresource): an upgrade of the chart leaves it
                **{k: before[k] for k in ("_state_ready", "_provisioned", "_ready_workers") if k in before},
                **_replica_failure(cluster, namespace, group),
            },
        )
        ctx.state.put(skind, key_of("Service", namespace, f"{cluster}-head-svc"), _head_service(cluster, namespace,
                                                                                                  release))
        blocker = _blocker(ctx, skind, namespace, values)
        pods = [
            o
            for o in ctx.state.list(skind)
            if o.get("kind") == "Pod"
            and o["metadata"].get("labels", {}).get("ray.io/cluster") == cluster
            and o["metadata"].get("namespace") == namespace
        ]
        existing = [o for o in pods if not o["metadata"].get("deletionTimestamp")]  # the others are going
        while any(o["metadata"]["name"].endswith(_suffix(cluster, "head", *((generation,) if generation else ())))
                  for o in pods if o not in existing):  # KubeRay's new pods never take a going pod's name
            generation += 1
            ctx.state.put(skind, key, {**ctx.state.get(skind, key), "_generation": generation})
        kept = sorted((o for o in existing if not o.get("_never_ready")), key=lambda o: o["metadata"]["name"])
        heads = [o for o in kept if o["metadata"]["labels"].get("ray.io/node-type") == "head"][:1]
        workers = [o for o in kept if o["metadata"]["labels"].get("ray.io/node-type") == "worker"][:replicas]
        for pod in existing:
            if pod not in heads and pod not in workers:
                ctx.state.delete(skind, key_of("Pod", namespace, pod["metadata"]["name"]))
        taken = {o["metadata"]["name"] for o in heads + workers}
        tail = (generation,) if generation else ()  # pods made again after a restart get new names, as KubeRay's
        wanted = [] if heads else [
            (f"{cluster}-head-{_suffix(cluster, 'head', *tail)}", _labels(cluster, "head", "headgroup"), "ray-head", 0)
        ]
        new_workers = [f"{cluster}-{group}-worker-{_suffix(cluster, group, i, *tail)}" for i in range(2 * replicas)]
        new_workers = [name for name in new_workers if name not in taken][:replicas - len(workers)]
        wanted += [(name, _labels(cluster, "worker", group), "ray-worker", gpus) for name in new_workers]
        workers_placed = len(workers)
        # The worker template's networking.gke.io/interfaces, as the chart renders it from worker.interfaces:
        # KubeRay copies the template's annotations to each pod (GKE gives the pod's node those NICs).
        nics = {INTERFACES: json.dumps(worker["interfaces"])} if worker.get("interfaces") else {}
        for name, labels, container, pod_gpus in wanted:
            pod = _pod(name, namespace, labels, container, pod_gpus,
                       {**annotations, **nics} if container == "ray-worker" else annotations,
                       str((values.get("data") or {}).get("claimName") or ""))
            pod["_ready_at"] = ready_at
            start = float(os.environ.get("FAKECLOUD_RAY_START_SECONDS", RAY_START_SECONDS))
            pod["_running_at"] = ready_at - start * time_scale()  # Running, Ray in it not yet answering
            if blocker is not None:
                pod["_never_ready"] = True
                pod["status"] = dict(blocker)
            elif pod_gpus and unmatched:
                pod["_never_ready"] = True
                pod["status"] = {"conditions": [scheduler_says({UNMATCHED: unmatched}, {NOT_HELPFUL: unmatched})]}
            elif pod_gpus and capacity is not None and workers_placed >= capacity:
                pod["_never_ready"] = True
                pod["status"] = {"conditions": [unschedulable(capacity)]}
            elif pod_gpus and os.environ.get("FAKECLOUD_RAY_WORKERS_REFUSED"):
                continue  # the API refused it: no pod, KubeRay's condition says why (_replica_failure)
            elif pod_gpus and os.environ.get("FAKECLOUD_WORKER_CRASHLOOP"):
                pod["_never_ready"] = True
                pod["status"] = crash_loop(pod, int(os.environ["FAKECLOUD_WORKER_CRASHLOOP"]))
                workers_placed += 1
            elif pod_gpus:
                if workers_placed >= up_now:  # its node is still coming up (a resize): Pending until it has
                    pod["_ready_at"] = max(ready_at, coming_at + (ready_at - time.time()))
                    pod["_running_at"] = pod["_ready_at"] - start * time_scale()
                workers_placed += 1
            ctx.state.put(skind, key_of("Pod", namespace, name), pod)


def _delete_pods(ctx: Ctx) -> int:
    """`kubectl delete pods NAME… | --selector=S`: gone once kubectl returns (its --wait); KubeRay then makes the
    Ray pods of an existing RayCluster again, from its current templates (new names)."""
    from .kubectl_objects import delete_targets, store_kind

    skind = store_kind(ctx)
    namespace, names = delete_targets(ctx, "Pod")
    ctx.work(RESTART_DELETE_SECONDS if names else 0)
    context = str(ctx.flag("--context"))
    clusters: set[str] = set()
    code = 0
    for name in names:
        pod = ctx.state.get(skind, key_of("Pod", namespace, name))
        if pod is not None and ctx.state.delete(skind, key_of("Pod", namespace, name)):
            ctx.out(f'pod "{name}" deleted')
            cluster = (pod["metadata"].get("labels") or {}).get("ray.io/cluster")
            if cluster:
                clusters.add(cluster)
        elif not ctx.flag("--ignore-not-found"):
            ctx.err(f'Error from server (NotFound): pods "{name}" not found')
            code = 1
    if not names:
        ctx.out("No resources found")  # kubectl delete: on stdout (o.Out), unlike get's "No resources found in …"
    for cluster in sorted(clusters):
        made_again(ctx, context, namespace, cluster)
    return code


for _word in ("pods", "pod", "po"):
    command("kubectl", "delete", _word, mutating=True, latency=0)(_delete_pods)


def made_again(ctx: Ctx, context: str, namespace: str, cluster: str) -> None:
    """KubeRay's answer to deleted Ray pods: the RayCluster's head and workers again, from its current spec."""
    skind = f"k8s:{context}"
    with ctx.state.locked():
        raycluster = ctx.state.get(skind, key_of("RayCluster", namespace, cluster))
        if raycluster is None:
            return
        release = raycluster.get("_release", cluster)
        helm_release = ctx.state.get(f"helm:{context}", f"{namespace}/{release}")
        if helm_release is None:
            return
        raycluster["_generation"] = int(raycluster.get("_generation", 0)) + 1
        ctx.state.put(skind, key_of("RayCluster", namespace, cluster), raycluster)
    sync(ctx, context, namespace, release, helm_release["values"], ready_in=RESTART_READY_SECONDS)


# The head container's ports in our chart (manifests/ray-cluster/templates/raycluster.yaml); KubeRay's head
# Service, <RayCluster name>-head-svc, exposes the head container's ports.
HEAD_PORTS = {"gcs-server": 6379, "dashboard": 8265, "client": 10001}


def _head_service(cluster: str, namespace: str, release: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"{cluster}-head-svc", "namespace": namespace,
                         "labels": {"ray.io/cluster": cluster, "app.kubernetes.io/created-by": "kuberay-operator"}},
            "spec": {"type": "ClusterIP", "selector": {"ray.io/cluster": cluster, "ray.io/node-type": "head"},
                     "ports": [{"name": name, "port": port, "targetPort": port, "protocol": "TCP"}
                               for name, port in HEAD_PORTS.items()]},
            "_release": release}


def remove(ctx: Ctx, context: str, namespace: str, release: str) -> None:
    """helm uninstall: the release's objects go at once; the Ray pods, which Kubernetes' garbage collector deletes
    after their RayCluster (helm's --wait does not wait for them), are on their way out for their shutdown
    (RESTART_DELETE_SECONDS, or FAKECLOUD_POD_SHUTDOWN_SECONDS, × the scale): still listed, Running, with a
    deletionTimestamp."""
    skind = f"k8s:{context}"
    shutdown = float(os.environ.get("FAKECLOUD_POD_SHUTDOWN_SECONDS", RESTART_DELETE_SECONDS))
    gone_at = time.time() + shutdown * time_scale()
    with ctx.state.locked():
        for key, obj in list(ctx.state.items(skind).items()):
            labels = obj.get("metadata", {}).get("labels", {}) or {}
            pod = obj.get("kind") == "Pod" and labels.get("ray.io/cluster") == release
            if not (obj.get("_release") == release or pod) or obj.get("metadata", {}).get("namespace") != namespace:
                continue
            if pod and time_scale() > 0:
                obj["metadata"].setdefault("deletionTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                obj.setdefault("_gone_at", gone_at)
                ctx.state.put(skind, key, obj)
            else:
                ctx.state.delete(skind, key)


def sweep_gone(ctx: Ctx, skind: str) -> None:
    """Pods whose shutdown has ended are gone; each RayCluster's status follows its pods (observe_clusters)."""
    now = time.time()
    with ctx.state.locked():
        for key, obj in list(ctx.state.items(skind).items()):
            if obj.get("kind") == "Pod" and "_gone_at" in obj and now >= float(obj["_gone_at"]):
                ctx.state.delete(skind, key)
        observe_clusters(ctx, skind)


def observe_clusters(ctx: Ctx, skind: str) -> None:
    """KubeRay v1.4.2's calculateStatus, as of now: readyWorkerReplicas counts the Ready workers; state "ready" once
    the reconcile had no error (no ReplicaFailure) and the Ray pods are the head and the desired workers, all
    Running and Ready; the RayClusterProvisioned condition once the pods that exist are all Running and Ready
    (CheckAllPodsRunning: a head whose workers a quota refused sets it). Neither goes back (a worker lost later
    leaves them), so they are kept in the state. Called with the state locked."""
    items = ctx.state.items(skind)
    for key, obj in list(items.items()):
        if obj.get("kind") != "RayCluster":
            continue
        name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace")
        pods = [with_status(o) for o in items.values() if o.get("kind") == "Pod"
                and (o.get("metadata") or {}).get("namespace") == namespace
                and ((o.get("metadata") or {}).get("labels") or {}).get("ray.io/cluster") == name]
        ready = [p for p in pods if p["status"].get("phase") == "Running"
                 and all(c.get("status") == "True" for c in p["status"].get("conditions") or []
                         if c.get("type") == "Ready")]
        workers = sum(1 for p in ready if p["metadata"]["labels"].get("ray.io/node-type") == "worker")
        desired = _desired_workers(obj)
        all_ready = bool(pods) and len(ready) == len(pods)
        failing = any(c.get("type") == "ReplicaFailure" for c in (obj.get("status") or {}).get("conditions") or [])
        state_ready = bool(obj.get("_state_ready")) or (all_ready and len(pods) == desired + 1 and not failing)
        provisioned = bool(obj.get("_provisioned")) or all_ready
        seen = (workers, state_ready, provisioned)
        if seen != (obj.get("_ready_workers"), bool(obj.get("_state_ready")), bool(obj.get("_provisioned"))):
            ctx.state.put(skind, key, {**obj, "_ready_workers": workers, "_state_ready": state_ready,
                                       "_provisioned": provisioned})


def _desired_workers(cluster: dict[str, Any]) -> int:
    return sum(int(g.get("replicas", 0)) for g in cluster.get("spec", {}).get("workerGroupSpecs") or [])


def cluster_view(obj: dict[str, Any]) -> dict[str, Any]:
    """A RayCluster as the API shows it: its status as observe_clusters last saw it (KubeRay's conditions kept)."""
    from ..core import public

    view = public(obj)
    desired = _desired_workers(obj)
    status = dict(view.get("status") or {})
    provisioned = bool(obj.get("_provisioned"))
    status.update({"readyWorkerReplicas": int(obj.get("_ready_workers") or 0), "desiredWorkerReplicas": desired,
                   **({"state": "ready"} if obj.get("_state_ready") else {})})
    reason = "AllPodRunningAndReadyFirstTime" if provisioned else "RayClusterPodsProvisioning"
    status["conditions"] = [*(c for c in status.get("conditions") or [] if c.get("type") != "RayClusterProvisioned"),
                            {"type": "RayClusterProvisioned", "status": "True" if provisioned else "False",
                             "reason": reason}]
    view["status"] = status
    return view


def _ready(pod: dict[str, Any]) -> bool:
    conditions = with_status(pod).get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def ready_worker_gpus(state: Any, context: str, namespace: str, cluster: str) -> tuple[int, int]:
    """(GPUs, Ready workers) of a Ray cluster: what `ray.cluster_resources()` in its head would answer."""
    workers = [
        o
        for o in state.list(f"k8s:{context}")
        if o.get("kind") == "Pod"
        and o["metadata"].get("namespace") == namespace
        and (o["metadata"].get("labels") or {}).get("ray.io/cluster") == cluster
        and (o["metadata"].get("labels") or {}).get("ray.io/node-type") == "worker"
        and _ready(o)
    ]
    gpus = sum(
        int(o.get("_ray_gpus", o["spec"]["containers"][0]["resources"]["limits"].get(GPU, 0)))
        for o in workers
    )
    return gpus, len(workers)


WORKER_ERROR_LOG = """\
[2026-01-01 00:00:00,000 E 412 412] (raylet) node_manager.cc: The raylet on {pod} is exiting: the node is \
being preempted (received SIGTERM).
"""


def preempt_worker(state: Any, context: str, namespace: str, cluster: str, *, return_in: float,
                   pod_root: Any = None) -> str | None:
    """A Spot node taken back: one Ready worker pod vanishes; its replacement is Ready after return_in s."""
    skind = f"k8s:{context}"
    with state.locked():
        workers = [
            o
            for o in state.list(skind)
            if o.get("kind") == "Pod"
            and o["metadata"].get("namespace") == namespace
            and (o["metadata"].get("labels") or {}).get("ray.io/cluster") == cluster
            and (o["metadata"].get("labels") or {}).get("ray.io/node-type") == "worker"
            and _ready(o)
        ]
        if not workers:
            return None
        gone = sorted(workers, key=lambda o: o["metadata"]["name"])[-1]
        name = gone["metadata"]["name"]
        state.delete(skind, key_of("Pod", namespace, name))
        replacement = json.loads(json.dumps(gone))
        base = name.rsplit("-", 1)[0] if name.count("-") > 1 else name
        new_name = f"{base}-{_suffix(name, time.time())}"
        replacement["metadata"]["name"] = new_name
        replacement["_ready_at"] = time.time() + return_in
        replacement.pop("status", None)
        replacement.pop("_never_ready", None)
        state.put(skind, key_of("Pod", namespace, new_name), replacement)
    if pod_root is not None:
        # What the chart's log shipping leaves on /data when the pod gets its SIGTERM (see the chart's helpers).
        logs = pod_root / "data" / "ray-logs" / name
        logs.mkdir(parents=True, exist_ok=True)
        (logs / "raylet.err").write_text(WORKER_ERROR_LOG.format(pod=name))
    return name


@pod_command("python")
def python(ctx: Ctx, pod: dict[str, Any], container: str, argv: list[str]) -> int:
    """Our GPU query (`python -c '...ray.cluster_resources()...'`): what Ray in the head would answer."""
    code = argv[argv.index("-c") + 1] if "-c" in argv[:-1] else ""
    if "cluster_resources" not in code:
        raise Fail(1, f"fakecloud python: only the Ray GPU query is simulated, not {argv[1:]}")
    labels = pod["metadata"].get("labels", {})
    if labels.get("ray.io/node-type") != "head":
        raise Fail(1, "ConnectionError: could not find any running Ray instance (not the head pod)")
    gpus, workers = ready_worker_gpus(ctx.state, str(ctx.flag("--context")), pod["metadata"]["namespace"],
                                      str(labels.get("ray.io/cluster")))
    ctx.out(json.dumps({"gpus": float(gpus), "nodes": 1 + workers}))
    return 0


def _register_views() -> None:
    from . import kubectl_objects

    kubectl_objects.STATUS_VIEWS["RayCluster"] = cluster_view


_register_views()
