"""Ownership per deployment, through the real `invoke` on the fake cloud with the GCS emulator: another
deployment's `down` (CLUSTER_NAME=other) leaves nemo-rl's things alone; a bucket we did not create is used only
with GS_BUCKET_EXISTING=true, and then never deleted."""

from __future__ import annotations

from support.fake import FakeCloud, read_env_example

PROJECT = read_env_example()["PROJECT_ID"]
BUCKET = f"nemo-rl-{PROJECT}"


def _client(cloud: FakeCloud):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                          client_options={"api_endpoint": cloud.env["STORAGE_EMULATOR_HOST"]})


def _members(cloud: FakeCloud) -> set[str]:
    policy = _client(cloud).bucket(BUCKET).get_iam_policy(requested_policy_version=3)
    return set(policy.get("roles/storage.objectUser", set()))


def test_owner_another_deployments_down_leaves_ours_alone(cloud):
    assert cloud.invoke("up", "--yes").code == 0
    before = cloud.resources()
    members = _members(cloud)
    done = cloud.invoke("down", "--yes", "--delete-data", "--delete-bucket", CLUSTER_NAME="other")
    assert done.code == 0, done.output[-3000:]
    assert "other deployment(s) nemo-rl in" in done.stderr, done.stderr
    assert "another deployment shares them (above), whatever the flags" in done.stderr
    after = cloud.resources()
    assert {kind: sorted(items) for kind, items in after.items()} == {
        kind: sorted(items) for kind, items in before.items()}
    assert _members(cloud) == members and _client(cloud).lookup_bucket(BUCKET) is not None


def test_owner_firewall_rule_is_named_and_described_per_deployment(cloud):
    assert cloud.invoke("net.create").code == 0
    (rule,) = cloud.resources()["firewall"].values()
    assert rule["name"].endswith("nemo-gvnic-nemo-rl-internal") and "deployment=nemo-rl" in rule["description"]


def test_owner_last_deployment_down_deletes_the_shared_things(cloud):
    assert cloud.invoke("up", "--yes").code == 0
    done = cloud.invoke("down", "--yes", "--delete-data", "--delete-bucket")
    assert done.code == 0, done.output[-3000:]
    assert cloud.resources() == {} and _client(cloud).lookup_bucket(BUCKET) is None


def test_owner_bucket_without_our_label_is_refused_without_gs_bucket_existing(cloud):
    _client(cloud).create_bucket(BUCKET)
    done = cloud.invoke("up", "--yes")
    assert (done.code, "GS_BUCKET_EXISTING=true" in done.stderr, cloud.mutating_calls()) == (2, True, [])


def test_owner_users_own_bucket_is_used_and_never_deleted(cloud):
    bucket = _client(cloud).create_bucket(BUCKET)
    bucket.blob("mine/notes.txt").upload_from_string("the user's own data")
    own = {"GS_BUCKET": BUCKET, "GS_BUCKET_EXISTING": "true"}  # the user names the bucket they own
    assert cloud.invoke("up", "--yes", **own).code == 0
    done = cloud.invoke("down", "--yes", "--delete-data", "--delete-bucket", **own)
    assert done.code == 0, done.output[-3000:]
    assert _client(cloud).bucket(BUCKET).blob("mine/notes.txt").download_as_text() == "the user's own data"
    assert "GS_BUCKET_EXISTING" in done.stderr


def test_owner_gs_bucket_existing_without_the_bucket_is_a_config_error(cloud):
    done = cloud.invoke("up", "--yes", GS_BUCKET=BUCKET, GS_BUCKET_EXISTING="true")
    assert (done.code, "GS_BUCKET_EXISTING" in done.stderr, cloud.mutating_calls()) == (2, True, [])
