"""clean.ray|cluster|net hold no data, so they take no data flags (exit 2 names the flag); their dry run ends
with a plain sentence. Through the real `invoke` command."""

from __future__ import annotations

import pytest

from support.fake import FakeCloud


@pytest.fixture(scope="module")
def cloud(tmp_path_factory) -> FakeCloud:
    fake = FakeCloud(tmp_path_factory.mktemp("clean"), processes=True)
    fake.workdir.mkdir(parents=True)
    return fake


@pytest.mark.parametrize("layer", ["ray", "cluster", "net"])
@pytest.mark.parametrize("flag", ["--delete-data", "--delete-unexported", "--delete-bucket"])
def test_clean_layer_without_data_refuses_data_flags(cloud, layer, flag):
    done = cloud.invoke("--dry", f"clean.{layer}", flag)
    assert done.code == 2 and f"No idea what '{flag}' is" in done.stderr, done.output
    assert cloud.calls() == []


@pytest.mark.parametrize("layer", ["ray", "cluster", "net", "storage"])
def test_clean_layer_dry_run_ends_with_a_whole_sentence(cloud, layer):
    done = cloud.invoke("--dry", f"clean.{layer}", "--yes")
    assert done.code == 0, done.output
    last = done.stdout.rstrip().splitlines()[-1]
    assert last.startswith("# then: leftover scan (each step asked by name") and last.endswith(")")
    assert "lists of )" not in last


def test_clean_storage_keeps_its_data_flags(cloud):
    done = cloud.invoke("clean.storage", "--help")
    assert "--delete-data" in done.stdout and "--delete-bucket" in done.stdout and "verified" in done.stdout
