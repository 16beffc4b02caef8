"""kubectl and batch/v1 Jobs (our model prefetch): `apply` stores a Job like any object (kubectl_objects), timed
here when it is created; `get job(s)` shows the status the Job controller would by now; `delete job(s)` takes
names or --selector.

A Job's pod mounts the claim its template names and runs `hf download REPO` (nothing else is known: such a Job
fails). It completes after the model's download time (FACTS §6 × FAKECLOUD_TIME_SCALE; fakecloud/hf_cache.py),
and the model is then in the HF cache on that volume: $FAKECLOUD_STATE/lustre/<instance>/<HF_HOME below the
mount>, the /data of the fake pods, where the NeMo RL stand-in finds it. The files appear when someone looks
(`kubectl get` of the Job, or the stand-in driver calling settle()). A repo in FAKECLOUD_HF_NO_ACCESS (a gated
model the token may not read) fails every try with a 403 and the Job ends Failed (BackoffLimitExceeded) after
backoffLimit retries. Without its claim (or the claim's PV and instance) the pod never starts: the Job stays
active, as on GKE.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from .. import hf_cache
from ..core import Ctx, State, command, public, time_scale
from . import kubectl_objects as objects
from .kubectl_objects import delete_targets, key_of, list_objects, namespace_of, store_kind, with_status

objects.ALIASES.update({"job": "Job", "jobs": "Job"})
JOB_WORDS = ("job", "jobs", "job.batch", "jobs.batch")
TRY_SECONDS = 5.0  # one failing try of `hf download` (a 403 comes back at once; the pod start dominates)


def _stamp(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def _downloads(job: dict[str, Any]) -> list[tuple[str, str]] | None:
    """(model, HF_HOME) of each container, or None when a container runs something other than `hf download`."""
    out = []
    for container in job.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
        argv = list(container.get("command") or []) + list(container.get("args") or [])
        if argv[:2] != ["hf", "download"] or len(argv) < 3:
            return None
        env = {e.get("name"): e.get("value") for e in container.get("env") or []}
        out.append((str(argv[2]), str(env.get("HF_HOME") or "/root/.cache/huggingface")))
    return out


def cache_dirs(state: State, skind: str, job: dict[str, Any]) -> list[tuple[str, Path]] | None:
    """(model, its HF cache directory in the fake's Lustre files) for each download; None when the pod cannot
    mount its volume (no claim, PV or instance)."""
    spec = job.get("spec", {}).get("template", {}).get("spec", {})
    namespace = job.get("metadata", {}).get("namespace", "default")
    mounts = {m.get("name"): m.get("mountPath", "") for c in spec.get("containers", []) for m in
              c.get("volumeMounts") or []}
    downloads = _downloads(job) or []
    out = []
    for volume in spec.get("volumes") or []:
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        mount = mounts.get(volume.get("name"))
        if not claim or not mount:
            continue
        pvc = state.get(skind, key_of("PersistentVolumeClaim", namespace, claim))
        if (pvc or {}).get("_phase") != "Bound":  # the pod is not scheduled until its claim is bound
            return None
        pv = state.get(skind, key_of("PersistentVolume", "", (pvc or {}).get("spec", {}).get("volumeName", "")))
        csi = (pv or {}).get("spec", {}).get("csi") or {}
        if csi.get("driver") != objects.LUSTRE_CSI_DRIVER:
            return None
        files = state.root / "lustre" / str(csi.get("volumeHandle", "")).rsplit("/", 1)[-1]
        if not files.is_dir():
            return None
        for model, hf_home in downloads:
            if hf_home == mount or hf_home.startswith(mount.rstrip("/") + "/"):
                out.append((model, files / hf_home[len(mount):].lstrip("/")))
    return out if out or not downloads else None


def _on_create(ctx: Ctx, job: dict[str, Any]) -> None:
    """When the Job ends and how: decided at creation, with this call's FAKECLOUD_* settings."""
    downloads = _downloads(job)
    skind = store_kind(ctx)
    denied = {r for r in os.environ.get("FAKECLOUD_HF_NO_ACCESS", "").split(",") if r}
    tries = int(job.get("spec", {}).get("backoffLimit", 6)) + 1
    job["_started"] = time.time()
    if cache_dirs(ctx.state, skind, job) is None:
        job["_done_at"] = None  # the pod waits for its volume forever
    elif downloads is None or any(model in denied for model, _ in downloads):
        job["_outcome"], job["_done_at"] = "Failed", time.time() + TRY_SECONDS * tries * time_scale()
        job["_why"] = "unknown command" if downloads is None else "403 Client Error: cannot access gated repo"
    else:
        seconds = max((hf_cache.download_seconds(model) for model, _ in downloads), default=0.0)
        job["_outcome"], job["_done_at"] = "Complete", time.time() + seconds * time_scale()


def view(job: dict[str, Any]) -> dict[str, Any]:
    """The Job as the API shows it now."""
    out = public(job)
    started = job.get("_started", job.get("_created", time.time()))
    done_at = job.get("_done_at")
    status: dict[str, Any] = {"startTime": _stamp(started)}
    if done_at is None or time.time() < done_at:
        status.update({"active": 1, "ready": 0 if done_at is None else 1})
    elif job.get("_outcome") == "Complete":
        status.update({"succeeded": 1, "completionTime": _stamp(done_at), "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": _stamp(done_at)}]})
    else:
        status.update({"failed": int(job.get("spec", {}).get("backoffLimit", 6)) + 1, "conditions": [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
             "message": "Job has reached the specified backoff limit", "lastTransitionTime": _stamp(done_at)}]})
    out["status"] = status
    return out


