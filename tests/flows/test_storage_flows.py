"""storage.create / status / export / delete on the fake cloud, the bucket on gcp-storage-emulator.

The network and the cluster are made once per module (invoke net.create cluster.create), and so is one
`invoke storage.create` on top. Each test starts from a copy of one of those states (`cloud`: before
storage, `made`: after it), fake cloud and emulator data alike, with its own emulator owned by the fake
project's number.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from support.fake import FAKE_BIN, REPO, TEST_HF_TOKEN, TEST_WANDB_KEY, FakeCloud, plant_run
from support.gcs_emulator import running_emulator

PROJECT = "my-nemo-project"
CONTEXT = f"k8s:gke_{PROJECT}_us-central1_nemo-rl"
LUSTRE_KEY = f"{PROJECT}/us-central1-b/nemo-lustre"


def _project_number() -> str:
    from fakecloud.handlers.gcloud_projects import project_number

    return project_number(PROJECT)


@pytest.fixture(scope="module")
def base_state(tmp_path_factory) -> Path:
    cloud = FakeCloud(tmp_path_factory.mktemp("storage-base"))
    cloud.write_env()
    done = cloud.invoke("net.create", "cluster.create")
    assert done.code == 0, done.output
    return cloud.state_dir


@contextlib.contextmanager
def _cloud_from(root: Path, state: Path, gcs_data: Path | None):
    fake = FakeCloud(root)
    fake.write_env()
    shutil.copytree(state, fake.state_dir)
    data = root / "gcs"
    if gcs_data is not None:
        shutil.copytree(gcs_data, data)
    with running_emulator(_project_number(), str(data)) as emulator:
        fake.env["STORAGE_EMULATOR_HOST"] = emulator.host
        fake.emulator = emulator  # type: ignore[attr-defined]
        yield fake


@pytest.fixture(scope="module")
def made_state(tmp_path_factory, base_state) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("storage-made")
    with _cloud_from(root, base_state, None) as fake:
        done = fake.invoke("storage.create")
        assert done.code == 0, done.output
    return fake.state_dir, root / "gcs"


@pytest.fixture
def cloud(tmp_path, base_state):
    """Network and cluster, no storage yet."""
    with _cloud_from(tmp_path, base_state, None) as fake:
        yield fake


@pytest.fixture
def made(tmp_path, made_state):
    """After one `invoke storage.create`."""
    with _cloud_from(tmp_path, *made_state) as fake:
        yield fake


def gcloud(fake: FakeCloud, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(FAKE_BIN / "gcloud"), *argv], env=fake.process_env(), capture_output=True,
                          text=True, check=False)


def bucket(fake: FakeCloud):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": fake.emulator.host})  # type: ignore[attr-defined]
    return client.lookup_bucket(f"nemo-rl-{PROJECT}")


def k8s(fake: FakeCloud, key: str):
    return fake.resources().get(CONTEXT, {}).get(key)


def created(fake: FakeCloud) -> FakeCloud:
    done = fake.invoke("storage.create")
    assert done.code == 0, done.output
    return fake


def test_storage_create_pv_carries_the_ip_from_describe(made):
    cloud = made
    described = json.loads(gcloud(cloud, "lustre", "instances", "describe", "nemo-lustre",
                                  "--location=us-central1-b", f"--project={PROJECT}", "--format=json").stdout)
    pv = k8s(cloud, "PersistentVolume//lustre-pv")
    assert pv["spec"]["csi"]["volumeAttributes"]["ip"] == described["mountPoint"].split("@")[0]


def test_storage_create_pv_has_instance_capacity_and_handle(made):
    cloud = made
    spec = k8s(cloud, "PersistentVolume//lustre-pv")["spec"]
    assert (spec["capacity"]["storage"], spec["csi"]["volumeHandle"]) == ("18000Gi", LUSTRE_KEY)


def test_storage_create_pvc_is_bound_to_the_pv(made):
    cloud = made
    assert k8s(cloud, "PersistentVolumeClaim/default/lustre-pvc")["spec"]["volumeName"] == "lustre-pv"


def test_storage_create_makes_the_bucket_and_binding(made):
    cloud = made
    policy = bucket(cloud).get_iam_policy(requested_policy_version=3)
    member = (f"principal://iam.googleapis.com/projects/{_project_number()}/locations/global/"
              f"workloadIdentityPools/{PROJECT}.svc.id.goog/subject/ns/default/sa/generic-ksa")
    assert member in policy["roles/storage.objectUser"]


def test_storage_create_twice_second_run_mutates_nothing(made):
    cloud = made
    before = len(cloud.calls())
    policy = bucket(cloud).get_iam_policy(requested_policy_version=3).etag
    created(cloud)
    assert cloud.mutating_calls(before) == []
    assert bucket(cloud).get_iam_policy(requested_policy_version=3).etag == policy


def test_storage_create_during_lustre_maintenance_mutates_nothing(made):
    # v1's UPGRADING and REPAIRING (and the deprecated UPDATING), and the docs' MAINTENANCE: Google's maintenance
    # of a ready instance, still mounted. They used to count as "not ready": a create again (ALREADY_EXISTS), then
    # up to an hour of waiting for ACTIVE.
    cloud = made
    for state in ("UPGRADING", "REPAIRING", "UPDATING", "MAINTENANCE"):
        before = len(cloud.calls())
        done = cloud.invoke("storage.create", timeout=60, FAKECLOUD_LUSTRE_MAINTENANCE=state)
        assert done.code == 0, done.output[-2000:]
        assert cloud.mutating_calls(before) == [], state


def test_storage_create_on_a_suspended_lustre_says_why_at_once(made):
    # SUSPENDED (v1, a Cloud KMS key the instance cannot use) was neither ready nor failed: an hour of waiting,
    # then "re-run to keep waiting". Waiting never mends it; its stateReason says what does.
    done = made.invoke("storage.create", timeout=60, FAKECLOUD_LUSTRE_MAINTENANCE="SUSPENDED")
    assert done.code == 1, done.output[-2000:]
    assert ("Lustre instance nemo-lustre is SUSPENDED (The Cloud KMS key version used by this instance is "
            "disabled.) instead of becoming ACTIVE, and waiting will not change that") in done.stderr


@pytest.mark.parametrize("pattern", [
    "compute addresses create", "vpc-peerings connect", "lustre instances create",
    "lustre instances describe", "apply --filename=-",
])
def test_storage_create_after_a_failure_rerun_completes(cloud, pattern):
    failed = cloud.invoke("storage.create", FAKECLOUD_FAIL=f"{pattern}:1:permanent")
    assert failed.code != 0
    created(cloud)
    assert k8s(cloud, "PersistentVolumeClaim/default/lustre-pvc") is not None


def test_storage_create_transient_lustre_error_is_retried(cloud):
    done = cloud.invoke("storage.create", FAKECLOUD_FAIL="lustre instances create:2:transient")
    assert done.code == 0, done.output


def test_storage_create_adds_our_range_to_an_existing_peering(cloud):
    for argv in (["compute", "addresses", "create", "sql-range", "--global", "--purpose=VPC_PEERING",
                  "--prefix-length=24", "--network=default", f"--project={PROJECT}"],
                 ["services", "vpc-peerings", "connect", "--ranges=sql-range", "--network=default",
                  f"--project={PROJECT}"]):
        assert gcloud(cloud, *argv).returncode == 0
    created(cloud)
    (peering,) = cloud.resources()["peering"].values()
    assert peering["reservedPeeringRanges"] == ["sql-range", "nemo-lustre-range"]


def _peering_calls(cloud, before=0):
    return [" ".join(c["argv"][:3]) for c in cloud.calls()[before:] if c["argv"][:2] == ["services", "vpc-peerings"]]


def test_storage_create_connects_the_peering_its_listing_found_absent_without_asking_again(cloud):
    # The listing before any create saw no peering on the network: `connect` (which cannot change another
    # service's peering, it fails) goes without a second `vpc-peerings list` on the Lustre chain.
    created(cloud)
    assert _peering_calls(cloud) == ["services vpc-peerings list", "services vpc-peerings connect"]


def test_storage_create_adds_our_range_to_a_peering_made_after_its_listing(cloud, monkeypatch):
    # Another service (Cloud SQL) peers the network while our range is being created, after our listing.
    from fakecloud import core

    key = ("gcloud", ("compute", "addresses", "create"))
    real = core.REGISTRY[key]

    def and_meanwhile(ctx):
        code = real.handler(ctx)
        if ctx.positionals[0] == "nemo-lustre-range":
            for argv in (["compute", "addresses", "create", "sql-range", "--global", "--purpose=VPC_PEERING",
                          "--prefix-length=24", "--network=default", f"--project={PROJECT}"],
                         ["services", "vpc-peerings", "connect", "--ranges=sql-range", "--network=default",
                          f"--project={PROJECT}"]):
                assert gcloud(cloud, *argv).returncode == 0
        return code

    monkeypatch.setitem(core.REGISTRY, key, core.Registered(and_meanwhile, real.mutating, real.latency))
    before = len(cloud.calls())
    created(cloud)
    (peering,) = cloud.resources()["peering"].values()
    assert peering["reservedPeeringRanges"] == ["sql-range", "nemo-lustre-range"]
    ours = [c for c in _peering_calls(cloud, before) if "--ranges=sql-range" not in c]
    assert ours[-3:] == ["services vpc-peerings connect", "services vpc-peerings list",
                         "services vpc-peerings update"], ours


def test_storage_delete_without_delete_data_keeps_lustre_and_bucket(made):
    cloud = made
    done = cloud.invoke("storage.delete", "--yes")
    assert done.code == 0, done.output
    assert LUSTRE_KEY in cloud.resources()["lustre"] and bucket(cloud) is not None


def test_storage_delete_without_delete_data_says_why_lustre_stays(made):
    cloud = made
    done = cloud.invoke("storage.delete", "--yes")
    (kept,) = [line for line in done.stderr.splitlines() if line.startswith("kept ")]
    assert "Lustre instance nemo-lustre" in kept and "--delete-data" in kept


def test_storage_delete_without_delete_data_removes_pv_and_pvc(made):
    cloud = made
    cloud.invoke("storage.delete", "--yes")
    assert k8s(cloud, "PersistentVolume//lustre-pv") is None
    assert k8s(cloud, "PersistentVolumeClaim/default/lustre-pvc") is None


def test_storage_delete_data_without_export_refuses_and_lists_the_loss(made):
    cloud = made
    done = cloud.invoke("storage.delete", "--delete-data", "--yes")
    assert done.code == 1
    assert "Lustre instance nemo-lustre" in done.stderr and "invoke storage.export" in done.stderr
    assert LUSTRE_KEY in cloud.resources()["lustre"]


def test_storage_delete_data_after_export_removes_lustre_and_keeps_the_bucket(made):
    cloud = made
    plant_run(cloud, "r1", size=100)
    assert cloud.invoke("storage.export").code == 0
    done = cloud.invoke("storage.delete", "--delete-data", "--yes")
    assert done.code == 0, done.output
    left = {kind: items for kind, items in cloud.resources().items()
            if kind in ("lustre", "peering", "address")}
    assert (left, bucket(cloud).name) == ({}, f"nemo-rl-{PROJECT}")
    assert bucket(cloud).get_blob("runs/r1/step_10/model.pt").size == 100


def test_storage_delete_bucket_deletes_it_after_naming_its_size(made):
    cloud = made
    plant_run(cloud, "r1", size=100)
    assert cloud.invoke("storage.export").code == 0
    done = cloud.invoke("storage.delete", "--delete-data", "--delete-bucket", "--yes")
    assert done.code == 0, done.output
    assert bucket(cloud) is None and re.search(rf"gs://nemo-rl-{PROJECT} holds \d+ objects, \d", done.stderr)


def test_storage_delete_data_export_of_nothing_without_a_head_pod_refuses(made):
    cloud = made
    assert cloud.invoke("storage.export").code == 0
    done = cloud.invoke("storage.delete", "--delete-data", "--yes")
    assert done.code == 1 and "copied nothing" in done.stderr and LUSTRE_KEY in cloud.resources()["lustre"]


def test_storage_delete_data_keeps_another_services_peering_range(cloud):
    for argv in (["compute", "addresses", "create", "sql-range", "--global", "--purpose=VPC_PEERING",
                  "--prefix-length=24", "--network=default", f"--project={PROJECT}"],
                 ["services", "vpc-peerings", "connect", "--ranges=sql-range", "--network=default",
                  f"--project={PROJECT}"]):
        assert gcloud(cloud, *argv).returncode == 0
    created(cloud)
    plant_run(cloud, "r1", size=100)
    cloud.invoke("storage.export")
    assert cloud.invoke("storage.delete", "--delete-data", "--yes").code == 0
    (peering,) = cloud.resources()["peering"].values()
    assert peering["reservedPeeringRanges"] == ["sql-range"]


def test_storage_export_lists_the_runs_checkpoints(made):
    cloud = made
    step = cloud.state_dir / "lustre" / "nemo-lustre" / "runs" / "r1" / "step_10"
    step.mkdir(parents=True)
    (step / "config.yaml").write_text("grpo: {}\n")
    (step / "training_info.json").write_text("{}")
    done = cloud.invoke("storage.export", "--run=r1")
    assert done.code == 0, done.output
    assert f"gs://nemo-rl-{PROJECT}/runs/r1/step_10/config.yaml" in done.stdout
    assert f"gs://nemo-rl-{PROJECT}/runs/r1/step_10/training_info.json" in done.stdout


def test_storage_export_of_a_run_that_is_not_there_fails(made):
    """A mistyped --run exported nothing and said "0 objects, 0 B" with exit 0 (the README walkthrough)."""
    done = made.invoke("storage.export", "--run=gsm8k-1")
    assert done.code == 1, done.output
    assert "nothing of run gsm8k-1 is in gs://" in done.stderr and "invoke job.list" in done.stderr, done.output


def test_storage_export_bad_run_id_is_usage_error(cloud):
    assert cloud.invoke("storage.export", "--run=../x").code == 2


def test_storage_status_shows_lustre_ip_and_pvc_phase(made):
    cloud = made
    done = cloud.invoke("storage.status")
    assert done.code == 0, done.output
    assert "ACTIVE, 18000 GiB, IP 10.90.0.2" in done.stdout and "Bound" in done.stdout


def test_storage_status_reads_everything_at_once(made):
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    from rounds import call_rounds

    before = len(made.calls())
    done = made.invoke("storage.status", process=True, FAKECLOUD_TIME_SCALE="1")
    assert done.code == 0, done.output
    calls = made.calls()[before:]
    assert len(calls) == 3 and call_rounds(calls) == 1, [(c["argv"][:3], c["launched"], c["end"]) for c in calls]


def test_storage_status_says_unknown_not_absent_when_kubectl_cannot_ask(made):
    # Without gke-gcloud-auth-plugin kubectl cannot ask the cluster: the claim and the Secret were "absent".
    done = made.invoke("storage.status", FAKECLOUD_NO_AUTH_PLUGIN="1")
    assert done.code == 0, done.output
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in done.stdout.splitlines()
            if line.count("│") >= 3}
    for row in ("PVC default/lustre-pvc", "Secret default/nemo-rl-secrets"):
        assert rows[row].startswith("unknown: ") and "gke-gcloud-auth-plugin" in rows[row], rows
    assert rows["Lustre nemo-lustre"].startswith("ACTIVE"), rows


def test_storage_status_says_unknown_not_absent_on_a_machine_without_the_clusters_context(made):
    # kubectl's "context was not found for specified context" matched "not found": the claim and the Secret,
    # both there, read "absent" on a second laptop that never fetched the credentials.
    done = made.invoke("storage.status", process=True, FAKECLOUD_MACHINE="a second laptop")
    assert done.code == 0, done.output
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in done.stdout.splitlines()
            if line.count("│") >= 3}
    for row in ("PVC default/lustre-pvc", "Secret default/nemo-rl-secrets"):
        assert rows[row].startswith("unknown: ") and "invoke cluster.credentials" in rows[row], rows


def test_storage_secret_is_updated_when_a_token_changes(made):
    cloud = made
    cloud.write_env(HF_TOKEN="hf_ANOTHERsecretVALUE999")
    before = len(cloud.calls())
    created(cloud)
    changed = [" ".join(c["argv"]) for c in cloud.mutating_calls(before)]
    assert changed == [f"--context={CONTEXT[4:]} apply --filename=-"]
    secret = k8s(cloud, "Secret/default/nemo-rl-secrets")
    assert secret["stringData"]["HF_TOKEN"] == "hf_ANOTHERsecretVALUE999"


def test_storage_secret_values_appear_in_no_argv_output_or_file(cloud):
    outputs = [created(cloud) and cloud.invoke("storage.status"), cloud.invoke("storage.export"),
               cloud.invoke("storage.delete", "--yes"), cloud.invoke("--dry", "storage.create")]
    argvs = json.dumps([c["argv"] for c in cloud.calls()])
    files = [p.read_text(errors="replace") for p in cloud.workdir.rglob("*") if p.is_file()
             and p.name != ".env"]
    haystack = argvs + "".join(o.output for o in outputs) + "".join(files)
    assert TEST_HF_TOKEN not in haystack and TEST_WANDB_KEY not in haystack


def test_storage_create_replaces_a_secret_whose_value_is_not_utf8(made):
    import base64

    cloud = made
    value = base64.b64encode(b"\xff\xfe").decode()
    bad = ("apiVersion: v1\nkind: Secret\nmetadata: {name: nemo-rl-secrets, namespace: default}\n"
           f"data: {{HF_TOKEN: {value}}}\n")
    subprocess.run([str(FAKE_BIN / "kubectl"), f"--context={CONTEXT[4:]}", "apply", "--filename=-"], input=bad,
                   env=cloud.process_env(), text=True, check=True, capture_output=True)
    done = cloud.invoke("storage.create")
    assert (done.code, "Traceback" in done.output) == (0, False), done.output
    again = cloud.invoke("storage.create")
    assert again.code == 0 and k8s(cloud, "Secret/default/nemo-rl-secrets")["stringData"]["HF_TOKEN"] == TEST_HF_TOKEN


def test_storage_status_with_an_unreachable_endpoint_names_it_fast(made):
    import socket
    import time

    with socket.socket() as sock:  # bound, not listening: refused, and no other process is handed the port
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        started = time.monotonic()
        done = made.invoke("storage.status", STORAGE_EMULATOR_HOST=f"http://127.0.0.1:{port}")
    assert (done.code, "Traceback" in done.output, time.monotonic() - started < 30) == (1, False, True), done.output
    assert f"Cloud Storage at http://127.0.0.1:{port} did not answer" in done.stderr


def test_storage_create_asks_nothing_its_own_steps_just_read(cloud):
    # The wait for Lustre describes the instance until it is READY; the PV takes the address and capacity
    # from that last describe, and the PVC its capacity from the PV this run applied.
    before = len(cloud.calls())
    done = cloud.invoke("storage.create")
    calls = [" ".join([c["tool"], *c["argv"]]) for c in cloud.calls()[before:]]
    created = next(i for i, w in enumerate(calls) if "lustre instances create" in w)
    waited = [w for w in calls[created:] if "lustre instances describe" in w]
    assert (done.code, len(waited), [w for w in calls if "get persistentvolume" in w]) == (0, 1, []), "\n".join(calls)
    pv = k8s(cloud, "PersistentVolume//lustre-pv")
    pvc = k8s(cloud, "PersistentVolumeClaim/default/lustre-pvc")
    assert (pv["spec"]["capacity"]["storage"], pvc["spec"]["resources"]["requests"]["storage"]) == ("18000Gi",) * 2


def test_storage_create_says_why_google_could_not_create_lustre(cloud):
    # A create that fails on Google's side (no capacity in the zone, a quota) says so only in its operation: the
    # instance goes. The error, not "NOT_FOUND instead of ACTIVE", must reach the user; a re-run creates it.
    failing = cloud.invoke("storage.create", FAKECLOUD_TIME_SCALE="0.001",
                           FAKECLOUD_LUSTRE_CREATE_ERROR="8:Insufficient capacity for the requested Lustre instance "
                                                         "in zone us-central1-b")
    assert failing.code == 1, failing.output[-3000:]
    assert ("Lustre instance nemo-lustre was not created: Insufficient capacity for the requested Lustre instance in "
            "zone us-central1-b (code 8), operation operation-") in failing.stderr
    assert "-fake. Fix what it says, then `invoke storage.create`." in failing.stderr
    assert "lustre" not in cloud.resources()
    again = cloud.invoke("storage.create", FAKECLOUD_TIME_SCALE="0.001")
    assert again.code == 0, again.output[-3000:]
    assert len(cloud.resources()["lustre"]) == 1


def _plant_checkpoint(cloud) -> None:
    step = cloud.state_dir / "lustre" / "nemo-lustre" / "runs" / "r1" / "step_10"
    step.mkdir(parents=True)
    (step / "training_info.json").write_text("{}")


def test_storage_export_longer_than_gcloud_waits_is_followed_to_its_end(made):
    # A waiting gcloud gives up on an operation after 30 minutes ("has not finished in 1800 seconds") while the
    # export goes on: a large model's checkpoints take longer. The export is started --async and its operation
    # followed until done.
    _plant_checkpoint(made)
    done = made.invoke("storage.export", "--run=r1", FAKECLOUD_TIME_SCALE="0.001",
                       FAKECLOUD_LUSTRE_EXPORT_SECONDS="2400")
    assert done.code == 0, done.output[-3000:]
    assert f"gs://nemo-rl-{PROJECT}/runs/r1/step_10/training_info.json" in done.stdout
    asked = [c["argv"] for c in made.calls() if c["argv"][:3] == ["lustre", "operations", "describe"]]
    assert asked, [c["argv"][:4] for c in made.calls()]


def test_storage_export_that_fails_on_googles_side_says_why_and_records_nothing(made):
    _plant_checkpoint(made)
    done = made.invoke("storage.export", "--run=r1", FAKECLOUD_TIME_SCALE="0.001",
                       FAKECLOUD_LUSTRE_EXPORT_ERROR="7:The Managed Lustre service agent lacks storage.objects.create "
                                                     f"on gs://nemo-rl-{PROJECT}")
    assert done.code == 1, done.output[-3000:]
    assert ("the Lustre export of /runs/r1 to gs://nemo-rl-my-nemo-project/runs/r1/ failed: The Managed Lustre "
            "service agent lacks storage.objects.create") in done.stderr
    assert "(code 7), operation operation-" in done.stderr and "Nothing counts as exported" in done.stderr


def test_storage_export_whose_operation_cannot_be_read_stops_at_once(made):
    # An operation it may not read (a permission, a wrong id) must not turn into six hours of blind polling.
    _plant_checkpoint(made)
    before = len(made.calls())
    done = made.invoke("storage.export", "--run=r1", FAKECLOUD_TIME_SCALE="0.001",
                       FAKECLOUD_LUSTRE_EXPORT_SECONDS="2400", FAKECLOUD_FAIL="operations describe:99:permanent")
    assert done.code == 1, done.output[-3000:]
    assert "gcloud failed with exit code 1: gcloud lustre operations describe operation-" in done.stderr
    asked = [c for c in made.calls()[before:] if c["argv"][:3] == ["lustre", "operations", "describe"]]
    assert len(asked) == 1


def _kubectl_json(fake: FakeCloud, *argv: str) -> dict:
    done = subprocess.run([str(FAKE_BIN / "kubectl"), f"--context={CONTEXT[4:]}", *argv, "--output=json"],
                          env=fake.process_env(), capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _claim_deleted_by_hand(fake: FakeCloud) -> str:
    """`kubectl delete pvc lustre-pvc` (or of its namespace) by a user: the volume, kept (Retain), is Released,
    still naming the old claim's uid. Returns that uid."""
    uid = _kubectl_json(fake, "get", "pvc", "lustre-pvc", "--namespace=default")["metadata"]["uid"]
    subprocess.run([str(FAKE_BIN / "kubectl"), f"--context={CONTEXT[4:]}", "delete", "pvc", "lustre-pvc",
                    "--namespace=default"], env=fake.process_env(), capture_output=True, check=True)
    pv = _kubectl_json(fake, "get", "pv", "lustre-pv")
    assert (pv["status"]["phase"], pv["spec"]["claimRef"]["uid"]) == ("Released", uid), pv
    return uid


