"""The bucket, through the google-cloud-storage client (imported lazily: `invoke --list` stays fast).

The client is not a process, so it does not go through the Runner's `run`; it does honour the Runner's
dry mode: in `invoke --dry` nothing here touches the network, and each operation prints its gcloud
equivalent (`$ gcloud storage buckets create gs://… --location=…`) after a comment line saying so, which
keeps the dry-run plan complete and every line parseable by the real gcloud. Real runs print the same
equivalent to stderr, as the Runner does for commands.

STORAGE_EMULATOR_HOST (e.g. http://127.0.0.1:9023) points the client at a local GCS server with
anonymous credentials: the tests and the fake-cloud flows use gcp-storage-emulator that way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

from . import names
from .commands import buckets, exports
from .gcs_client import CALL_TIMEOUT, StorageError, api_error, bounded, client, retry
from .runner import Runner
from .settings import ConfigError, Settings

if TYPE_CHECKING:
    # google-cloud-storage has no type information: these are Any to mypy, named for the reader.
    from google.api_core.iam import Policy
    from google.cloud.storage import Bucket, Client


# The project number, or the call that finds it (a `gcloud projects describe` when nothing listed it).
Number = str | Callable[[], str]


def number_of(project_number: Number) -> str:
    """The project number itself (asking for it now, when it was passed as the call that finds it)."""
    return project_number() if callable(project_number) else project_number


EQUIVALENT_NOTE = "# google-cloud-storage client call; the equivalent gcloud command:"


def show(r: Runner, argv: Sequence[str]) -> None:
    """The equivalent command: on stdout in a dry run (the plan), on stderr otherwise (the log)."""
    r.say(EQUIVALENT_NOTE, err=not r.dry)
    r.show_command(list(argv))


def unreachable(s: Settings, detail: str) -> ConfigError:
    return ConfigError("GS_BUCKET", s.bucket,
                       f"the bucket exists but is not ours ({detail}). Bucket names are global: pick another "
                       f"GS_BUCKET, e.g. nemo-rl-{s.PROJECT_ID}, or get access to this one.")


# ---- the bucket --------------------------------------------------------------------------------------------
def new_bucket(gcs: Client, s: Settings) -> Bucket:
    """The Bucket we create: uniform bucket-level access and hierarchical namespace (which needs uniform
    access); the create passes the location (the region)."""
    bucket = gcs.bucket(s.bucket)
    bucket.iam_configuration.uniform_bucket_level_access_enabled = True
    bucket.hierarchical_namespace_enabled = True
    bucket.labels = {"managed-by": names.MANAGED_BY, names.DEPLOYMENT_KEY: s.CLUSTER_NAME}
    return bucket


@bounded
def get_bucket(gcs: Client, s: Settings, project_number: Number | None = None) -> Bucket | None:
    """Our bucket, or None if there is none. Raises ConfigError if it exists and is another project's
    (project_number, or the call that finds it, is asked only then: a first `up` needs no number to start)."""
    from google.api_core import exceptions

    try:
        bucket = gcs.get_bucket(s.bucket, timeout=CALL_TIMEOUT, retry=retry())
    except exceptions.NotFound:
        return None
    except exceptions.Forbidden as exc:
        raise unreachable(s, f"access denied: {getattr(exc, 'message', exc)}") from None
    except exceptions.GoogleAPICallError as exc:
        raise api_error(f"reading gs://{s.bucket}", exc) from None
    owner = str(bucket.project_number or "")
    wanted = number_of(project_number) if project_number is not None else None
    if wanted and owner and owner != str(wanted):
        raise unreachable(s, f"it belongs to project number {owner}, not {wanted}")
    return bucket


@bounded
def bucket_exists(r: Runner, s: Settings, project_number: Number | None = None) -> bool:
    if r.dry:
        return False
    return get_bucket(client(s), s, project_number) is not None


@bounded
def create_bucket(r: Runner, s: Settings, project_number: Number | None = None) -> str | None:
    """Create the bucket; "exists" if it appeared meanwhile and is ours; ConfigError if another's."""
    from google.api_core import exceptions

    show(r, buckets.bucket_create_equivalent(s))
    if r.dry:
        return None
    gcs = client(s)
    try:
        gcs.create_bucket(new_bucket(gcs, s), project=s.PROJECT_ID, location=s.region,
                          timeout=CALL_TIMEOUT, retry=retry())
    except exceptions.Conflict:
        # The name is taken: by us (a race, or a create that timed out) or by another project.
        if get_bucket(gcs, s, project_number) is None:
            raise unreachable(s, "the name is taken") from None
        return "exists"
    except exceptions.Forbidden as exc:
        raise unreachable(s, f"access denied: {getattr(exc, 'message', exc)}") from None
    except exceptions.GoogleAPICallError as exc:
        raise api_error(f"creating gs://{s.bucket}", exc) from None
    import json

    gcs.bucket(s.bucket).blob(MARKER_OBJECT).upload_from_string(
        json.dumps({"managed-by": names.MANAGED_BY, names.DEPLOYMENT_KEY: s.CLUSTER_NAME}),
        content_type="application/json", timeout=CALL_TIMEOUT, retry=retry())
    return None


