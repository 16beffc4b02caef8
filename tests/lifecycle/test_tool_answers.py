"""Where our decisions hang on how a real tool answers, and the fake once answered more kindly: each flow runs
through `invoke` on the fake cloud, which now answers as the real tool does (checked against its source)."""

from __future__ import annotations

import re
import subprocess

import pytest


def _ok(done, what):
    assert done.code == 0, f"{what}:\n{done.output[-3000:]}"
    return done


def _releases(cloud) -> list[str]:
    return [key for kind, items in cloud.resources().items() if kind.startswith("helm:") for key in items]


@pytest.mark.parametrize("kind", ["transient", "ratelimit", "internal", "timeout"])
def test_a_ray_uninstall_that_could_not_read_the_release_is_retried_not_taken_for_gone(cloud, kind):
    # helm 3.13-3.19's --ignore-not-found answers 'release "nemo-rl" uninstalled' and 0 when the release's history
    # could not be read (a 503 from the API server): clean.ray said the release was deleted and left it running.
    # A 500 or a 504 (client-go's words for them) failed at once: not taken for transient.
    _ok(cloud.invoke("up", "--yes"), "up")
    assert _releases(cloud) == ["default/nemo-rl"]
    done = _ok(cloud.invoke("clean.ray", "--yes", process=True, FAKECLOUD_FAIL=f"helm uninstall:1:{kind}"),
               "clean.ray")
    assert _releases(cloud) == [], done.output[-2000:]
    uninstalls = [c for c in cloud.calls() if c["tool"] == "helm" and c["argv"][0] == "uninstall"]
    assert [c["exit"] for c in uninstalls] == [1, 0], uninstalls



def _kubectl(cloud, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--context=gke_my-nemo-project_us-central1_nemo-rl", *args], input=stdin,
                          env=cloud.process_env(), capture_output=True, text=True, cwd=cloud.workdir)


def _objects(cloud) -> list[str]:
    return [key for kind, items in cloud.resources().items() if kind.startswith("k8s:") for key in items]


def test_storage_in_a_namespace_of_its_own_makes_the_namespace_first(cloud):
    # kubectl's apply into a namespace that is not there fails (the fake stored it anyway): the Secret's apply ran
    # beside the KSA's, which makes the namespace, and a first `up` with NAMESPACE=nemo failed on it.
    cloud.write_env(NAMESPACE="nemo")
    _ok(cloud.invoke("up", "--yes"), "up")
    assert {"Namespace//nemo", "PersistentVolumeClaim/nemo/lustre-pvc"} <= set(_objects(cloud))
    assert _releases(cloud) == ["nemo/nemo-rl"]
    for kind, name in (("secret", "nemo-rl-secrets"), ("serviceaccount", "generic-ksa"), ("namespace", "nemo")):
        assert _kubectl(cloud, "delete", kind, name, "--namespace=nemo").returncode == 0
    # Each apply now takes 0.1 s: the Secret's, started beside the KSA's, asks before the namespace is there.
    _ok(cloud.invoke("storage.create", process=True, FAKECLOUD_TIME_SCALE="0.05"), "storage.create")
    assert {"Namespace//nemo", "ServiceAccount/nemo/generic-ksa", "Secret/nemo/nemo-rl-secrets"} <= set(
        _objects(cloud))
    _ok(cloud.invoke("down", "--yes", "--delete-data"), "down")


def test_the_fakes_apply_into_a_missing_namespace_fails_as_kubectls_does(cloud):
    _ok(cloud.invoke("up", "--yes"), "up")
    secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: x, namespace: elsewhere}\nstringData: {a: b}\n"
    done = _kubectl(cloud, "apply", "--filename=-", stdin=secret)
    assert done.returncode == 1 and 'namespaces "elsewhere" not found' in done.stderr, done.stderr


