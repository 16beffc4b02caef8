from __future__ import annotations

import pytest

from nemo_rl_gke import names
from nemo_rl_gke.commands import gcloud, kubectl
from nemo_rl_gke.settings import Settings, coerce, validate
from support.fake import read_env_example

VARIANTS = [(gpu, mode) for gpu in ("b200", "h200") for mode in ("standard", "autopilot")]


def make(**overrides) -> Settings:
    values = {k: v for k, v in read_env_example().items() if k in Settings.__dataclass_fields__}
    return validate(Settings(**coerce({**values, **overrides})))


@pytest.mark.parametrize("gpu,mode", VARIANTS)
def test_cluster_create_has_the_complete_flags(gpu, mode):
    argv = gcloud.cluster_create(make(GPU_TYPE=gpu, CLUSTER_MODE=mode, GKE_VERSION="1.33.5-gke.1000000"))
    assert argv[:4] == ["gcloud", "container", "clusters", "create-auto" if mode == "autopilot" else "create"]
    common = {"--location=us-central1", "--enable-multi-networking", "--network=default",
              "--cluster-version=1.33.5-gke.1000000", "--labels=managed-by=nemo-rl-gke,deployment=nemo-rl"}
    assert common <= set(argv)
    if mode == "standard":
        assert {"--workload-pool=my-nemo-project.svc.id.goog", "--enable-dataplane-v2", "--enable-ip-alias",
                "--addons=HttpLoadBalancing,HorizontalPodAutoscaling,RayOperator,LustreCsiDriver",
                "--enable-legacy-lustre-port", "--enable-autoscaling",
                "--num-nodes=1", "--min-nodes=1", "--max-nodes=5", "--machine-type=n2-highmem-16"} <= set(argv)
        # The node counts are per zone: one zone, the GPU zone, so 1 CPU node (not 3 across the region).
        assert "--node-locations=us-central1-b" in argv
    else:
        assert {"--enable-ray-operator", "--enable-lustre-csi-driver"} <= set(argv)
    # Without GKE_VERSION (the .env.example's default): the release channel's default version.
    assert not [a for a in gcloud.cluster_create(make(GPU_TYPE=gpu, CLUSTER_MODE=mode)) if a.startswith("--cluster-v")]


@pytest.mark.parametrize("gpu,machine,accelerator", [("b200", "a4-highgpu-8g", "nvidia-b200"),
                                                     ("h200", "a3-ultragpu-8g", "nvidia-h200-141gb")])
def test_node_pool_create_matches_gpu_profile(gpu, machine, accelerator):
    argv = gcloud.node_pool_create(make(GPU_TYPE=gpu, GPU_NODES="3"))
    assert f"--machine-type={machine}" in argv
    assert f"--accelerator=type={accelerator},count=8,gpu-driver-version=DEFAULT" in argv
    assert "--num-nodes=3" in argv
    assert "--node-locations=us-central1-b" in argv


def test_node_pool_create_lists_nine_additional_networks_gvnic_first():
    argv = gcloud.node_pool_create(make())
    extra = [a for a in argv if a.startswith("--additional-node-network=")]
    assert len(extra) == 9
    assert extra[0] == "--additional-node-network=network=nemo-gvnic-net,subnetwork=nemo-gvnic-sub"
    assert extra[1:] == [f"--additional-node-network=network=nemo-rdma-net,subnetwork=nemo-rdma-sub-{n}"
                         for n in range(8)]


def test_node_pool_capacity_spot_or_reservation():
    assert "--spot" in gcloud.node_pool_create(make(SPOT="true", RESERVATION=""))
    reserved = gcloud.node_pool_create(make(SPOT="false", RESERVATION="a4-res"))
    assert "--spot" not in reserved
    assert {"--reservation-affinity=specific", "--reservation=a4-res"} <= set(reserved)
    on_demand = gcloud.node_pool_create(make(SPOT="false", RESERVATION=""))
    assert not any(a.startswith(("--spot", "--reservation")) for a in on_demand)


def test_rdma_network_uses_the_zonal_roce_profile():
    s = make()
    argv = gcloud.network_create(s, names.rdma_network(s), subnet_mode="custom", profile=names.rdma_profile(s))
    assert "--network-profile=us-central1-b-vpc-roce" in argv


def test_subnets_use_region_flag_and_distinct_ranges():
    s = make()
    ranges = set()
    for n in range(8):
        argv = gcloud.subnet_create(s, names.rdma_subnet(s, n), network=names.rdma_network(s),
                                    ip_range=names.rdma_range(n))
        assert "--region=us-central1" in argv and not any(a.startswith("--location") for a in argv)
        ranges.add(next(a for a in argv if a.startswith("--range=")))
    assert len(ranges) == 8 and "--range=192.168.0.0/24" not in ranges


def test_firewall_allows_internal_traffic_on_gvnic_network():
    argv = gcloud.firewall_create(make())
    assert {"--network=nemo-gvnic-net", "--action=ALLOW", "--rules=tcp:0-65535,udp:0-65535,icmp",
            "--source-ranges=192.168.0.0/16"} <= set(argv)


def test_every_kubectl_call_names_the_cluster_context():
    s = make()
    for argv in (kubectl.apply_stdin(s), kubectl.nccl_installer_apply(s), kubectl.get(s, "pods"),
                 kubectl.delete(s, "secret", "x")):
        assert argv[1] == "--context=gke_my-nemo-project_us-central1_nemo-rl"


@pytest.mark.parametrize("mode,manifest", [("standard", "nccl-rdma-installer.yaml"),
                                           ("autopilot", "nccl-rdma-installer-autopilot.yaml")])
def test_nccl_installer_is_pinned_to_a_commit(mode, manifest):
    url = kubectl.nccl_installer_apply(make(CLUSTER_MODE=mode))[-1]
    assert kubectl.NCCL_INSTALLER_COMMIT in url and url.endswith("/" + manifest)
    assert "refs/heads" not in url and "master" not in url


def test_kubectl_wait_ready_takes_a_go_duration_and_the_pods_selector():
    s = make()
    argv = kubectl.wait_ready(s, "pods", selector="ray.io/cluster=nemo-rl", namespace="default", seconds=30)
    assert argv == ["kubectl", f"--context={s.kube_context}", "wait", "pods", "--for=condition=Ready",
                    "--selector=ray.io/cluster=nemo-rl", "--namespace=default", "--timeout=30s"]
    durations = [kubectl.wait_ready(s, "pods", selector="a=b", namespace="n", seconds=x)[-1]
                 for x in (1.5, 0.00003, 1800)]
    assert durations == ["--timeout=1.5s", "--timeout=0.001s", "--timeout=1800s"]  # never 3e-05s
