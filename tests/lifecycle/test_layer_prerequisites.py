"""A layer task whose steps stand on another layer's refuses (exit 2) before any change when those are missing,
naming them and the task that makes them, through the real `invoke` command on the fake cloud: storage.create
without the cluster made the bucket, the range, the peering and Lustre (about $8/h), then failed at
get-credentials; cluster.create before net.create failed with gcloud's own 400. Chains in the right order go on
(each task asks once the one before it has finished); a dry run asks nothing and refuses nothing."""

from __future__ import annotations

import subprocess

from lifecycle_buckets import buckets

NO_CLUSTER = ("error: storage.create needs the Standard cluster nemo-rl, which does not exist: run `invoke "
              "cluster.create` first, or `invoke up` for everything. Nothing was created.")


def test_storage_create_on_a_fresh_project_exits_2_naming_what_is_missing_before_any_change(cloud):
    done = cloud.invoke("storage.create", process=True)
    assert done.code == 2, done.output[-3000:]
    assert ("error: storage.create needs the main VPC default and the Standard cluster nemo-rl, which do not "
            "exist: run `invoke net.create cluster.create` first, or `invoke up` for everything. Nothing was "
            "created.") in done.stderr
    assert "Traceback" not in done.output
    assert (cloud.mutating_calls(), buckets(cloud), cloud.resources()) == ([], [], {})


def test_storage_create_after_net_create_alone_names_the_cluster_and_changes_nothing_of_its_own(cloud):
    # The README's old chain example: the networks are made, then storage.create refuses before its bucket.
    done = cloud.invoke("net.create", "storage.create", process=True)
    assert done.code == 2, done.output[-3000:]
    assert NO_CLUSTER in done.stderr
    made = [" ".join(call["argv"][:3]) for call in cloud.mutating_calls()]
    assert made and all(m.startswith("compute networks") or m.startswith("compute firewall-rules") for m in made)
    assert buckets(cloud) == []


def test_cluster_create_before_net_create_exits_2_naming_the_networks_before_any_change(cloud):
    done = cloud.invoke("cluster.create", "--gpu=b200", process=True)
    assert done.code == 2, done.output[-3000:]
    assert ("error: cluster.create needs the main VPC default, the gVNIC VPC nemo-gvnic-net, the gVNIC subnet "
            "nemo-gvnic-sub and 9 more, which do not exist: run `invoke net.create` first, or `invoke up` for "
            "everything. Nothing was created.") in done.stderr
    assert cloud.mutating_calls() == []


def test_chain_in_layer_order_creates_everything(cloud):
    done = cloud.invoke("net.create", "cluster.create", "--gpu=b200", "storage.create", process=True)
    assert done.code == 0, done.output[-3000:]
    assert {"network", "cluster", "nodepool", "lustre"} <= set(cloud.resources())


def test_storage_create_on_a_whole_deployment_asks_no_more_than_its_own_listings(cloud):
    assert cloud.invoke("net.create", "cluster.create", "--gpu=b200", "storage.create").code == 0
    before = len(cloud.calls())
    done = cloud.invoke("storage.create", process=True)
    assert done.code == 0, done.output[-3000:]
    asked = sorted(" ".join(call["argv"][:3]) for call in cloud.calls()[before:])
    # No listing of the networks: the cluster, listed for the storage layer's own checks anyway, stands on them.
    assert not [a for a in asked if a.startswith("compute networks")], asked
    assert cloud.mutating_calls(before) == []


def test_dry_storage_create_on_a_fresh_project_prints_its_plan_without_refusing(cloud):
    done = cloud.invoke("--dry", "storage.create", process=True)
    assert done.code == 0, done.output[-3000:]
    assert "$ gcloud lustre instances create " in done.stdout and "needs" not in done.stderr
    assert cloud.calls() == []


def test_ray_deploy_and_cluster_credentials_without_the_cluster_say_so_plainly(cloud):
    """They fetch credentials first (no step graph to check): gcloud's 404 used to come raw ("ResponseError:
    code=404, message=Not found: projects/…/clusters/nemo-rl."), exit 1."""
    for task in (["ray.deploy", "--yes"], ["cluster.credentials"]):
        done = cloud.invoke(*task)
        assert done.code == 2, (task, done.output[-3000:])
        assert ("cluster nemo-rl does not exist in project my-nemo-project (us-central1): `invoke net.create "
                "cluster.create` makes it, `invoke up` makes everything. Nothing was changed.") in done.stderr, task
        assert "code=404" not in done.stderr and "Traceback" not in done.output, task
    assert cloud.mutating_calls() == [] and cloud.resources() == {}


def test_storage_export_without_lustre_says_there_is_nothing_to_export(cloud):
    done = cloud.invoke("storage.export")  # gcloud's raw NOT_FOUND, exit 1, it was
    assert done.code == 2, done.output[-3000:]
    assert ("Lustre instance nemo-lustre does not exist in us-central1-b (project my-nemo-project): there is "
            "nothing to export. `invoke storage.create` makes it.") in done.stderr, done.stderr[-3000:]
    assert "Traceback" not in done.output and cloud.resources() == {}


def test_autopilot_cluster_create_on_a_project_with_only_a_default_vpc_names_our_networks(cloud):
    """Most projects have a `default` VPC, all an Autopilot cluster stands on: cluster.create made the cluster and
    a network mapping naming VPCs that did not exist (no pod would get its interfaces)."""
    made = subprocess.run(["gcloud", "compute", "networks", "create", "default", "--subnet-mode=auto",
                           "--project=my-nemo-project"], env=cloud.process_env(), cwd=cloud.workdir,
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    before = len(cloud.mutating_calls())
    done = cloud.invoke("cluster.create", "--mode=autopilot")
    assert done.code == 2, done.output[-3000:]
    assert "error: cluster.create needs the gVNIC VPC nemo-gvnic-net" in done.stderr, done.stderr[-3000:]
    assert "run `invoke net.create` first" in done.stderr
    assert len(cloud.mutating_calls()) == before and "cluster" not in cloud.resources()
