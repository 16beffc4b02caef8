"""The Ray head pod: finding it (for the data guard: the Running one or None; for the job tasks that read /data:
the Running one or a clear error saying why not; for a submit and the dashboard, which need Ray itself: the Ready
one), the GPUs Ray sees, and read-only scripts piped into it (`kubectl exec -i … -- bash`), whose 'no such run' is
exit 3."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..settings import Settings

if TYPE_CHECKING:
    from ..runner import Result, Runner
    from .inventory import Inventory


def leaving(pod: dict[str, Any]) -> bool:
    """Being deleted (`metadata.deletionTimestamp`, e.g. for a while after `ray.delete`, since helm's uninstall does
    not wait for the pods): it still reads Running, with its labels, until it is gone."""
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def serving(pod: dict[str, Any]) -> bool:
    """Running and not on its way out."""
    return pod.get("status", {}).get("phase") == "Running" and not leaving(pod)


def is_ready(pod: dict[str, Any]) -> bool:
    """Its Ready condition is True: for a Ray pod, KubeRay's readiness probe found Ray in it healthy. A head can
    be Running for a while before (Ray starting), or again after (Ray failing its health check)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def running_head(r: Runner, s: Settings, inv: Inventory | None = None) -> str | None:
    """The Running Ray head pod, which mounts the Lustre volume at /data; None without cluster, Ray or pod.

    inv: this run's inventory: its cluster listing says whether there is a cluster, and a kubectl that
    answered its listings needs no fresh credentials (two calls less before a teardown can start). The data
    guard asks it; the job tasks' `head` says why there is none instead."""
    from ..commands import gcloud
    from . import cluster_steps

    clusters = inv.listed(r, "cluster") if inv is not None else None
    if clusters is not None and inv is not None:
        if not inv.may_hold_ours(clusters):
            return None
        if not inv.kube_answered():
            r.run(gcloud.get_credentials(s))
    elif inv is not None and inv.kube_answered():  # no fresh credentials needed, but is there a cluster?
        if not r.exists(gcloud.cluster_describe(s)):
            return None
    elif not cluster_steps.credentials_if_cluster(r, s, say=False):
        return None
    return listed_head(r, s)[1]


def listed_head(r: Runner, s: Settings) -> tuple[bool, str | None]:
    """(kubectl answered, the Running head pod or None) from one `get pods`, asking nothing before it."""
    import json

    from .. import names
    from ..commands import kubectl

    result = r.query(kubectl.get(s, "pods", namespace=s.NAMESPACE,
                                 selector=f"ray.io/cluster={names.RAY_RELEASE},ray.io/node-type=head"),
                     ok_codes=range(256))
    if result is None or not result.ok:
        return False, None
    return True, head_among(json.loads(result.stdout or "{}").get("items", []))


def head_among(pods: list[dict[str, Any]]) -> str | None:
    """The Running head pod of our Ray cluster among pods (a namespace's `get pods`), or None."""
    from .. import names

    def labels(pod: dict[str, Any]) -> dict[str, str]:
        return (pod.get("metadata") or {}).get("labels") or {}

    running = [p["metadata"]["name"] for p in pods if serving(p) and labels(p).get("ray.io/cluster") ==
               names.RAY_RELEASE and labels(p).get("ray.io/node-type") == "head"]
    return running[0] if running else None


def kubectl_exec(s: Settings, pod: str) -> list[str]:
    """The head pod's bash, reading a script on stdin."""
    from ..commands import kubectl

    return kubectl.exec_head(s, pod, "bash", stdin=True)


def head(r: Runner, s: Settings) -> tuple[str, int | None]:
    """(the Ready head pod's name, the GPUs Ray sees or None if unknown), for what needs Ray itself (a job's
    submit). Dry runs: a placeholder, None."""
    found = ready_head(r, s, ray=True)
    if found is None:
        return "HEAD_POD", None
    name, items = found
    return name, ray_gpus(r, s, name, items)


def reading_head(r: Runner, s: Settings) -> str:
    """The Running head pod, for what only reads or signals files on /data (job.list, status, logs, stop): no
    Ray query (an `import ray; ray.init()` in the pod costs seconds). Dry runs: a placeholder."""
    found = ready_head(r, s)
    return "HEAD_POD" if found is None else found[0]


