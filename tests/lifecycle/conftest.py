"""Lifecycle flows on the fake cloud: fake tools first on PATH, a fresh FAKECLOUD_STATE and working directory
with a .env per test, retries and polls without sleeping, and a GCS emulator for the bucket (the storage
layer uses the google-cloud-storage client) owned by the fake project's number."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from support.fake import FakeCloud, read_env_example


def write_auth_plugin(bin_dir: Path) -> Path:
    """A stand-in gke-gcloud-auth-plugin (the real one may or may not be installed on the machine)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    plugin = bin_dir / "gke-gcloud-auth-plugin"
    plugin.write_text("#!/bin/sh\necho 'Kubernetes v1.30.0+fakecloud'\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    return plugin


@pytest.fixture
def cloud(tmp_path):
    from fakecloud.handlers.gcloud_projects import project_number
    from support.gcs_emulator import running_emulator

    fake = FakeCloud(tmp_path)
    fake.write_env()
    project = read_env_example()["PROJECT_ID"]
    with running_emulator(project_number(project)) as emulator:
        fake.env["STORAGE_EMULATOR_HOST"] = emulator.host
        fake.env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
        plugin_dir = tmp_path / "plugin-bin"
        write_auth_plugin(plugin_dir)
        path = fake.process_env()["PATH"]
        fake.env["PATH"] = path.replace(os.pathsep, os.pathsep + str(plugin_dir) + os.pathsep, 1)
        fake.emulator = emulator  # type: ignore[attr-defined]
        yield fake

