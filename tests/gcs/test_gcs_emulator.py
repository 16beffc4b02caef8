"""nemo_rl_gke.gcs against a real local GCS server (gcp-storage-emulator)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest

from nemo_rl_gke import gcs, gcs_client
from nemo_rl_gke.commands import buckets, exports
from nemo_rl_gke.runner import Runner
from nemo_rl_gke.settings import ConfigError, Settings, validate

NUMBER = "1234"  # the emulator's project number (support.gcs_emulator.DEFAULT_PROJECT_NUMBER)


def make_settings(**overrides) -> Settings:
    base = dict(PROJECT_ID="my-nemo-project", CONTROL_PLANE_LOCATION="us-central1",
                NODE_LOCATION="us-central1-b", CLUSTER_NAME="nemo-rl", GS_BUCKET="nemo-ckpt-test")
    return validate(Settings(**{**base, **overrides}))


def runner(dry: bool = False) -> Runner:
    return Runner(dry=dry, out=io.StringIO(), err=io.StringIO())


@pytest.fixture
def recorded(monkeypatch):
    """Every POST body the storage client sends (what the real service would receive)."""
    from google.cloud.storage.client import Client

    sent: list[tuple[str, dict]] = []
    original = Client._post_resource

    def record(self, path, data, *args, **kwargs):
        sent.append((path, json.loads(json.dumps(data, default=list))))
        return original(self, path, data, *args, **kwargs)

    monkeypatch.setattr(Client, "_post_resource", record)
    return sent


def test_gcs_create_bucket_sends_region_uniform_access_and_hierarchical_namespace(gcs_emulator, recorded):
    s = make_settings()
    gcs.create_bucket(runner(), s, NUMBER)
    (path, body), = [(p, b) for p, b in recorded if p == "/b"]
    assert (body["name"], body["location"]) == ("nemo-ckpt-test", "us-central1")
    assert body["iamConfiguration"]["uniformBucketLevelAccess"]["enabled"] is True
    assert body["hierarchicalNamespace"] == {"enabled": True}


def test_gcs_create_bucket_makes_it_exist(gcs_emulator):
    s = make_settings()
    r = runner()
    assert gcs.bucket_exists(r, s, NUMBER) is False
    gcs.create_bucket(r, s, NUMBER)
    assert gcs.bucket_exists(r, s, NUMBER) is True


def test_gcs_create_bucket_again_says_exists(gcs_emulator):
    s = make_settings()
    gcs.create_bucket(runner(), s, NUMBER)
    assert gcs.create_bucket(runner(), s, NUMBER) == "exists"


def test_gcs_bucket_of_another_project_names_gs_bucket(gcs_emulator):
    s = make_settings()
    gcs.create_bucket(runner(), s, NUMBER)
    with pytest.raises(ConfigError) as error:
        gcs.bucket_exists(runner(), s, "999999999")
    assert error.value.key == "GS_BUCKET" and "another GS_BUCKET" in error.value.fix


def test_gcs_binding_round_trip_adds_and_removes_only_our_member(gcs_emulator):
    s = make_settings()
    r = runner()
    gcs.create_bucket(r, s, NUMBER)
    bucket = gcs_client.client(s).bucket(s.bucket)
    other = "user:someone@example.com"
    gcs.add_binding(bucket, other)
    gcs.ensure_binding(r, s, NUMBER)
    member = buckets.workload_principal(s, NUMBER)
    policy = bucket.get_iam_policy(requested_policy_version=3)
    assert {other, member} <= set(policy[buckets.OBJECT_USER_ROLE])
    gcs.drop_binding(r, s, NUMBER)
    policy = bucket.get_iam_policy(requested_policy_version=3)
    assert set(policy[buckets.OBJECT_USER_ROLE]) == {other}


def test_gcs_binding_exists_after_ensure(gcs_emulator):
    s = make_settings()
    r = runner()
    gcs.create_bucket(r, s, NUMBER)
    assert gcs.binding_exists(r, s, NUMBER) is False
    gcs.ensure_binding(r, s, NUMBER)
    assert gcs.binding_exists(r, s, NUMBER) is True


def test_gcs_ensure_binding_twice_changes_nothing(gcs_emulator):
    s = make_settings()
    r = runner()
    gcs.create_bucket(r, s, NUMBER)
    gcs.ensure_binding(r, s, NUMBER)
    assert gcs.ensure_binding(r, s, NUMBER) == "exists"


def test_gcs_list_prefix_lists_one_runs_checkpoints(gcs_emulator):
    s = make_settings()
    gcs.create_bucket(runner(), s, NUMBER)
    bucket = gcs_client.client(s).bucket(s.bucket)
    for name in ("runs/a/step_10/config.yaml", "runs/a/step_20/config.yaml", "runs/ab/step_5/config.yaml",
                 "runs/b/step_10/config.yaml"):
        bucket.blob(name).upload_from_string("x" * 3)
    _, _, prefix = exports.export_paths(s, "a")
    assert gcs.list_prefix(s, prefix) == [("runs/a/step_10/config.yaml", 3),
                                          ("runs/a/step_20/config.yaml", 3)]


def test_gcs_summary_counts_objects_and_bytes(gcs_emulator):
    s = make_settings()
    gcs.create_bucket(runner(), s, NUMBER)
    bucket = gcs_client.client(s).bucket(s.bucket)
    bucket.blob("runs/a/x").upload_from_string("12345")
    bucket.blob("runs/b/y").upload_from_string("123")
    marker = bucket.get_blob(gcs.MARKER_OBJECT).size  # written by create_bucket: the bucket is ours
    summary = gcs.summary(s)
    assert (summary["objects"], summary["bytes"]) == (3, 8 + marker)


def test_gcs_bucket_we_create_is_ours_and_a_users_is_not(gcs_emulator):
    s = make_settings()
    gcs.create_bucket(runner(), s, NUMBER)
    users = gcs_client.client(s).create_bucket("users-own-bucket")
    assert (gcs.is_ours(gcs_client.client(s).get_bucket(s.bucket)), gcs.is_ours(users)) == (True, False)


def test_gcs_export_record_round_trip_is_fresh(gcs_emulator):
    s = make_settings()
    gcs.create_bucket(runner(), s, NUMBER)
    now = datetime.now(UTC)
    gcs.write_export_record(s, exports.export_record(s, exports.RUNS_PATH, f"gs://{s.bucket}/runs/", now, copied=2))
    assert exports.export_is_fresh(gcs.read_export_record(s), now + timedelta(hours=1))


def test_gcs_generations_change_when_an_object_is_rewritten(gcs_emulator):
    s = make_settings()
    gcs.create_bucket(runner(), s, NUMBER)
    blob = gcs_client.client(s).bucket(s.bucket).blob("runs/a/x")
    blob.upload_from_string("1")
    before = gcs.generations(s, "runs/")
    blob.upload_from_string("2")
    after = gcs.generations(s, "runs/")
    assert set(before) == set(after) == {"runs/a/x"} and before["runs/a/x"] != after["runs/a/x"]


def test_gcs_read_export_record_without_one_is_none(gcs_emulator):
    s = make_settings()
    gcs.create_bucket(runner(), s, NUMBER)
    assert gcs.read_export_record(s) is None


def test_gcs_delete_bucket_removes_it_with_its_objects(gcs_emulator):
    s = make_settings()
    r = runner()
    gcs.create_bucket(r, s, NUMBER)
    gcs_client.client(s).bucket(s.bucket).blob("runs/a/x").upload_from_string("1")
    gcs.delete_bucket(r, s)
    assert gcs.bucket_exists(r, s, NUMBER) is False


def test_gcs_delete_bucket_deletes_the_lock_last_and_goes_on_past_an_object_gone_already(gcs_emulator, monkeypatch):
    from google.api_core import exceptions
    from google.cloud.storage import Blob

    from nemo_rl_gke import lock

    s = make_settings()
    r = runner()
    gcs.create_bucket(r, s, NUMBER)
    bucket = gcs_client.client(s).bucket(s.bucket)
    for name in ("a-first", lock.lease_name(s), "runs/a/x", "runs/b/y", "zz-last"):
        bucket.blob(name).upload_from_string("1")
    lease = gcs_client.client(s).bucket(s.bucket).get_blob(lock.lease_name(s))
    monkeypatch.setattr(lock, "HELD", [(s, "down", lease.generation)])  # this teardown's lease
    deleted: list[str] = []
    original = Blob.delete

    def delete(self, *args, **kwargs):
        if self.name == "runs/a/x" and not deleted.count("gone"):  # deleted by another call meanwhile: 404
            deleted.append("gone")
            original(self, *args, **kwargs)
            raise exceptions.NotFound("No such object")
        deleted.append(self.name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Blob, "delete", delete)
    assert gcs.delete_bucket(r, s) is None
    assert deleted[-1] == lock.lease_name(s) and "runs/b/y" in deleted and "zz-last" in deleted, deleted
    assert gcs.bucket_exists(r, s, NUMBER) is False


@pytest.mark.parametrize("holder", ["nobody here", "taken over"])
def test_gcs_delete_bucket_keeps_it_with_a_lock_this_run_does_not_hold(gcs_emulator, monkeypatch, holder):
    # Another run's lease (--force-unlock during the teardown): not deleted, nor the bucket under it.
    from nemo_rl_gke import lock

    s = make_settings()
    r = runner()
    gcs.create_bucket(r, s, NUMBER)
    blob = gcs_client.client(s).bucket(s.bucket).blob(lock.lease_name(s))
    blob.upload_from_string("{}")
    held = [] if holder == "nobody here" else [(s, "down", blob.generation)]
    blob.upload_from_string('{"host": "laptop-2"}')  # replaced: a new generation
    gcs_client.client(s).bucket(s.bucket).blob("runs/a/ckpt").upload_from_string("weights")
    monkeypatch.setattr(lock, "HELD", held)
    with pytest.raises(gcs_client.StorageError, match="another run holds the lock.*Nothing in it was deleted"):
        gcs.delete_bucket(r, s)
    left = {b.name for b in gcs_client.client(s).list_blobs(s.bucket)}
    assert "runs/a/ckpt" in left and lock.lease_name(s) in left


@pytest.mark.parametrize("expires_in", [3600, -60])
def test_gcs_delete_bucket_keeps_it_while_another_deployment_holds_a_live_lock_in_it(gcs_emulator, monkeypatch,
                                                                                   expires_in):
    # One bucket per project by default, one lock per cluster: another deployment's `up`, before its cluster
    # exists, holds its lock in it (no cluster yet, so the teardown did not count it as sharing).
    import json
    import time

    from nemo_rl_gke import lock

    s = make_settings()
    r = runner()
    gcs.create_bucket(r, s, NUMBER)
    bucket = gcs_client.client(s).bucket(s.bucket)
    ours = bucket.blob(lock.lease_name(s))
    ours.upload_from_string("{}")
    monkeypatch.setattr(lock, "HELD", [(s, "down", ours.generation)])
    bucket.blob("nemo-rl-gke/lock-other.json").upload_from_string(json.dumps(
        lock.lease_body("up", time.time() - 3 * 3600 + expires_in, host="laptop-2", pid=7)))
    if expires_in > 0:
        with pytest.raises(gcs_client.StorageError, match="another deployment .* is at work"):
            gcs.delete_bucket(r, s)
        assert bucket.get_blob("nemo-rl-gke/lock-other.json") and bucket.get_blob(lock.lease_name(s))
    else:  # a lock left expired (its run crashed) holds nothing
        assert gcs.delete_bucket(r, s) is None
        assert gcs.bucket_exists(r, s, NUMBER) is False
        assert lock.HELD == []  # let go of with its bucket: nothing left to renew or release


def test_gcs_delete_bucket_that_is_not_empty_after_its_objects_says_what_deletes_the_rest(gcs_emulator,
                                                                                          monkeypatch):
    from google.api_core import exceptions
    from google.cloud.storage import Bucket

    s = make_settings()
    r = runner()
    gcs.create_bucket(r, s, NUMBER)

    def conflict(self, *args, **kwargs):  # Cloud Storage's 409 (the emulator keeps no folders to refuse on)
        raise exceptions.Conflict("The bucket you tried to delete is not empty.")

    monkeypatch.setattr(Bucket, "delete", conflict)
    with pytest.raises(gcs_client.StorageError) as refused:
        gcs.delete_bucket(r, s)
    assert f"`gcloud storage rm --recursive gs://{s.bucket}` deletes them and the bucket" in str(refused.value)


def test_gcs_dry_create_touches_no_server(gcs_emulator):
    s = make_settings()
    r = runner(dry=True)
    gcs.create_bucket(r, s, NUMBER)
    gcs.ensure_binding(r, s, NUMBER)
    assert gcs_client.client(s).lookup_bucket(s.bucket) is None


def test_gcs_dry_create_prints_the_gcloud_equivalent(gcs_emulator):
    s = make_settings()
    r = runner(dry=True)
    gcs.create_bucket(r, s, NUMBER)
    lines = r.out.getvalue().splitlines()
    assert lines == [gcs.EQUIVALENT_NOTE, "$ gcloud storage buckets create gs://nemo-ckpt-test "
                     "--project=my-nemo-project --location=us-central1 --enable-hierarchical-namespace "
                     "--uniform-bucket-level-access"]


def test_gcs_client_fetches_no_bucket_metadata_behind_our_back(gcs_emulator, monkeypatch):
    """google-cloud-storage 3.17 answers an object call by starting a thread that fetches the bucket's metadata
    (for OpenTelemetry attributes; we install no OpenTelemetry): one more request per run, retried for up to
    two minutes on failure. Our client turns it off (its own switch, which an explicit setting overrides)."""
    from google.cloud.storage import _bucket_metadata_cache

    monkeypatch.delenv("DISABLE_GCS_PYTHON_CLIENT_OTEL_BUCKET_METADATA", raising=False)
    queued: list[str] = []
    fetch = _bucket_metadata_cache.BucketMetadataCache.get_or_queue_fetch
    monkeypatch.setattr(_bucket_metadata_cache.BucketMetadataCache, "get_or_queue_fetch",
                        lambda cache, name: queued.append(name) or fetch(cache, name))
    s = make_settings()
    gcs.create_bucket(runner(), s, NUMBER)
    gcs_client.client(s).bucket(s.bucket).blob("runs/a/x").upload_from_string("12345")
    assert queued == []
