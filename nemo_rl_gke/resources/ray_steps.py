"""The Ray cluster: our Helm release of manifests/ray-cluster, its pods' readiness, and Ray's own count of
GPUs. `deploy` is the step's create and `invoke ray.deploy`; the pure helpers read pod JSON and explain
what keeps the cluster short of GPUs (pending pods and the scheduler's words, quota, the pool's size).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import names, raychart
from ..commands import gcloud, helm, kubectl
from ..runner import Runner
from ..settings import Settings
from ..steps import Step
from ..tools import ToolError
from . import cluster_steps as cluster
from .head_pod import is_ready, leaving
from .inventory import Inventory, KubeRef

RELEASE = "ray.release"
# Created by the storage layer; deps outside a selection are ignored by the graph.
STORAGE_DEPS = ("storage.pvc", "storage.secret", "storage.ksa")
READY_TIMEOUT_SECONDS = 1800  # image pull of a 20+ GB image on fresh GPU nodes, with margin
# Ready pods register with the head within seconds; Ray gets this many poll intervals (2 min by default).
GPU_CHECK_POLLS = 12
# While every pod exists, `kubectl wait` ends the wait the moment they are all Ready; the pods are listed again
# (progress, a hopeless image) once per this many poll intervals.
WATCH_POLLS = 3

# Runs in the head pod: Ray's view of the cluster, as one JSON line.
GPU_QUERY = ("import json, ray; ray.init(address='auto', logging_level='ERROR'); "
             "alive = [n for n in ray.nodes() if n['Alive']]; "
             "print(json.dumps({'gpus': ray.cluster_resources().get('GPU', 0), 'nodes': len(alive)}))")


class RayNotReady(ToolError):
    """The release is installed but Ray is short of pods or GPUs; the message says why."""

    def __init__(self, message: str):
        super().__init__(message, 1)


# ---- argv -----------------------------------------------------------------------------------------
POD_SELECTOR = f"ray.io/cluster={names.RAY_RELEASE}"


def pods_argv(s: Settings) -> list[str]:
    return kubectl.get(s, "pods", namespace=s.NAMESPACE, selector=POD_SELECTOR)


def gpu_query_argv(s: Settings, head_pod: str) -> list[str]:
    return kubectl.exec_head(s, head_pod, "python", "-c", GPU_QUERY)


def restart_argv(s: Settings) -> list[str]:
    """Delete every Ray pod; KubeRay starts them again from the RayCluster's templates. kubectl waits for them to
    be gone (its --wait default), so no old pod is counted among the new ones."""
    return kubectl.delete(s, "pods", namespace=s.NAMESPACE, selector=POD_SELECTOR)


# ---- pod state (pure) -----------------------------------------------------------------------------
@dataclass(frozen=True)
class PodState:
    name: str
    node_type: str  # head | worker
    ready: bool
    why: str  # empty when ready
    template: str = ""  # its raychart.POD_TEMPLATE_HASH annotation: what its spec was made from
    crash_looping: bool = False  # a container exited CRASH_LOOP_RESTARTS times or more and waits to start again


# A container that has exited this often keeps exiting: the kubelet's back-off (10 s doubling to 5 minutes) puts
# the fifth restart about 5 minutes in, past what a fresh node's NCCL installer takes (FACTS §6: about 3), which
# a worker's start script needs. Waiting the rest of the 30 minutes would only repeat it.
CRASH_LOOP_RESTARTS = 5


def crash_looping(pod: dict[str, Any]) -> bool:
    return any(((c.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"
               and int(c.get("restartCount") or 0) >= CRASH_LOOP_RESTARTS
               for c in (pod.get("status") or {}).get("containerStatuses") or [])


def why_not_ready(pod: dict[str, Any]) -> str:
    """Kubernetes' words for a pod that is not Ready: scheduler message, container waiting reason (with how its
    last run ended, for a container that has exited), phase."""
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return condition.get("message") or condition.get("reason") or "not scheduled"
    for container in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (container.get("state") or {}).get("waiting")
        if waiting:
            reason = waiting.get("reason", "waiting")
            ended = (container.get("lastState") or {}).get("terminated")
            if ended:
                reason += (f" (it exited with code {ended.get('exitCode')}, restarted "
                           f"{int(container.get('restartCount') or 0)} times)")
            return f"{reason}: {waiting['message']}" if waiting.get("message") else reason
        terminated = (container.get("state") or {}).get("terminated")
        if terminated:
            return f"container exited with code {terminated.get('exitCode')} ({terminated.get('reason', '')})"
    return str(status.get("phase") or "starting")


def pod_states(pods_json: str) -> list[PodState]:
    body = json.loads(pods_json or "{}")
    out = []
    for pod in body.get("items", []):
        if leaving(pod):  # helm's uninstall leaves the pods to go: never one of the cluster's pods
            continue
        ready = is_ready(pod)
        meta = pod.get("metadata") or {}
        node_type = (meta.get("labels") or {}).get("ray.io/node-type", "?")
        template = str((meta.get("annotations") or {}).get(raychart.POD_TEMPLATE_HASH, ""))
        out.append(PodState(meta["name"], node_type, ready, "" if ready else why_not_ready(pod), template,
                            not ready and crash_looping(pod)))
    return out


def started_from_another_spec(states: list[PodState], template: str) -> list[PodState]:
    """The pods whose spec is not the one the values make (older settings, chart or Secret; a pod of a chart
    without the annotation counts too): KubeRay leaves them running as they are."""
    return [p for p in states if p.template != template]


def progress_line(states: list[PodState], workers_wanted: int) -> str:
    heads = [p for p in states if p.node_type == "head"]
    ready_workers = sum(p.ready for p in states if p.node_type == "worker")
    head = "Ready" if heads and all(p.ready for p in heads) else ("starting" if heads else "not created yet")
    return f"head {head}, {ready_workers}/{workers_wanted} GPU workers Ready"


def all_ready(states: list[PodState], workers_wanted: int) -> bool:
    heads = [p for p in states if p.node_type == "head"]
    workers = [p for p in states if p.node_type == "worker"]
    return (len(heads) == 1 and heads[0].ready and len(workers) == workers_wanted
            and all(p.ready for p in workers))


def shortfall_message(s: Settings, states: list[PodState], seen_gpus: float | None,
                      pool_nodes: int | None) -> str:
    """Why Ray has fewer than GPU_NODES × 8 GPUs, and what to do about it."""
    wanted = raychart.expected_gpus(s)
    workers = [p for p in states if p.node_type == "worker"]
    ready = sum(p.ready for p in workers)
    if seen_gpus is not None:
        seen = f"sees {seen_gpus:g}"
    elif any(p.node_type == "head" and p.ready for p in states):
        seen = "could not be asked (the query in the head pod failed; `invoke ray.status` asks again)"
    else:
        seen = "cannot be asked (the head is not Ready)"
    lines = [f"Ray {seen} of the {wanted} GPUs wanted (GPU_NODES={s.GPU_NODES} × {s.gpu.gpus_per_node}); "
             f"{ready} of {s.GPU_NODES} GPU workers are Ready."]
    for pod in states:
        if not pod.ready:
            lines.append(f"  {pod.name} ({pod.node_type}): {pod.why}")
    hints = []
    text = " ".join(p.why for p in states)
    if any(word in text for word in ("Insufficient nvidia.com/gpu", "affinity")):  # kube-scheduler's words
        if s.autopilot:
            hints.append(f"Autopilot could not provision {s.gpu.machine_type} nodes: check the GPU quota of "
                         f"{s.zone} and, with SPOT/RESERVATION, their capacity.")
        elif pool_nodes is not None and pool_nodes < s.GPU_NODES:
            hints.append(f"the GPU node pool {names.GPU_POOL} has {pool_nodes} node(s) but "
                         f"GPU_NODES={s.GPU_NODES}: resize it (gcloud container clusters resize "
                         f"{s.CLUSTER_NAME} --node-pool={names.GPU_POOL} --num-nodes={s.GPU_NODES} "
                         f"--location={s.region}) or deploy with --nodes={pool_nodes}.")
        else:
            hints.append(f"not enough free GPU nodes: see `invoke cluster.status`, the {s.gpu.machine_type} "
                         f"quota in {s.zone}, and whether Spot capacity was reclaimed.")
    if "secret" in text:
        hints.append(f"the Secret {names.SECRET_NAME} is missing: run `invoke storage.create`.")
    if "persistentvolumeclaim" in text:
        hints.append(f"the Lustre claim {names.LUSTRE_PVC} is missing: run `invoke storage.create`.")
    if "unbound immediate PersistentVolumeClaims" in text:  # the scheduler's words for a claim still Pending
        hints.append(f"the Lustre claim {names.LUSTRE_PVC} is not bound to its volume (`kubectl describe pvc "
                     f"{names.LUSTRE_PVC} --namespace={s.NAMESPACE}` says why): `invoke storage.create` makes a "
                     f"Released volume anew, or names the claim that holds it.")
    if "CrashLoopBackOff" in text:
        looping = next(p.name for p in states if "CrashLoopBackOff" in p.why)
        hints.append(f"a container keeps exiting: `kubectl logs {looping} --previous --namespace={s.NAMESPACE} "
                     f"--context={s.kube_context}` shows why (a GPU worker exits when its node lacks the NCCL RDMA "
                     f"installer's files or the GPU type's NCCL tuner file: `invoke cluster.status`).")
    if "ImagePull" in text or "ErrImage" in text:
        hints.append(f"the image {s.NEMO_RL_IMAGE} cannot be pulled: check NEMO_RL_IMAGE and egress.")
    if workers and ready == len(workers) == s.GPU_NODES and seen_gpus is not None:
        hints.append("every worker pod is Ready but Ray counts fewer GPUs: look at `invoke ray.status` and "
                     "the workers' logs (NVIDIA driver or device plugin).")
    if hints:
        lines.append("What to do: " + " ".join(hints))
    return "\n".join(lines)


# ---- actions --------------------------------------------------------------------------------------
def query_pods(r: Runner, s: Settings) -> list[PodState]:
    result = r.query(pods_argv(s), ok_codes=(0,))
    return [] if result is None else pod_states(result.stdout)


def query_gpus(r: Runner, s: Settings, states: list[PodState]) -> float | None:
    """Ray's GPU count, asked in the head; None when there is no Ready head to ask."""
    heads = [p for p in states if p.node_type == "head" and p.ready]
    if not heads:
        return None
    result = r.query(gpu_query_argv(s, heads[0].name), ok_codes=(0, 1))
    if result is None or not result.ok:
        return None
    for line in reversed(result.stdout.strip().splitlines()):
        if line.startswith("{"):
            return float(json.loads(line).get("gpus", 0))
    return None


