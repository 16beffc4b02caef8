"""Pure parts of the lifecycle: cost, doctor checks, the leftover filter, clean's keep rule, the board, and
properties of the graph that stay true as layers add steps."""

from __future__ import annotations

import io
import json

import pytest

from nemo_rl_gke import cost, graph, readiness
from nemo_rl_gke.board import Board
from nemo_rl_gke.commands import doctor
from nemo_rl_gke.resources import LAYERS, all_steps, leftovers
from nemo_rl_gke.steps import Consent
from nemo_rl_gke.tasks import clean
from support.fake import read_env_example

VARIANTS = [(gpu, mode) for gpu in ("b200", "h200") for mode in ("standard", "autopilot")]


def settings(**overrides):
    from nemo_rl_gke.settings import Settings, coerce, validate

    values = {k: v for k, v in read_env_example().items() if k in Settings.__dataclass_fields__}
    return validate(Settings(**coerce({**values, **overrides})))


# ---- the graph -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("gpu", "mode"), VARIANTS)
def test_all_steps_every_name_is_in_a_known_layer(gpu, mode):
    steps = all_steps(settings(GPU_TYPE=gpu, CLUSTER_MODE=mode))
    assert [st.name for st in steps if st.layer not in LAYERS] == []


@pytest.mark.parametrize(("gpu", "mode"), VARIANTS)
def test_all_steps_deps_name_existing_steps(gpu, mode):
    steps = all_steps(settings(GPU_TYPE=gpu, CLUSTER_MODE=mode))
    names = {st.name for st in steps}
    assert [(st.name, d) for st in steps for d in st.deps if d not in names] == []


@pytest.mark.parametrize(("gpu", "mode"), VARIANTS)
def test_all_steps_order_without_cycle(gpu, mode):
    steps = all_steps(settings(GPU_TYPE=gpu, CLUSTER_MODE=mode))
    assert len(graph.order(steps)) == len(steps)


def test_all_steps_has_parallel_work_shorter_than_the_sequential_sum():
    steps = all_steps(settings())
    assert graph.critical_path_seconds(steps) < sum(st.create_seconds for st in steps)


# ---- cost --------------------------------------------------------------------------------------------
def test_cost_prices_file_states_date_and_sources():
    prices = cost.load_prices()
    assert prices["as_of"] and prices["sources"] and set(prices["machines"]) >= {"a4-highgpu-8g", "a3-ultragpu-8g"}


def test_cost_gpu_line_scales_with_nodes():
    two = {ln.attach: ln.hourly for ln in cost.estimate(settings(GPU_NODES="2")).lines}["gpu"]
    four = {ln.attach: ln.hourly for ln in cost.estimate(settings(GPU_NODES="4")).lines}["gpu"]
    assert four == pytest.approx(2 * two)


def test_cost_spot_is_cheaper_than_on_demand():
    spot = cost.estimate(settings(SPOT="true")).total
    on_demand = cost.estimate(settings(SPOT="false")).total
    assert spot < on_demand


def test_cost_lustre_line_uses_the_throughput_tier():
    prices = cost.load_prices()
    line = next(ln for ln in cost.estimate(settings(LUSTRE_THROUGHPUT="1000")).lines if ln.attach == "lustre")
    assert line.hourly == pytest.approx(18000 * prices["lustre_per_gib_hour"][1000])


def test_cost_hourly_by_step_attaches_gpu_cost_to_the_gpu_pool_on_standard():
    s = settings(CLUSTER_MODE="standard")
    assert "cluster.gpu-pool" in cost.hourly_by_step(cost.estimate(s), all_steps(s))


# ---- doctor ------------------------------------------------------------------------------------------
def quotas(**metrics):
    return json.dumps({"quotas": [{"metric": m, "limit": limit, "usage": 0} for m, limit in metrics.items()]})


def test_doctor_quota_spot_uses_the_preemptible_metric():
    check = readiness.check_quota(settings(SPOT="true"), quotas(PREEMPTIBLE_NVIDIA_B200_GPUS=8, NVIDIA_B200_GPUS=64))
    assert (check.ok, "PREEMPTIBLE_NVIDIA_B200_GPUS" in check.detail) == (False, True)


