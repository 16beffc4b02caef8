"""The environment each tool runs with: the user's, but for what would change how we read its answers or which
cluster it talks to (tools.TOOL_ENVIRONMENT; the flows in lifecycle/test_tool_answers.py, the real gcloud in
gcloud/test_gcloud_output.py)."""

from __future__ import annotations

from nemo_rl_gke.tools import GCLOUD_PRINTS, tool_environment

USER = {"PATH": "/usr/bin", "HOME": "/home/u", "CLOUDSDK_CORE_USER_OUTPUT_ENABLED": "false",
        "CLOUDSDK_CORE_VERBOSITY": "error", "CLOUDSDK_CORE_SHOW_STRUCTURED_LOGS": "always",
        "CLOUDSDK_CORE_LOG_HTTP": "true", "CLOUDSDK_CONFIG": "/home/u/.gcloud-work",
        "HELM_KUBEAPISERVER": "https://10.9.9.9:6443", "HELM_KUBETOKEN": "t0ken", "HELM_KUBEASUSER": "admin",
        "HELM_KUBEASGROUPS": "system:masters", "HELM_KUBECAFILE": "/ca.pem", "HELM_KUBETLS_SERVER_NAME": "x",
        "HELM_KUBEINSECURE_SKIP_TLS_VERIFY": "true", "HELM_DRIVER": "configmap", "HELM_CACHE_HOME": "/c",
        "KUBECONFIG": "/home/u/.kube/config"}


def test_gcloud_prints_its_answers_as_we_read_them_whatever_its_configuration():
    env = tool_environment("gcloud", USER)
    assert {k: env[k] for k in env if k.startswith("CLOUDSDK_CORE_")} == {
        "CLOUDSDK_CORE_USER_OUTPUT_ENABLED": "true", "CLOUDSDK_CORE_VERBOSITY": "warning",
        "CLOUDSDK_CORE_SHOW_STRUCTURED_LOGS": "never", "CLOUDSDK_CORE_CONSOLE_LOG_FORMAT": "standard",
        "CLOUDSDK_CORE_PRINT_HANDLED_TRACEBACKS": "false", "CLOUDSDK_CORE_LOG_HTTP": "false"}
    assert env["CLOUDSDK_CONFIG"] == "/home/u/.gcloud-work" and env["PATH"] == "/usr/bin"  # the rest is theirs
    assert tool_environment("/usr/lib/google-cloud-sdk/bin/gcloud", USER) == env


def test_helm_talks_to_the_context_we_name_and_keeps_releases_where_helm_does_by_default():
    env = tool_environment("helm", {**USER, "HELM_KUBECONTEXT": "other"})
    assert not [k for k in env if k.startswith("HELM_KUBE") and k != "HELM_KUBECONTEXT" or k == "HELM_DRIVER"]
    assert env["HELM_CACHE_HOME"] == "/c" and env["KUBECONFIG"] == "/home/u/.kube/config"
    assert env["HELM_KUBECONTEXT"] == "other"  # kept: --kube-context, which every call names, outranks it
    assert "HELM_DEBUG" not in tool_environment("helm", {**USER, "HELM_DEBUG": "true"})


def test_get_credentials_writes_the_kubeconfig_entry_kubectl_and_helm_can_use():
    env = tool_environment("gcloud", {**USER, "USE_GKE_GCLOUD_AUTH_PLUGIN": "False",
                                      "CLOUDSDK_CONTAINER_USE_CLIENT_CERTIFICATE": "true"})
    assert "USE_GKE_GCLOUD_AUTH_PLUGIN" not in env and env["CLOUDSDK_CONTAINER_USE_CLIENT_CERTIFICATE"] == "false"


def test_kubectl_runs_without_the_users_kuberc_preferences():
    env = tool_environment("kubectl", {**USER, "KUBERC": "/home/u/.kube/kuberc-work"})
    assert env["KUBERC"] == "off" and env["KUBECONFIG"] == USER["KUBECONFIG"]


def test_the_gcloud_that_kubectl_and_helm_run_for_a_token_prints_as_gcloud_does_for_us():
    # gke-gcloud-auth-plugin runs `gcloud config config-helper --format=json` with kubectl's or helm's
    # environment: with output off it printed nothing, and every call failed on an unreadable token.
    for tool in ("kubectl", "helm"):
        env = tool_environment(tool, USER)
        assert {k: env.get(k) for k in GCLOUD_PRINTS} == GCLOUD_PRINTS, tool


def test_other_tools_run_with_the_users_environment_as_it_is():
    assert tool_environment("bash", {}) == {}
    assert "HELM_DRIVER" in USER and USER["CLOUDSDK_CORE_VERBOSITY"] == "error"  # the caller's mapping unchanged
