"""Pure storage decisions: peering plans, mount IP, export freshness, Secret comparison, the step graph."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from nemo_rl_gke import gcs
from nemo_rl_gke.commands import buckets, exports, kube_objects, lustre
from nemo_rl_gke.resources import storage_steps
from nemo_rl_gke.settings import ConfigError, Settings, validate

NOW = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)


def make_settings(**overrides) -> Settings:
    base = dict(PROJECT_ID="my-nemo-project", CONTROL_PLANE_LOCATION="us-central1",
                NODE_LOCATION="us-central1-b", CLUSTER_NAME="nemo-rl", HF_TOKEN="hf_PLANTEDsecretVALUE1234",
                WANDB_API_KEY="wandbPLANTEDsecretVALUE5678")
    return validate(Settings(**{**base, **overrides}))


@pytest.mark.parametrize("answer", [
    (0, "[]", ""),  # what Service Networking lists for a network that is gone
    (1, "", "ERROR: (gcloud.services.vpc-peerings.list) NOT_FOUND: Network projects/123/global/networks/default "
            "not found"),  # and what a 404 would read as
])
def test_peering_of_a_network_that_is_gone_is_no_peering_in_the_step_and_in_the_listing(answer):
    import io

    from nemo_rl_gke.resources import inventory, peering
    from nemo_rl_gke.runner import Runner
    from nemo_rl_gke.tools import Ran

    class Answers:
        def run(self, argv, *, stdin, timeout):
            return Ran(*answer)

    s = make_settings()
    r = Runner(out=io.StringIO(), err=io.StringIO(), tools=Answers())
    (listing,) = [item for item in inventory.listings(s) if item.kind == peering.KIND]
    assert (peering.existing_peering_ranges(r, s), inventory._ask(r, listing.argv, listing.missing_ok)) == (None, [])


def test_peering_delete_that_finds_no_peering_counts_it_gone_without_waiting():
    """Removed since our read (by hand, after our "still held" note): Service Networking's 400 "There is no
    peering" is not a producer holding it, so no 10-minute wait ending in "still says a producer uses" it."""
    import io

    from nemo_rl_gke.resources import peering
    from nemo_rl_gke.runner import Runner
    from nemo_rl_gke.tools import Ran, ToolError

    asked: list[list[str]] = []
    listed: list[list[dict]] = []

    class Answers:
        def run(self, argv, *, stdin, timeout):
            asked.append(argv[:4])
            if argv[3] == "list":
                return Ran(0, json.dumps(listed.pop(0)), "")
            return Ran(1, "", "ERROR: (gcloud.services.vpc-peerings.delete) There is no peering "
                              "(servicenetworking-googleapis-com) for the network.\n")

    s = make_settings()
    r = Runner(out=io.StringIO(), err=io.StringIO(), tools=Answers(), poll_seconds=0.001, sleep=lambda _: None)
    listed[:] = [[{"service": "services/servicenetworking.googleapis.com",
                   "reservedPeeringRanges": ["nemo-lustre-range"]}], []]  # and listed no more after the 400
    assert peering.delete(s)(r) is None
    assert [a[3] for a in asked] == ["list", "delete", "list"], asked
    # The VPC side removed by hand, the connection still listed: said, not counted gone.
    asked.clear()
    listed[:] = [[{"service": "services/servicenetworking.googleapis.com",
                   "reservedPeeringRanges": ["nemo-lustre-range"]}]] * 2
    with pytest.raises(ToolError, match="Private services access"):
        peering.delete(s)(r)


def test_peering_plan_without_peering_connects():
    assert lustre.peering_plan(None, "ours") == ("connect", ["ours"])


def test_peering_plan_with_another_services_peering_updates_with_the_union():
    assert lustre.peering_plan(["sql"], "ours") == ("update", ["sql", "ours"])


def test_peering_plan_with_our_range_does_nothing():
    assert lustre.peering_plan(["sql", "ours"], "ours")[0] == "none"


def test_peering_teardown_of_ours_alone_deletes():
    assert lustre.peering_teardown(["ours"], "ours") == ("delete", [])


