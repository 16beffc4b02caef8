"""Kubeconfig files, one per machine, as gcloud and kubectl keep them; what a context whose cluster is gone does.

`gcloud container clusters get-credentials` writes the context, its cluster entry (the endpoint of that moment)
and its user into the caller's kubeconfig ($KUBECONFIG's first file, else ~/.kube/config: in tests, a machine is
a HOME); a cluster delete takes them out of the deleting machine's file only. Another machine keeps its entry:
its kubectl and helm then dial an endpoint that no longer answers (the cluster deleted, or re-created with a new
endpoint) and give up only after the dial timeout, wall-clock as the network's (UNREACHABLE_SECONDS, not the
time scale), in their own words. A context with no file entry answers from the fake's state as before (the job
tests seed one for every machine).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

from .core import Ctx, Fail

UNREACHABLE_SECONDS = float(os.environ.get("FAKECLOUD_UNREACHABLE_SECONDS", "30"))


def kubeconfig_file() -> Path:
    """The caller's kubeconfig, where kubectl writes: $KUBECONFIG's first file, else ~/.kube/config."""
    listed = [f for f in os.environ.get("KUBECONFIG", "").split(os.pathsep) if f]
    return Path(listed[0]) if listed else Path(os.path.expanduser("~")) / ".kube" / "config"


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


def new_endpoint(ctx: Ctx, key: str) -> str:
    """A public endpoint for a cluster created now: the same for the same history (runs compare), another for a
    re-created cluster (its creations are counted in state kind '_cluster-generation', bookkeeping)."""
    generation = int((ctx.state.get("_cluster-generation", key) or {}).get("n", 0)) + 1
    ctx.state.put("_cluster-generation", key, {"n": generation})
    digest = hashlib.sha1(f"{key}/{generation}".encode()).digest()
    return f"34.{digest[0]}.{digest[1]}.{digest[2] or 1}"


def write(context: str, endpoint: str) -> None:
    """get-credentials: context, cluster and user entries named after the context, made current."""
    config = _load()
    config["clusters"] = [*_without(config, "clusters", context),
                          {"name": context, "cluster": {"server": f"https://{endpoint}"}}]
    config["contexts"] = [*_without(config, "contexts", context),
                          {"name": context, "context": {"cluster": context, "user": context}}]
    config["users"] = [*_without(config, "users", context),
                       {"name": context, "user": {"exec": {"command": "gke-gcloud-auth-plugin"}}}]
    config["current-context"] = context
    _save(config)


def remove(context: str, *, cluster_and_user: bool) -> bool:
    """The context out of the caller's kubeconfig (with its cluster and user: what a cluster delete does);
    False if the file has no such context."""
    config = _load()
    if not any(entry.get("name") == context for entry in config["contexts"]):
        return False
    config["contexts"] = _without(config, "contexts", context)
    if cluster_and_user:
        config["clusters"] = _without(config, "clusters", context)
        config["users"] = _without(config, "users", context)
    _save(config)
    return True


def server_of(context: str) -> str | None:
    """The endpoint the caller's kubeconfig has for context (None: no such context in its file)."""
    config = _load()
    entry = next((e for e in config["contexts"] if e.get("name") == context), None)
    if entry is None:
        return None
    cluster = (entry.get("context") or {}).get("cluster")
    server = next((c.get("cluster", {}).get("server", "") for c in config["clusters"] if c.get("name") == cluster),
                  "")
    return str(server).removeprefix("https://")


def reachable(ctx: Ctx, context: str, *, helm: bool = False) -> dict[str, Any] | None:
    """The context's record (None: the caller cannot name it). A context in the caller's file whose cluster is
    gone, or has another endpoint now, hangs for the dial timeout, then fails as kubectl or helm does."""
    with ctx.state.locked():  # as a cluster delete changes both: never half of it seen
        endpoint = server_of(context)
        record = ctx.state.get("kubecontext", context)
        cluster = ctx.state.get("cluster", str(record.get("cluster"))) if record else None
    if not endpoint:  # no entry in the caller's file, or one without an endpoint (a seeded cluster)
        return record
    if cluster is None or cluster.get("endpoint") != endpoint:
        time.sleep(UNREACHABLE_SECONDS)
        dial = f"dial tcp {endpoint}:443: i/o timeout"
        raise Fail(1, f'Error: Kubernetes cluster unreachable: Get "https://{endpoint}/version": {dial}' if helm
                   else f"Unable to connect to the server: {dial}")
    return record
