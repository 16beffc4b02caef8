"""gcloud argv builders: pure functions of Settings returning lists of strings (flags in --key=value form)."""

from __future__ import annotations

from .. import names
from ..settings import Settings

Argv = list[str]


def project_flag(s: Settings) -> str:
    """`--project=PROJECT_ID`: every gcloud command names its project (never the gcloud config's default)."""
    return f"--project={s.PROJECT_ID}"


# ---- projects ------------------------------------------------------------------------------------
def project_number(s: Settings) -> Argv:
    return ["gcloud", "projects", "describe", s.PROJECT_ID, "--format=value(projectNumber)"]


# ---- networks ------------------------------------------------------------------------------------
def network_describe(s: Settings, network: str) -> Argv:
    return ["gcloud", "compute", "networks", "describe", network, project_flag(s), "--format=json"]


def network_create(s: Settings, network: str, *, subnet_mode: str, profile: str | None = None) -> Argv:
    argv = ["gcloud", "compute", "networks", "create", network, project_flag(s), f"--subnet-mode={subnet_mode}"]
    if profile:
        argv.append(f"--network-profile={profile}")
    return argv + [f"--description={names.DESCRIPTION}"]


def network_delete(s: Settings, network: str) -> Argv:
    return ["gcloud", "compute", "networks", "delete", network, project_flag(s), "--quiet"]


def subnet_describe(s: Settings, subnet: str) -> Argv:
    return ["gcloud", "compute", "networks", "subnets", "describe", subnet, project_flag(s), f"--region={s.region}",
            "--format=json"]


def subnet_create(s: Settings, subnet: str, *, network: str, ip_range: str) -> Argv:
    # Subnets take --region; the tutorial's --location is not a flag of this command.
    return ["gcloud", "compute", "networks", "subnets", "create", subnet, project_flag(s), f"--network={network}",
            f"--region={s.region}", f"--range={ip_range}", f"--description={names.DESCRIPTION}"]


def subnet_delete(s: Settings, subnet: str) -> Argv:
    return ["gcloud", "compute", "networks", "subnets", "delete", subnet, project_flag(s),
            f"--region={s.region}", "--quiet"]


def firewall_describe(s: Settings, rule: str) -> Argv:
    return ["gcloud", "compute", "firewall-rules", "describe", rule, project_flag(s), "--format=json"]


def firewall_create(s: Settings) -> Argv:
    return ["gcloud", "compute", "firewall-rules", "create", names.gvnic_firewall(s), project_flag(s),
            f"--network={names.gvnic_network(s)}", "--action=ALLOW", f"--rules={names.FIREWALL_RULES}",
            f"--source-ranges={names.GVNIC_SOURCE_RANGES}", f"--description={names.deployment_description(s)}"]


def firewall_delete(s: Settings, rule: str) -> Argv:
    return ["gcloud", "compute", "firewall-rules", "delete", rule, project_flag(s), "--quiet"]


# ---- cluster -------------------------------------------------------------------------------------
def cluster_describe(s: Settings) -> Argv:
    return ["gcloud", "container", "clusters", "describe", s.CLUSTER_NAME, project_flag(s), f"--location={s.region}",
            "--format=json"]


def cluster_create(s: Settings) -> Argv:
    if s.autopilot:
        argv = ["gcloud", "container", "clusters", "create-auto", s.CLUSTER_NAME, project_flag(s),
                f"--location={s.region}",
                f"--network={s.NETWORK}", "--enable-multi-networking", "--enable-ray-operator",
                # The tutorial's Autopilot cluster has no Lustre driver, yet the Ray pods mount /data from it.
                "--enable-lustre-csi-driver", "--enable-legacy-lustre-port"]
    else:
        argv = ["gcloud", "container", "clusters", "create", s.CLUSTER_NAME, project_flag(s), f"--location={s.region}",
                f"--network={s.NETWORK}", f"--workload-pool={s.PROJECT_ID}.svc.id.goog", "--enable-dataplane-v2",
                # --addons disables every add-on it does not name, GKE's defaults included: name them too.
                "--enable-ip-alias", "--enable-multi-networking",
                "--addons=HttpLoadBalancing,HorizontalPodAutoscaling,RayOperator,LustreCsiDriver",
                "--enable-legacy-lustre-port", "--machine-type=n2-highmem-16",
                # --num-nodes, --min-nodes and --max-nodes count per zone, and a regional cluster's default pool
                # spans three zones unless told: 3 CPU nodes (up to 15) where the Ray head needs one. In the GPU
                # zone, the head also sits beside its workers and Lustre (no cross-zone hops for /data).
                f"--node-locations={s.zone}", "--num-nodes=1", "--enable-autoscaling", "--min-nodes=1",
                "--max-nodes=5"]
    if s.GKE_VERSION:
        argv.append(f"--cluster-version={s.GKE_VERSION}")
    # --format=json: gcloud prints the cluster it made, whose status tells a create GKE ended in ERROR (gcloud exits
    # 0 on one whose operation carries no statusMessage: cluster_steps.created_in_error).
    return argv + [f"--labels={names.deployment_labels(s)}", "--format=json"]


