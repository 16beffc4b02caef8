"""raychart: Settings -> Helm values, one decision per test."""

import pytest

from nemo_rl_gke import names, raychart
from nemo_rl_gke import settings as settings_module
from nemo_rl_gke.settings import ConfigError


def settings(**overrides):
    return settings_module.load(allow_example=True, environ={}, cwd=raychart.CHART_DIR, **overrides)


@pytest.mark.parametrize("nodes", [1, 2, 4, 64])
def test_raychart_worker_replicas_are_gpu_nodes(nodes):
    assert raychart.values(settings(GPU_NODES=nodes))["worker"]["replicas"] == nodes


def test_raychart_h200_gets_h200_selector_and_a3u_tuner():
    worker = raychart.values(settings(GPU_TYPE="h200"))["worker"]
    assert worker["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"}
    assert worker["ncclTunerConfig"].endswith("tuner_config_a3u.txtpb")


def test_raychart_accelerator_name_works_as_gpu_type():
    worker = raychart.values(settings(GPU_TYPE="nvidia-h200-141gb"))["worker"]
    assert worker["nodeSelector"]["cloud.google.com/gke-accelerator"] == "nvidia-h200-141gb"


def test_raychart_standard_head_goes_to_the_cpu_pool():
    head = raychart.values(settings(CLUSTER_MODE="standard"))["head"]
    assert (head["cpuPool"], head["cpu"], head["memory"]) == ("default-pool", "12", "96Gi")


def test_raychart_autopilot_head_has_no_pool_and_autopilot_ratio():
    head = raychart.values(settings(CLUSTER_MODE="autopilot"))["head"]
    assert head["cpuPool"] == "" and head["nodeSelector"] == {}
    assert (head["cpu"], head["memory"]) == ("12", "78Gi")


def test_raychart_autopilot_workers_select_compute_class_and_count():
    selector = raychart.values(settings(CLUSTER_MODE="autopilot", SPOT="false"))["worker"]["nodeSelector"]
    assert selector == {"cloud.google.com/gke-accelerator": "nvidia-b200",
                        "cloud.google.com/compute-class": "Performance",
                        "cloud.google.com/gke-accelerator-count": "8"}


def test_raychart_autopilot_spot_selects_spot_nodes():
    selector = raychart.values(settings(CLUSTER_MODE="autopilot", SPOT="true"))["worker"]["nodeSelector"]
    assert selector["cloud.google.com/gke-spot"] == "true"


def test_raychart_autopilot_shared_reservation_names_project_and_reservation():
    s = settings(CLUSTER_MODE="autopilot", SPOT="false", RESERVATION="projects/other-proj/reservations/r1")
    selector = raychart.values(s)["worker"]["nodeSelector"]
    assert selector["cloud.google.com/reservation-name"] == "r1"
    assert selector["cloud.google.com/reservation-project"] == "other-proj"
    assert selector["cloud.google.com/reservation-affinity"] == "specific"


def test_raychart_standard_spot_adds_no_selector():
    # The Standard pool is Spot or reserved already; its accelerator label is enough.
    selector = raychart.values(settings(CLUSTER_MODE="standard", SPOT="true"))["worker"]["nodeSelector"]
    assert selector == {"cloud.google.com/gke-accelerator": "nvidia-b200"}


def test_raychart_image_and_ray_version_come_from_settings():
    values = raychart.values(settings(NEMO_RL_IMAGE="example.com/team/nemo-rl:v9", RAY_VERSION="2.50.1"))
    assert values["image"]["repository"] == "example.com/team/nemo-rl"
    assert values["image"]["tag"] == "v9"
    assert values["rayVersion"] == "2.50.1"


def test_raychart_digest_image_is_kept_as_digest():
    digest = "sha256:" + "a" * 64
    values = raychart.values(settings(NEMO_RL_IMAGE=f"nvcr.io/nvidia/nemo-rl@{digest}", RAY_VERSION="2.49.2"))
    assert values["image"] == {"repository": "nvcr.io/nvidia/nemo-rl", "digest": digest,
                               "pullPolicy": "IfNotPresent"}


def test_raychart_names_the_storage_layers_objects():
    values = raychart.values(settings(KSA_NAME="my-ksa"))
    assert values["secretName"] == names.SECRET_NAME
    assert values["serviceAccountName"] == "my-ksa"
    assert values["data"]["claimName"] == names.LUSTRE_PVC


def test_raychart_hf_home_and_logs_live_on_data():
    data = raychart.values(settings())["data"]
    assert data["hfHome"].startswith("/data/") and data["logDir"].startswith("/data/")


def test_raychart_disables_rays_memory_monitor():
    assert raychart.values(settings())["env"]["RAY_memory_monitor_refresh_ms"] == "0"


def test_raychart_values_hold_no_secret():
    s = settings(HF_TOKEN="hf_abcdefghijklmnop", WANDB_API_KEY="wandb_abcdefghijkl")
    text = raychart.values_yaml(s)
    assert "hf_abcdefghijklmnop" not in text and "wandb_abcdefghijkl" not in text


def test_raychart_interfaces_are_eth0_default_then_gvnic_then_eight_rdma():
    interfaces = raychart.interfaces()
    assert interfaces[0] == {"interfaceName": "eth0", "network": "default"}
    assert interfaces[1] == {"interfaceName": "eth1", "network": "gvnic-1"}
    assert interfaces[2:] == [{"interfaceName": f"eth{n + 2}", "network": f"rdma-{n}"} for n in range(8)]


def test_raychart_head_size_is_configurable():
    head = raychart.values(settings(), head_cpu=8, head_memory_gi=64)["head"]
    assert (head["cpu"], head["memory"], head["shmSize"]) == ("8", "64Gi", "21Gi")


def test_raychart_rejects_a_head_bigger_than_the_cpu_pool():
    with pytest.raises(ConfigError, match="--head-cpu"):
        raychart.values(settings(), head_cpu=64)


def test_raychart_rejects_head_memory_above_the_cpu_pool():
    with pytest.raises(ConfigError, match="--head-memory"):
        raychart.values(settings(), head_memory_gi=500)


def test_raychart_rejects_autopilot_head_memory_above_the_ratio():
    with pytest.raises(ConfigError, match="6.5 GiB per CPU"):
        raychart.values(settings(CLUSTER_MODE="autopilot"), head_cpu=4, head_memory_gi=96)


def test_raychart_expected_gpus_is_nodes_times_eight():
    assert raychart.expected_gpus(settings(GPU_NODES=3)) == 24


# ---- the pod-template hash ------------------------------------------------------------------------------
def _hash(**overrides) -> str:
    return str(raychart.values(settings(**overrides))["podTemplateHash"])


def test_pod_template_hash_ignores_the_worker_count_kuberay_reconciles_without_a_restart():
    assert _hash(GPU_NODES=1) == _hash(GPU_NODES=4)


@pytest.mark.parametrize("change", [{"GPU_TYPE": "h200"}, {"CLUSTER_MODE": "autopilot"},
                                    {"HF_TOKEN": "hf_othertoken123456"},
                                    {"WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567"}])
def test_pod_template_hash_changes_with_what_the_pods_are_made_from(change):
    assert _hash(**change) != _hash()


def test_pod_template_hash_changes_with_the_head_size_and_never_holds_a_token():
    s = settings(HF_TOKEN="hf_secretvalue1234")
    assert raychart.values(s, head_cpu=10)["podTemplateHash"] != raychart.values(s)["podTemplateHash"]
    assert "secretvalue" not in raychart.values_yaml(s)