def _pool_nodes(r: Runner, s: Settings) -> int | None:
    """How many GPU nodes the pool can give: None on Autopilot (nodes come on demand) or when unknown."""
    if s.autopilot:
        return None
    capacity = pool_capacity(r, s)
    return None if capacity is None else capacity[0]


def pool_capacity(r: Runner, s: Settings, pool: dict[str, Any] | None = None) -> tuple[int, str] | None:
    """(nodes, where the number comes from) for the GPU pool of a Standard cluster; None if there is no pool.
    pool: the pool as this run described it already (else it is described).

    GKE's NodePool has no current size (initialNodeCount is the size at creation; a resize does not change it),
    so Kubernetes' Nodes labelled with the pool are counted; an autoscaling pool can grow to its maximum.
    Before nodes register (or where no Node is listed) the initial count stands in."""
    if pool is None:
        result = r.query(gcloud.node_pool_describe(s))
        if result is None or not result.ok:
            return None
        pool = json.loads(result.stdout or "{}")
    locations = max(1, len(pool.get("locations") or []))
    autoscaling = pool.get("autoscaling") or {}
    if autoscaling.get("enabled"):
        most = autoscaling.get("totalMaxNodeCount") or (autoscaling.get("maxNodeCount") or 0) * locations
        return int(most), "its autoscaling maximum"
    listed = r.query(kubectl.get(s, "nodes", selector=f"cloud.google.com/gke-nodepool={names.GPU_POOL}"))
    nodes = len(json.loads(listed.stdout or "{}").get("items", [])) if listed is not None and listed.ok else 0
    if nodes:
        return nodes, "Kubernetes nodes in the pool"
    from .pool_size import current_nodes  # its instance groups' size now, not initialNodeCount

    return current_nodes(r, s, pool) or 0, "the pool's node count"


