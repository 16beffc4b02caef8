"""The model prefetch Jobs (manifests/model-prefetch-job.yaml rendered by nemo_rl_gke.prefetch) validated with
kubernetes-validate --strict, and their contract: the image's own `hf download` as an argv list, the one HF cache
on the Lustre claim, the token only by reference to our Secret, the CPU pool on Standard."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from nemo_rl_gke import names, prefetch
from nemo_rl_gke.settings import Settings, validate
from support.fake import TEST_HF_TOKEN
from support.schemas import SchemaError, validate_builtin

MODES = ["standard", "autopilot"]


def make_settings(**overrides: object) -> Settings:
    base = dict(PROJECT_ID="my-nemo-project", CONTROL_PLANE_LOCATION="us-central1", NODE_LOCATION="us-central1-b",
                CLUSTER_NAME="nemo-rl", HF_TOKEN=TEST_HF_TOKEN,
                PREFETCH_MODELS="google/gemma-3-27b-it,Qwen/Qwen2.5-1.5B")
    return validate(Settings(**{**base, **overrides}))


def jobs(s: Settings) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(prefetch.jobs_yaml(s)) if doc]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("namespace", ["default", "nemo"])
def test_prefetch_manifests_jobs_are_strictly_valid(mode: str, namespace: str) -> None:
    docs = jobs(make_settings(CLUSTER_MODE=mode, NAMESPACE=namespace))
    assert [doc["kind"] for doc in docs] == ["Job", "Job"]
    for doc in docs:
        validate_builtin(doc)


def test_prefetch_manifests_strict_validation_rejects_an_unknown_field() -> None:
    doc = jobs(make_settings())[0]
    doc["spec"]["template"]["spec"]["containers"][0]["downloadTo"] = "/data"
    with pytest.raises(SchemaError):
        validate_builtin(doc)


def test_prefetch_manifests_one_job_per_model_runs_hf_download_as_an_argv_list() -> None:
    docs = jobs(make_settings())
    commands = [doc["spec"]["template"]["spec"]["containers"][0]["command"] for doc in docs]
    assert commands == [["hf", "download", "google/gemma-3-27b-it", "--quiet"],
                        ["hf", "download", "Qwen/Qwen2.5-1.5B", "--quiet"]]
    assert [doc["metadata"]["name"] for doc in docs] == [prefetch.job_name(m) for m in ("google/gemma-3-27b-it",
                                                                                          "Qwen/Qwen2.5-1.5B")]
    assert [doc["metadata"]["annotations"][prefetch.MODEL_ANNOTATION] for doc in docs] == [
        "google/gemma-3-27b-it", "Qwen/Qwen2.5-1.5B"]


def test_prefetch_manifests_fill_the_one_hf_cache_on_the_lustre_claim() -> None:
    pod = jobs(make_settings())[0]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert {"name": "HF_HOME", "value": "/data/huggingface"} in container["env"]
    assert container["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]
    assert pod["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": names.LUSTRE_PVC}}]
    assert container["image"] == "nvcr.io/nvidia/nemo-rl:v0.5.0"


def test_prefetch_manifests_token_only_by_reference_to_our_secret() -> None:
    s = make_settings()
    text = prefetch.jobs_yaml(s)
    assert TEST_HF_TOKEN not in text
    env = {e["name"]: e for e in jobs(s)[0]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HF_TOKEN"] == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
        "name": names.SECRET_NAME, "key": "HF_TOKEN", "optional": True}}}


@pytest.mark.parametrize(("mode", "selector"), [("standard", {"cloud.google.com/gke-nodepool": "default-pool"}),
                                                ("autopilot", {})])
def test_prefetch_manifests_run_on_the_cpu_pool(mode: str, selector: dict[str, str]) -> None:
    pod = jobs(make_settings(CLUSTER_MODE=mode))[0]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == selector
    assert "tolerations" not in pod  # the GPU nodes' nvidia.com/gpu taint keeps it off them
    assert "nvidia.com/gpu" not in str(pod["containers"][0]["resources"])


def test_prefetch_manifests_labels_select_every_prefetch_job() -> None:
    for doc in jobs(make_settings()):
        labels = doc["metadata"]["labels"]
        wanted = dict(term.split("=") for term in prefetch.SELECTOR.split(","))
        assert wanted.items() <= labels.items()
        assert doc["spec"]["backoffLimit"] >= 1 and doc["spec"]["activeDeadlineSeconds"] == prefetch.DEADLINE_SECONDS
        assert doc["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
