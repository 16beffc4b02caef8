"""`up`, `down`, `plan`, `doctor` and the lock end to end on the fake cloud (real task code, fake tools)."""

from __future__ import annotations

import fcntl
import json

import pytest
from lifecycle_buckets import buckets

from support.fake import FakeCloud


def _up(cloud: FakeCloud, *args: str, **env: str):
    done = cloud.invoke("up", "--yes", *args, **env)
    assert done.code == 0, done.output[-3000:]
    return done


def test_up_twice_second_run_makes_no_mutating_call(cloud):
    _up(cloud)
    before = len(cloud.calls())
    _up(cloud)
    assert [" ".join([c["tool"], *c["argv"]]) for c in cloud.mutating_calls(since=before)] == []


def test_up_then_down_delete_data_and_bucket_leaves_no_resource(cloud):
    _up(cloud)
    done = cloud.invoke("down", "--yes", "--delete-data", "--delete-bucket")
    assert done.code == 0, done.output[-3000:]
    assert (cloud.resources(), buckets(cloud)) == ({}, [])


def test_down_without_delete_data_keeps_lustre_and_bucket_and_says_so(cloud):
    _up(cloud)
    done = cloud.invoke("down", "--yes")
    assert done.code == 0, done.output[-3000:]
    kept = (sorted(cloud.resources().get("lustre", {})), buckets(cloud))
    assert kept[0] and kept[1] and "bucket gs://" in done.stderr and "Lustre instance" in done.stderr \
        and "invoke storage.export" in done.stderr


def test_down_without_delete_data_deletes_the_cluster(cloud):
    _up(cloud)
    done = cloud.invoke("down", "--yes")
    assert done.code == 0, done.output[-2000:]
    assert "cluster" not in cloud.resources() and "lustre" in cloud.resources()  # the data stays


def test_up_without_yes_and_without_terminal_exits_2_before_creating(cloud):
    done = cloud.invoke("up")
    assert (done.code, cloud.mutating_calls()) == (2, [])


def test_up_refuses_while_another_run_holds_the_lock(cloud, tmp_path):
    from nemo_rl_gke import lock
    from nemo_rl_gke.settings import load

    s = load(allow_example=False, cwd=cloud.workdir, environ={"XDG_CACHE_HOME": cloud.env["XDG_CACHE_HOME"]})
    path = (tmp_path / "cache" / "nemo-rl-gke" / f"{s.PROJECT_ID}-{s.CLUSTER_NAME}.lock")
    assert lock.lock_path(s).name == path.name
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write(json.dumps({"what": "down", "pid": 4242, "since": "now"}))
        held.flush()
        done = cloud.invoke("up", "--yes")
    assert (done.code, "another run holds" in done.stderr, cloud.mutating_calls()) == (1, True, [])


def test_plan_on_half_built_state_leaves_the_networks_and_creates_the_rest(cloud):
    from nemo_rl_gke.resources import all_steps, layer_steps
    from nemo_rl_gke.settings import load

    assert cloud.invoke("net.create").code == 0
    before = len(cloud.calls())
    done = cloud.invoke("plan")
    assert done.code == 0, done.output[-3000:]
    s = load(allow_example=False, cwd=cloud.workdir, environ={})
    net, everything = layer_steps(s, "net"), all_steps(s)
    creatable = [st for st in everything if not st.always and st.layer != "net"]
    summary = f"up would create {len(creatable)} of {len(everything)} and leave {len(net)}."
    assert (summary in done.stdout, cloud.mutating_calls(since=before)) == (True, [])


def test_dry_up_without_env_prints_the_whole_plan_from_env_example(tmp_path):
    from nemo_rl_gke.resources import all_steps
    from nemo_rl_gke.settings import load

    fake = FakeCloud(tmp_path)
    fake.workdir.mkdir(parents=True)
    done = fake.invoke("--dry", "up")
    s = load(allow_example=True, cwd=fake.workdir, environ={})
    titles = [step.title for step in all_steps(s)]
    missing = [t for t in titles if f"# {t}" not in done.stdout]
    assert (done.code, missing, ".env.example" in done.stderr, fake.calls()) == (0, [], True, [])


def test_doctor_passes_on_a_healthy_fake_project(cloud):
    done = cloud.invoke("doctor")
    assert done.code == 0, done.output


def test_doctor_without_auth_plugin_fails_with_the_install_fix(cloud):
    import sys
    from pathlib import Path

    from support.fake import FAKE_BIN

    done = cloud.invoke("doctor", PATH=f"{FAKE_BIN}:{Path(sys.executable).parent}")
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("✗ gke-gcloud-auth-plugin")), "")
    fix = "gcloud components install gke-gcloud-auth-plugin"
    assert (done.code, bool(line), fix in done.stdout) == (1, True, True)


