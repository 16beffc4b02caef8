"""The model prefetch step (storage layer): one Kubernetes Job per model of PREFETCH_MODELS downloads it into the
Hugging Face cache on /data as soon as the cluster and the Lustre claim exist, while the GPU pool and Ray come up.

`up` starts the Jobs and does not wait for them: the download is off the critical path, and whoever needs the
model next waits for it (`job.submit`: `wait_for_model`). The step exists when every model has a Job that has
not failed; a failed Job is deleted and started again by the next `up`. `down`/`clean.storage` delete our Jobs
(by label, also those of models no longer listed) before the claim they mount.
"""

from __future__ import annotations

from .. import names, prefetch
from ..commands import kubectl
from ..runner import Runner
from ..settings import Settings
from ..steps import Step
from . import cluster_steps as cluster
from . import storage_steps as storage
from .inventory import Inventory, KubeRef

PREFETCH = "storage.model-prefetch"
# The namespace (with the KSA), the token and the claim the Jobs use.
NEEDS = (cluster.CREDENTIALS, storage.KSA, storage.SECRET, storage.PVC)


# ---- argv ----------------------------------------------------------------------------------------
def list_argv(s: Settings) -> list[str]:
    return kubectl.get(s, "jobs", namespace=s.NAMESPACE, selector=prefetch.SELECTOR)


def delete_all_argv(s: Settings) -> list[str]:
    return kubectl.delete(s, "jobs", namespace=s.NAMESPACE, selector=prefetch.SELECTOR)


def delete_argv(s: Settings, job: str) -> list[str]:
    return kubectl.delete(s, "job", job, namespace=s.NAMESPACE)


# ---- actions -------------------------------------------------------------------------------------
def listed(r: Runner, s: Settings) -> dict[str, prefetch.JobState]:
    """model -> state of our prefetch Jobs in the namespace ({} in a dry run, or with no cluster to ask)."""
    result = r.query(list_argv(s))
    if result is None:
        return {}
    if not result.ok:
        if result.not_found:  # the namespace or the kubeconfig context is gone: so are the Jobs
            return {}
        raise r.failure(result)
    return prefetch.job_states(result.stdout)


def missing_models(s: Settings, states: dict[str, prefetch.JobState]) -> list[str]:
    """The models without a Job that is running or complete (pure)."""
    return [m for m in prefetch.models(s) if m not in states or states[m].state == "failed"]


def start(r: Runner, s: Settings) -> None:
    """Start a Job for each model that has none (a failed one is deleted first: a Job's pod template is
    immutable, so only a new Job tries again). Does not wait for the downloads."""
    states = listed(r, s)
    wanted = missing_models(s, states) if not r.dry else prefetch.models(s)
    for model in wanted:
        if model in states:
            r.say(f"the earlier download of {model} failed ({states[model].why}): starting it again", err=True)
            r.run(delete_argv(s, states[model].name))
    if not wanted:
        return
    r.run(kubectl.apply_stdin(s), stdin=prefetch.jobs_yaml(s, wanted),
          stdin_label=f"manifests/{prefetch.TEMPLATE} rendered ({len(wanted)} Job(s): {', '.join(wanted)})")
    if not r.dry:
        times = [f"{m} {prefetch.typical_time(m)}".strip() for m in wanted]
        r.say(f"model download started in the cluster ({'; '.join(times)}), into {names.LUSTRE_PVC} at "
              f"{prefetch.HF_HOME}; it goes on after `up`, and `job.submit` waits for it if needed.", err=True)


def stop(r: Runner, s: Settings) -> None:
    """Delete our prefetch Jobs (a download still running stops; what it wrote stays in the cache)."""
    r.run(delete_all_argv(s))


