"""Our kubeconfig context when it has outlived its cluster (deleted, or re-created, from another machine or the
console: gcloud removes the entry only on the machine that deletes). kubectl and helm would dial a dead endpoint
and give up after minutes ("i/o timeout", which the runner retries as transient).

Two ways to notice: a run that lists the clusters compares at once (Inventory); a task that goes straight to
kubectl (the job tasks' head pod) watches its first call and asks gcloud only if that call has not answered
after STALE_CHECK_SECONDS (`watch`): a live context answers well within it, so nothing is asked then.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..commands import gcloud, kubectl
from ..runner import Interrupted, Runner
from ..settings import Settings

STALE_CHECK_SECONDS = 5.0


def endpoints(cluster: dict[str, Any]) -> set[str]:
    """The addresses a context of this cluster (as gcloud describes or lists it) may point at: its endpoint, and its
    private one."""
    found = {cluster.get("endpoint"), (cluster.get("privateClusterConfig") or {}).get("privateEndpoint")}
    return {str(address) for address in found if address}


def drop_if_stale(r: Runner, s: Settings, cluster: dict[str, Any] | None) -> bool:
    """cluster: ours as gcloud lists or describes it now (None: there is none). If this machine's kubeconfig
    still has our context and it points elsewhere, remove the context, as gcloud's delete does, and end the
    kubectl/helm calls already dialing it: they, and every later one, then answer at once that there is no such
    context (the path a first `up` takes; `up` fetches credentials again). True if it did."""
    from .. import kubeconfig

    server = kubeconfig.server_of(s.kube_context)
    if server is None:
        return False
    if cluster is None:
        why = f"cluster {s.CLUSTER_NAME} is not in {s.PROJECT_ID}/{s.region} any more"
    else:
        if not server or not re.fullmatch(r"[0-9.]+|\[?[0-9a-fA-F:]+\]?", server) or server in endpoints(cluster):
            return False  # ours, or a DNS endpoint this check cannot compare
        new = f"its endpoint is {cluster['endpoint']}" if cluster.get("endpoint") else "it has no endpoint yet"
        why = (f"cluster {s.CLUSTER_NAME} was re-created: {new} (`invoke up` or "
               f"`gcloud container clusters get-credentials {s.CLUSTER_NAME} --location={s.region} "
               f"--project={s.PROJECT_ID}` fetches the new one)")
    r.query(kubectl.delete_context(s), ok_codes=range(256))
    ended = r.end_calls(lambda argv: kubectl.uses_context(s, argv), f"stopped: {why}")
    r.say(f"note: the kubeconfig context {s.kube_context} pointed at {server}, but {why}: removed it "
          f"(as gcloud does on the machine that deletes a cluster)"
          + (f"; {ended} kubectl/helm call(s) waiting on it stopped." if ended else "."), err=True)
    return True


@contextmanager
def watch(r: Runner, s: Settings, after: float = STALE_CHECK_SECONDS) -> Iterator[None]:
    """Around a task's first kubectl call: if the block is still running `after` seconds later and this machine's
    kubeconfig has our context, `gcloud container clusters describe` the cluster and drop_if_stale. The block's
    call then ends with why (ENDED) instead of minutes of dialing."""
    if r.dry:
        yield
        return
    done = threading.Event()

    def check() -> None:
        try:
            look()
        except Interrupted:  # Ctrl-C (or SIGTERM) reached the run: it is ending, nothing to check
            return

    def look() -> None:
        import json

        from .. import kubeconfig

        if done.wait(after) or not kubeconfig.server_of(s.kube_context):
            return
        result = r.query(gcloud.cluster_describe(s), ok_codes=range(256))
        if result is None or done.is_set():
            return
        if result.ok:
            try:
                cluster = json.loads(result.stdout or "{}")
            except json.JSONDecodeError:
                return
        elif result.not_found:
            cluster = None
        else:
            return
        drop_if_stale(r, s, cluster)  # reads the kubeconfig again: it may have changed during the describe

    thread = threading.Thread(target=check, daemon=True, name="kube-context-watch")
    thread.start()
    try:
        yield
    finally:
        done.set()