@pytest.mark.parametrize("task", ["storage.create", "up"])
def test_a_claim_deleted_by_hand_is_bound_again_by_the_next_create(made, task):
    """A Released volume never binds a claim of the same name again: without the repair the new claim stayed
    Pending and the Ray pods with it ("pod has unbound immediate PersistentVolumeClaims"), `up` waiting 30 min."""
    old = _claim_deleted_by_hand(made)
    plan = made.invoke("plan", "--json")
    assert plan.code == 0, plan.output
    actions = {row["name"]: row["action"] for row in json.loads(plan.stdout)["resources"]}
    assert (actions["storage.pv"], actions["storage.pvc"], actions["storage.lustre"]) == ("create", "create", "leave")
    done = made.invoke(task, *(["--yes"] if task == "up" else []), timeout=240)
    assert done.code == 0, done.output[-3000:]
    assert "PersistentVolume lustre-pv was Released" in done.stderr, done.stderr
    pvc = _kubectl_json(made, "get", "pvc", "lustre-pvc", "--namespace=default")
    pv = _kubectl_json(made, "get", "pv", "lustre-pv")
    assert (pvc["status"]["phase"], pv["status"]["phase"]) == ("Bound", "Bound"), (pvc, pv)
    assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"] != old
    deleted = [c["argv"] for c in made.mutating_calls() if "delete" in c["argv"]]
    assert deleted == [[f"--context={CONTEXT[4:]}", "delete", "pvc", "lustre-pvc", "--namespace=default"],
                       [f"--context={CONTEXT[4:]}", "delete", "persistentvolume", "lustre-pv", "--ignore-not-found",
                        "--timeout=10m"]], deleted  # the pointer only: Lustre and its files are untouched