def steps(s: Settings, inventory: Inventory | None = None) -> list[Step]:
    """The prefetch step. Its existence comes from the inventory's one `kubectl get` of the namespace (the Jobs by
    name); what is present, for a delete, from our label (Jobs of models no longer listed too). With
    PREFETCH_MODELS empty there is nothing to start, but the Jobs an earlier `up` started may still be there,
    their ended pods mounting the Lustre claim (Kubernetes keeps a claim while any pod placed on a node mounts
    it, whatever its phase): the step stays, done without asking, for the teardowns to delete them."""
    models = prefetch.models(s)
    inv = inventory or Inventory(s)
    if not models:
        step = Step(PREFETCH, "model prefetch: none (PREFETCH_MODELS is empty; earlier Jobs go with teardowns)",
                    lambda r: True, lambda r: "exists", lambda r: stop(r, s),
                    # No parent: the leftover scan asks it by label (the Jobs of a cluster that is gone are gone).
                    deps=NEEDS, present=lambda r: bool(listed(r, s)), create_seconds=0, delete_seconds=2)
        return [step] if inventory is not None else inv.track([step])
    refs = [KubeRef("jobs.batch", "Job", prefetch.job_name(m), s.NAMESPACE) for m in models]
    exists = inv.in_cluster(PREFETCH, refs, lambda items: not missing_models(s, prefetch.states_of(items)),
                            lambda r: not missing_models(s, listed(r, s)))
    title = f"model prefetch {', '.join(models)} -> {prefetch.HF_HOME} (Job on the CPU pool)"
    step = Step(PREFETCH, title, exists, lambda r: start(r, s), lambda r: stop(r, s),
                deps=NEEDS, parent=cluster.CLUSTER,
                present=lambda r: bool(listed(r, s)),
                # `up` only applies the Jobs (seconds); the download itself runs on in the cluster.
                create_seconds=2, delete_seconds=2)
    return [step] if inventory is not None else inv.track([step])


# ---- job.submit ----------------------------------------------------------------------------------
WAIT_TIMEOUT_SECONDS = prefetch.DEADLINE_SECONDS + 600  # the Job gives up by itself before this


def prefetched(r: Runner, s: Settings, model: str) -> dict[str, prefetch.JobState] | None:
    """The prefetch Jobs now, if model is one the settings prefetch (None: not one, or a dry run): the first
    answer wait_for_model needs, for a caller to ask beside its own reads."""
    return listed(r, s) if model in prefetch.models(s) and not r.dry else None


def wait_for_model(r: Runner, s: Settings, model: str, now: dict[str, prefetch.JobState] | None = None) -> None:
    """Before a job starts its driver: if a prefetch Job of its model is still downloading, wait for it (the
    driver would otherwise download the same files again, racing it). A failed or missing prefetch is said and
    the submission goes on: the driver downloads the model itself. now: the Jobs as `prefetched` just read them."""
    if model not in prefetch.models(s):
        return
    name = prefetch.job_name(model)
    if r.dry:  # a dry run asks nothing, so it has nothing to wait for
        return
    found: dict[str, prefetch.JobState] = {}
    first = [now] if now is not None else []

    def done() -> bool:
        found.update(first.pop() if first else listed(r, s))
        return model not in found or found[model].state != "running"

    if not done():
        typical = prefetch.typical_time(model)
        r.say(f"{model} is still being downloaded by the prefetch Job {name}{f' ({typical} in all)' if typical else ''}"
              f": waiting for it rather than downloading it twice", err=True)
        if not r.poll(f"model prefetch {model} (Job {name})", done, timeout=WAIT_TIMEOUT_SECONDS):
            r.say(f"warning: the prefetch of {model} is still running; the driver joins its download", err=True)
            return
    state = found.get(model)
    if state is None:
        r.say(f"note: no prefetch Job for {model} (deleted?): the driver downloads it", err=True)
    elif state.state == "failed":
        r.say(f"warning: the prefetch of {model} failed ({state.why}); the driver downloads it itself (`kubectl "
              f"logs job/{name} --namespace={s.NAMESPACE}` shows why; `invoke up` starts the prefetch again)",
              err=True)