def test_doctor_quota_spot_without_preemptible_quota_falls_back_to_standard():
    check = readiness.check_quota(settings(SPOT="true"), quotas(NVIDIA_B200_GPUS=16))
    assert check.ok


def test_doctor_quota_h200_on_demand_uses_the_h200_metric():
    check = readiness.check_quota(settings(GPU_TYPE="h200", SPOT="false"), quotas(NVIDIA_H200_GPUS=15))
    assert (check.ok, "NVIDIA_H200_GPUS: 15 free, up needs 16" in check.detail) == (False, True)


def test_doctor_quota_not_listed_is_not_checked_rather_than_zero_free():
    # A region may list no on-demand quota for the newer GPUs in `regions describe` (gcloud 528's enum has none
    # for B200/H200; they may be counted per GPU family): a missing metric must not fail doctor with "0 free".
    check = readiness.check_quota(settings(SPOT="false"), quotas(CPUS=24))
    assert (check.ok, check.warn) == (True, True) and "was not checked" in check.detail
    spot = readiness.check_quota(settings(SPOT="true"), quotas(PREEMPTIBLE_NVIDIA_B200_GPUS=8))
    assert (spot.ok, spot.warn) == (False, False)  # listed: checked (8 free < 16)


def test_doctor_helm_older_than_3_14_fails():
    assert not readiness.check_helm("v3.13.2+g1234").ok


def test_doctor_apis_names_the_missing_ones_in_the_fix():
    check = readiness.check_apis(settings(), "compute.googleapis.com\ncontainer.googleapis.com\n")
    assert "gcloud services enable storage.googleapis.com lustre.googleapis.com" in check.fix


def test_doctor_reservation_of_another_machine_type_fails():
    body = json.dumps({"status": "READY", "specificReservation": {
        "count": "4", "inUseCount": "0", "instanceProperties": {"machineType": "a3-ultragpu-8g"}}})
    assert not readiness.check_reservation(settings(SPOT="false", RESERVATION="r1"), 0, body, "").ok


def test_doctor_shared_reservation_is_described_in_its_own_project():
    s = settings(SPOT="false", RESERVATION="projects/other-project/reservations/r1")
    assert "--project=other-project" in doctor.reservation_describe(s)


# ---- leftovers ---------------------------------------------------------------------------------------
def test_leftovers_network_named_ours_without_marker_is_not_counted():
    s = settings()
    assert leftovers.ours("network", [{"name": "nemo-gvnic-net", "description": ""}], s) == []


def test_leftovers_any_item_with_our_label_is_counted():
    found = leftovers.ours("cluster", [{"name": "renamed", "resourceLabels": {"managed-by": "nemo-rl-gke"}}],
                           settings())
    assert [f.name for f in found] == ["renamed"]


def test_leftovers_peering_using_our_range_is_counted():
    s = settings()
    items = [{"service": "services/servicenetworking.googleapis.com", "reservedPeeringRanges": ["nemo-lustre-range"]}]
    assert [f.name for f in leftovers.ours("VPC peering", items, s)] == ["servicenetworking.googleapis.com"]


def test_leftovers_kept_bucket_is_expected():
    found = leftovers.Found("bucket", "nemo-rl-my-nemo-project", "name")
    assert leftovers._expected(found, ["bucket gs://nemo-rl-my-nemo-project (us-central1)"])


# ---- clean -------------------------------------------------------------------------------------------
def test_clean_net_keeps_the_main_vpc_that_kept_lustre_needs():
    steps = clean.layer_teardown_steps(all_steps(settings()), "net", delete_data=False)
    assert {st.name for st in steps if st.holds_data} == {"net.network"}


def test_clean_net_with_delete_data_keeps_nothing():
    steps = clean.layer_teardown_steps(all_steps(settings()), "net", delete_data=True)
    assert [st.name for st in steps if st.holds_data] == []