def test_a_volume_bound_to_another_namespaces_claim_is_refused_naming_both(made):
    """NAMESPACE changed after storage.create: the one volume of ours stays with the old claim (deleting it
    would wait for that claim, and take /data from a Ray cluster there); say so, and how to move."""
    made.write_env(NAMESPACE="team-b")
    before = len(made.calls())
    done = made.invoke("storage.create")
    assert done.code == 1, done.output
    assert ("PersistentVolume lustre-pv is bound to the claim default/lustre-pvc, not team-b/lustre-pvc"
            in done.stderr), done.stderr
    assert "NAMESPACE=default" in done.stderr and "invoke clean.storage" in done.stderr
    assert not any("persistentvolume" in c["argv"] for c in made.mutating_calls(before))
    pv = _kubectl_json(made, "get", "pv", "lustre-pv")
    assert (pv["status"]["phase"], pv["spec"]["claimRef"]["namespace"]) == ("Bound", "default")


def test_up_with_the_volume_bound_to_another_namespaces_claim_refuses_before_any_change(made):
    """The same through `up` and `plan`: a difference between what exists and the settings (exit 2, nothing
    changed), as for a cluster's GPU type."""
    made.write_env(NAMESPACE="team-b")
    plan = made.invoke("plan")
    assert plan.code == 0 and "bound to the claim default/lustre-pvc, the settings say team-b/lustre-pvc" \
        in plan.stdout, plan.output
    rows = {row["name"]: row for row in json.loads(made.invoke("plan", "--json").stdout)["resources"]}
    assert (rows["storage.pv"]["action"], rows["storage.pv"]["differs"]) == (
        "leave", "bound to the claim default/lustre-pvc, the settings say team-b/lustre-pvc (NAMESPACE)")
    before = len(made.calls())
    done = made.invoke("up", "--yes")
    assert done.code == 2, done.output
    assert "PersistentVolume: bound to the claim default/lustre-pvc, the settings say team-b/lustre-pvc" \
        in done.stderr and "set NAMESPACE=default again" in done.stderr, done.stderr
    assert made.mutating_calls(before) == []