def preflight(r: Runner, s: Settings, *, pool: dict[str, Any] | None = None) -> None:
    """What waiting cannot fix, asked before anything is installed (at once): the GPU pool must hold GPU_NODES
    nodes, and the Secret and the Lustre claim the pods mount must exist. ConfigError (exit 2) with the fix.
    pool: the GPU pool as this run described it already."""
    if r.dry:
        return
    from ..settings import ConfigError

    mounted = (("Secret", names.SECRET_NAME), ("PersistentVolumeClaim", names.LUSTRE_PVC))
    reads: list[Callable[[], Any]] = [(lambda: None) if s.autopilot else (lambda: pool_capacity(r, s, pool))]
    reads += [functools.partial(r.exists, kubectl.get(s, kind.lower(), name, namespace=s.NAMESPACE))
              for kind, name in mounted]
    capacity, *found = r.parallel(reads)
    if not s.autopilot:
        if capacity is None:
            raise ConfigError("GPU_NODES", s.GPU_NODES, f"the GPU node pool {names.GPU_POOL} of {s.CLUSTER_NAME} "
                              "does not exist: run `invoke cluster.create` first.")
        nodes, source = capacity
        if nodes < s.GPU_NODES:
            raise ConfigError(
                "GPU_NODES", s.GPU_NODES,
                f"the GPU node pool {names.GPU_POOL} has {nodes} node(s) ({source}), so Ray could never get "
                f"{s.GPU_NODES} GPU workers. Deploy with --nodes={nodes}, or resize the pool first: gcloud "
                f"container clusters resize {s.CLUSTER_NAME} --node-pool={names.GPU_POOL} "
                f"--num-nodes={s.GPU_NODES} --location={s.region} --project={s.PROJECT_ID}")
    missing = [f"{kind} {name}" for (kind, name), here in zip(mounted, found, strict=True) if not here]
    if missing:
        raise ConfigError("NAMESPACE", s.NAMESPACE, f"the Ray pods mount {' and '.join(missing)}, which "
                          f"{'does' if len(missing) == 1 else 'do'} not exist there: run `invoke storage.create` "
                          "first.")


