"""A kubeconfig context that outlived its cluster: deleted, or re-created, from another machine.

gcloud removes the context only on the machine that deletes the cluster; on this one kubectl and helm then dial a
dead endpoint and give up after the dial timeout (the fake hangs FAKECLOUD_UNREACHABLE_SECONDS, wall-clock, then
fails with kubectl's and helm's words, as the real ones do), and our runner retried that as transient: minutes
per `status`, `up` or `down`. The run's cluster listing tells: the context is removed and the calls dialing it are
ended. Each run here gets 60 s; without that it would take 30 s per call, five attempts each.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from support.fake import FakeCloud, leave_cluster_provisioning
from support.ports import quiet_ports

CONTEXT = "gke_my-nemo-project_us-central1_nemo-rl"
TIMEOUT = 60


def on(fake: FakeCloud, machine: Path, *args: str, process: bool = True):
    """`invoke ARGS` on a machine (its HOME, its kubeconfig). process=False: in-process, for the runs that only set
    the scene (no stale context in them; the same fake cloud and kubeconfig files, seconds less each)."""
    return fake.invoke(*args, process=process, timeout=TIMEOUT, HOME=str(machine), FAKECLOUD_MACHINE=machine.name)


def setting(fake: FakeCloud, machine: Path, *args: str):
    done = on(fake, machine, *args, process=False)
    assert done.code == 0, done.output[-3000:]
    return done


def contexts(machine: Path) -> list[str]:
    import yaml

    config = machine / ".kube" / "config"
    return [c["name"] for c in (yaml.safe_load(config.read_text()) or {}).get("contexts") or []] if config.exists() \
        else []


def test_stale_context_of_a_cluster_deleted_elsewhere(fake, tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    setting(fake, here, "up", "--yes")
    assert CONTEXT in contexts(here)
    setting(fake, there, "down", "--yes")  # the other machine never had the context
    assert CONTEXT in contexts(here)  # gcloud left this machine's entry alone

    status = on(fake, here, "status")
    assert status.code == 0, status.output
    assert f"note: the kubeconfig context {CONTEXT} pointed at" in status.stderr
    assert "is not in my-nemo-project/us-central1 any more: removed it" in status.stderr
    assert "i/o timeout" not in status.output
    assert CONTEXT not in contexts(here)

    again = on(fake, here, "down", "--yes")  # nothing stale any more: nothing to note
    assert again.code == 0, again.output
    assert "kubeconfig context" not in again.stderr


def test_stale_context_down_from_this_machine_after_a_delete_elsewhere(fake, tmp_path):
    """down's own direct reads (helm status, the prefetch Jobs, the head pod) dial the context too."""
    here, there = tmp_path / "here", tmp_path / "there"
    setting(fake, here, "up", "--yes")
    setting(fake, there, "cluster.delete", "--yes")
    down = on(fake, here, "down", "--yes")
    assert down.code == 0, down.output
    assert "removed it" in down.stderr and "i/o timeout" not in down.output
    assert "nothing of ours is left" in down.stderr


