"""Every gcloud command of `invoke --dry storage.create storage.delete --yes` (and --delete-data, and
storage.export), the gcloud equivalents of the storage client's calls, and the queries storage makes,
parsed by the real gcloud: none may exit 2."""

from __future__ import annotations

import shlex

from nemo_rl_gke.commands import buckets, lustre
from support.fake import FakeCloud, example_settings


def dry_gcloud_lines(tmp_path, *args: str) -> list[list[str]]:
    cloud = FakeCloud(tmp_path)
    cloud.workdir.mkdir(parents=True, exist_ok=True)
    done = cloud.invoke("--dry", *args)
    assert done.code == 0, done.output
    return [shlex.split(line[2:]) for line in done.stdout.splitlines() if line.startswith("$ gcloud ")]


def _bad(results) -> dict[str, str]:
    return {" ".join(argv): err for argv, (code, err) in results.items() if code == 2}


def test_gcloud_storage_dry_create_and_delete_commands_parse(tmp_path, gcloud_parse):
    commands = dry_gcloud_lines(tmp_path / "a", "storage.create", "storage.delete", "--yes")
    commands += dry_gcloud_lines(tmp_path / "b", "storage.delete", "--delete-data", "--yes")
    commands += dry_gcloud_lines(tmp_path / "c", "storage.export")
    commands += dry_gcloud_lines(tmp_path / "d", "storage.export", "--run=gsm8k-1")
    words = {" ".join(c[1:4]) for c in commands}
    assert {"storage buckets create", "lustre instances create", "lustre instances delete",
            "services vpc-peerings connect", "lustre instances export-data"} <= words
    assert not _bad(gcloud_parse(commands))


def test_gcloud_storage_queries_and_updates_parse(gcloud_parse):
    s = example_settings()
    commands = [lustre.range_describe(s), lustre.peering_list(s), lustre.lustre_describe(s),
                lustre.lustre_describe(s, fmt="value(mountPoint)"),
                lustre.peering_update(s, ["sql-range", "nemo-lustre-range"]),
                lustre.peering_update(s, ["sql-range"], force=True), buckets.list_equivalent(s, "runs/"),
                lustre.operation_describe(s, lustre.operation_id(
                    "Create request issued for: [nemo-lustre]\nCheck operation [projects/p/locations/us-central1-b/"
                    "operations/operation-1733404912345-62ab] for status."))]
    results = gcloud_parse(commands)
    assert not _bad(results)
    assert all(code == 1 for code, _ in results.values())  # well-formed, stopped only for lack of an account
