from __future__ import annotations

from pathlib import Path

import pytest

from nemo_rl_gke import settings
from nemo_rl_gke.settings import ConfigError, Settings, load, validate
from support.fake import read_env_example


def base(**overrides) -> Settings:
    values = {k: v for k, v in read_env_example().items() if k in settings.KEYS}
    return Settings(**settings.coerce({**values, **overrides}))


def test_env_example_lists_every_key_and_validates():
    example = read_env_example()
    assert set(settings.KEYS) <= set(example), set(settings.KEYS) - set(example)
    validate(base())


@pytest.mark.parametrize("key,value", [
    ("PROJECT_ID", "Bad_Project"), ("PROJECT_ID", "short"), ("PROJECT_ID", "ends-with-hyphen-"),
    ("PROJECT_ID", ""),
    ("CONTROL_PLANE_LOCATION", "us-central1-b"), ("CONTROL_PLANE_LOCATION", "mars"),
    ("NODE_LOCATION", "us-central1"), ("NODE_LOCATION", "europe-west4-b"),
    ("LUSTRE_ZONE", "europe-west4-a"), ("LUSTRE_ZONE", "zone"),
    ("CLUSTER_NAME", "Nemo"), ("CLUSTER_NAME", "x" * 41), ("CLUSTER_NAME", "-lead"),
    ("GPU_TYPE", "a100"), ("GPU_TYPE", "nvidia-h100-80gb"),
    ("CLUSTER_MODE", "hybrid"),
    ("GKE_VERSION", "1.30.0-gke.1"), ("GKE_VERSION", "1.32"), ("GKE_VERSION", "1.32.1-gke.1000000"),
    ("KSA_NAME", "Generic_KSA"), ("NAMESPACE", "x" * 64),
    ("GS_BUCKET", "ab"), ("GS_BUCKET", "google-bucket"), ("GS_BUCKET", "goog-x"), ("GS_BUCKET", "UPPER"),
    ("GVNIC_NETWORK_PREFIX", "1gvnic"), ("GVNIC_NETWORK_PREFIX", "g" * 56),
    ("RDMA_NETWORK_PREFIX", "rdma_"), ("RDMA_NETWORK_PREFIX", "nemo-gvnic"),
    ("NETWORK", "Default"), ("RESERVATION", "bad reservation"), ("RESERVATION", "projects/x/reservations/r"),
    ("GPU_NODES", "0"), ("GPU_NODES", "65"), ("GPU_NODES", "two"),
    ("LUSTRE_NAME", "Lustre"), ("LUSTRE_CAPACITY_GIB", "1000"), ("LUSTRE_CAPACITY_GIB", "18001"),
    ("LUSTRE_CAPACITY_GIB", "9000"), ("LUSTRE_CAPACITY_GIB", "963000"),
    ("LUSTRE_THROUGHPUT", "300"), ("LUSTRE_THROUGHPUT", "fast"),
    ("NEMO_RL_IMAGE", "nemo-rl"), ("NEMO_RL_IMAGE", "nvcr.io/nvidia/nemo-rl:v9.9.9"),
    ("RAY_VERSION", "latest"), ("PROJECT_NUMBER", "12ab"),
    ("HF_TOKEN", "hf_ with space"), ("WANDB_API_KEY", "short"), ("HF_TOKEN", "hf_tökenvalue1234"),
    ("HF_TOKEN", "a" * 5000), ("WANDB_API_KEY", "k" * 513),
    # ASCII only: other scripts' digits match `\d` but not gcloud.
    ("GKE_VERSION", "1.\u0663\u0662.2-gke.1422000"), ("GPU_NODES", "\uff12"),
    ("LUSTRE_THROUGHPUT", "\u0665\u0660\u0660"),
    ("RAY_VERSION", "2.\u0664\u0669.2"), ("PROJECT_NUMBER", "\u0661" * 12),
    # Cloud Storage naming rules.
    ("GS_BUCKET", "192.168.5.4"), ("GS_BUCKET", "my-g00gle-data"), ("GS_BUCKET", "a..b"), ("GS_BUCKET", "x" * 64),
    ("GS_BUCKET", ".".join(["x" * 63] * 4)), ("GS_BUCKET", "a." + "x" * 64), ("GS_BUCKET", "-lead"),
    # Names that collide with our own derived names.
    ("NETWORK", "nemo-gvnic-net"), ("NETWORK", "nemo-rdma-net"),
    ("GS_BUCKET_EXISTING", "maybe"),
    ("NCCL_INSTALLER_REF", ""), ("NCCL_INSTALLER_REF", "../../evil"), ("NCCL_INSTALLER_REF", "a b"),
    ("NCCL_INSTALLER_REF", "master"), ("NCCL_INSTALLER_REF", "2DA1C92FF7BD772A2C833710BB6C21DCFE6DFAAE"),
    # Numbers past Python's int-string limit.
    ("GPU_NODES", "9" * 5000), ("LUSTRE_CAPACITY_GIB", "9" * 10000), ("GKE_VERSION", "1.32.2-gke." + "9" * 5000),
])
def test_validate_rejects_bad_value_naming_the_key(key, value):
    with pytest.raises(ConfigError) as caught:
        validate(base(**{key: value, "SPOT": "false"} if key != "SPOT" else {key: value}))
    assert caught.value.key == key
    assert str(caught.value).startswith(f"{key}=")


