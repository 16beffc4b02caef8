"""kubectl argv builders. Every call names the cluster's context, so a stale current-context never
points an apply at another cluster."""

from __future__ import annotations

from .. import names
from ..settings import NCCL_INSTALLER_DEFAULT_REF, Settings

Argv = list[str]

# The NCCL RDMA installer, pinned to a commit (`refs/heads/master`, as the tutorial has it, changes under our
# users' feet): NCCL_INSTALLER_REF, one setting, default settings.NCCL_INSTALLER_DEFAULT_REF (FACTS §7).
NCCL_INSTALLER_COMMIT = NCCL_INSTALLER_DEFAULT_REF
NCCL_REPO_RAW = "https://raw.githubusercontent.com/GoogleCloudPlatform/container-engine-accelerators"
NCCL_INSTALLER = {
    # mode -> (manifest path in the repository, namespace of its DaemonSet)
    "standard": ("gpudirect-rdma/nccl-rdma-installer.yaml", "kube-system"),
    "autopilot": ("gpudirect-rdma/nccl-rdma-installer-autopilot.yaml", "rdma-system"),
}


def nccl_installer_url(s: Settings, mode: str | None = None) -> str:
    """The raw URL of the installer manifest for a cluster mode (default: the settings' mode)."""
    return f"{NCCL_REPO_RAW}/{s.NCCL_INSTALLER_REF}/{NCCL_INSTALLER[mode or s.CLUSTER_MODE][0]}"


def nccl_installer_urls(s: Settings) -> list[str]:
    """Both installer URLs at the pinned ref (doctor checks each answers 200)."""
    return [nccl_installer_url(s, mode) for mode in NCCL_INSTALLER]


NCCL_DAEMONSET = "nccl-rdma-installer"


def base(s: Settings) -> Argv:
    return ["kubectl", f"--context={s.kube_context}"]


def delete_context(s: Settings) -> Argv:
    """Our context out of the local kubeconfig, as `gcloud container clusters delete` does on the machine that
    deletes (its cluster gone, kubectl would dial a dead endpoint for minutes). Exit 1 if there is none."""
    return ["kubectl", "config", "delete-context", s.kube_context]


def uses_context(s: Settings, argv: list[str]) -> bool:
    """argv is a kubectl or helm call through our context."""
    return f"--context={s.kube_context}" in argv or f"--kube-context={s.kube_context}" in argv


def apply_stdin(s: Settings, *, namespace: str | None = None) -> Argv:
    argv = base(s) + ["apply"]
    if namespace:
        argv.append(f"--namespace={namespace}")
    return argv + ["--filename=-"]


def apply_url(s: Settings, url: str) -> Argv:
    return base(s) + ["apply", f"--filename={url}"]


def get(s: Settings, kind: str, *names: str, namespace: str | None = None, output: str = "json",
        selector: str | None = None) -> Argv:
    argv = base(s) + ["get", kind, *names]
    if namespace:
        argv.append(f"--namespace={namespace}")
    if selector:
        argv.append(f"--selector={selector}")
    return argv + [f"--output={output}"]


def wait_ready(s: Settings, kind: str, *, selector: str, namespace: str, seconds: float) -> Argv:
    """`kubectl wait` until every object of kind matching selector (those there when it starts) is Ready:
    exit 0 then, 1 after seconds ("timed out waiting for the condition") or at once if none matches."""
    return base(s) + ["wait", kind, "--for=condition=Ready", f"--selector={selector}", f"--namespace={namespace}",
                      f"--timeout={max(seconds, 0.001):.3f}".rstrip("0").rstrip(".") + "s"]  # a Go duration


def get_named(s: Settings, refs: list[str], *, namespace: str) -> Argv:
    """One `kubectl get` of several TYPE/NAME objects (cluster-scoped ones ignore the namespace); what is
    missing is left out, not an error."""
    return base(s) + ["get", *refs, f"--namespace={namespace}", "--ignore-not-found", "--output=json"]


def exec_head(s: Settings, pod: str, *command: str, stdin: bool = False) -> Argv:
    """`kubectl exec` into the Ray head container of pod: command, with stdin attached when a script is piped
    in (`exec_head(s, pod, "bash", stdin=True)`)."""
    return base(s) + ["exec", *(["-i"] if stdin else []), pod, f"--namespace={s.NAMESPACE}",
                      f"--container={names.HEAD_CONTAINER}", "--", *command]


# kubectl's delete waits for the object to be gone, by default for up to a week: one a finalizer holds (a claim a
# pod still mounts, a controller that is gone) would hang a teardown. Ours are gone in seconds; then it fails.
DELETE_TIMEOUT = "10m"


def delete(s: Settings, kind: str, *names: str, namespace: str | None = None, selector: str = "") -> Argv:
    """Delete the named objects, or those the label selector matches; gone already is fine, DELETE_TIMEOUT at most."""
    argv = base(s) + ["delete", kind, *names] + ([f"--selector={selector}"] if selector else [])
    if namespace:
        argv.append(f"--namespace={namespace}")
    return argv + ["--ignore-not-found", f"--timeout={DELETE_TIMEOUT}"]


def nccl_installer_apply(s: Settings) -> Argv:
    return apply_url(s, nccl_installer_url(s))


def nccl_installer_get(s: Settings) -> Argv:
    return get(s, "daemonset", NCCL_DAEMONSET, namespace=NCCL_INSTALLER[s.CLUSTER_MODE][1])
