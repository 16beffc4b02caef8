"""Model prefetch, pure: PREFETCH_MODELS -> one Kubernetes Job per model (manifests/model-prefetch-job.yaml), the
Jobs' names and labels, and what a listed Job's status says (complete, failed, running).

`up` applies these Jobs as soon as the cluster and the Lustre claim exist, so the model download (gemma-3-27b-it:
about 55 GB, 8 min, FACTS §6) runs while the GPU pool and Ray come up; `job.submit` waits for a download still
running instead of racing it. No processes here (resources/prefetch_steps.py runs them).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from . import names, podpaths, raychart, render
from .settings import Settings

TEMPLATE = "model-prefetch-job.yaml"
COMPONENT = "model-prefetch"
# Where the Job keeps the repo id it downloads (a label value cannot hold the '/').
MODEL_ANNOTATION = "nemo-rl-gke/model"
SELECTOR = f"app.kubernetes.io/managed-by={names.MANAGED_BY},app.kubernetes.io/component={COMPONENT}"
# The Job gives up after this long (a stalled download must not hold `job.submit` forever).
DEADLINE_SECONDS = 3 * 3600
# Typical download into the HF cache on Lustre (FACTS §6), for messages; other models: unknown.
TYPICAL_SECONDS = {"google/gemma-3-27b-it": 480.0, "Qwen/Qwen2.5-1.5B": 30.0}
HF_HOME = podpaths.HF_HOME  # the one cache the Jobs fill (the Ray pods' and the drivers')
_NOT_DNS = re.compile(r"[^a-z0-9]+")


def models(s: Settings) -> list[str]:
    """PREFETCH_MODELS as a list: stripped, in order, each once ([] when empty)."""
    found = [repo.strip() for repo in s.PREFETCH_MODELS.split(",") if repo.strip()]
    return list(dict.fromkeys(found))


def job_name(model: str) -> str:
    """A Job name for a repo id: readable, a DNS label (the Job controller puts it in a label: at most 63), and
    unique per id (a hash of the id, since `Qwen/Qwen2.5-1.5B` and `qwen/qwen2-5-1-5b` read the same)."""
    slug = _NOT_DNS.sub("-", model.lower()).strip("-")
    digest = hashlib.sha256(model.encode()).hexdigest()[:6]
    return f"prefetch-{slug}"[:55].rstrip("-") + f"-{digest}"


def job_yaml(s: Settings, model: str) -> str:
    """The Job that downloads one model (YAML text, rendered from the template)."""
    # Standard: the CPU pool by name (2 CPU / 4 GiB fit beside the Ray head on one node); Autopilot has no pools
    # (an empty selector: a general-purpose node).
    pool = raychart.head_pool(s)
    values: dict[str, object] = {
        "JOB_NAME": job_name(model), "NAMESPACE": s.NAMESPACE, "COMPONENT": COMPONENT,
        "MODEL_ANNOTATION": MODEL_ANNOTATION, "MODEL": model, "DEADLINE_SECONDS": DEADLINE_SECONDS,
        "NODE_SELECTOR": json.dumps({"cloud.google.com/gke-nodepool": pool} if pool else {}),
        "IMAGE": s.NEMO_RL_IMAGE, "HF_HOME": HF_HOME, "SECRET_NAME": names.SECRET_NAME,
        "DATA": podpaths.DATA, "PVC_NAME": names.LUSTRE_PVC,
    }
    text = render.render_file(TEMPLATE, values)
    job = render.load_all(text)[0]
    # Settings validated the id; this guards the template: the id must come out as one argv word, unchanged.
    if job["spec"]["template"]["spec"]["containers"][0]["command"][2] != model:
        raise render.RenderError(f"manifests/{TEMPLATE}: the model id {model!r} did not render as itself")
    return text


def jobs_yaml(s: Settings, wanted: list[str] | None = None) -> str:
    """The Jobs of `wanted` (default: every model of PREFETCH_MODELS) as one multi-document YAML text."""
    return "---\n".join(job_yaml(s, model) for model in (models(s) if wanted is None else wanted))


@dataclass(frozen=True)
class JobState:
    name: str
    model: str
    state: str  # complete | failed | running
    why: str = ""  # for failed: the Job's reason and message


def job_state(job: dict[str, Any]) -> JobState:
    """What a Job's status says. Kubernetes marks the end with a condition (Complete, or Failed with a reason
    such as BackoffLimitExceeded or DeadlineExceeded); 1.31+ first adds SuccessCriteriaMet / FailureTarget."""
    meta = job.get("metadata") or {}
    model = str((meta.get("annotations") or {}).get(MODEL_ANNOTATION, ""))
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") in ("Complete", "SuccessCriteriaMet"):
            return JobState(str(meta.get("name", "")), model, "complete")
        if condition.get("type") in ("Failed", "FailureTarget"):
            why = ": ".join(str(condition[k]) for k in ("reason", "message") if condition.get(k))
            return JobState(str(meta.get("name", "")), model, "failed", why or "failed")
    return JobState(str(meta.get("name", "")), model, "running")


def job_states(list_json: str) -> dict[str, JobState]:
    """model -> state of the prefetch Jobs in a `kubectl get jobs -o json` listing (Jobs of other models too)."""
    body = json.loads(list_json or "{}")
    items = body.get("items", [body]) if body.get("kind", "").endswith("List") else [body]
    return states_of(items)


def states_of(items: list[dict[str, Any]]) -> dict[str, JobState]:
    """model -> state of the prefetch Jobs among listed objects (objects of other kinds are skipped)."""
    states = [job_state(item) for item in items if item and item.get("kind", "Job") == "Job"]
    return {state.model: state for state in states if state.model}


def typical_time(model: str) -> str:
    """'about 8 min' for a model FACTS §6 knows, else ''."""
    seconds = TYPICAL_SECONDS.get(model)
    if seconds is None:
        return ""
    return f"about {seconds / 60:.0f} min" if seconds >= 90 else f"about {seconds:.0f} s"