@pytest.mark.parametrize("key,value", [
    ("GPU_TYPE", "h200"), ("GPU_TYPE", "nvidia-b200"), ("GPU_TYPE", "NVIDIA-H200-141GB"),
    ("CLUSTER_MODE", "autopilot"), ("CLUSTER_MODE", "Standard"), ("GKE_VERSION", ""),
    ("GKE_VERSION", "1.33.5-gke.1000000"), ("LUSTRE_ZONE", "us-central1-a"), ("GS_BUCKET", ""),
    ("RESERVATION", "projects/other-project/reservations/a4-res"), ("GPU_NODES", "64"),
    ("LUSTRE_THROUGHPUT", "1000"), ("LUSTRE_CAPACITY_GIB", "954000"), ("PROJECT_NUMBER", "123456789012"),
    ("LUSTRE_CAPACITY_GIB", "3060000"), ("LUSTRE_CAPACITY_GIB", "3168000"), ("LUSTRE_CAPACITY_GIB", "20016000"),
    ("NEMO_RL_IMAGE", "nvcr.io/nvidia/nemo-rl:v0.6.0"),
    ("GS_BUCKET", "my.data.bucket"), ("GS_BUCKET", "a_b-c"), ("GS_BUCKET", ".".join(["x" * 63] * 3)),
    ("GS_BUCKET", "1.2.3.4.5"), ("NETWORK", "nemo-gvnic"),
    ("NCCL_INSTALLER_REF", "155bfa49b7459a55c2352495d3eeb46a55637be6"),
])
def test_validate_accepts_good_value(key, value):
    overrides = {key: value}
    if key == "RESERVATION":
        overrides["SPOT"] = "false"
    if key == "NEMO_RL_IMAGE":
        overrides["RAY_VERSION"] = "2.52.0"
    validate(base(**overrides))


@pytest.mark.parametrize(("throughput", "capacity", "fits"), [
    # The Managed Lustre docs' tiers: smallest size, step, the threshold past which the step grows, largest size.
    (1000, 9000, True), (1000, 27000, True), (1000, 1_530_000, True), (1000, 1_539_000, False),
    (1000, 1_584_000, True), (1000, 10_008_000, True), (1000, 10_080_000, False),
    (500, 18000, True), (500, 27000, False), (500, 9000, False), (500, 3_168_000, True), (500, 3_078_000, False),
    (250, 18000, False), (250, 36000, True), (250, 54000, False), (250, 6_336_000, True),
    (125, 18000, False), (125, 72000, True), (125, 108_000, False), (125, 12_240_000, True),
    (125, 12_312_000, False),
])
def test_lustre_capacity_is_checked_against_its_tier(throughput, capacity, fits):
    settings = base(LUSTRE_THROUGHPUT=str(throughput), LUSTRE_CAPACITY_GIB=str(capacity))
    if fits:
        validate(settings)
        return
    with pytest.raises(ConfigError) as caught:
        validate(settings)
    assert caught.value.key == "LUSTRE_CAPACITY_GIB" and f"LUSTRE_THROUGHPUT={throughput}" in str(caught.value)


def test_coerce_rejects_non_boolean_spot():
    with pytest.raises(ConfigError, match="SPOT"):
        base(SPOT="maybe")


def test_secret_errors_never_echo_the_value():
    with pytest.raises(ConfigError) as caught:
        validate(base(HF_TOKEN="hf_secret with space"))
    assert "hf_secret" not in str(caught.value)


