"""The user's kubeconfig, read only (kubectl and gcloud write it): where a context points.

A context outlives its cluster on every machine but the one that deleted it (gcloud removes the entry there
only). kubectl and helm then dial an endpoint that no longer answers and give up after minutes; the
inventory (resources/inventory.py) compares this with the run's cluster listing to notice it first.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit


def files() -> list[Path]:
    """The kubeconfig files kubectl reads, in its order: $KUBECONFIG's list, else ~/.kube/config."""
    listed = [Path(f) for f in os.environ.get("KUBECONFIG", "").split(os.pathsep) if f]
    return listed or [Path.home() / ".kube" / "config"]


def server_of(context: str) -> str | None:
    """The host (name or IP) of the API server that context points at; None when no kubeconfig file names
    the context (or none can be read); "" when it names it without a server."""
    import yaml

    contexts: dict[str, str] = {}
    servers: dict[str, str] = {}
    for path in files():
        try:
            config = yaml.safe_load(path.read_text()) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if not isinstance(config, dict):
            continue
        for entry in config.get("contexts") or []:  # the first file that names an entry wins, as in kubectl
            if isinstance(entry, dict) and entry.get("name"):
                contexts.setdefault(str(entry["name"]), str((entry.get("context") or {}).get("cluster") or ""))
        for entry in config.get("clusters") or []:
            if isinstance(entry, dict) and entry.get("name"):
                servers.setdefault(str(entry["name"]), str((entry.get("cluster") or {}).get("server") or ""))
    if context not in contexts:
        return None
    return urlsplit(servers.get(contexts[context], "")).hostname or ""