# Written into every bucket we create, next to the label: a marker that every Cloud Storage server keeps
# (gcp-storage-emulator drops labels), and that a user's own bucket never has.
MARKER_OBJECT = "nemo-rl-gke/managed-by.json"


def is_ours(bucket: Bucket) -> bool:
    """We created the bucket: our managed-by label, or our marker object; a user's own bucket has neither."""
    if (bucket.labels or {}).get("managed-by") == names.MANAGED_BY:
        return True
    return bool(bucket.blob(MARKER_OBJECT).exists(timeout=CALL_TIMEOUT, retry=retry()))


@bounded
def delete_bucket(r: Runner, s: Settings) -> str | None:
    """Delete every object, then the bucket; only a bucket we created ("kept" otherwise)."""
    from google.api_core import exceptions

    show(r, buckets.bucket_delete_equivalent(s))
    if r.dry:
        return None
    gcs = client(s)
    found = get_bucket(gcs, s)
    if found is None:
        return "absent"
    if not is_ours(found):
        r.say(f"kept gs://{s.bucket}: not created by nemo-rl-gke (no managed-by={names.MANAGED_BY} label)", err=True)
        return "kept"
    from . import lock

    lease = lock.lease_name(s)
    ours = lock.held_generation(s)  # the lock object is deleted only at the generation this run holds
    try:
        bucket = gcs.bucket(s.bucket)
        blobs = list(gcs.list_blobs(s.bucket, timeout=CALL_TIMEOUT, retry=retry()))
        # Before anything is deleted: another run's lock in it (ours taken over with --force-unlock), or a live
        # lock of another deployment of the project (its `up` before its cluster exists) keeps the bucket whole.
        for blob in blobs:
            if blob.name == lease and blob.generation != ours:
                raise StorageError(f"Cloud Storage: not deleting gs://{s.bucket}: another run holds the lock of "
                                   f"{s.PROJECT_ID}/{s.CLUSTER_NAME} ({blob.name}; taken over with --force-unlock "
                                   f"during this teardown?). Nothing in it was deleted.")
            if blob.name != lease and blob.name.startswith(lock.LEASE_PREFIX) and lock.live(blob):
                raise StorageError(f"Cloud Storage: not deleting gs://{s.bucket}: another deployment of "
                                   f"{s.PROJECT_ID} is at work ({blob.name} is a live lock). Nothing in it was "
                                   f"deleted; run the teardown again once it is done.")
        # The deployment's lock last: it holds off other machines until the bucket goes (the teardown's last
        # delete). An object gone already (a retry whose first try deleted it, another delete) is skipped.
        for blob in sorted(blobs, key=lambda blob: blob.name == lease):
            try:
                blob.delete(if_generation_match=ours if blob.name == lease else None, timeout=CALL_TIMEOUT,
                            retry=retry())
            except exceptions.NotFound:
                continue
            except exceptions.PreconditionFailed:
                raise StorageError(f"Cloud Storage: not deleting gs://{s.bucket}: another run took the lock of "
                                   f"{s.PROJECT_ID}/{s.CLUSTER_NAME} during this teardown (--force-unlock); its "
                                   f"other objects were deleted.") from None
            if blob.name == lease:
                lock.gone_with_bucket(s)
        bucket.delete(timeout=CALL_TIMEOUT, retry=retry())
    except exceptions.NotFound:
        return "absent"
    except exceptions.Conflict as exc:
        raise api_error(f"deleting gs://{s.bucket}", exc, hint=_not_empty(gcs, s, lease)) from None
    except exceptions.GoogleAPICallError as exc:
        raise api_error(f"deleting gs://{s.bucket}", exc) from None
    return None


