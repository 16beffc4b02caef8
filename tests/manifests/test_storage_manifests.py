"""The storage objects (Lustre PV and PVC, ServiceAccount, Namespace, Secret) validated with
kubernetes-validate --strict, and the PV/PVC's contract with Managed Lustre and the Ray pods."""

from __future__ import annotations

import pytest
import yaml

from nemo_rl_gke import render
from nemo_rl_gke.commands import kube_objects
from nemo_rl_gke.settings import Settings, validate
from support.schemas import SchemaError, validate_builtin

IP = "10.90.0.2"


def make_settings(**overrides) -> Settings:
    base = dict(PROJECT_ID="my-nemo-project", CONTROL_PLANE_LOCATION="us-central1",
                NODE_LOCATION="us-central1-b", CLUSTER_NAME="nemo-rl", HF_TOKEN="hf_PLANTEDsecretVALUE1234",
                WANDB_API_KEY="wandbPLANTEDsecretVALUE5678")
    return validate(Settings(**{**base, **overrides}))


def pv_pvc(s: Settings, capacity: int = 18000) -> tuple[dict, dict]:
    pv, pvc = kube_objects.pv_pvc_yaml(s, IP, capacity)
    return yaml.safe_load(pv), yaml.safe_load(pvc)


@pytest.mark.parametrize("namespace", ["default", "nemo"])
def test_storage_manifests_pv_is_strictly_valid(namespace):
    validate_builtin(pv_pvc(make_settings(NAMESPACE=namespace))[0])


@pytest.mark.parametrize("namespace", ["default", "nemo"])
def test_storage_manifests_pvc_is_strictly_valid(namespace):
    validate_builtin(pv_pvc(make_settings(NAMESPACE=namespace))[1])


@pytest.mark.parametrize("namespace", ["no", "y", "1e5", "0123"])
def test_storage_manifests_a_namespace_that_looks_like_a_number_or_a_boolean_stays_a_string_to_go(namespace,
                                                                                                   tmp_path):
    """The templates' namespace, read by Go's YAML (kubectl's, here the real helm's): a DNS label such as `no`,
    `y`, `1e5` or `0123` is a boolean or a number to it unless quoted, and kubectl's apply then fails."""
    import shutil
    import subprocess

    from nemo_rl_gke import prefetch

    helm = shutil.which("helm")
    if helm is None:
        pytest.skip("needs helm on PATH (nox adds .tools/bin)")
    chart = tmp_path / "kinds"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: kinds\nversion: 0.1.0\n")
    (chart / "templates" / "kinds.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kinds}\ndata:\n"
        "  namespace: {{ if hasKey .Values.metadata \"namespace\" }}{{ kindOf .Values.metadata.namespace | quote }}"
        "{{ else }}{{ kindOf .Values.spec.claimRef.namespace | quote }}{{ end }}\n")
    s = make_settings(NAMESPACE=namespace)
    pv, pvc = kube_objects.pv_pvc_yaml(s, IP, 18000)
    for text in (pv, pvc, prefetch.job_yaml(s, "google/gemma-3-27b-it")):
        done = subprocess.run([helm, "template", "k", str(chart), "--values=-"], input=text, capture_output=True,
                              text=True, check=False)
        assert done.returncode == 0, done.stderr
        assert yaml.safe_load(done.stdout)["data"]["namespace"] == "string", (namespace, text[:300])


@pytest.mark.parametrize("namespace", ["default", "nemo"])
def test_storage_manifests_service_account_docs_are_strictly_valid(namespace):
    for doc in kube_objects.service_account(make_settings(NAMESPACE=namespace)):
        validate_builtin(doc)


def test_storage_manifests_secret_is_strictly_valid():
    validate_builtin(kube_objects.secret(make_settings()))


def test_storage_manifests_strict_validation_rejects_an_unknown_field():
    pv, _ = pv_pvc(make_settings())
    pv["spec"]["csi"]["mountOptions"] = ["x"]
    with pytest.raises(SchemaError):
        validate_builtin(pv)


def test_storage_manifests_pv_points_at_the_instance():
    csi = pv_pvc(make_settings())[0]["spec"]["csi"]
    assert csi == {"driver": "lustre.csi.storage.gke.io", "volumeHandle": "my-nemo-project/us-central1-b/nemo-lustre",
                   "volumeAttributes": {"ip": IP, "filesystem": "lustrefs"}}


def test_storage_manifests_pv_capacity_is_the_instance_size():
    assert pv_pvc(make_settings(), 27000)[0]["spec"]["capacity"] == {"storage": "27000Gi"}


def test_storage_manifests_pv_is_rwx_retain_and_claimed_by_our_pvc():
    spec = pv_pvc(make_settings(NAMESPACE="nemo"))[0]["spec"]
    assert (spec["accessModes"], spec["persistentVolumeReclaimPolicy"], spec["claimRef"]) == (
        ["ReadWriteMany"], "Retain", {"namespace": "nemo", "name": "lustre-pvc"})


def test_storage_manifests_pvc_binds_the_pv_by_name():
    pvc = pv_pvc(make_settings())[1]
    assert (pvc["spec"]["volumeName"], pvc["spec"]["storageClassName"]) == ("lustre-pv", "")


def test_storage_manifests_pv_handle_uses_lustre_zone():
    s = make_settings(LUSTRE_ZONE="us-central1-a")
    assert pv_pvc(s)[0]["spec"]["csi"]["volumeHandle"] == "my-nemo-project/us-central1-a/nemo-lustre"


def test_storage_manifests_missing_variable_fails_the_render():
    values = kube_objects.pv_values(make_settings(), IP, 18000)
    del values["LUSTRE_IP"]
    with pytest.raises(render.RenderError):
        render.render_file("lustre-pv.yaml", values)


def test_storage_manifests_rendered_files_hold_no_secret():
    s = make_settings()
    text = "".join(kube_objects.pv_pvc_yaml(s, IP, 18000)) + kube_objects.to_yaml(kube_objects.service_account(s))
    assert s.HF_TOKEN not in text and s.WANDB_API_KEY not in text
