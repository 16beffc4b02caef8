"""Model prefetch: PREFETCH_MODELS (default, parsing, validation), Job names, what a Job's status says, and the
step's place in the graph (after the cluster, the Secret and the Lustre claim; never after the GPU pool or Ray)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nemo_rl_gke import graph, jobspec, prefetch
from nemo_rl_gke.resources import all_steps, prefetch_steps
from nemo_rl_gke.resources import cluster_steps as cluster
from nemo_rl_gke.resources import ray_steps as ray
from nemo_rl_gke.resources import storage_steps as storage
from nemo_rl_gke.settings import DEFAULT_PREFETCH_MODELS, ConfigError, Settings, validate

GEMMA, QWEN = "google/gemma-3-27b-it", "Qwen/Qwen2.5-1.5B"


def make_settings(**overrides: object) -> Settings:
    base = dict(PROJECT_ID="my-nemo-project", CONTROL_PLANE_LOCATION="us-central1", NODE_LOCATION="us-central1-b",
                CLUSTER_NAME="nemo-rl")
    return validate(Settings(**{**base, **overrides}))  # type: ignore[arg-type]


# ---- settings ------------------------------------------------------------------------------------
def test_prefetch_default_is_the_model_of_the_tutorials_job() -> None:
    assert DEFAULT_PREFETCH_MODELS == jobspec.load("gemma3-gsm8k").model_name
    assert prefetch.models(make_settings()) == [GEMMA]


def test_prefetch_models_are_stripped_in_order_and_once() -> None:
    s = make_settings(PREFETCH_MODELS=f" {QWEN} ,{GEMMA},{QWEN}")
    assert prefetch.models(s) == [QWEN, GEMMA]


def test_prefetch_empty_setting_starts_nothing_but_teardowns_still_delete_earlier_jobs() -> None:
    """Nothing to start (done without asking), but the Jobs an earlier `up` started are deleted by label."""
    s = make_settings(PREFETCH_MODELS="")
    assert prefetch.models(s) == []
    (step,) = [step for step in all_steps(s) if step.name == prefetch_steps.PREFETCH]
    assert step.exists(None) is True and step.create(None) == "exists"  # no runner: nothing is asked or run
    assert step.delete is not None and step.present is not None


@pytest.mark.parametrize("value", [GEMMA, f"{GEMMA},{QWEN}", "meta-llama/Llama-3.1-8B-Instruct",
                                   "a/b", "under_score/x.y-z"])
def test_prefetch_settings_accept_hugging_face_ids(value: str) -> None:
    assert make_settings(PREFETCH_MODELS=value).PREFETCH_MODELS == value


@pytest.mark.parametrize("value", ["gemma-3-27b-it", "google/", "/gemma", "google/gemma/3", "google/gemma 3",
                                   "google/gemma--3", "google/gemma..3", f"{GEMMA},,{QWEN}", f"{GEMMA};{QWEN}",
                                   "google/-gemma", "google/gemma.", "google/gémma", "g/" + "x" * 97, "$(id)/x"])
def test_prefetch_settings_refuse_what_is_not_a_model_id(value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        make_settings(PREFETCH_MODELS=value)
    assert refused.value.key == "PREFETCH_MODELS"
    assert "owner/name" in str(refused.value) and "leave it empty" in str(refused.value)


# ---- names and states -----------------------------------------------------------------------------
def test_prefetch_job_names_are_dns_labels_unique_per_model() -> None:
    ids = [GEMMA, QWEN, "qwen/qwen2-5-1-5b", "a" * 96 + "/" + "b" * 96, "a" * 96 + "/" + "b" * 95]
    found = [prefetch.job_name(model) for model in ids]
    assert len(set(found)) == len(ids)
    for name in found:
        assert len(name) <= 63 and name[0].isalpha() and name[-1].isalnum(), name
        assert set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789-"), name
    assert prefetch.job_name(GEMMA).startswith("prefetch-google-gemma-3-27b-it-")


def job(model: str, *conditions: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": prefetch.job_name(model), "annotations": {prefetch.MODEL_ANNOTATION: model}},
            "status": {"conditions": list(conditions)} if conditions else {"active": 1}}


def test_prefetch_job_state_reads_the_conditions() -> None:
    listing = json.dumps({"kind": "List", "items": [
        job(GEMMA),
        job(QWEN, {"type": "Complete", "status": "True"}),
        job("x/failed", {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                         "message": "Job has reached the specified backoff limit"}),
        job("x/ending", {"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded"}),
        job("x/suspended", {"type": "Suspended", "status": "True"}, {"type": "Complete", "status": "False"}),
    ]})
    states = prefetch.job_states(listing)
    assert {m: st.state for m, st in states.items()} == {
        GEMMA: "running", QWEN: "complete", "x/failed": "failed", "x/ending": "failed", "x/suspended": "running"}
    assert states["x/failed"].why == "BackoffLimitExceeded: Job has reached the specified backoff limit"


def test_prefetch_job_states_of_one_object_and_of_nothing() -> None:
    assert prefetch.job_states(json.dumps(job(GEMMA)))[GEMMA].state == "running"
    assert prefetch.job_states("") == {}
    assert prefetch.job_states(json.dumps({"kind": "List", "items": [{"metadata": {"name": "other"}}]})) == {}


def test_prefetch_missing_models_are_those_without_a_job_that_has_not_failed() -> None:
    s = make_settings(PREFETCH_MODELS=f"{GEMMA},{QWEN},x/y")
    states = {GEMMA: prefetch.JobState("a", GEMMA, "running"), QWEN: prefetch.JobState("b", QWEN, "failed", "x")}
    assert prefetch_steps.missing_models(s, states) == [QWEN, "x/y"]


def test_prefetch_typical_times_come_from_facts() -> None:
    assert prefetch.typical_time(GEMMA) == "about 8 min"
    assert prefetch.typical_time(QWEN) == "about 30 s"
    assert prefetch.typical_time("x/y") == ""


# ---- the step in the graph ------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["standard", "autopilot"])
def test_prefetch_step_needs_the_cluster_secret_and_claim_only(mode: str) -> None:
    s = make_settings(CLUSTER_MODE=mode)
    steps = all_steps(s)
    step = next(st for st in steps if st.name == prefetch_steps.PREFETCH)
    assert set(step.deps) == {cluster.CREDENTIALS, storage.KSA, storage.SECRET, storage.PVC}
    assert step.layer == "storage" and step.parent == cluster.CLUSTER and step.delete is not None
    before = graph.needed_by(steps, [step.name])
    assert cluster.GPU_POOL not in before and ray.RELEASE not in before
    assert storage.LUSTRE in before and cluster.CLUSTER in before


def test_prefetch_step_is_off_up_s_critical_path() -> None:
    with_prefetch = all_steps(make_settings())
    without = all_steps(make_settings(PREFETCH_MODELS=""))
    assert graph.critical_path_seconds(with_prefetch) == graph.critical_path_seconds(without)
    assert graph.critical_path_seconds(with_prefetch, deleting=True) == graph.critical_path_seconds(
        without, deleting=True)


def test_prefetch_step_comes_after_the_claim_it_mounts() -> None:
    steps = all_steps(make_settings())
    order = [st.name for st in graph.order(steps)]
    assert order.index(storage.PVC) < order.index(prefetch_steps.PREFETCH)