def ready_head(r: Runner, s: Settings, *, ray: bool = False) -> tuple[str, list[dict[str, Any]]] | None:
    """(the Running head pod's name, the Ray pods listed), asked once under the stale-context watch (a context
    that outlived its cluster: seconds, not minutes of dialing); no head, or one not Running: ToolError saying
    what to do. ray: the head must also be Ready (Ray in it answers). None in a dry run."""
    import json

    from .. import names
    from ..runner import NO_CONTEXT
    from ..tools import CommandFailed, ToolError
    from . import kube_context
    from .ray_steps import pods_argv

    with kube_context.watch(r, s):
        result = r.query(pods_argv(s))
    if result is None:
        return None
    if not result.ok:
        hint = (f" This machine's kubeconfig has no context for cluster {s.CLUSTER_NAME}: `invoke "
                f"cluster.credentials` fetches it (`invoke up` if the cluster is gone)."
                if NO_CONTEXT.search(result.stderr) else "")
        raise CommandFailed(f"cannot list the Ray pods: {result.stderr.strip()}{hint}", result.exit_code)
    items = json.loads(result.stdout or "{}").get("items", [])
    heads = [p for p in items if p.get("metadata", {}).get("labels", {}).get("ray.io/node-type") == "head"]
    if not heads:
        raise ToolError(f"no Ray head pod (labels ray.io/node-type=head, ray.io/cluster={names.RAY_RELEASE}) "
                        f"in namespace {s.NAMESPACE}: deploy the cluster with `invoke ray.deploy`.", 1)
    running = [p for p in heads if serving(p)]
    if not running:
        if leaving(heads[0]):  # Running still, until it is gone (`ray.delete`, a teardown, a restart of the spec)
            raise ToolError(f"the Ray head pod {heads[0]['metadata']['name']} is being deleted (a teardown, "
                            f"`ray.delete` or a restart of Ray's pods is under way): see `invoke ray.status`.", 1)
        phase = heads[0].get("status", {}).get("phase", "unknown")
        raise ToolError(f"the Ray head pod {heads[0]['metadata']['name']} is {phase}, not Running: see "
                        f"`invoke ray.status`.", 1)
    if ray:
        answering = [p for p in running if is_ready(p)]
        if not answering:
            raise ToolError(f"the Ray head pod {running[0]['metadata']['name']} is Running but not Ready: Ray in it "
                            f"is still starting, or fails its health check. `invoke ray.status` says which; try "
                            f"again once the head is Ready.", 1)
        running = answering
    return running[0]["metadata"]["name"], items


def ray_gpus(r: Runner, s: Settings, head: str, items: list[dict[str, Any]]) -> int | None:
    """What Ray in the head reports (one cheap exec); the Running workers' GPU limits if Ray cannot say."""
    import json

    from ..resources import ray_steps

    answer = r.query(ray_steps.gpu_query_argv(s, head), ok_codes=range(256), timeout=60)
    if answer is not None and answer.ok:
        try:
            return int(float(json.loads(answer.stdout.strip().splitlines()[-1])["gpus"]))
        except (ValueError, KeyError, IndexError):
            pass
    return worker_gpus(items)


def worker_gpus(items: list[dict[str, Any]]) -> int | None:
    """nvidia.com/gpu over Running worker pods; None when no worker declares any (GPU_NODES then decides)."""
    total, declared = 0, False
    for pod in items:
        if pod.get("metadata", {}).get("labels", {}).get("ray.io/node-type") != "worker":
            continue
        gpus = 0
        for container in pod.get("spec", {}).get("containers", []):
            limit = container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
            if limit is not None:
                declared = True
                gpus += int(limit)
        if serving(pod):
            total += gpus
    return total if declared else None


def query(r: Runner, s: Settings, script: str) -> Result | None:
    """Pipe a read-only script into the head pod. Dry run: show it, return None. 'No such run' is exit 3."""

    if r.dry:
        from ..runner import DRY_QUESTIONS
        from .ray_steps import pods_argv

        r.say(DRY_QUESTIONS)  # the pods (which one is the head), then the head itself
        r.show_command(pods_argv(s))
        r.show_command(kubectl_exec(s, "HEAD_POD"), stdin=script, stdin_label="run-dir reader")
        return None
    return ask(r, s, script)


def ask(r: Runner, s: Settings, script: str) -> Result:
    """_query's real run (not dry): the reader's answer, 'no such run' (exit 3) as an error."""
    from ..tools import ToolError

    result = r.query(kubectl_exec(s, reading_head(r, s)), stdin=script, ok_codes=(0, 3))
    if result is None:
        raise ToolError("the head pod was not asked (a dry run reads nothing)", 1)
    if result.exit_code == 3:
        raise ToolError(remote_error(result), 1)
    return result


def remote_error(result: Result) -> str:
    """What the script in the pod said on stderr, without kubectl's own last line for a remote command that
    failed ("command terminated with exit code N") nor the script's "error: " prefix."""
    lines = [line for line in result.stderr.strip().splitlines()
             if not line.startswith("command terminated with exit code ")]
    return "\n".join(lines).strip().removeprefix("error: ")