def test_down_does_not_take_a_cluster_list_gke_answered_in_part_for_no_cluster(cloud):
    # gcloud container clusters list exits 0 with a warning when a location did not answer (missingZones): read as
    # complete, the cluster was absent to `down`, which then left it (and its nodes) billing.
    _ok(cloud.invoke("up", "--yes"), "up")
    done = _ok(cloud.invoke("down", "--yes", "--delete-data", process=True,
                            FAKECLOUD_FAIL="container clusters list:1:partial"), "down")
    partial = [c for c in cloud.calls() if c["argv"][:3] == ["container", "clusters", "list"] and c["exit"] == 0]
    assert partial, "the injected partial list was never asked"
    assert "cluster" not in cloud.resources(), sorted(cloud.resources())
    assert "nothing of ours is left" in done.stderr, done.stderr[-2000:]


def test_down_deletes_nothing_while_gke_lists_the_clusters_in_part(cloud):
    # Another deployment in a location that did not answer would go unseen: its VPCs, peering and Lustre deleted.
    _ok(cloud.invoke("up", "--yes"), "up")
    before, asked = cloud.resources(), len(cloud.calls())
    done = cloud.invoke("down", "--yes", "--delete-data", process=True,
                        FAKECLOUD_FAIL="container clusters list:2:partial")
    assert done.code == 1 and "without some locations" in done.stderr and "nothing was deleted" in done.stderr, \
        done.output[-2000:]
    assert "Traceback" not in done.output and cloud.resources() == before
    assert not [c for c in cloud.calls()[asked:] if c["mutating"]]
    again = _ok(cloud.invoke("down", "--yes", "--delete-data"), "down, GKE answering again")
    assert "nothing of ours is left" in again.stderr, again.stderr[-2000:]


def test_a_teardown_that_deletes_nothing_shared_goes_on_while_gke_lists_the_clusters_in_part(cloud):
    _ok(cloud.invoke("up", "--yes"), "up")
    _ok(cloud.invoke("clean.ray", "--yes", FAKECLOUD_FAIL="container clusters list:5:partial"), "clean.ray")
    assert _releases(cloud) == []


def test_up_with_a_gke_version_no_longer_offered_fails_at_the_clusters_create(cloud):
    # What `doctor` foresees (flows/test_doctor_flow.py): GKE refuses a version it no longer offers.
    cloud.write_env(GKE_VERSION="1.32.2-gke.1422000")
    done = cloud.invoke("up", "--yes")
    assert done.code == 1 and 'Master version "1.32.2-gke.1422000" is unsupported' in done.stderr, done.output[-2000:]


# A gcloud configuration (`gcloud config set`, here its environment variables, which outrank it) that hides what
# we read of gcloud's answers: the fake prints as gcloud does under it (fakecloud/gcloud_output.py).
NO_USER_OUTPUT = {"CLOUDSDK_CORE_USER_OUTPUT_ENABLED": "false"}
QUIET = {"CLOUDSDK_CORE_VERBOSITY": "error"}
STRUCTURED = {"CLOUDSDK_CORE_SHOW_STRUCTURED_LOGS": "always"}


@pytest.mark.parametrize("process", [False, True], ids=["in-process", "invoke"])
def test_down_deletes_everything_under_a_gcloud_configuration_without_user_output(cloud, process):
    # Every `--format=json` list printed nothing, exit 0: read as empty, so `down` found nothing to delete and said
    # nothing of ours was left, with the cluster, the VPCs and Lustre billing.
    _ok(cloud.invoke("up", "--yes"), "up")
    done = _ok(cloud.invoke("down", "--yes", "--delete-data", process=process, **NO_USER_OUTPUT), "down")
    assert "nothing of ours is left" in done.stderr, done.stderr[-2000:]
    assert cloud.resources() == {}, sorted(cloud.resources())


def test_status_sees_the_deployment_under_a_gcloud_configuration_without_user_output(cloud):
    _ok(cloud.invoke("up", "--yes"), "up")
    done = _ok(cloud.invoke("status", "--json", process=True, **NO_USER_OUTPUT, **QUIET), "status")
    assert '"absent"' not in done.stdout, done.stdout[-3000:]