def cluster_update(s: Settings, change: str) -> Argv:
    """One change to an existing cluster (GKE runs one update at a time: `--update-addons=X=ENABLED,...`,
    `--enable-legacy-lustre-port`, `--enable-multi-networking`, `--workload-pool=...`)."""
    return ["gcloud", "container", "clusters", "update", s.CLUSTER_NAME, project_flag(s), f"--location={s.region}",
            change]


def cluster_delete(s: Settings) -> Argv:
    return ["gcloud", "container", "clusters", "delete", s.CLUSTER_NAME, project_flag(s),
            f"--location={s.region}", "--quiet"]


def get_credentials(s: Settings) -> Argv:
    return ["gcloud", "container", "clusters", "get-credentials", s.CLUSTER_NAME, project_flag(s),
            f"--location={s.region}"]


def node_pool_describe(s: Settings) -> Argv:
    return ["gcloud", "container", "node-pools", "describe", names.GPU_POOL, project_flag(s),
            f"--cluster={s.CLUSTER_NAME}",
            f"--location={s.region}", "--format=json"]


def node_pool_create(s: Settings) -> Argv:
    gpu = s.gpu
    argv = ["gcloud", "container", "node-pools", "create", names.GPU_POOL, project_flag(s),
            f"--cluster={s.CLUSTER_NAME}",
            f"--location={s.region}", f"--node-locations={s.zone}", f"--machine-type={gpu.machine_type}",
            f"--accelerator=type={gpu.accelerator},count={gpu.gpus_per_node},gpu-driver-version=DEFAULT",
            # Explicit: without it GKE creates 3 GPU nodes, whatever the job needs.
            f"--num-nodes={s.GPU_NODES}"]
    if s.RESERVATION:
        argv += ["--reservation-affinity=specific", f"--reservation={s.RESERVATION}"]
    elif s.SPOT:
        argv.append("--spot")
    argv += [f"--additional-node-network=network={net},subnetwork={sub}" for net, sub in names.additional_networks(s)]
    return argv + [f"--labels={names.LABELS}", "--format=json"]  # the pool it made, as cluster_create's


def node_pool_resize(s: Settings) -> Argv:
    """The GPU pool to GPU_NODES nodes (per zone: ours has one); `clusters resize` is gcloud's resize of a pool."""
    return ["gcloud", "container", "clusters", "resize", s.CLUSTER_NAME, project_flag(s),
            f"--node-pool={names.GPU_POOL}",
            f"--num-nodes={s.GPU_NODES}", f"--location={s.region}", "--quiet"]


def instance_group_describe(s: Settings, name: str, zone: str) -> Argv:
    """A node pool's managed instance group: its targetSize is the pool's current size in that zone."""
    return ["gcloud", "compute", "instance-groups", "managed", "describe", name, project_flag(s), f"--zone={zone}",
            "--format=json"]


def node_pool_delete(s: Settings) -> Argv:
    return ["gcloud", "container", "node-pools", "delete", names.GPU_POOL, project_flag(s),
            f"--cluster={s.CLUSTER_NAME}",
            f"--location={s.region}", "--quiet"]


def clusters_list(s: Settings, filter_: str = "") -> Argv:
    """The project's clusters in every location, with their node pools (a Cluster carries `nodePools`):
    ours, and the other deployments that may share our networks."""
    return ["gcloud", "container", "clusters", "list", project_flag(s), *_filter(filter_), "--format=json"]


# ---- listings (the inventory: one per kind, filtered on our names or marker) -----------------------------
def _filter(expression: str) -> Argv:
    return [f"--filter={expression}"] if expression else []


def networks_list(s: Settings, filter_: str) -> Argv:
    return ["gcloud", "compute", "networks", "list", project_flag(s), *_filter(filter_), "--format=json"]


def subnets_list(s: Settings, filter_: str) -> Argv:
    # Every region: a leftover of ours in another region is found too; the steps match the region.
    return ["gcloud", "compute", "networks", "subnets", "list", project_flag(s), *_filter(filter_), "--format=json"]


def firewalls_list(s: Settings, filter_: str) -> Argv:
    return ["gcloud", "compute", "firewall-rules", "list", project_flag(s), *_filter(filter_), "--format=json"]