def test_spot_and_reservation_exclude_each_other():
    with pytest.raises(ConfigError, match="SPOT"):
        validate(base(SPOT="true", RESERVATION="my-res"))


def test_gke_version_below_gpu_minimum_names_the_minimum():
    with pytest.raises(ConfigError, match="1.32.2-gke.1422000"):
        validate(base(GPU_TYPE="b200", GKE_VERSION="1.31.4-gke.1183000"))
    validate(base(GPU_TYPE="h200", GKE_VERSION="1.31.4-gke.1183000"))


@pytest.mark.parametrize("gpu,machine,accelerator,tuner", [
    ("b200", "a4-highgpu-8g", "nvidia-b200", "tuner_config_a4.txtpb"),
    ("h200", "a3-ultragpu-8g", "nvidia-h200-141gb", "tuner_config_a3u.txtpb"),
    ("nvidia-h200-141gb", "a3-ultragpu-8g", "nvidia-h200-141gb", "tuner_config_a3u.txtpb"),
])
def test_gpu_profile_derives_from_gpu_type(gpu, machine, accelerator, tuner):
    profile = validate(base(GPU_TYPE=gpu)).gpu
    assert (profile.machine_type, profile.accelerator) == (machine, accelerator)
    assert profile.tuner_config.endswith(tuner)
    assert profile.node_selector == {"cloud.google.com/gke-accelerator": accelerator}


def _write(path: Path, **values: str) -> Path:
    merged = {**read_env_example(), **values}
    path.write_text("".join(f"{k}={v}\n" for k, v in merged.items()))
    return path


def test_load_environment_overrides_file_and_flags_override_both(tmp_path):
    _write(tmp_path / ".env", GPU_NODES="2", CLUSTER_NAME="from-file")
    s = load(allow_example=False, environ={"GPU_NODES": "3"}, cwd=tmp_path)
    assert (s.GPU_NODES, s.CLUSTER_NAME) == (3, "from-file")
    s = load(allow_example=False, environ={"GPU_NODES": "3"}, cwd=tmp_path, GPU_NODES=4, GPU_TYPE=None)
    assert s.GPU_NODES == 4 and s.GPU_TYPE == "b200"


def test_load_env_file_selects_another_file(tmp_path):
    _write(tmp_path / ".env", CLUSTER_NAME="default-file")
    other = _write(tmp_path / "prod.env", CLUSTER_NAME="prod-cluster", PROJECT_ID="prod-project")
    s = load(allow_example=False, environ={"ENV_FILE": str(other)}, cwd=tmp_path)
    assert s.CLUSTER_NAME == "prod-cluster"


def test_load_missing_env_file_named_by_env_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="ENV_FILE"):
        load(allow_example=True, environ={"ENV_FILE": "nope.env"}, cwd=tmp_path)


def test_load_without_env_refuses_real_runs_and_allows_dry_runs(tmp_path):
    with pytest.raises(ConfigError, match="no .env found"):
        load(allow_example=False, environ={}, cwd=tmp_path)
    s = load(allow_example=True, environ={}, cwd=tmp_path)
    assert "placeholder" in s.source and s.PROJECT_ID == read_env_example()["PROJECT_ID"]


def test_kube_context_matches_get_credentials_naming():
    assert validate(base()).kube_context == "gke_my-nemo-project_us-central1_nemo-rl"


def test_config_error_cuts_long_values_and_never_fails_on_huge_numbers():
    long = ConfigError("CLUSTER_NAME", "x" * 10_000, "fix it.")
    huge = ConfigError("GPU_NODES", 10 ** 5000, "fix it.")
    assert (len(str(long)) < 150, "…" in str(long), "5001 digits" in str(huge)) == (True, True, True)


def test_nccl_installer_ref_defaults_to_the_master_commit_with_both_files():
    assert validate(base()).NCCL_INSTALLER_REF == "2da1c92ff7bd772a2c833710bb6c21dcfe6dfaae"


def test_placeholder_project_matches_env_example():
    assert settings.PLACEHOLDER_PROJECT_ID == read_env_example()["PROJECT_ID"]


def test_gs_bucket_existing_needs_the_bucket_named():
    with pytest.raises(ConfigError) as caught:
        validate(base(GS_BUCKET="", GS_BUCKET_EXISTING="true"))
    assert caught.value.key == "GS_BUCKET_EXISTING"
    assert validate(base(GS_BUCKET="my-own-data", GS_BUCKET_EXISTING="true")).GS_BUCKET_EXISTING is True
