"""kubectl argv builders. Every call names the cluster's context, so a stale current-context never
points an apply at another cluster."""

from __future__ import annotations

from ..settings import Settings

Argv = list[str]

# The NCCL RDMA installer, pinned: `refs/heads/master` (the tutorial) changes under our users' feet.
NCCL_INSTALLER_COMMIT = "64f0eeb0dc1d980eaef8939584f832bb10e3d482"
_NCCL_BASE = (f"https://raw.githubusercontent.com/GoogleCloudPlatform/container-engine-accelerators/"
              f"{NCCL_INSTALLER_COMMIT}/gpudirect-rdma")
NCCL_INSTALLER = {
    # mode -> (manifest URL, namespace of its DaemonSet)
    "standard": (f"{_NCCL_BASE}/nccl-rdma-installer.yaml", "kube-system"),
    "autopilot": (f"{_NCCL_BASE}/nccl-rdma-installer-autopilot.yaml", "rdma-system"),
}
NCCL_DAEMONSET = "nccl-rdma-installer"


def base(s: Settings) -> Argv:
    return ["kubectl", f"--context={s.kube_context}"]


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


def delete(s: Settings, kind: str, *names: str, namespace: str | None = None) -> Argv:
    argv = base(s) + ["delete", kind, *names]
    if namespace:
        argv.append(f"--namespace={namespace}")
    return argv + ["--ignore-not-found"]


def nccl_installer_apply(s: Settings) -> Argv:
    return apply_url(s, NCCL_INSTALLER[s.CLUSTER_MODE][0])


def nccl_installer_get(s: Settings) -> Argv:
    return get(s, "daemonset", NCCL_DAEMONSET, namespace=NCCL_INSTALLER[s.CLUSTER_MODE][1])


def nccl_installer_delete(s: Settings) -> Argv:
    return base(s) + ["delete", f"--filename={NCCL_INSTALLER[s.CLUSTER_MODE][0]}", "--ignore-not-found"]