@pytest.mark.parametrize("task", [("storage.delete",), ("clean.storage",), ("down",),
                                  ("storage.delete", "--delete-data", "--delete-unexported")])
def test_a_teardown_with_the_volume_bound_to_another_namespaces_claim_refuses_before_any_change(made, task):
    """The deployment of the other NAMESPACE uses the volume, and Lustre through it: the PV's delete would wait
    for its claim (pv-protection) for 10 minutes, then fail with the teardown half done; kept instead, Lustre
    (with --delete-data) went from under it. What exists does not match the settings: nothing is deleted."""
    made.write_env(NAMESPACE="team-b")
    before = len(made.calls())
    done = made.invoke(*task, "--yes")
    assert done.code == 2, done.output[-3000:]
    assert "PersistentVolume lustre-pv is bound to the claim default/lustre-pvc, not team-b/lustre-pvc" in \
        done.stderr and "run this with NAMESPACE=default" in done.stderr, done.stderr
    assert made.mutating_calls(before) == []
    pv = _kubectl_json(made, "get", "pv", "lustre-pv")
    assert (pv["status"]["phase"], "deletionTimestamp" in pv["metadata"]) == ("Bound", False), pv


def test_a_teardown_deletes_a_released_volume(made):
    _claim_deleted_by_hand(made)
    done = made.invoke("storage.delete", "--yes")
    assert done.code == 0, done.output[-3000:]
    assert k8s(made, "PersistentVolume//lustre-pv") is None


