"""`plan --json` and `status --json` through the real `invoke` command on the fake cloud: stdout is one JSON
document of the documented shape and nothing else (notes and the runner's lines go to stderr)."""

from __future__ import annotations

import json

from support.fake import FakeCloud

RESOURCE_KEYS = {"status": {"name", "title", "state", "cost_per_hour", "age_seconds", "cost_so_far"},
                 "plan": {"name", "title", "action", "differs", "cost_per_hour"}}
TOP_KEYS = {"status": {"version", "kind", "dry_run", "project", "cluster", "settings", "resources",
                       "cost_per_hour_now", "caveat", "ray", "latest_job", "errors"},
            "plan": {"version", "kind", "dry_run", "project", "cluster", "settings", "resources", "create",
                     "leave", "drift", "cost_per_hour", "caveat"}}


def document(cloud: FakeCloud, task: str, *args: str) -> dict:
    done = cloud.invoke(task, "--json", *args, process=True)  # the real command: nothing else on stdout
    assert done.code == 0, done.output[-3000:]
    parsed = json.loads(done.stdout)
    assert set(parsed) == TOP_KEYS[task] and parsed["kind"] == task and parsed["version"] == 1
    assert all(set(row) == RESOURCE_KEYS[task] for row in parsed["resources"])
    return parsed


def test_json_plan_and_status_before_anything_exists(cloud):
    plan = document(cloud, "plan")
    assert {row["action"] for row in plan["resources"]} == {"create", "run"} and plan["drift"] == []
    assert plan["leave"] == 0 and plan["cost_per_hour"]["now"] == 0 and plan["cost_per_hour"]["all_up"] > 100
    status = document(cloud, "status")
    assert {row["state"] for row in status["resources"]} == {"absent"}
    assert status["ray"]["deployed"] is False and status["latest_job"] is None and status["errors"] == {}
    # No Ray cluster: no run, said so, without asking a head that cannot be there (it said "could not read").
    text = cloud.invoke("status")
    assert text.code == 0 and "latest job: none (no Ray cluster)" in text.stdout, text.output[-2000:]
    assert "could not read status" not in text.stderr, text.stderr[-2000:]


def test_json_status_after_up_has_every_resource_present_with_costs(cloud):
    done = cloud.invoke("up", "--yes")
    assert done.code == 0, done.output[-3000:]
    status = document(cloud, "status")
    assert {row["state"] for row in status["resources"]} == {"present"}
    pool = next(row for row in status["resources"] if row["name"] == "cluster.gpu-pool")
    assert pool["cost_per_hour"] == 114.0 and pool["age_seconds"] is not None
    lustre = next(row for row in status["resources"] if row["name"] == "storage.lustre")
    assert lustre["cost_per_hour"] > 0 and lustre["age_seconds"] is not None  # its createTime, as listed
    assert status["cost_per_hour_now"] > 100 and status["settings"]["nodes"] == 2
    assert status["ray"] == {"deployed": True, "pods": 3, "ready_pods": 3, "gpus_seen": 16.0, "gpus_expected": 16}
    plan = document(cloud, "plan", "--nodes=3")
    assert plan["create"] == 0 and plan["drift"] == [
        {"name": "cluster.gpu-pool", "title": "GPU node pool", "field": "nodes", "have": "2", "want": "3"},
        {"name": "ray.release", "title": "Ray cluster", "field": "workers", "have": "2", "want": "3"}]
    pool_row = next(row for row in plan["resources"] if row["name"] == "cluster.gpu-pool")
    assert pool_row["action"] == "leave" and pool_row["differs"] == "2 nodes, the settings say 3"