# ---- board -------------------------------------------------------------------------------------------
def test_board_prints_one_plain_line_per_finished_step_without_terminal():
    steps = all_steps(settings())[:2]
    out = io.StringIO()
    with Board(steps, out=out, live=False) as board:
        board.listener(steps[0], "running", 0.0)
        board.listener(steps[0], "created", 1.25)
    assert out.getvalue().splitlines()[0] == f"✓ {steps[0].title}: created (1.2 s)"


def test_board_rows_show_every_step_with_its_state():
    steps = all_steps(settings())
    board = Board(steps, out=io.StringIO(), live=False)
    board.listener(steps[0], "failed", 2.0)
    assert [row[1] for row in board.rows()][:2] == ["✗ failed", "  waiting"]


# ---- plan's drift ------------------------------------------------------------------------------------
def test_drift_gpu_pool_node_count_differs():
    from nemo_rl_gke.tasks.lifecycle import drift

    body = {"initialNodeCount": 3, "config": {"machineType": "a4-highgpu-8g", "spot": True}}
    assert drift(settings(GPU_NODES="2", SPOT="true"), "cluster.gpu-pool", body) == "3 nodes, the settings say 2"


def test_drift_matching_gpu_pool_is_empty():
    from nemo_rl_gke.tasks.lifecycle import drift

    body = {"initialNodeCount": 2, "config": {"machineType": "a4-highgpu-8g", "spot": True}}
    assert drift(settings(GPU_NODES="2", SPOT="true"), "cluster.gpu-pool", body) == ""


def test_drift_cluster_mode_differs():
    from nemo_rl_gke.tasks.lifecycle import drift

    assert "autopilot" in drift(settings(CLUSTER_MODE="standard"), "cluster.cluster", {"autopilot": {"enabled": True}})


def test_leftovers_ignore_another_deployments_cluster_and_firewall_rule():
    s = settings()
    items = [{"name": "other", "resourceLabels": {"managed-by": "nemo-rl-gke", "deployment": "other"}},
             {"name": "nemo-rl", "resourceLabels": {"managed-by": "nemo-rl-gke", "deployment": "nemo-rl"}}]
    rules = [{"name": "nemo-gvnic-other-internal", "description": "managed-by=nemo-rl-gke deployment=other"}]
    assert ([f.name for f in leftovers.ours("cluster", items, s)], leftovers.ours("firewall rule", rules, s)) == (
        ["nemo-rl"], [])


def test_other_deployments_are_our_labelled_clusters_but_this_one():
    from nemo_rl_gke.resources import cluster_steps
    from nemo_rl_gke.runner import Result

    class Asked:
        dry = False

        def query(self, argv, ok_codes=(0, 1)):
            body = [{"name": "nemo-rl", "resourceLabels": {"managed-by": "nemo-rl-gke"}},
                    {"name": "other", "resourceLabels": {"managed-by": "nemo-rl-gke", "deployment": "other"}},
                    {"name": "someone-elses", "resourceLabels": {}}]
            return Result(list(argv), 0, json.dumps(body))

    assert cluster_steps.other_deployments(Asked(), settings()) == ["other"]


def test_other_deployments_count_a_cluster_made_another_way_whose_pool_is_on_our_vpcs():
    from nemo_rl_gke.resources import cluster_steps
    from nemo_rl_gke.runner import Result

    def pool(name, *networks):
        return {"name": name, "networkConfig": {"additionalNodeNetworkConfigs": [
            {"network": net, "subnetwork": f"{net}-sub"} for net in networks]}}

    class Asked:
        dry = False

        def query(self, argv, ok_codes=(0, 1)):
            body = [{"name": "tutorial", "nodePools": [pool("default-pool"), pool("gpu-pool", "nemo-gvnic-net")]},
                    {"name": "by-url", "nodePools": [
                        pool("a3", "projects/p/global/networks/nemo-rdma-net")]},
                    {"name": "elsewhere", "nodePools": [pool("gpu", "nemo-gvnic-net-2", "my-rdma-net")]},
                    {"name": "nemo-rl", "nodePools": [pool("gpu-pool", "nemo-gvnic-net")]}]
            return Result(list(argv), 0, json.dumps(body))

    assert cluster_steps.other_deployments(Asked(), settings()) == [
        "by-url (made another way: node pool a3 is on our VPCs)",
        "tutorial (made another way: node pool gpu-pool is on our VPCs)"]


