"""Entry point of the fake tools: parse, inject failures, dispatch, log the call."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import sys
import time
from pathlib import Path

from . import core, handlers

TRANSIENT_TEXT = {
    "gcloud": "HttpError 503: Service Unavailable (injected transient failure); code=503",
    "kubectl": "Error from server (ServiceUnavailable): the server is currently unable to handle the request "
               "(injected transient failure)",
    "helm": "Error: Kubernetes cluster unreachable: the server is currently unable to handle the request "
            "(injected transient failure)",
}
PERMANENT_TEXT = {
    "gcloud": "INVALID_ARGUMENT: injected permanent failure; code=400",
    "kubectl": "Error from server (Forbidden): injected permanent failure",
    "helm": "Error: INSTALLATION FAILED: injected permanent failure",
}


def _load_handlers() -> None:
    for module in pkgutil.iter_modules(handlers.__path__):
        importlib.import_module(f"{handlers.__name__}.{module.name}")


def _injected_failure(state: core.State, tool: str, argv: list[str]) -> tuple[int, str] | None:
    """FAKECLOUD_FAIL="PATTERN:COUNT:KIND;...": the first COUNT calls whose words contain PATTERN fail."""
    spec = os.environ.get("FAKECLOUD_FAIL", "").strip()
    if not spec:
        return None
    words = " ".join([tool, *argv])
    for entry in [e for e in spec.split(";") if e.strip()]:
        pattern, count, kind = entry.rsplit(":", 2)
        if pattern.strip() not in words:
            continue
        with state.locked():
            used = state.get("_fail", pattern) or {"n": 0}
            if used["n"] >= int(count):
                continue
            state.put("_fail", pattern, {"n": used["n"] + 1})
        text = TRANSIENT_TEXT if kind.strip() == "transient" else PERMANENT_TEXT
        prefix = "ERROR: (gcloud) " if tool == "gcloud" else ""
        return 1, prefix + text[tool]
    return None


def main(tool: str, argv: list[str]) -> int:
    root = os.environ.get("FAKECLOUD_STATE")
    if not root:
        sys.stderr.write(f"fake {tool}: FAKECLOUD_STATE is not set\n")
        return 3
    state = core.State(Path(root))
    _load_handlers()
    ctx = core.parse(tool, argv)
    ctx.state = state
    registered = core.REGISTRY.get((tool, ctx.words))
    started = time.time()
    code = 0
    if registered is None:
        sys.stderr.write(f"ERROR: ({tool}) fakecloud has no handler for: {' '.join([tool, *argv])}\n")
        code = 2
    else:
        ctx.latency = registered.latency
        failure = _injected_failure(state, tool, argv)
        if failure:
            ctx.work(min(registered.latency, 5.0))
            code, message = failure
            sys.stderr.write(message + "\n")
        else:
            try:
                code = registered.handler(ctx) or 0
            except core.Fail as fail:
                code = fail.code
                sys.stderr.write(fail.stderr.rstrip("\n") + "\n")
    record = {"tool": tool, "argv": argv, "start": started, "end": time.time(), "exit": code,
              "mutating": bool(registered and registered.mutating)}
    with state.locked():
        with open(state.root / "calls.jsonl", "a") as log:
            log.write(json.dumps(record) + "\n")
    sys.stdout.flush()
    return code
