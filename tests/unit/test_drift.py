"""drift: what exists against the settings, from describe JSON shaped like the API's (the pool's current size from
its instance groups, never the creation-time initialNodeCount; an autoscaling pool has no fixed size)."""

from __future__ import annotations

from nemo_rl_gke.resources.pool_size import pool_nodes
from nemo_rl_gke.settings import Settings, coerce, validate
from nemo_rl_gke.tasks import drift
from support.fake import read_env_example


def settings(**overrides: str) -> Settings:
    values = {k: v for k, v in read_env_example().items() if k in Settings.__dataclass_fields__}
    return validate(Settings(**coerce({**values, **overrides})))


POOL = {"initialNodeCount": 2, "locations": ["us-central1-b"],
        "instanceGroupUrls": ["https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-b/"
                              "instanceGroupManagers/gke-nemo-rl-gpu-pool-1234abcd-grp"],
        "config": {"machineType": "a4-highgpu-8g", "spot": True}}


def test_drift_pool_size_is_the_instance_groups_not_the_initial_count():
    assert pool_nodes(POOL, [4]) == 4
    assert pool_nodes(POOL, None) == 2  # the groups could not be read: the creation size stands in
    assert pool_nodes({**POOL, "autoscaling": {"enabled": True, "maxNodeCount": 8}}, [3]) is None


def test_drift_resized_pool_against_the_settings():
    found = drift.read_pool(POOL, [3])
    assert [d.text() for d in drift.differences(settings(GPU_NODES="2", SPOT="true"), found)] == \
        ["3 nodes, the settings say 2"]


def test_drift_matching_pool_has_no_difference():
    assert drift.differences(settings(GPU_NODES="2", SPOT="true"), drift.read_pool(POOL, [2])) == []


def test_drift_reservation_read_from_reservation_affinity():
    pool = {**POOL, "config": {"machineType": "a4-highgpu-8g", "reservationAffinity": {
        "consumeReservationType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
        "values": ["r1"]}}}
    s = settings(GPU_NODES="2", SPOT="false", RESERVATION="r1")
    assert drift.differences(s, drift.read_pool(pool, [2])) == []
    other = settings(GPU_NODES="2", SPOT="false", RESERVATION="r2")
    assert [d.text() for d in drift.differences(other, drift.read_pool(pool, [2]))] == \
        ["reservation r1, the settings say reservation r2"]


def test_drift_advice_names_resize_only_for_a_node_count():
    s = settings(GPU_NODES="4", GPU_TYPE="h200")
    found = drift.differences(s, drift.read_pool(POOL, [2]))
    assert [d.field for d in found] == ["gpu", "nodes"]
    text = drift.advice(found)
    assert "add --resize to resize the GPU pool to 4 nodes" in text and "GPU_TYPE / --gpu" in text


def test_drift_ray_workers_are_a_count_up_resize_applies():
    s = settings(GPU_NODES="2", SPOT="true")
    found = drift.differences(s, drift.Found(ray_workers=1))
    assert [(d.step, d.field, d.text()) for d in found] == \
        [("ray.release", "workers", "1 GPU worker(s), the settings say 2")]
    assert found[0].document()["title"] == "Ray cluster"
    text = drift.advice(found)
    assert "`invoke up --resize`" in text and "`invoke ray.deploy` upgrades the Ray cluster to 2" in text
    assert drift.differences(s, drift.Found(ray_workers=2)) == []
    assert drift.differences(s, drift.Found()) == []  # no Ray cluster, or its count not known: no difference


def test_drift_pool_and_ray_counts_together_get_one_resize_hint():
    s = settings(GPU_NODES="4", SPOT="true")
    pool = drift.read_pool(POOL, [2])
    found = drift.differences(s, drift.Found(machine_type=pool.machine_type, nodes=2, spot=True, reservation="",
                                             ray_workers=2))
    assert [d.field for d in found] == ["nodes", "workers"]
    assert drift.advice(found).count("--resize") == 2  # the pool's hint (flag and example), no second one for Ray


def test_drift_prices_what_exists():
    s = settings(GPU_TYPE="h200", GPU_NODES="4")
    as_built = drift.as_found(s, drift.read_pool(POOL, [2]))
    assert (as_built.gpu.short, as_built.GPU_NODES, as_built.SPOT) == ("b200", 2, True)


def test_drift_a_volume_another_claim_holds_blocks_up_with_its_own_fix():
    s = settings(NAMESPACE="team-b")
    found = drift.differences(s, drift.Found(claim={"namespace": "default", "name": "lustre-pvc"}))
    assert [(d.step, d.field, d.text()) for d in found] == \
        [("storage.pv", "claim", "bound to the claim default/lustre-pvc, the settings say team-b/lustre-pvc "
                                 "(NAMESPACE)")]
    assert found[0].document()["title"] == "PersistentVolume" and drift.blocking(found, resize=True) == found
    text = drift.advice(found)
    assert text.startswith("To resolve: set NAMESPACE=default again") and "GPU_TYPE" not in text, text


def test_plan_table_says_create_for_a_step_up_creates_even_when_something_of_it_differs():
    """A cluster still being created with an advisory difference: `up` creates (waits for) it, so the table
    must not say "leave" while the JSON says "create"."""
    from nemo_rl_gke.tasks.overview import _plan_action

    assert _plan_action({"action": "create", "differs": "Workload Identity is off"}) == \
        "create (it differs: Workload Identity is off)"
    assert _plan_action({"action": "leave", "differs": "2 nodes"}) == "leave, but it differs: 2 nodes"
    assert _plan_action({"action": "unknown", "differs": None}) == "create?"