def install(r: Runner, s: Settings, *, head_cpu: int | None = None,
            head_memory_gi: int | None = None) -> None:
    text = raychart.values_yaml(s, head_cpu=head_cpu, head_memory_gi=head_memory_gi)
    chart = helm.chart_path(raychart.CHART_DIR)
    try:
        r.run(helm.upgrade_install(s, chart), stdin=text, timeout=900,
              stdin_label=f"Helm values from settings: {s.GPU_NODES} × {s.gpu.short} workers, {s.CLUSTER_MODE} "
                          f"({len(text.splitlines())} lines; `invoke ray.render --values` shows them)")
    except ToolError as exc:
        if not (HELM_BUSY.search(str(exc)) or NOT_DEPLOYED.search(str(exc))):
            raise
        # We hold the deployment's lock, so no helm of ours runs: a helm stopped mid-way (Ctrl-C, a kill) left
        # the release pending or half uninstalled, and waiting will not help. Its status says what mends it.
        raise ToolError(f"{exc}\n{stuck_release_advice(r, s)}", exc.exit_code) from None


HELM_BUSY = re.compile(r"another operation \(install/upgrade/rollback\) is in progress", re.IGNORECASE)
NOT_DEPLOYED = re.compile(r"has no deployed releases", re.IGNORECASE)


def stuck_release_advice(r: Runner, s: Settings) -> str:
    """What mends a release an interrupted helm left behind, by its status: a first install cut short has no
    revision to roll back to (`helm rollback` says "release has no 0 version"), so it goes; an upgrade or
    rollback cut short rolls back to the last good revision; an uninstall cut short is finished."""
    flags = f"--kube-context={s.kube_context} --namespace={s.NAMESPACE}"
    result = r.query(helm.status(s), ok_codes=range(256))
    try:
        status = str(json.loads(result.stdout or "{}").get("info", {}).get("status", "")) if result else ""
    except ValueError:
        status = ""
    name = names.RAY_RELEASE
    if status == "pending-install":
        return (f"The release {name} is stuck in pending-install: its first install was stopped mid-way, so there "
                f"is no revision to roll back to. `invoke clean.ray --yes` removes it; then run this again.")
    if status == "uninstalling":
        return (f"The release {name} is stuck in uninstalling: an uninstall was stopped mid-way. `invoke clean.ray "
                f"--yes` finishes it; then run this again.")
    shown = f" ({status})" if status.startswith("pending") else ""
    return (f"The release {name} is stuck in a pending state{shown} left by an interrupted helm (`helm status {name} "
            f"{flags}` shows it): `helm rollback {name} {flags}` returns it to its last good revision (or `invoke "
            f"clean.ray --yes` removes it); then run this again.")


