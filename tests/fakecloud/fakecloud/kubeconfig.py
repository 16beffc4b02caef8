"""Kubeconfig contexts, one set per machine, as gcloud and kubectl keep them; what a context whose cluster is
gone does.

`gcloud container clusters get-credentials` writes the context, its cluster entry (the endpoint of that moment)
and its user into the caller's kubeconfig ($KUBECONFIG's first file, else ~/.kube/config; a test's second
machine has a HOME and a FAKECLOUD_MACHINE of its own); a cluster delete takes them out of the deleting
machine's kubeconfig only. Another machine keeps its entry:
its kubectl and helm then dial an endpoint that no longer answers (the cluster deleted, or re-created with a new
endpoint) and give up only after the dial timeout, wall-clock as the network's (UNREACHABLE_SECONDS, not the
time scale), in their own words.

The fake's own record is state kind 'kubecontext', one per context name: the cluster, and "_kubeconfigs":
{machine: endpoint} for each machine that has it (private: equality checks compare clouds, not machines). Each
kubectl/helm call reads it in one locked look; the YAML file is written beside it for what reads a real
kubeconfig (nemo_rl_gke/kubeconfig.py, the tests). A record without "_kubeconfigs" (the job tests seed one) is
every machine's and always reachable.

A machine without gke-gcloud-auth-plugin (FAKECLOUD_NO_AUTH_PLUGIN set): kubectl and helm find the context, then
fail to get its credentials from the exec plugin the kubeconfig names, in client-go's words (with the install
hint gcloud's kubeconfig carries), before any request.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

from .core import Ctx, Fail

UNREACHABLE_SECONDS = float(os.environ.get("FAKECLOUD_UNREACHABLE_SECONDS", "30"))
NO_PLUGIN = ("getting credentials: exec: executable gke-gcloud-auth-plugin not found\n\nIt looks like you are trying "
             "to use a client-go credential plugin that is not installed.\n\nTo learn more about this feature, "
             "consult the documentation available at:\n      https://kubernetes.io/docs/reference/access-authn-authz/"
             "authentication/#client-go-credential-plugins\n\nInstall gke-gcloud-auth-plugin for use with kubectl by "
             "following https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl"
             "#install_plugin")


def kubeconfig_file() -> Path:
    """The caller's kubeconfig, where kubectl writes: $KUBECONFIG's first file, else ~/.kube/config."""
    listed = [f for f in os.environ.get("KUBECONFIG", "").split(os.pathsep) if f]
    return Path(listed[0]) if listed else Path(os.path.expanduser("~")) / ".kube" / "config"


def machine() -> str:
    """Whose kubeconfig: FAKECLOUD_MACHINE (a test's second machine sets it, with a HOME of its own), else this
    one. Not the file's path: a test may copy a cloud's state to another folder, and stays the same machine."""
    return os.environ.get("FAKECLOUD_MACHINE", "this machine")


def new_endpoint(ctx: Ctx, key: str) -> str:
    """A public endpoint for a cluster created now: the same for the same history (runs compare), another for a
    re-created cluster (its creations are counted in state kind '_cluster-generation', bookkeeping)."""
    generation = int((ctx.state.get("_cluster-generation", key) or {}).get("n", 0)) + 1
    ctx.state.put("_cluster-generation", key, {"n": generation})
    digest = hashlib.sha1(f"{key}/{generation}".encode()).digest()
    return f"34.{digest[0]}.{digest[1]}.{digest[2] or 1}"


def write(ctx: Ctx, context: str, cluster_key: str, cluster: dict[str, Any]) -> None:
    """get-credentials: the context, with the cluster's endpoint now, for the caller's machine."""
    endpoint = str(cluster.get("endpoint", ""))
    with ctx.state.locked() as data:
        record = data.setdefault("kubecontext", {}).get(context) or {"name": context}
        files = {**(record.get("_kubeconfigs") or {}), machine(): endpoint}
        data["kubecontext"][context] = {**record, "cluster": cluster_key,
                                        "autopilot": cluster["autopilot"]["enabled"], "_kubeconfigs": files}
    _write_file(context, endpoint)


def remove(ctx: Ctx, context: str, *, cluster_and_user: bool) -> bool:
    """The context out of the caller's kubeconfig (with its cluster and user entries: what a cluster delete
    does); other machines keep theirs. False if the caller had no such context."""
    mine = machine()
    with ctx.state.locked() as data:
        contexts = data.setdefault("kubecontext", {})
        record = contexts.get(context)
        if record is None:
            return False
        files = record.get("_kubeconfigs")
        if files is not None and mine not in files:
            return False
        rest = {f: e for f, e in (files or {}).items() if f != mine}
        if rest:
            contexts[context] = {**record, "_kubeconfigs": rest}
        else:
            contexts.pop(context)
    _remove_from_file(context, cluster_and_user=cluster_and_user)
    return True


def reachable(ctx: Ctx, context: str, *, helm: bool = False) -> dict[str, Any] | None:
    """The context's record (None: the caller's kubeconfig has no such context). One whose cluster is gone, or
    has another endpoint now, hangs for the dial timeout, then fails as kubectl or helm does."""
    with ctx.state.reading() as data:  # one look: a cluster delete changes the record and the cluster at once
        record = data.get("kubecontext", {}).get(context)
        files = (record or {}).get("_kubeconfigs")
        cluster = data.get("cluster", {}).get(str((record or {}).get("cluster")))
    if record is None:
        return record
    endpoint = None if files is None else files.get(machine())
    if files is not None and endpoint is None:
        return None
    if os.environ.get("FAKECLOUD_NO_AUTH_PLUGIN"):  # kubectl: a url.Error; helm: its "cluster unreachable"
        where = endpoint or (cluster or {}).get("endpoint") or "34.0.0.1"
        raise Fail(1, f'Error: Kubernetes cluster unreachable: Get "https://{where}/version": {NO_PLUGIN}' if helm
                   else f"Unable to connect to the server: {NO_PLUGIN}")
    if files is None:
        return record
    if endpoint and (cluster is None or cluster.get("endpoint") != endpoint):
        time.sleep(UNREACHABLE_SECONDS)
        dial = f"dial tcp {endpoint}:443: i/o timeout"
        raise Fail(1, f'Error: Kubernetes cluster unreachable: Get "https://{endpoint}/version": {dial}' if helm
                   else f"Unable to connect to the server: {dial}")
    return dict(record)


def cluster_of(ctx: Ctx, context: str) -> dict[str, Any]:
    """The GKE cluster behind a context ({} when none): what its API server serves depends on its add-ons."""
    record = ctx.state.get("kubecontext", context) or {}
    return ctx.state.get("cluster", str(record.get("cluster"))) or {}


def missing_kind(ctx: Ctx, context: str, api_version: str, kind: str) -> bool:
    """A kind whose CRD the cluster lacks: KubeRay's (the Ray operator add-on installs it) and GKE's network
    kinds (multi-networking installs them). Other kinds: always there, as far as the fake knows."""
    cluster = cluster_of(ctx, context)
    if api_version.startswith("ray.io/"):
        return not ((cluster.get("addonsConfig") or {}).get("rayOperatorConfig") or {}).get("enabled")
    if api_version.startswith("networking.gke.io/") and kind in ("GKENetworkParamSet", "Network"):
        return not (cluster.get("networkConfig") or {}).get("enableMultiNetworking")
    return False


def no_mapping(name: str, namespace: str, source: str, api_version: str, kind: str) -> str:
    """kubectl's and helm's words for an object whose kind the API server does not serve."""
    return (f'resource mapping not found for name: "{name}" namespace: "{namespace}" from "{source}": no matches '
            f'for kind "{kind}" in version "{api_version}"\nensure CRDs are installed first')


# ---- the YAML file, as kubectl writes it ----------------------------------------------------------------
def _load() -> dict[str, Any]:
    import yaml

    path = kubeconfig_file()
    config = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    for section in ("clusters", "contexts", "users"):
        config[section] = config.get(section) or []
    return {"apiVersion": "v1", "kind": "Config", **config}


def _save(config: dict[str, Any]) -> None:
    import yaml

    path = kubeconfig_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def _without(config: dict[str, Any], section: str, name: str) -> list[dict[str, Any]]:
    return [entry for entry in config[section] if entry.get("name") != name]


def _write_file(context: str, endpoint: str) -> None:
    config = _load()
    config["clusters"] = [*_without(config, "clusters", context),
                          {"name": context, "cluster": {"server": f"https://{endpoint}"}}]
    config["contexts"] = [*_without(config, "contexts", context),
                          {"name": context, "context": {"cluster": context, "user": context}}]
    config["users"] = [*_without(config, "users", context),
                       {"name": context, "user": {"exec": {"command": "gke-gcloud-auth-plugin"}}}]
    config["current-context"] = context
    _save(config)


def _remove_from_file(context: str, *, cluster_and_user: bool) -> None:
    if not kubeconfig_file().exists():
        return
    config = _load()
    config["contexts"] = _without(config, "contexts", context)
    if cluster_and_user:
        config["clusters"] = _without(config, "clusters", context)
        config["users"] = _without(config, "users", context)
    _save(config)