def _not_empty(gcs: Client, s: Settings, lease: str) -> str:
    """What to say of a bucket its delete found not empty after every object of it was deleted: another run's
    lock taken since ours went, something written meanwhile, or (not verified) the folders of a
    hierarchical-namespace bucket, which google-cloud-storage cannot delete and gcloud's rm -r does."""
    from google.api_core import exceptions

    try:
        if gcs.bucket(s.bucket).get_blob(lease, timeout=CALL_TIMEOUT, retry=retry()) is not None:
            return "another run took the lock after this teardown let go of it: the bucket is kept with it"
        left = [blob.name for blob in gcs.list_blobs(s.bucket, max_results=6, timeout=CALL_TIMEOUT, retry=retry())]
    except exceptions.GoogleAPICallError:
        left = []
    if left:
        return (f"it holds {', '.join(left[:5])}{', …' if len(left) > 5 else ''} (written since its objects were "
                f"deleted): run the teardown again")
    return (f"its objects were deleted. If it still holds folders (a hierarchical-namespace bucket keeps them), "
            f"`gcloud storage rm --recursive gs://{s.bucket}` deletes them and the bucket")


class BucketSummary(TypedDict):
    location: str
    objects: int
    bytes: int


class BucketListing(TypedDict):
    name: str
    labels: dict[str, str]


@bounded
def summary(s: Settings) -> BucketSummary | None:
    """location, object count and bytes held, or None without a bucket (for status)."""
    gcs = client(s)
    bucket = get_bucket(gcs, s)
    if bucket is None:
        return None
    count = size = 0
    for blob in gcs.list_blobs(s.bucket, timeout=CALL_TIMEOUT, retry=retry()):
        count += 1
        size += int(blob.size or 0)
    return {"location": bucket.location or "", "objects": count, "bytes": size}


@bounded
def list_prefix(s: Settings, prefix: str) -> list[tuple[str, int]]:
    """(object name, size) under prefix, in name order."""
    from google.api_core import exceptions

    try:
        return sorted((b.name, int(b.size or 0)) for b in client(s).list_blobs(s.bucket, prefix=prefix,
                                                                                timeout=CALL_TIMEOUT, retry=retry()))
    except exceptions.NotFound:
        return []
    except exceptions.GoogleAPICallError as exc:
        raise api_error(f"listing gs://{s.bucket}/{prefix}", exc) from None


@bounded
def list_buckets(s: Settings) -> list[BucketListing]:
    """Every bucket of the project: name and labels (for the leftover scan)."""
    return [{"name": b.name, "labels": dict(b.labels or {})}
            for b in client(s).list_buckets(timeout=CALL_TIMEOUT, retry=retry())]


# ---- the Workload Identity binding -------------------------------------------------------------------------
def _policy(bucket: Bucket) -> Policy:
    policy: Policy = bucket.get_iam_policy(requested_policy_version=3, timeout=CALL_TIMEOUT, retry=retry())
    return policy


def has_binding(bucket: Bucket, member: str, role: str = buckets.OBJECT_USER_ROLE) -> bool:
    return any(b.get("role") == role and member in b.get("members", ()) for b in _policy(bucket).bindings)


def add_binding(bucket: Bucket, member: str, role: str = buckets.OBJECT_USER_ROLE) -> bool:
    """Add member to role (read-modify-write; the policy's etag guards a concurrent change). True if added."""
    policy = _policy(bucket)
    for binding in policy.bindings:
        if binding.get("role") == role and not binding.get("condition"):
            if member in binding["members"]:
                return False
            binding["members"] = set(binding["members"]) | {member}
            break
    else:
        policy.bindings.append({"role": role, "members": {member}})
    bucket.set_iam_policy(policy, timeout=CALL_TIMEOUT)
    return True


def remove_binding(bucket: Bucket, member: str, role: str = buckets.OBJECT_USER_ROLE) -> bool:
    """Remove member from role, leaving every other member and role alone. True if removed."""
    policy = _policy(bucket)
    changed = False
    for binding in list(policy.bindings):
        if binding.get("role") == role and member in binding.get("members", ()):
            binding["members"] = set(binding["members"]) - {member}
            changed = True
            if not binding["members"]:
                policy.bindings.remove(binding)
    if changed:
        bucket.set_iam_policy(policy, timeout=CALL_TIMEOUT)
    return changed


