"""Fake clouds for the reliability suite: a GCS emulator per cloud, its own lock directory, latencies off."""

from __future__ import annotations

import shutil
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from reliability import counts
from reliability.state import comparable
from support.fake import Done, FakeCloud, read_env_example


def make_cloud(stack: ExitStack, root: Path) -> FakeCloud:
    from fakecloud.handlers.gcloud_projects import project_number
    from support.gcs_emulator import running_emulator

    fake = FakeCloud(root)
    fake.write_env()
    emulator = stack.enter_context(running_emulator(project_number(read_env_example()["PROJECT_ID"])))
    fake.env.update(STORAGE_EMULATOR_HOST=emulator.host, XDG_CACHE_HOME=str(root / "cache"),
                    FAKECLOUD_TIME_SCALE="0")
    return fake


def copy_state(source: FakeCloud, target: FakeCloud) -> None:
    """The fake cloud's resources and the buckets with their objects (each cloud has its own emulator), calls
    log emptied: a copy of `up` holds what a real one does, the bucket next to the Lustre instance included."""
    shutil.rmtree(target.state_dir, ignore_errors=True)
    shutil.copytree(source.state_dir, target.state_dir)
    (target.state_dir / "calls.jsonl").write_text("")
    source_client, target_client = _client(source), _client(target)
    for bucket in source_client.list_buckets():
        if target_client.lookup_bucket(bucket.name) is None:
            target_client.create_bucket(bucket.name)
        for blob in source_client.list_blobs(bucket.name):
            target_client.bucket(bucket.name).blob(blob.name).upload_from_string(blob.download_as_bytes())


def _client(fake: FakeCloud):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(project=read_env_example()["PROJECT_ID"], credentials=AnonymousCredentials(),
                          client_options={"api_endpoint": fake.env["STORAGE_EMULATOR_HOST"]})


def run(fake: FakeCloud, *args: str, **env: str) -> Done:
    counts.add("runs")
    return fake.invoke(*args, **env)


def call_line(call: dict) -> str:
    return " ".join([call["tool"], *call["argv"]])


def successful_mutations(calls: list[dict]) -> Counter[str]:
    return Counter(call_line(c) for c in calls if c["mutating"] and c["exit"] == 0)


def state(fake: FakeCloud) -> dict:
    return comparable(fake.resources())


def buckets(fake: FakeCloud) -> list[str]:
    import os

    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    saved = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = fake.env["STORAGE_EMULATOR_HOST"]
    try:
        client = storage.Client(project=read_env_example()["PROJECT_ID"], credentials=AnonymousCredentials())
        return sorted(b.name for b in client.list_buckets())
    finally:
        if saved is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = saved