def test_down_deletes_nothing_while_gke_lists_in_part_under_a_gcloud_configuration_that_hides_warnings(cloud):
    _ok(cloud.invoke("up", "--yes"), "up")
    before = cloud.resources()
    done = cloud.invoke("down", "--yes", "--delete-data", process=True,
                        FAKECLOUD_FAIL="container clusters list:2:partial", **QUIET)
    assert done.code == 1 and "without some locations" in done.stderr, done.output[-2000:]
    assert cloud.resources() == before


def test_a_failed_gcloud_command_says_its_sentence_under_a_configuration_of_structured_logs(cloud):
    done = cloud.invoke("up", "--yes", FAKECLOUD_FAIL="compute networks create:9:permanent", **STRUCTURED)
    assert done.code == 1 and "ERROR: (gcloud.compute.networks.create)" in done.stderr, done.output[-2000:]
    assert '"verbosity": "ERROR"' not in done.output


def test_up_installs_ray_in_our_cluster_whatever_helms_environment_names(cloud):
    # HELM_KUBEAPISERVER outranks the --kube-context we name (helm's pkg/cli/environment.go): left in the
    # environment of the shell `up` runs in, helm would talk to that server, not to our cluster.
    _ok(cloud.invoke("up", "--yes", process=True, HELM_KUBEAPISERVER="https://10.9.9.9:6443",
                     HELM_KUBETOKEN="not-ours"), "up")
    assert _releases(cloud) == ["default/nemo-rl"]


ASKING_KUBERC = """apiVersion: kubectl.config.k8s.io/v1beta1
kind: Preference
defaults:
- command: delete
  options:
  - name: interactive
    default: "true"
"""


def _jobs(cloud) -> list[str]:
    return [key for key in _objects(cloud) if key.startswith("Job/")]


@pytest.mark.parametrize("process", [False, True], ids=["in-process", "invoke"])
def test_clean_storage_deletes_under_a_kuberc_that_makes_kubectl_delete_ask(cloud, tmp_path, process):
    # kubectl 1.34+ applies ~/.kube/kuberc's defaults: with `delete --interactive` each delete asked, read no
    # answer, printed "deletion is cancelled" and exited 0, so clean.storage said "deleted" and left the objects.
    kuberc = tmp_path / "kuberc"
    kuberc.write_text(ASKING_KUBERC)
    _ok(cloud.invoke("up", "--yes"), "up")
    assert _jobs(cloud), "up made no model prefetch Job to delete"
    _ok(cloud.invoke("clean.ray", "--yes", process=process, KUBERC=str(kuberc)), "clean.ray")
    _ok(cloud.invoke("clean.storage", "--yes", process=process, KUBERC=str(kuberc)), "clean.storage")
    left = _objects(cloud)
    assert _jobs(cloud) == [] and _releases(cloud) == [], sorted(left)
    assert not {"Secret/default/nemo-rl-secrets", "PersistentVolumeClaim/default/lustre-pvc"} & set(left), left


def test_the_fakes_kubectl_delete_asks_under_such_a_kuberc_as_kubectl_does(cloud, tmp_path):
    kuberc = tmp_path / "kuberc"
    kuberc.write_text(ASKING_KUBERC)
    _ok(cloud.invoke("up", "--yes"), "up")
    env = {**cloud.process_env(), "KUBERC": str(kuberc)}
    argv = ["kubectl", "--context=gke_my-nemo-project_us-central1_nemo-rl", "delete", "secret", "nemo-rl-secrets"]
    asked = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=cloud.workdir, stdin=subprocess.DEVNULL)
    assert asked.returncode == 0 and asked.stdout.rstrip().endswith("deletion is cancelled"), asked
    assert "Secret/default/nemo-rl-secrets" in _objects(cloud)
    named = subprocess.run([*argv, "--interactive=false"], env=env, capture_output=True, text=True, cwd=cloud.workdir)
    assert named.returncode == 0 and "Secret/default/nemo-rl-secrets" not in _objects(cloud), named


