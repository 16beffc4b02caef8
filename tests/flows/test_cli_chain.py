"""Chained tasks run every task named, in order (`invoke net.create storage.create`), through the real
`invoke` command. Dry runs: nothing external runs, each task prints its own plan."""

from __future__ import annotations

import itertools

import pytest

from support.fake import FakeCloud

# One cheap dry task per namespace, and a line only that task prints.
PROBES = {
    "net": ("net.create", "$ gcloud compute networks create "),
    "cluster": ("cluster.create", "$ gcloud container clusters create "),
    "storage": ("storage.create", "$ gcloud lustre instances create "),
    "ray": ("ray.render", "$ helm template "),
    "job": ("job.list", "exec -i HEAD_POD"),
    "clean": ("clean.ray", "$ helm uninstall "),
}


@pytest.fixture(scope="module")
def cloud(tmp_path_factory) -> FakeCloud:
    fake = FakeCloud(tmp_path_factory.mktemp("chain"), processes=True)  # the real `invoke` command
    fake.workdir.mkdir(parents=True)  # no .env: dry runs use .env.example
    return fake


def _first(stdout: str, marker: str) -> int:
    return stdout.find(marker)


@pytest.mark.parametrize(("first", "second"), list(itertools.combinations(PROBES, 2)))
def test_chain_runs_both_namespaces_in_order(cloud, first, second):
    (task_a, mark_a), (task_b, mark_b) = PROBES[first], PROBES[second]
    for a, ma, b, mb in ((task_a, mark_a, task_b, mark_b), (task_b, mark_b, task_a, mark_a)):
        done = cloud.invoke("--dry", a, b)
        assert done.code == 0, done.output
        assert 0 <= _first(done.stdout, ma) < _first(done.stdout, mb), (a, b, done.stdout)
    assert cloud.calls() == []


def test_chain_same_named_tasks_of_three_namespaces_all_run(cloud):
    done = cloud.invoke("--dry", "net.create", "cluster.create", "storage.create")
    assert done.code == 0, done.output
    marks = [PROBES[n][1] for n in ("net", "cluster", "storage")]
    places = [_first(done.stdout, m) for m in marks]
    assert 0 <= places[0] < places[1] < places[2], done.stdout


def test_chain_status_of_three_namespaces_prints_three_answers(cloud):
    done = cloud.invoke("--dry", "net.status", "cluster.status", "storage.status")
    assert done.code == 0, done.output
    places = [done.stdout.find(f"without --dry, {task} ") for task in ("net.status", "cluster.status",
                                                                        "storage.status")]
    assert 0 <= places[0] < places[1] < places[2], done.stdout


def test_chain_a_task_named_twice_runs_once(cloud):
    # Invoke's own dedupe still holds for the very same task.
    done = cloud.invoke("--dry", "ray.render", "ray.render")
    assert done.code == 0, done.output
    assert done.stdout.count(PROBES["ray"][1]) == 1