def test_other_deployments_count_a_firewall_rule_only_on_our_gvnic_vpc():
    from nemo_rl_gke.resources import cluster_steps
    from nemo_rl_gke.runner import Result

    net = "https://www.googleapis.com/compute/v1/projects/p/global/networks/"

    class Asked:
        dry = False

        def query(self, argv, ok_codes=(0, 1)):
            if "firewall-rules" not in argv:
                return Result(list(argv), 0, "[]")
            rules = [{"name": "nemo-gvnic-auto-internal", "network": f"{net}nemo-gvnic-net",
                      "description": "managed-by=nemo-rl-gke deployment=auto"},
                     {"name": "elsewhere-internal", "network": f"{net}their-gvnic-net",
                      "description": "managed-by=nemo-rl-gke deployment=elsewhere"},
                     {"name": "nemo-gvnic-nemo-rl-internal", "network": f"{net}nemo-gvnic-net",
                      "description": "managed-by=nemo-rl-gke deployment=nemo-rl"}]
            return Result(list(argv), 0, json.dumps(rules))

    assert cluster_steps.other_deployments(Asked(), settings()) == [
        "auto (its firewall rule nemo-gvnic-auto-internal is on our gVNIC VPC)"]


def test_kept_steps_keep_shared_names_with_what_they_need():
    steps = all_steps(settings())
    kept = graph.kept_steps(steps, Consent(delete_data=True, delete_bucket=True), ["storage.lustre"])
    assert {"storage.lustre", "storage.peering", "storage.range", "net.network"} <= kept
    assert "cluster.cluster" not in kept


def test_kept_message_names_each_flag_that_deletes_what_was_kept():
    steps = {st.name: st for st in all_steps(settings())}
    chain = ["storage.bucket", "storage.lustre", "storage.peering", "storage.range", "net.network"]
    text = lifecycle_kept([steps[name] for name in chain])
    assert "--delete-data" in text and "--delete-bucket" in text and "main VPC" in text
    # what is kept for another reason (a cluster nemo-rl-gke did not create) is not "what they need"
    text = lifecycle_kept([steps[name] for name in [*chain, "cluster.cluster", "cluster.nccl-installer"]])
    assert "main VPC" in text and "cluster" not in text.split("Also kept what they need:")[1]


def test_kept_message_names_no_flag_for_what_another_deployment_shares():
    """Data kept because another deployment shares it stays whatever the flags: the message says so instead of
    naming a flag that would not delete it."""
    from nemo_rl_gke.tasks.teardown import kept_message

    steps = {st.name: st for st in all_steps(settings())}
    chain = [steps[name] for name in ["storage.bucket", "storage.lustre", "storage.peering", "storage.range",
                                      "net.network"]]
    text = kept_message(chain, [step.name for step in chain if step.shared])
    assert "another deployment shares them (above), whatever the flags" in text, text
    assert "--delete" not in text and "main VPC" in text
    text = kept_message(chain, ["storage.lustre"])  # only Lustre shared (as a unit: the flags' hints stay apart)
    assert "`--delete-bucket` deletes the bucket" in text and "--delete-data` deletes" not in text, text
    assert "Kept too, as another deployment shares it: Lustre instance" in text


def test_kept_message_says_the_users_own_bucket_is_never_deleted_even_when_shared():
    from nemo_rl_gke.tasks.teardown import kept_message

    steps = {st.name: st for st in all_steps(settings(GS_BUCKET="mine", GS_BUCKET_EXISTING="true"))}
    chain = [steps[name] for name in ["storage.bucket", "storage.lustre", "storage.peering", "storage.range",
                                      "net.network"]]
    text = kept_message(chain, [step.name for step in chain if step.shared])
    assert "the bucket is your own (GS_BUCKET_EXISTING=true): never deleted" in text, text
    assert "Kept too, as another deployment shares it: Lustre instance" in text and "--delete" not in text, text


def lifecycle_kept(kept):
    from nemo_rl_gke.tasks.teardown import kept_message

    return kept_message(kept)