def test_down_delete_data_on_a_machine_without_the_clusters_context_still_sees_the_volume_held(made):
    """No kubectl context here: the run's listing of the namespace has no answer, so the volume another
    namespace's claim holds went unseen, and Lustre went from under that deployment. With Lustre at stake the
    Lustre step's guard asks the cluster itself (after the confirmation; the data guard's credentials)."""
    made.write_env(NAMESPACE="team-b")
    done = made.invoke("down", "--yes", "--delete-data", "--delete-unexported", process=True,
                       FAKECLOUD_MACHINE="a second laptop")
    assert done.code == 1, done.output[-3000:]
    assert "refusing to delete Lustre instance nemo-lustre: PersistentVolume lustre-pv is bound to the claim " \
           "default/lustre-pvc, not team-b/lustre-pvc" in done.stderr and "Nothing was deleted" in done.stderr
    assert "lustre" in made.resources() and not [c for c in made.mutating_calls() if "delete" in c["argv"]]


def test_down_on_a_machine_without_the_clusters_context_deletes_the_cluster_and_keeps_lustre(made):
    """Without --delete-data and without a kubectl context here, nothing reads the volume: it reads absent, goes
    with the cluster (and the other namespace's deployment with it, as `down` means), and Lustre is kept."""
    made.write_env(NAMESPACE="team-b")
    done = made.invoke("down", "--yes", process=True, FAKECLOUD_MACHINE="a second laptop")
    assert done.code == 0, done.output[-3000:]
    assert "lustre" in made.resources() and "cluster" not in made.resources()
    assert not any("persistentvolume" in c["argv"] and "delete" in c["argv"] for c in made.calls())


@pytest.mark.parametrize("task", ["storage.delete", "clean.storage"])
def test_a_storage_teardown_on_a_machine_without_the_clusters_context_refuses_as_anywhere(made, task):
    """They fetch the cluster's credentials before their plan (their deletes are kubectl's): the listing sees the
    volume another namespace's claim holds, and they stop before any change."""
    made.write_env(NAMESPACE="team-b")
    before = len(made.calls())
    done = made.invoke(task, "--yes", process=True, FAKECLOUD_MACHINE="a second laptop")
    assert done.code == 2, done.output[-3000:]
    assert "PersistentVolume lustre-pv is bound to the claim default/lustre-pvc, not team-b/lustre-pvc" in done.stderr
    assert not any("delete" in c["argv"] for c in made.mutating_calls(before))