def test_peering_teardown_keeps_other_ranges():
    assert lustre.peering_teardown(["sql", "ours"], "ours") == ("update", ["sql"])


def test_peering_teardown_without_our_range_does_nothing():
    assert lustre.peering_teardown(["sql"], "ours")[0] == "none"


def test_peering_ranges_reads_the_service_networking_connection():
    listing = json.dumps([{"service": "services/servicenetworking.googleapis.com",
                           "reservedPeeringRanges": ["a", "b"]}])
    assert lustre.peering_ranges(listing) == ["a", "b"]


def test_peering_ranges_of_an_empty_list_is_none():
    assert lustre.peering_ranges("[]") is None


def test_mount_ip_is_the_part_before_the_at():
    assert lustre.mount_ip("10.90.0.2@tcp:/lustrefs") == "10.90.0.2"


def test_mount_ip_of_an_empty_mount_point_raises():
    with pytest.raises(ValueError):
        lustre.mount_ip("")


def test_export_fresh_for_a_recent_full_export():
    record = exports.export_record(make_settings(), exports.RUNS_PATH, "gs://b/runs/", NOW - timedelta(hours=2),
                                  copied=3)
    assert exports.export_is_fresh(record, NOW)


def test_export_that_copied_nothing_does_not_count():
    record = exports.export_record(make_settings(), exports.RUNS_PATH, "gs://b/runs/", NOW, copied=0)
    assert not exports.export_is_fresh(record, NOW)


def test_export_not_fresh_after_a_day():
    record = exports.export_record(make_settings(), exports.RUNS_PATH, "gs://b/runs/", NOW - timedelta(hours=25),
                                  copied=3)
    assert not exports.export_is_fresh(record, NOW)


def test_export_of_one_run_does_not_cover_the_instance():
    record = exports.export_record(make_settings(), "/runs/r1", "gs://b/runs/r1/", NOW, copied=3)
    assert not exports.export_is_fresh(record, NOW)


def test_unexported_runs_names_runs_with_missing_or_resized_files_and_running_ones():
    on_lustre = {"r1/a": 1, "r1/b": 2, "r2/a": 5, "r3/a": 1, "r4/pid": 3}
    in_bucket = {"r1/a": 1, "r1/b": 2, "r2/a": 4, "extra/x": 9, "r4/pid": 3}
    assert exports.unexported_runs(on_lustre, in_bucket, {"r4"}) == {
        "r2": "1 file(s) of another size in the bucket (e.g. r2/a)",
        "r3": "1 file(s) not in the bucket (e.g. r3/a)", "r4": "still running"}


def test_unexported_runs_is_empty_when_every_file_is_in_the_bucket():
    assert exports.unexported_runs({"r1/a": 1}, {"r1/a": 1, "r1/old": 7}) == {}


def test_parse_runs_listing_reads_files_runs_and_running():
    text = "run r1\nrun r2\nrunning r2\nfile 10 r1/step_1/x y.pt\nfile 3 r2/pid\n"
    assert exports.parse_runs_listing(text) == ({"r1/step_1/x y.pt": 10, "r2/pid": 3}, {"r1", "r2"}, {"r2"})


def test_bucket_run_files_strips_the_prefix_and_skips_folders():
    assert exports.bucket_run_files([("runs/r1/a", 4), ("runs/r1/", 0), ("other/b", 1)]) == {"r1/a": 4}


def test_export_record_unreadable_is_not_fresh():
    assert not exports.export_is_fresh("not json", NOW)


def test_export_paths_of_one_run():
    assert exports.export_paths(make_settings(GS_BUCKET="ckpt-b"), "r1") == ("/runs/r1", "gs://ckpt-b/runs/r1/",
                                                                            "runs/r1/")


def test_export_paths_of_every_run():
    assert exports.export_paths(make_settings(GS_BUCKET="ckpt-b"), None) == ("/runs", "gs://ckpt-b/runs/", "runs/")