# KubeRay's own word for pods it could not make (the API refused them: a ResourceQuota, an admission webhook,
# Autopilot's rules): a ReplicaFailure condition on the RayCluster, its message the API's error
# (raycluster_controller.go, the RayClusterStatusConditions gate, on by default in v1.4.2). No pod shows it. Seen at
# this many looks in a row it is taken as final (one may pass: a webhook that timed out once).
REPLICA_FAILURE_LOOKS = 3


def replica_failure(r: Runner, s: Settings) -> str | None:
    """The RayCluster's ReplicaFailure condition, "reason: message", or None (none, or it cannot be read)."""
    result = r.query(kubectl.get(s, "rayclusters.ray.io", names.RAY_RELEASE, namespace=s.NAMESPACE),
                     ok_codes=range(256))
    if result is None or not result.ok:
        return None
    try:
        body = json.loads(result.stdout or "{}")
    except ValueError:
        return None
    for condition in (body.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "ReplicaFailure" and condition.get("status") == "True":
            said = " ".join(str(condition.get("message") or "").split())
            return f"{condition.get('reason') or 'ReplicaFailure'}: {said}" if said else str(condition.get("reason"))
    return None


# Pod states that waiting does not cure: the image name or registry answer is final.
HOPELESS = re.compile(r"InvalidImageName|ErrImageNeverPull|(ErrImagePull|ImagePullBackOff).*"
                      r"(not found|manifest unknown|denied|unauthorized|403|404)", re.IGNORECASE)


def wait_ready(r: Runner, s: Settings, *, timeout: float = READY_TIMEOUT_SECONDS) -> list[PodState]:
    """Poll the pods until the head and every worker are Ready (progress on stderr); returns the last view.

    Raises RayNotReady, with Kubernetes' reasons and what to do, when timeout seconds pass or a pod is in a
    state waiting cannot cure (a bad image). The runner's poll never times out by itself here, so a timeout
    never ends in its ✓ line."""
    import time

    from .watch import Watch

    last: dict[str, Any] = {"line": None, "states": [], "refused": 0}
    deadline = time.monotonic() + timeout
    seconds = WATCH_POLLS * r.poll_seconds
    watch = Watch(r, kubectl.wait_ready(s, "pods", selector=POD_SELECTOR, namespace=s.NAMESPACE, seconds=seconds),
                  seconds)

    def check() -> bool:
        if watch.out():
            return False
        states = query_pods(r, s)
        last["states"] = states
        line = progress_line(states, s.GPU_NODES)
        if line != last["line"]:
            r.say(f"  {line}", err=True)
            last["line"] = line
        if all_ready(states, s.GPU_NODES):
            return True
        # Pods missing: KubeRay may say why it could not make them (the pods cannot).
        refused = replica_failure(r, s) if len(states) < 1 + s.GPU_NODES else None
        last["refused"] = last["refused"] + 1 if refused else 0  # looks in a row that found it
        if last["refused"] >= REPLICA_FAILURE_LOOKS:
            raise RayNotReady(f"Ray cluster {names.RAY_RELEASE} is not Ready: KubeRay cannot create its pods "
                              f"({refused}). Waiting does not change that: free or raise the quota, or change what "
                              f"refuses them (`kubectl describe raycluster {names.RAY_RELEASE} --namespace="
                              f"{s.NAMESPACE} --context={s.kube_context}` shows KubeRay's events), then run this "
                              f"again.\n" + shortfall_message(s, states, None, None))
        hopeless = [p for p in states if not p.ready and (HOPELESS.search(p.why) or p.crash_looping)]
        if hopeless or time.monotonic() >= deadline:
            why = (f"{hopeless[0].name} cannot start ({hopeless[0].why.split(':')[0]})" if hopeless
                   else f"timed out after {timeout:.0f} s")
            raise RayNotReady(f"Ray cluster {names.RAY_RELEASE} is not Ready: {why}.\n"
                              + shortfall_message(s, states, query_gpus(r, s, states), _pool_nodes(r, s)))
        if len(states) == 1 + s.GPU_NODES:  # `kubectl wait` waits for the pods there when it starts: all of them
            watch.start()
        return False

    r.poll(f"Ray head and {s.GPU_NODES} GPU workers Ready", check, timeout=float("inf"), wake=watch.ready)
    states: list[PodState] = last["states"]
    return states


def verify_gpus(r: Runner, s: Settings, states: list[PodState], *, timeout: float | None = None) -> float:
    """Ray must see GPU_NODES × 8 GPUs; otherwise raise RayNotReady saying why (never after a ✓ line: the
    check itself raises at the deadline, so the runner's wait never ends as a success)."""
    import time

    wanted = raychart.expected_gpus(s)
    timeout = GPU_CHECK_POLLS * r.poll_seconds if timeout is None else timeout
    deadline = time.monotonic() + timeout
    seen: dict[str, float | None] = {"gpus": None}

    def shortfall() -> RayNotReady:
        return RayNotReady(shortfall_message(s, states, seen["gpus"], _pool_nodes(r, s)))

    def enough() -> bool:
        seen["gpus"] = query_gpus(r, s, states)
        if seen["gpus"] is not None and seen["gpus"] >= wanted:
            return True
        if time.monotonic() >= deadline:
            raise shortfall()
        return False

    if not all_ready(states, s.GPU_NODES):
        seen["gpus"] = query_gpus(r, s, states)
        raise shortfall()
    r.poll(f"Ray reports {wanted} GPUs", enough, timeout=float("inf"))
    return float(seen["gpus"] or 0)


Restart = Callable[[list[PodState], int], None]  # (pods of another spec, the GPU workers there now)


def deploy(r: Runner, s: Settings, *, head_cpu: int | None = None, head_memory_gi: int | None = None,
           timeout: float = READY_TIMEOUT_SECONDS, restart: Restart | None = None) -> None:
    """helm upgrade --install, wait for every pod, then check Ray's GPU count. Idempotent.

    Pods started from another spec (raychart.pod_template_hash) are found before the upgrade. KubeRay would leave
    them as they are, so with restart (ray.deploy: it asks first when runs are running, or refuses; it raises to
    stop before any change) they are deleted after the upgrade and KubeRay starts them from the new spec; without
    (`up`), they are left, with a note. Fewer GPU workers than run now go through restart too (KubeRay deletes
    the extra workers, and what runs on them). `invoke ray.deploy` calls preflight() first; `up` creates the
    pool, Secret and claim before this step."""
    template = raychart.values(s, head_cpu=head_cpu, head_memory_gi=head_memory_gi)["podTemplateHash"]
    # ray.deploy asks before anything changes; `up` looks at the pods its wait lists anyway (no extra call).
    before = query_pods(r, s) if restart is not None and not r.dry else []
    stale = started_from_another_spec(before, template)
    workers = sum(p.node_type == "worker" for p in before)
    # Fewer workers than run now: KubeRay deletes the extra worker pods (and what runs on them).
    if restart is not None and (stale or workers > s.GPU_NODES):
        restart(stale, workers)
    from . import data_guard

    data_guard.ray_deployed(r, s)  # its runs write /data/runs again: no earlier listing answers for them
    install(r, s, head_cpu=head_cpu, head_memory_gi=head_memory_gi)
    if r.dry:
        if restart is not None:
            r.say("# only if Ray's pods were started from another spec (KubeRay does not restart them):")
            r.run(restart_argv(s))
        return
    if stale:
        r.run(restart_argv(s), timeout=900)
    states = wait_ready(r, s, timeout=timeout)
    left = started_from_another_spec(states, template) if restart is None else []
    if left:
        r.say(f"note: {len(left)} Ray pod(s) run an older spec than the settings' (image, resources, chart or the "
              f"Secret's values), and KubeRay does not restart running pods: `invoke ray.deploy` restarts Ray with "
              f"the new one.", err=True)
    gpus = verify_gpus(r, s, states)
    r.say(f"✓ Ray cluster {names.RAY_RELEASE}: {s.GPU_NODES} GPU workers, Ray sees {gpus:g} GPUs", err=True)


def release_exists(r: Runner, s: Settings) -> bool:
    return r.exists(helm.status(s))


def listed_workers(r: Runner, s: Settings, steps: Any) -> int | None:
    """The GPU workers the deployed RayCluster asks for (its worker group's replicas), from this run's kubectl
    listing (steps: their inventory); None without that listing or without our RayCluster in it."""
    from .inventory import inventory_of

    inv = inventory_of(steps or [])
    found = inv.kube_item(r, "RayCluster", names.RAY_RELEASE)[1] if inv is not None else None
    if found is None:
        return None
    groups = (found.get("spec") or {}).get("workerGroupSpecs") or []
    counts = [g.get("replicas") for g in groups if g.get("groupName") == raychart.WORKER_GROUP]
    return counts[0] if counts and isinstance(counts[0], int) else None


# helm cannot uninstall a release whose kind the cluster no longer serves: with the Ray operator add-on turned
# off, KubeRay's CRD went, and every RayCluster with it. helm 3.17 builds the release's objects from its manifest
# first ("unable to build kubernetes objects for delete", said only under --debug), answers "Error: failed to
# delete release: X" and leaves the release `uninstalling`, on every run (pkg/action/uninstall.go).
DELETE_FAILED = re.compile(r"failed to delete release: ")
UNSERVED = re.compile(r"doesn't have a resource type")


def uninstall(r: Runner, s: Settings) -> None:
    from ..tools import CommandFailed

    try:
        r.run(helm.uninstall(s), accept=helm.RELEASE_GONE, timeout=900)
    except CommandFailed as exc:
        if not DELETE_FAILED.search(exc.said) or _ray_cluster_served(r, s):
            raise
        # Our chart makes a RayCluster only, and none can be left without its CRD: what stays is helm's record
        # of the release (its Secrets, labelled owner=helm and name=X), which helm's uninstall deletes at its end.
        r.say(f"helm cannot uninstall {names.RAY_RELEASE}: the cluster no longer serves RayCluster (its CRD is "
              f"gone: the Ray operator add-on turned off?), so no RayCluster of it is left; deleting helm's record "
              f"of the release", err=True)
        r.run(kubectl.delete(s, "secret", namespace=s.NAMESPACE, selector=f"owner=helm,name={names.RAY_RELEASE}"))


def provisioned(items: list[dict[str, Any]]) -> bool:
    """Our RayCluster is among a listing's items and KubeRay saw all its pods, the head and every desired worker,
    Running and Ready once: its state "ready" (v1.4.2's calculateStatus; it does not go back when a worker is lost
    later). Not the RayClusterProvisioned condition: that counts only the pods that exist, so a head alone (its
    workers refused by a quota) sets it. One that never was ready (an `up` stopped in Ray's wait, workers a quota
    refuses) counted as done, and a re-run of `up` said "done" with the head Pending: now `up` deploys it again
    (the chart unchanged: nothing restarts) and waits for it."""
    from .inventory import find_kube

    found = find_kube(items, "RayCluster", names.RAY_RELEASE)
    return found is not None and ((found.get("status") or {}).get("state") == "ready")


def _ray_cluster_served(r: Runner, s: Settings) -> bool:
    """The cluster serves KubeRay's RayCluster kind (its CRD is there); a doubt counts as served."""
    result = r.query(kubectl.get(s, "rayclusters.ray.io", namespace=s.NAMESPACE, output="name"), ok_codes=range(256))
    return result is None or result.ok or not UNSERVED.search(result.stderr)


def steps(s: Settings, inventory: Inventory | None = None) -> list[Step]:
    inv = inventory or Inventory(s)
    deps: tuple[str, ...] = (cluster.NETWORK_MAPPING, cluster.NCCL, *STORAGE_DEPS)
    if not s.autopilot:
        deps = (cluster.GPU_POOL, *deps)
    title = f"Ray cluster {names.RAY_RELEASE} ({s.GPU_NODES} × {s.gpu.gpus_per_node} {s.gpu.short} GPUs)"
    # What the release makes, the RayCluster named after it, answers "exists" from the run's one kubectl
    # listing, once KubeRay saw its pods all Ready (provisioned); a teardown asks helm itself (a failed release
    # without its RayCluster is still uninstalled), the leftover scan the listing.
    ray_cluster = KubeRef("rayclusters.ray.io", "RayCluster", names.RAY_RELEASE, s.NAMESPACE)
    from . import data_guard

    out = [Step(RELEASE, title, inv.in_cluster(RELEASE, ray_cluster, provisioned, lambda r: release_exists(r, s)),
                lambda r: deploy(r, s), lambda r: uninstall(r, s), deps=deps,
                parent=cluster.CLUSTER, create_seconds=600, delete_seconds=30,
                present=lambda r: release_exists(r, s),
                listed=inv.in_cluster(RELEASE, ray_cluster, None, lambda r: release_exists(r, s)),
                # /data/runs as Ray goes away: the export check's only answer once its head is gone
                guard=data_guard.final_listing_guard(s, inv, lambda r: release_exists(r, s)))]
    return out if inventory is not None else inv.track(out)
