"""helm argv builders: context and namespace on every cluster call, values on stdin, no --set."""

from pathlib import Path

from nemo_rl_gke import settings as settings_module
from nemo_rl_gke.commands import helm


def settings(**overrides):
    return settings_module.load(allow_example=True, environ={}, cwd=Path("/"), **overrides)


CONTEXT = "--kube-context=gke_my-nemo-project_us-central1_nemo-rl"


def test_helm_upgrade_install_names_release_chart_context_namespace():
    argv = helm.upgrade_install(settings(NAMESPACE="team"), "manifests/ray-cluster")
    assert argv[:5] == ["helm", "upgrade", "--install", "nemo-rl", "manifests/ray-cluster"]
    assert CONTEXT in argv and "--namespace=team" in argv


def test_helm_upgrade_install_reads_values_from_stdin_and_never_sets():
    argv = helm.upgrade_install(settings(), "chart")
    assert "--values=-" in argv
    assert not any(a.startswith("--set") for a in argv)


def test_helm_upgrade_install_resets_values_so_no_old_value_survives():
    assert "--reset-values" in helm.upgrade_install(settings(), "chart")


def test_helm_upgrade_install_does_not_wait_by_default():
    # helm's --wait does not understand a RayCluster; ray.deploy waits for the pods itself.
    assert "--wait" not in helm.upgrade_install(settings(), "chart")
    assert "--wait" in helm.upgrade_install(settings(), "chart", wait=True)


def test_helm_upgrade_install_can_take_a_values_file():
    assert "--values=/tmp/v.yaml" in helm.upgrade_install(settings(), "chart", values_file="/tmp/v.yaml")


def test_helm_template_is_offline_without_context():
    argv = helm.template(settings(), "chart")
    assert argv[:4] == ["helm", "template", "nemo-rl", "chart"]
    assert "--values=-" in argv and not any(a.startswith("--kube-context") for a in argv)


def test_helm_uninstall_waits_and_counts_only_a_missing_release_as_gone():
    argv = helm.uninstall(settings())
    assert argv[:3] == ["helm", "uninstall", "nemo-rl"]
    # Not --ignore-not-found: helm 3.13-3.19 then says "uninstalled" (exit 0) for a release it could not read.
    assert CONTEXT in argv and "--ignore-not-found" not in argv and "--wait" in argv
    assert helm.RELEASE_GONE.search("Error: uninstall: Release not loaded: nemo-rl: release: not found")
    for unread in ("Error: uninstall: Release not loaded: nemo-rl: query: failed to query with labels: the server "
                   "is currently unable to handle the request",
                   'Error: uninstall: Release not loaded: nemo-rl: secrets is forbidden: User "x" cannot list '
                   'resource "secrets"',
                   'Error: Kubernetes cluster unreachable: context "gke_p_r_c" does not exist'):
        assert not helm.RELEASE_GONE.search(unread), unread


def test_helm_status_asks_for_json_in_the_clusters_context():
    argv = helm.status(settings())
    assert argv[:3] == ["helm", "status", "nemo-rl"] and CONTEXT in argv and "--output=json" in argv


def test_helm_chart_path_is_relative_below_the_working_directory(tmp_path):
    chart = tmp_path / "manifests" / "ray-cluster"
    chart.mkdir(parents=True)
    assert helm.chart_path(chart, tmp_path) == "manifests/ray-cluster"


def test_helm_chart_path_is_absolute_elsewhere(tmp_path):
    chart = tmp_path / "a" / "chart"
    chart.mkdir(parents=True)
    (tmp_path / "b").mkdir()
    assert helm.chart_path(chart, tmp_path / "b") == str(chart)
