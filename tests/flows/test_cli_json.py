"""--json through the real `invoke`: one JSON document on stdout and nothing else (notes on stderr)."""

from __future__ import annotations

import json

import pytest

from support.fake import FakeCloud


@pytest.fixture(scope="module")
def cloud(tmp_path_factory) -> FakeCloud:
    fake = FakeCloud(tmp_path_factory.mktemp("json"), processes=True)  # the real `invoke` command
    fake.write_env()
    done = fake.invoke("net.create")
    assert done.code == 0, done.output
    return fake


def test_cli_json_net_status_is_one_document_with_every_resource_present(cloud):
    done = cloud.invoke("net.status", "--json")
    assert done.code == 0, done.output
    document = json.loads(done.stdout)  # the whole of stdout is the document
    assert document["version"] == 1 and document["kind"] == "net.status" and document["dry_run"] is False
    assert document["resources"] and {r["state"] for r in document["resources"]} == {"present"}
    assert {"name", "title", "state"} == set(document["resources"][0])
    table = cloud.invoke("net.status")
    assert all(r["title"] in table.stdout for r in document["resources"])


def test_cli_json_cluster_status_says_absent_before_cluster_create(cloud):
    done = cloud.invoke("cluster.status", "-j")
    assert done.code == 0, done.output
    document = json.loads(done.stdout)
    assert {r["state"] for r in document["resources"]} == {"absent"}


def test_cli_json_dry_run_keeps_stdout_for_the_document(tmp_path):
    bare = FakeCloud(tmp_path, processes=True)
    bare.workdir.mkdir(parents=True)
    done = bare.invoke("--dry", "net.status", "--json")
    assert done.code == 0, done.output
    assert json.loads(done.stdout)["dry_run"] is True
    assert ".env.example" in done.stderr  # the note went to stderr