objects.ON_CREATE["Job"] = _on_create
objects.STATUS_VIEWS["Job"] = view


def settle(state: State, context: str) -> None:
    """Fill the cache of every Job of the cluster that has completed by now (once per Job)."""
    skind = f"k8s:{context}"
    for key, job in state.items(skind).items():
        if job.get("kind") != "Job" or job.get("_filled") or job.get("_outcome") != "Complete":
            continue
        if job.get("_done_at") is None or time.time() < job["_done_at"]:
            continue
        for _model, directory in cache_dirs(state, skind, job) or []:
            hf_cache.fill(directory, _model)
        with state.locked():
            current = state.get(skind, key)
            if current is not None:
                state.put(skind, key, {**current, "_filled": True})


def running_download(state: State, context: str, model: str) -> float | None:
    """Seconds until a prefetch Job of `model` still running completes it (None: no such Job)."""
    for job in state.items(f"k8s:{context}").values():
        if job.get("kind") != "Job" or job.get("_outcome") != "Complete" or job.get("_done_at") is None:
            continue
        if model in [m for m, _ in _downloads(job) or []] and time.time() < job["_done_at"]:
            return float(job["_done_at"]) - time.time()
    return None


def _not_found(name: str) -> str:
    return f'Error from server (NotFound): jobs.batch "{name}" not found'


def _get(ctx: Ctx) -> int:
    skind = store_kind(ctx)
    ctx.work()
    namespace = None if ctx.flag("--all-namespaces") else namespace_of("Job", None, ctx)
    if ctx.positionals:
        found = [ctx.state.get(skind, key_of("Job", namespace or "", n)) for n in ctx.positionals]
        views = [with_status(job) for job in found if job is not None]
        missing = [n for n, job in zip(ctx.positionals, found, strict=True) if job is None]
    else:
        views = [with_status(job) for job in list_objects(ctx, "Job", namespace, str(ctx.flag("--selector", "")))]
        missing = []
    if len(ctx.positionals) == 1 and views:
        ctx.emit(views[0])
    elif views or not ctx.positionals:
        ctx.emit({"apiVersion": "v1", "kind": "List", "items": views})
    for name in missing:
        ctx.err(_not_found(name))
    settle(ctx.state, str(ctx.flag("--context")))  # after the views: every Job shown complete has filled the cache
    return 1 if missing else 0


def _delete(ctx: Ctx) -> int:
    skind = store_kind(ctx)
    namespace, names = delete_targets(ctx, "Job")
    ctx.work()
    code = 0
    for name in names:
        if ctx.state.delete(skind, key_of("Job", namespace, name)):
            ctx.out(f'job.batch "{name}" deleted')
            # kubectl's default cascade (background): the garbage collector deletes the Job's pods, which Kubernetes
            # labels with its name (ended ones too, which still hold a claim they mount). The fake does it at once.
            for pod in list_objects(ctx, "Pod", namespace, f"batch.kubernetes.io/job-name={name}"):
                ctx.state.delete(skind, key_of("Pod", namespace, pod["metadata"]["name"]))
        elif not ctx.flag("--ignore-not-found"):
            ctx.err(_not_found(name))
            code = 1
    if not names:
        ctx.out("No resources found")  # kubectl delete: on stdout (o.Out), unlike get's "No resources found in …"
    return code


for _word in JOB_WORDS:
    command("kubectl", "get", _word, latency=0.3)(_get)
    command("kubectl", "delete", _word, mutating=True, latency=2)(_delete)