def test_down_does_not_take_an_endpoint_that_is_no_api_for_a_firewall_rule_gone_already(cloud):
    # An api_endpoint_overrides left pointing elsewhere: Google's front end answers 404 with its own page ("The
    # requested URL ... was not found on this server"), which read as "not found": the rule's delete counted as
    # done, and `down` failed later on the VPC "already being used by" that rule, the cause never said.
    _ok(cloud.invoke("up", "--yes"), "up")
    done = cloud.invoke("down", "--yes", "--delete-data", FAKECLOUD_FAIL="compute firewall-rules delete:50:endpoint")
    assert done.code == 1 and "was not found on this server" in done.stderr, done.output[-2000:]
    assert not re.search(r"firewall rule \S+: deleted", done.stderr), done.stderr[-2000:]
    assert cloud.resources().get("firewall"), sorted(cloud.resources())


def test_the_fakes_volumes_bind_and_release_as_kubernetes_pv_controller_does(cloud):
    """The fake's claims bound whatever happened to their volume: a claim made again after a delete (by hand, or
    with its namespace) was Bound at once, where Kubernetes keeps the Retained volume Released and the new claim
    Pending ("volume already bound to a different claim"), and a bound volume's delete waits (pv-protection)."""
    import json

    def phases() -> tuple[str, str]:
        pv = _kubectl(cloud, "get", "pv", "lustre-pv", "--output=json", "--ignore-not-found")
        pvc = _kubectl(cloud, "get", "pvc", "lustre-pvc", "--namespace=default", "--output=json", "--ignore-not-found")
        return tuple(json.loads(got.stdout)["status"]["phase"] if got.stdout else "-" for got in (pv, pvc))

    def read(*what: str) -> dict:
        found = json.loads(_kubectl(cloud, "get", *what, "--output=json").stdout)
        for key in ("uid", "deletionTimestamp"):
            found["metadata"].pop(key, None)
        return {**found, "status": {}}

    _ok(cloud.invoke("net.create", "cluster.create", "storage.create"), "storage.create")
    assert phases() == ("Bound", "Bound")
    claim, volume = read("pvc", "lustre-pvc", "--namespace=default"), read("pv", "lustre-pv")
    held = _kubectl(cloud, "delete", "pv", "lustre-pv", "--timeout=10s")
    assert held.returncode == 1 and "timed out waiting for the condition" in held.stderr, held
    assert phases() == ("Bound", "Bound")  # marked for deletion, held while bound
    assert _kubectl(cloud, "delete", "pvc", "lustre-pvc", "--namespace=default").returncode == 0
    assert phases() == ("-", "-")  # then gone with its claim
    _ok(cloud.invoke("storage.create"), "storage.create")
    assert phases() == ("Bound", "Bound")
    assert _kubectl(cloud, "delete", "pvc", "lustre-pvc", "--namespace=default").returncode == 0
    assert phases() == ("Released", "-")
    assert _kubectl(cloud, "apply", "--filename=-", stdin=json.dumps(claim)).returncode == 0
    assert phases() == ("Released", "Pending")  # a claim of the same name is another claim
    del volume["spec"]["claimRef"]  # an apply without it clears it: the volume is free, and the claim binds it
    assert _kubectl(cloud, "apply", "--filename=-", stdin=json.dumps(volume)).returncode == 0
    assert phases() == ("Bound", "Bound")
    assert _kubectl(cloud, "delete", "pvc", "lustre-pvc", "--namespace=default").returncode == 0
    assert _kubectl(cloud, "delete", "pv", "lustre-pv").returncode == 0  # released: nothing holds it
    assert phases() == ("-", "-")