def test_stale_context_of_a_cluster_recreated_elsewhere(fake, tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    setting(fake, here, "up", "--yes")
    setting(fake, there, "cluster.delete", "--yes")
    setting(fake, there, "up", "--yes")  # the same name, a new endpoint

    up = on(fake, here, "up", "--yes")
    assert up.code == 0, up.output
    assert "was re-created: its endpoint is" in up.stderr and "i/o timeout" not in up.output
    assert CONTEXT in contexts(here)  # fetched again by up's credentials step
    status = on(fake, here, "status")
    assert status.code == 0 and "kubeconfig context" not in status.stderr, status.output


def test_stale_context_job_tasks_say_why_in_seconds(fake, tmp_path):
    """The job tasks list no clusters: their first kubectl call is watched, and gcloud asked only once it has not
    answered for kube_context.STALE_CHECK_SECONDS (5 s; the dial timeout is 30 s, five attempts)."""
    here, there = tmp_path / "here", tmp_path / "there"
    setting(fake, here, "up", "--yes")
    setting(fake, there, "cluster.delete", "--yes")
    status = on(fake, here, "job.status")
    assert status.code == 1, status.output  # 143 said SIGTERM (the README's exit codes): a script took it for a kill
    assert "stopped: cluster nemo-rl is not in my-nemo-project/us-central1 any more" in status.stderr
    assert "removed it" in status.stderr and "i/o timeout" not in status.output
    assert CONTEXT not in contexts(here)
    again = on(fake, here, "job.status")  # at once now: kubectl knows no such context
    assert again.code != 0 and f'context "{CONTEXT}" does not exist' in again.stderr, again.output  # --namespace
    assert "`invoke cluster.credentials` fetches it" in again.stderr
    assert "removed it" not in again.stderr


def test_stale_context_ray_status_says_why_in_seconds(fake, tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    setting(fake, here, "up", "--yes")
    setting(fake, there, "cluster.delete", "--yes")
    status = on(fake, here, "ray.status")
    assert "removed it" in status.stderr and "i/o timeout" not in status.output, status.output
    assert CONTEXT not in contexts(here)


def test_stale_context_storage_status_says_why_in_seconds(fake, tmp_path):
    """storage.status lists no clusters: its kubectl reads (the claim's phase, the Secret) dialed the dead endpoint,
    minutes per row on a real kubectl (2.5 min with a cold discovery cache). Now watched: rows say why, in seconds."""
    here, there = tmp_path / "here", tmp_path / "there"
    setting(fake, here, "up", "--yes")
    setting(fake, there, "cluster.delete", "--yes")
    started = time.monotonic()
    status = on(fake, here, "storage.status")
    assert status.code == 0, status.output
    assert time.monotonic() - started < 25  # the 5 s watch and a describe, not the 30 s dial timeout
    assert "removed it" in status.stderr and "i/o timeout" not in status.output, status.output
    assert "unknown: stopped: cluster nemo-rl is not in my-nemo-project/us-central1 any more" in status.stdout, \
        status.stdout
    assert CONTEXT not in contexts(here)


def test_stale_context_ray_dashboard_says_why_in_seconds(fake, tmp_path):
    """The port-forward itself would dial for 30 s: the Ray pods are listed first, under the watch."""
    here, there = tmp_path / "here", tmp_path / "there"
    setting(fake, here, "up", "--yes")
    setting(fake, there, "cluster.delete", "--yes")
    port = quiet_ports()[0]  # free on this machine, and not one the kernel hands another process meanwhile
    started = time.monotonic()
    done = on(fake, here, "ray.dashboard", f"--port={port}")
    assert done.code == 1, done.output
    assert time.monotonic() - started < 25  # the 5 s watch and a describe, not the 30 s dial timeout
    assert "stopped: cluster nemo-rl is not in my-nemo-project/us-central1 any more" in done.stderr
    assert "removed it" in done.stderr and "i/o timeout" not in done.output and "port-forward" not in done.output
    again = on(fake, here, "ray.dashboard", f"--port={port}")  # no context now: said at once, with what to run
    assert again.code == 1 and "`invoke cluster.credentials` fetches it" in again.stderr, again.output


def test_a_machine_without_the_context_says_unknown_inside_the_cluster_not_absent(fake, tmp_path):
    """A second laptop that never fetched the credentials: kubectl's and helm's "context was not found" read as
    "not found", so status showed the Ray cluster, the claim and the Secret absent ("run `invoke ray.deploy`")
    while Ray ran, and plan said it would create them."""
    here, there = tmp_path / "here", tmp_path / "there"
    setting(fake, here, "up", "--yes")
    status = on(fake, there, "status")
    assert status.code == 0, status.output
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in status.stdout.splitlines()
            if line.count("│") >= 3}
    inside = [title for title in rows if title.startswith(("Ray cluster", "Secret", "PersistentVolumeClaim"))]
    assert len(inside) == 3 and {rows[title] for title in inside} == {"unknown"}, rows
    assert rows["Standard cluster nemo-rl"] == "present", rows
    assert "not deployed" not in status.output and "`invoke cluster.credentials` fetches it" in status.output
    document = on(fake, there, "status", "--json")  # the whole document, its unknowns as null
    assert document.code == 0, document.output
    parsed = json.loads(document.stdout)
    assert parsed["ray"]["deployed"] is None and {r["state"] for r in parsed["resources"] if r["title"] in inside} \
        == {"unknown"}, parsed
    assert parsed["latest_job"] is None and parsed["errors"] == {}, parsed  # unknown here, as Ray's figures
    plan = on(fake, there, "plan")
    assert plan.code == 0, plan.output
    ray = next(line for line in plan.stdout.splitlines() if "Ray cluster nemo-rl" in line)
    assert "create?" in ray, plan.stdout
    assert CONTEXT not in contexts(there)  # read-only: nothing fetched


def test_a_cluster_with_no_endpoint_yet_holds_nothing_to_delete(fake, tmp_path):
    """An `up` interrupted in the cluster's create leaves it PROVISIONING, with no endpoint for its first minutes,
    and gcloud refuses its credentials then ("missing endpoint. Is it still PROVISIONING?"): clean.ray,
    clean.storage and storage.delete failed on that (exit 1), and status and plan called what is in it unknown,
    telling to fetch the credentials gcloud refuses, where nothing of ours can be in it. The teardowns go on and
    say so; this machine's context of the cluster deleted before is dropped (kubectl would dial its endpoint)."""
    here, there, fresh = tmp_path / "here", tmp_path / "there", tmp_path / "fresh"
    setting(fake, here, "up", "--yes")
    setting(fake, there, "cluster.delete", "--yes")
    leave_cluster_provisioning(fake, HOME=str(there), FAKECLOUD_MACHINE=there.name)
    status = on(fake, fresh, "status")
    assert status.code == 0, status.output
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in status.stdout.splitlines()
            if line.count("│") >= 3}
    inside = [title for title in rows
              if title.startswith(("Ray cluster", "Secret", "PersistentVolume", "model", "service account"))]
    assert len(inside) == 6 and {rows[title] for title in inside} == {"absent"}, rows
    assert rows["Standard cluster nemo-rl"] == "present", rows
    assert "could not read" not in status.output and "cluster.credentials" not in status.output, status.output
    plan = on(fake, fresh, "plan", "--json")
    assert plan.code == 0, plan.output
    actions = {row["title"]: row["action"] for row in json.loads(plan.stdout)["resources"]}
    assert "unknown" not in actions.values(), actions
    for machine in (fresh, here):
        for task in ("clean.ray", "clean.storage", "storage.delete"):
            since = len(fake.calls())
            done = on(fake, machine, task, "--yes")
            assert done.code == 0, (machine.name, task, done.output)
            assert "missing endpoint" not in done.output and "Traceback" not in done.output, done.output
            assert not [c for c in fake.calls()[since:] if c["argv"][:3] == ["container", "clusters",
                                                                              "get-credentials"]]
            assert f"{task}: nothing of ours is left" in done.stderr, done.output
        assert CONTEXT not in contexts(machine)
    first = on(fake, fresh, "clean.ray", "--yes")
    assert "note: cluster nemo-rl is PROVISIONING and has no endpoint yet" in first.stderr, first.output
    fetch = on(fake, fresh, "cluster.credentials")  # gcloud's bare "missing endpoint" said with what to do
    assert fetch.code == 1 and "cluster nemo-rl is still being made (PROVISIONING) and has no endpoint yet" in \
        fetch.stderr and "`invoke up` (or `invoke cluster.create`) waits for it" in fetch.stderr, fetch.output
    assert next(iter(fake.resources()["cluster"].values()))["status"] == "PROVISIONING"  # GKE's, not ours to stop


