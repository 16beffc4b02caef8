"""Bucket names in a fake cloud's GCS emulator, for the lifecycle tests (a module of its own: `from conftest
import …` breaks when another directory's conftest is collected in the same run)."""

from __future__ import annotations

import os

from support.fake import FakeCloud, read_env_example


def buckets(fake: FakeCloud) -> list[str]:
    """Bucket names in the fake project's emulator."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    os.environ["STORAGE_EMULATOR_HOST"] = fake.env["STORAGE_EMULATOR_HOST"]
    try:
        client = storage.Client(project=read_env_example()["PROJECT_ID"], credentials=AnonymousCredentials())
        return [b.name for b in client.list_buckets()]
    finally:
        os.environ.pop("STORAGE_EMULATOR_HOST", None)