def _secret_json(values: dict[str, str]) -> str:
    return json.dumps({"data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}})


def test_secret_matches_the_same_values():
    s = make_settings()
    assert kube_objects.secret_matches(s, _secret_json(kube_objects.secret_values(s)))


def test_secret_does_not_match_a_changed_token():
    s = make_settings()
    changed = {**kube_objects.secret_values(s), "HF_TOKEN": "hf_oldVALUE123"}
    assert not kube_objects.secret_matches(s, _secret_json(changed))


def test_workload_principal_is_the_documented_member():
    assert buckets.workload_principal(make_settings(NAMESPACE="nemo", KSA_NAME="ray-ksa"), "42") == (
        "principal://iam.googleapis.com/projects/42/locations/global/workloadIdentityPools/"
        "my-nemo-project.svc.id.goog/subject/ns/nemo/sa/ray-ksa")


def test_lustre_create_argv_has_capacity_throughput_and_gke_support():
    argv = lustre.lustre_create(make_settings(LUSTRE_THROUGHPUT=1000, LUSTRE_CAPACITY_GIB=27000))
    assert {"--capacity-gib=27000", "--per-unit-storage-throughput=1000", "--gke-support-enabled",
            "--network=projects/my-nemo-project/global/networks/default", "--async"} <= set(argv)


def test_range_create_argv_is_a_global_peering_range():
    argv = lustre.range_create(make_settings())
    assert {"--global", "--purpose=VPC_PEERING", "--prefix-length=20", "--network=default"} <= set(argv)


def test_storage_steps_come_after_what_they_need_so_the_dry_run_reads_in_order():
    # The dry run prints steps in this order: each storage step after the storage steps it depends on, and
    # every step once.
    steps = storage_steps.steps(make_settings())
    names = [st.name for st in steps]
    assert len(set(names)) == len(names) == 9
    late = [(st.name, dep) for st in steps for dep in st.deps
            if dep in names and names.index(dep) > names.index(st.name)]
    assert late == []


def test_storage_steps_bucket_and_lustre_hold_data():
    held = {st.name for st in storage_steps.steps(make_settings()) if st.holds_data}
    assert held == {"storage.bucket", "storage.lustre"}


def test_storage_steps_dependencies():
    deps = {st.name: st.deps for st in storage_steps.steps(make_settings())}
    assert (deps["storage.range"], deps["storage.peering"], deps["storage.lustre"], deps["storage.pv"]) == (
        ("net.network",), ("storage.range",), ("storage.peering",), ("cluster.credentials", "storage.lustre"))


def test_storage_steps_in_cluster_objects_go_with_the_cluster():
    parents = {st.name: st.parent for st in storage_steps.steps(make_settings())
               if "cluster.credentials" in st.deps}
    assert set(parents) == {"storage.ksa", "storage.secret", "storage.pv", "storage.pvc"}
    assert set(parents.values()) == {"cluster.cluster"}


class _ForbiddenClient:
    def get_bucket(self, name, **options):
        from google.api_core import exceptions

        raise exceptions.Forbidden("caller does not have storage.buckets.get access")


def test_gcs_forbidden_bucket_is_a_config_error_naming_gs_bucket():
    with pytest.raises(ConfigError) as error:
        gcs.get_bucket(_ForbiddenClient(), make_settings(GS_BUCKET="someone-elses"))
    assert (error.value.key, error.value.value) == ("GS_BUCKET", "someone-elses")


def test_gcs_forbidden_bucket_message_says_how_to_fix():
    with pytest.raises(ConfigError) as error:
        gcs.get_bucket(_ForbiddenClient(), make_settings(GS_BUCKET="someone-elses"))
    assert "pick another GS_BUCKET" in str(error.value)


def test_secret_with_a_value_that_is_not_utf8_does_not_match():
    import base64
    import json

    body = json.dumps({"data": {"HF_TOKEN": base64.b64encode(b"\xff\xfe").decode(), "WANDB_API_KEY": ""}})
    assert kube_objects.secret_matches(make_settings(), body) is False


def test_secret_with_a_value_that_is_not_base64_does_not_match():
    assert kube_objects.secret_matches(make_settings(), '{"data": {"HF_TOKEN": "%%%"}}') is False


@pytest.mark.parametrize(("stderr", "wanted"), [
    ("Create request issued for: [nemo-lustre]\nCheck operation [projects/p/locations/us-central1-b/operations/"
     "operation-1733404912345-62ab] for status.", "operation-1733404912345-62ab"),
    ("Check operation [operation-9] for status.", "operation-9"),
    ("done: false\nname: projects/p/locations/us-central1-b/operations/operation-17-ab\n", "operation-17-ab"),
    ('{\n  "name": "projects/p/locations/z/operations/operation-9"\n}', "operation-9"),
    ("name: projects/p/locations/z/instances/nemo-lustre", ""),
    ("Created instance [nemo-lustre].", ""), ("", "")])
def test_lustre_operation_id_from_the_async_create(stderr, wanted):
    assert lustre.operation_id(stderr) == wanted


@pytest.mark.parametrize("namespace", ["nemo", "default"])
def test_what_lives_in_a_namespace_of_its_own_waits_for_the_apply_that_makes_it(namespace):
    # The KSA's apply makes a NAMESPACE that is not `default`; the Secret's and the claim's applies ran beside it
    # and failed on a first `up` (kubectl: namespaces "nemo" not found).
    from nemo_rl_gke import graph
    from nemo_rl_gke.resources import all_steps, prefetch_steps, ray_steps

    steps = all_steps(make_settings(NAMESPACE=namespace))
    inside = (storage_steps.SECRET, storage_steps.PVC, ray_steps.RELEASE, prefetch_steps.PREFETCH)
    waits = {name: storage_steps.KSA in graph.needed_by(steps, [name]) for name in inside}
    if namespace == "default":  # always there: the Secret and the claim need not wait
        assert not waits[storage_steps.SECRET] and not waits[storage_steps.PVC], waits
    else:
        assert all(waits.values()), waits


@pytest.mark.parametrize("edit", [
    {"time": "2026-12-05T09:00:00"},  # no zone: comparing it with now raised TypeError
    {"lustre_files": {"r1/driver.log": "x"}}, {"lustre_files": {"r1/driver.log": -1}}, {"objects": [1]},
    {"running": 5}, {"running": [1]},
    {"final": "false"}, {"deployed": 1},  # read by truth: the string "false" said final
])
def test_an_edited_export_record_proves_nothing_and_raises_nothing(edit):
    record = json.loads(exports.export_record(make_settings(), exports.RUNS_PATH, "gs://b/runs/",
                                              datetime.now(UTC), copied=3, objects={"r1/driver.log": 8}))
    assert exports.parse_export_record(json.dumps(record)) is not None
    assert exports.parse_export_record(json.dumps({**record, **edit})) is None


@pytest.mark.parametrize(("value", "read"), [(3, 3), ("3", 3), ("x", 0), (None, 0), (float("inf"), 0), ([], 0)])
def test_an_export_records_copied_count_is_read_tolerantly(value, read):
    assert exports.copied({"copied": value}) == read


def _pv(phase: str | None, namespace: str | None = "default", name: str = "lustre-pvc") -> dict:
    ref = {"namespace": namespace, "name": name} if namespace is not None else None
    return {"kind": "PersistentVolume", "metadata": {"name": "lustre-pv"},
            "spec": {"claimRef": ref}, **({"status": {"phase": phase}} if phase else {})}


@pytest.mark.parametrize(("pv", "binding"), [
    (None, "absent"),
    (_pv("Bound"), "ours"),
    (_pv("Available"), "ours"),  # waiting for our claim (applied before it)
    (_pv(None), "ours"),  # no status read: as applied
    (_pv("Available", namespace=None), "ours"),  # claimRef cleared by hand: our claim names it, and binds it
    (_pv("Released"), "stale"),  # our claim was deleted: a new one of the same name never binds it
    (_pv("Failed"), "stale"),
    (_pv("Released", "team-a"), "stale"),  # another namespace's, deleted: nothing mounts it
    (_pv("Available", "team-a"), "stale"),  # waiting for another namespace's claim, never made
    (_pv("Bound", "team-a"), "taken"),  # another NAMESPACE's claim holds it
    (_pv("Bound", "default", "my-claim"), "taken"),  # a claim made by hand
])
def test_pv_binding_tells_a_volume_our_claim_can_bind_from_one_to_make_anew_or_to_refuse(pv, binding):
    assert storage_steps.pv_binding(make_settings(), pv) == binding


def test_claim_fix_moves_a_namespace_of_ours_and_frees_a_claim_of_someone_else():
    s = make_settings(NAMESPACE="team-b")
    ours = storage_steps.claim_fix(s, {"namespace": "team-a", "name": "lustre-pvc"})
    assert "set NAMESPACE=team-a again" in ours and "then NAMESPACE=team-b and `invoke up`" in ours
    other = storage_steps.claim_fix(s, {"namespace": "default", "name": "my-claim"})
    assert "kubectl delete pvc my-claim --namespace=default" in other and "NAMESPACE" not in other


@pytest.mark.parametrize(("listed", "now", "deleted"), [
    ("Released", "Bound", False),  # bound again since the listing (another machine's storage.create): kept
    ("Released", "Released", True),
    ("Bound", "Released", False),  # the listing said ours: not asked again, nothing deleted
])
def test_the_stale_volume_is_deleted_only_as_the_cluster_has_it_now(listed, now, deleted):
    """`up` acts on the volume minutes after its listing (a Lustre create between): a delete goes by a fresh read."""
    import io

    from nemo_rl_gke.resources.inventory import Inventory
    from nemo_rl_gke.runner import Runner
    from nemo_rl_gke.tools import Ran

    asked: list[list[str]] = []

    class Answers:
        def run(self, argv, *, stdin, timeout):
            asked.append(list(argv))
            return Ran(0, json.dumps(_pv(now)), "") if "get" in argv else Ran(0, "", "")

    class Listing(Inventory):
        def as_listed(self, r, kind):
            assert kind == "kube:default"
            return [_pv(listed)]

    r = Runner(out=io.StringIO(), err=io.StringIO(), tools=Answers())
    storage_steps._stale_pv_gone(r, make_settings(), Listing(make_settings()))
    assert any("delete" in argv for argv in asked) == deleted, asked
    assert any("get" in argv for argv in asked) == (listed != "Bound"), asked


@pytest.mark.parametrize(("listed", "now", "outcome"), [
    (_pv("Bound", "team-a"), _pv("Released", "team-a"), "deleted"),  # let go since the listing: deleted
    (_pv("Bound", "team-a"), _pv("Bound", "team-a"), "refused"),  # still held: fails, so Lustre waits on it
    (_pv("Released"), None, "deleted"),  # the listing said ours to delete: not asked again
])
def test_the_teardowns_volume_delete_goes_by_the_volume_as_it_is_now(listed, now, outcome):
    import io

    from nemo_rl_gke.resources.inventory import Inventory
    from nemo_rl_gke.runner import Runner
    from nemo_rl_gke.tools import Ran, ToolError

    asked: list[list[str]] = []

    class Answers:
        def run(self, argv, *, stdin, timeout):
            asked.append(list(argv))
            return Ran(0, json.dumps(now), "") if "get" in argv else Ran(0, 'persistentvolume "lustre-pv" deleted', "")

    class Listing(Inventory):
        def as_listed(self, r, kind):
            return [listed]

    s = make_settings()
    (step,) = [st for st in storage_steps.steps(s, Listing(s)) if st.name == storage_steps.PV]
    r = Runner(out=io.StringIO(), err=io.StringIO(), tools=Answers())
    if outcome == "refused":
        with pytest.raises(ToolError, match="bound to the claim team-a/lustre-pvc since this teardown started"):
            step.delete(r)
    else:
        step.delete(r)
    assert any("delete" in argv for argv in asked) == (outcome == "deleted"), asked
    assert any("get" in argv for argv in asked) == (now is not None), asked