def test_a_layer_teardown_reads_the_cluster_that_replaced_its_contexts(fake, tmp_path):
    """The cluster re-created from another machine: this one's context pointed at the old endpoint. clean.storage
    dropped the context, then read what is in the cluster as absent (kubectl: no such context): it deleted the
    bucket's binding only and said nothing of ours was left, and with --delete-data it deleted the Lustre instance
    while the new cluster's Ray pods mounted its claim (the transitional-states audit). It now fetches the new
    cluster's credentials first: the claim guard refuses, and clean.ray finds the release to delete."""
    here, there = tmp_path / "here", tmp_path / "there"
    setting(fake, here, "up", "--yes")
    setting(fake, there, "cluster.delete", "--yes")
    setting(fake, there, "up", "--yes")
    setting(fake, there, "storage.export")  # the export check passes: only the claim stands in the way
    done = on(fake, here, "clean.storage", "--yes", "--delete-data")
    assert done.code == 1, done.output
    assert "the Lustre claim lustre-pvc is in use by 3 pod(s)" in done.stderr and "Nothing was deleted" in done.stderr
    assert fake.resources().get("lustre"), "the Lustre instance was deleted"
    ray = on(fake, here, "clean.ray", "--yes")
    assert ray.code == 0, ray.output
    assert "clean.ray will delete (1): Ray cluster nemo-rl" in ray.stderr, ray.output
    assert not [key for key, obj in fake.resources().get(f"k8s:{CONTEXT}", {}).items()
                if obj.get("kind") == "RayCluster"]