@pytest.mark.parametrize("argv", [("up", "--yes"), ("cluster.create",)])
def test_bring_up_without_the_auth_plugin_exits_2_before_any_call(cloud, argv):
    # kubectl and helm need gke-gcloud-auth-plugin for the cluster's credentials: without it `up` created the VPCs
    # and the cluster (minutes, billed) and stopped at its first in-cluster step.
    import sys
    from pathlib import Path

    from support.fake import FAKE_BIN

    bare = f"{FAKE_BIN}:{Path(sys.executable).parent}"  # the fake tools and Python, no plugin
    done = cloud.invoke(*argv, process=True, PATH=bare)
    assert done.code == 2, done.output[-2000:]
    assert "not on PATH: gke-gcloud-auth-plugin (run `gcloud components install gke-gcloud-auth-plugin`)" in \
        done.stderr and "Nothing was created" in done.stderr, done.stderr[-2000:]
    assert cloud.calls() == []
    assert cloud.invoke("--dry", "up", PATH=bare).code == 0  # the offline plan needs none of the tools
    assert cloud.invoke("up", "--yes").code == 0  # with it on PATH


def test_doctor_with_too_little_spot_quota_fails_naming_the_metric(cloud):
    from fakecloud.core import State

    quotas = {"PREEMPTIBLE_NVIDIA_B200_GPUS": {"limit": 8, "usage": 0}}
    State(cloud.state_dir).put("doctor", "settings", {"quotas": quotas})
    done = cloud.invoke("doctor")
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("✗ GPU quota")), "")
    assert (done.code, "PREEMPTIBLE_NVIDIA_B200_GPUS: 8 free, up needs 16" in line) == (1, True), done.stdout


def test_up_runs_independent_steps_overlapping_in_time(cloud):
    _up(cloud, FAKECLOUD_TIME_SCALE="0.003")  # the cluster's create 1.3 s; the range and peering 0.4 s
    calls = cloud.calls()
    # The graph starts with the first create; the existence checks before it are up's plan.
    begin = min(c["start"] for c in calls if c["mutating"])
    calls = [c for c in calls if c["start"] >= begin]

    def window(first: tuple[str, ...], last: tuple[str, ...]):
        """A branch of the graph: from the start of its first call to the end of its last one."""
        opening = [c for c in calls if all(w in c["argv"] for w in first)]
        closing = [c for c in calls if all(w in c["argv"] for w in last)]
        assert opening and closing, (first, last)
        return opening[0]["start"], closing[-1]["end"]

    def overlap(a, b) -> bool:
        return max(a[0], b[0]) < min(a[1], b[1])

    # After the main VPC: the cluster ∥ the range → peering; after the cluster: the GPU pool ∥ Lustre
    # (created, then described until it is ready).
    cluster = window(("clusters", "create"), ("clusters", "create"))
    peering = window(("addresses", "create"), ("vpc-peerings", "connect"))
    pool = window(("node-pools", "create"), ("node-pools", "create"))
    lustre = window(("lustre", "instances", "create"), ("lustre", "instances", "describe"))
    assert (overlap(cluster, peering), overlap(pool, lustre)) == (True, True), (cluster, peering, pool, lustre)


def test_plan_after_up_names_a_gpu_pool_that_differs_from_the_settings(cloud):
    _up(cloud)
    done = cloud.invoke("plan", "--nodes=3")
    # the pool's size and, following it, the Ray cluster's workers
    assert (done.code, "2 existing resource(s) differ from the settings" in done.stdout) == (0, True), done.stdout


def test_down_delete_data_never_deletes_a_main_vpc_it_did_not_create(cloud):
    import subprocess

    from support.fake import FAKE_BIN

    subprocess.run([str(FAKE_BIN / "gcloud"), "compute", "networks", "create", "default", "--project=my-nemo-project",
                    "--subnet-mode=auto"], env=cloud.process_env(), check=True, capture_output=True)
    _up(cloud)
    done = cloud.invoke("down", "--yes", "--delete-data")
    assert (done.code, sorted(cloud.resources().get("network", {}))) == (0, ["my-nemo-project/default"]), \
        done.output[-2000:]


def test_clean_layers_in_turn_leave_only_the_kept_data_and_what_it_needs(cloud):
    _up(cloud)
    for layer in ("ray", "cluster", "storage", "net"):
        done = cloud.invoke(f"clean.{layer}", "--yes")
        assert done.code == 0, (layer, done.output[-2000:])
    assert sorted(cloud.resources()) == ["address", "lustre", "network", "peering"]


def test_status_after_up_shows_every_resource_present_and_the_hourly_total(cloud):
    from nemo_rl_gke import cost
    from nemo_rl_gke.settings import load

    _up(cloud)
    done = cloud.invoke("status")
    s = load(allow_example=False, cwd=cloud.workdir, environ={})
    total = f"now: about {cost.money(cost.estimate(s).total)}/hour"
    assert (done.code, " absent " in done.stdout, total in done.stdout) == (0, False, True), done.stdout
    assert "Ray cluster nemo-rl:" in done.stdout and "Ray sees 16 of 16 GPUs" in done.stdout, done.output
    assert "latest job: none" in done.stdout, done.output
