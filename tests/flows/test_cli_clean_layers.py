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


TEARDOWNS = ["down", "clean", "clean.ray", "clean.cluster", "clean.net", "clean.storage", "ray.delete",
             "cluster.delete", "net.delete", "storage.delete"]


@pytest.mark.parametrize("task", TEARDOWNS)
def test_a_teardown_suggests_only_flags_it_takes(cloud, task):
    """Its question and its dry run told clean.ray, clean.cluster and clean.net (and ray.delete, cluster.delete,
    net.delete) to "add --delete-data" and "add --delete-bucket", which they refuse (exit 2)."""
    import re

    done = cloud.invoke("--dry", task, "--yes", process=False)
    assert done.code == 0, done.output
    helped = cloud.invoke(task, "--help", process=False)
    suggested = set(re.findall(r"\badd (--[a-z-]+)", done.output))
    assert {flag for flag in suggested if flag not in helped.stdout} == set(), done.output
    assert suggested or task not in ("down", "clean", "clean.storage", "storage.delete"), done.output


def test_clean_net_says_why_it_keeps_the_main_vpc(fake):
    """Kept because the kept Lustre instance needs it, not as data of its own: it said "main VPC default: it holds
    checkpoints; ... `--delete-data` deletes the Lustre instance", a flag clean.net refuses."""
    assert fake.invoke("up", "--yes").code == 0
    for task in ("clean.ray", "clean.cluster", "clean.net"):
        done = fake.invoke(task, "--yes")
        assert done.code == 0, done.output
    assert "kept main VPC default: the kept Lustre instance needs it; `invoke storage.export` then `invoke down " \
           "--delete-data` deletes it along with the instance." in done.stderr, done.output
    assert "holds checkpoints" not in done.stderr