@bounded
def binding_exists(r: Runner, s: Settings, project_number: Number) -> bool:
    """Without the bucket there is no binding (and no need to know the project number)."""
    if r.dry:
        return False
    bucket = get_bucket(client(s), s)
    if bucket is None:
        return False
    return has_binding(bucket, buckets.workload_principal(s, number_of(project_number)))


@bounded
def ensure_binding(r: Runner, s: Settings, project_number: str) -> str | None:
    from google.api_core import exceptions

    show(r, buckets.binding_add_equivalent(s, project_number))
    if r.dry:
        return None
    try:
        added = add_binding(client(s).bucket(s.bucket), buckets.workload_principal(s, project_number))
    except exceptions.GoogleAPICallError as exc:
        raise api_error(f"granting {buckets.OBJECT_USER_ROLE} on gs://{s.bucket}", exc) from None
    return None if added else "exists"


@bounded
def drop_binding(r: Runner, s: Settings, project_number: str) -> str | None:
    from google.api_core import exceptions

    show(r, buckets.binding_remove_equivalent(s, project_number))
    if r.dry:
        return None
    try:
        removed = remove_binding(client(s).bucket(s.bucket), buckets.workload_principal(s, project_number))
    except exceptions.NotFound:
        return "absent"
    except exceptions.GoogleAPICallError as exc:
        raise api_error(f"removing {buckets.OBJECT_USER_ROLE} on gs://{s.bucket}", exc) from None
    return None if removed else "absent"


# ---- export records ----------------------------------------------------------------------------------------
@bounded
def generations(s: Settings, prefix: str) -> dict[str, int]:
    """object name -> generation under prefix: an export that rewrites an object gives it a new generation."""
    from google.api_core import exceptions

    try:
        return {b.name: int(b.generation or 0) for b in client(s).list_blobs(s.bucket, prefix=prefix,
                                                                                   timeout=CALL_TIMEOUT, retry=retry())}
    except exceptions.NotFound:
        return {}
    except exceptions.GoogleAPICallError as exc:
        raise api_error(f"listing gs://{s.bucket}/{prefix}", exc) from None


@bounded
def write_export_record(s: Settings, record_json: str, name: str = exports.EXPORT_MARKER) -> None:
    from google.api_core import exceptions

    try:
        client(s).bucket(s.bucket).blob(name).upload_from_string(
            record_json, content_type="application/json", timeout=CALL_TIMEOUT, retry=retry())
    except exceptions.GoogleAPICallError as exc:
        raise api_error(f"writing gs://{s.bucket}/{name}", exc) from None


@bounded
def drop_record(s: Settings, name: str) -> None:
    """Delete one of our records (gone already, or no bucket: nothing to do)."""
    from google.api_core import exceptions

    try:
        client(s).bucket(s.bucket).blob(name).delete(timeout=CALL_TIMEOUT, retry=retry())
    except exceptions.NotFound:
        return
    except exceptions.GoogleAPICallError as exc:
        raise api_error(f"deleting gs://{s.bucket}/{name}", exc) from None


@bounded
def read_export_record(s: Settings, name: str = exports.EXPORT_MARKER) -> str | None:
    from google.api_core import exceptions

    try:
        text: str = client(s).bucket(s.bucket).blob(name).download_as_text(timeout=CALL_TIMEOUT, retry=retry())
        return text
    except exceptions.NotFound:
        return None
    except UnicodeDecodeError:
        return None  # not ours to read: proves no export
    except exceptions.GoogleAPICallError as exc:
        raise api_error(f"reading gs://{s.bucket}/{name}", exc) from None


@bounded
def read_written_record(s: Settings, name: str) -> tuple[str, datetime] | None:
    """A record's text and when it was written (Cloud Storage's own `updated` time, which no edit of the text
    can move); None when there is none. An object that is empty or not UTF-8 is there all the same: its text
    keeps what decodes (the caller tells a record it cannot read from a missing one)."""
    from google.api_core import exceptions

    try:
        blob = client(s).bucket(s.bucket).get_blob(name, timeout=CALL_TIMEOUT, retry=retry())
        if blob is None:
            return None
        data: bytes = blob.download_as_bytes(timeout=CALL_TIMEOUT, retry=retry())
    except exceptions.NotFound:
        return None
    except exceptions.GoogleAPICallError as exc:
        raise api_error(f"reading gs://{s.bucket}/{name}", exc) from None
    return data.decode("utf-8", errors="replace"), blob.updated
