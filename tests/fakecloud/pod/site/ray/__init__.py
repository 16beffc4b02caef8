"""Stand-in for `ray` in the fake head pod: just enough for `ray.init(address="auto")`, `ray.nodes()` and
`ray.cluster_resources()`, answered from the fake cloud's Ready worker pods (as Ray in a real head would)."""

from __future__ import annotations

import _fakecloud

_connected = False


def init(address=None, **kwargs):
    global _connected
    _fakecloud.identity()  # a real init fails without a running Ray; so does this without a pod
    _connected = True


def _ask():
    from fakecloud.handlers import ray_pods

    me = _fakecloud.identity()
    return ray_pods.ready_worker_gpus(_fakecloud.state(), me["context"], me["namespace"], me["cluster"])


def cluster_resources():
    if not _connected:
        raise RuntimeError("Ray has not been started yet. You can start Ray with 'ray.init()'.")
    gpus, workers = _ask()
    return {"CPU": 12.0 + 200.0 * workers, "GPU": float(gpus)} if gpus else {"CPU": 12.0}


def nodes():
    _, workers = _ask()
    return [{"Alive": True, "NodeManagerHostname": f"node-{i}"} for i in range(1 + workers)]
