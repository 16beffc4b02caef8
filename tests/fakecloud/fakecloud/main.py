"""Entry point of the fake tools: parse, inject failures, dispatch, log the call.

`main(tool, argv)` is what bin/gcloud, bin/kubectl and bin/helm run, one process per call; `dispatch` is the same
call made in-process (the Runner's in-process seam in tests/support/inprocess.py), with its own input and output.
"""

from __future__ import annotations

import fcntl
import importlib
import io
import json
import os
import pkgutil
import re
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from . import core, handlers, kuberc
from .gcloud_output import Shown

# FAKECLOUD_FAIL kinds and what each tool says for them, worded as the real tools word them, so the Runner's
# TRANSIENT pattern is exercised on each shape it retries ("transient" is the 5xx one).
FAULT_TEXT = {
    "transient": {
        "gcloud": "ERROR: (gcloud) HttpError 503: Service Unavailable (injected transient failure); code=503",
        "kubectl": "Error from server (ServiceUnavailable): the server is currently unable to handle the request "
                   "(injected transient failure)",
        "helm": "Error: Kubernetes cluster unreachable: the server is currently unable to handle the request "
                "(injected transient failure)",
    },
    "ratelimit": {
        "gcloud": "ERROR: (gcloud) Could not fetch resource:\n - Quota exceeded for quota metric 'Queries' and "
                  "limit 'Queries per minute' of service 'compute.googleapis.com' for consumer "
                  "'project_number:123456789012'. (injected rate limit)",
        "kubectl": "Error from server (TooManyRequests): the server has received too many requests and has asked "
                   "us to try again later (injected rate limit)",
        "helm": "Error: the server has received too many requests and has asked us to try again later "
                "(injected rate limit)",
    },
    "429": {
        "gcloud": "ERROR: (gcloud) ResponseError: code=429, message=Too many operations: the concurrent operations "
                  "quota is reached, please try again later. (injected 429)",
        "kubectl": "Error from server (TooManyRequests): 429 Too Many Requests (injected 429)",
        "helm": "Error: 429 Too Many Requests (injected 429)",
    },
    "inprogress": {
        "gcloud": "ERROR: (gcloud) ResponseError: code=400, message=Operation operation-1700000000000-fake is "
                  "currently upgrading cluster fake. Please wait and try again once it is done. "
                  "(injected operation in progress)",
        "kubectl": "Error from server (Conflict): Operation cannot be fulfilled on the object: the object has been "
                   "modified; please apply your changes to the latest version and try again "
                   "(injected operation in progress)",
        "helm": "Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress "
                "(injected operation in progress)",
    },
    "internal": {  # a 500: client-go's words for it in kubectl and helm, GKE's in gcloud
        "gcloud": "ERROR: (gcloud) ResponseError: code=500, message=Internal error encountered. (injected 500)",
        "kubectl": 'Error from server (InternalError): an error on the server ("") has prevented the request from '
                   "succeeding (injected 500)",
        "helm": 'Error: an error on the server ("") has prevented the request from succeeding (injected 500)',
    },
    "timeout": {  # a 504
        "gcloud": "ERROR: (gcloud) ResponseError: code=504, message=Deadline exceeded. (injected 504)",
        "kubectl": "Error from server (Timeout): the server was unable to return a response in the time allotted, "
                   "but may still be processing the request (injected 504)",
        "helm": "Error: the server was unable to return a response in the time allotted, but may still be "
                "processing the request (injected 504)",
    },
    "permanent": {
        "gcloud": "ERROR: (gcloud) INVALID_ARGUMENT: injected permanent failure; code=400",
        "kubectl": "Error from server (Forbidden): injected permanent failure",
        "helm": "Error: injected permanent failure",
    },
}

# `endpoint`: the API's address answers with a page that is no API, as Google's front end does for a path it does
# not serve (an api_endpoint_overrides left pointing at another service): compute's gcloud prints the page's words.
FAULT_TEXT["endpoint"] = dict.fromkeys(("gcloud", "kubectl", "helm"), (
    "ERROR: (gcloud) Could not fetch resource:\n - <!DOCTYPE html>\n<html lang=en>\n  <title>Error 404 (Not Found)!!1"
    "</title>\n  <p><b>404.</b> <ins>That's an error.</ins>\n  <p>The requested URL <code>/compute/v1/projects/"
    "my-nemo-project/global/firewalls</code> was not found on this server.  <ins>That's all we know.</ins>"))

# `denied`: a 403 as the newer APIs give it (Resource Manager, Lustre): gcloud prints the message, then the error's
# details as YAML (seen from gcloud 528 answering a local server).
FAULT_TEXT["denied"] = {
    "gcloud": "ERROR: (gcloud) [user@example.com] does not have permission to access projects instance "
              "[my-nemo-project] (or it may not exist): The caller does not have permission. This command is "
              "authenticated as user@example.com which is the active account specified by the [core/account] "
              "property\n- '@type': type.googleapis.com/google.rpc.ErrorInfo\n  domain: "
              "cloudresourcemanager.googleapis.com\n  metadata:\n    permission: resourcemanager.projects.get\n"
              "  reason: IAM_PERMISSION_DENIED",
    "kubectl": 'Error from server (Forbidden): pods is forbidden: User "user@example.com" cannot list resource "pods"',
    "helm": 'Error: secrets is forbidden: User "user@example.com" cannot list resource "secrets"',
}
# `refused`: the permanent failure's words at once, as a request the API refuses on its own checks comes back (a
# 400 in one round trip); the others answer after the call's work (up to 5 s × scale), as a failed operation does.
FAULT_TEXT["refused"] = FAULT_TEXT["permanent"]
# `dropped`: the call runs, then its stream is cut (kubectl exec: the script goes on in the pod; kubectl says so and
# exits 1): what was asked was done, the caller does not know it.
DROPPED = ("error: error reading from error stream: read tcp 10.0.0.2:52345->34.0.0.1:443: read: connection reset "
           "by peer (injected dropped stream)")
FAULT_TEXT["dropped"] = {"gcloud": DROPPED, "kubectl": DROPPED, "helm": DROPPED}
AFTER_WORK = ("dropped",)
# `partial`: GKE answers a cluster list without a location (its missingZones); gcloud warns and exits 0 with the
# rest. Elsewhere it is the 503.
FAULT_TEXT["partial"] = FAULT_TEXT["transient"]
AT_ONCE = ("refused",)

_loaded = threading.Lock()


def load_handlers(tool: str | None = None) -> None:
    """Import the handler modules of `tool` once (they register their commands), or every module (None).

    A gcloud call needs only the gcloud_* modules; kubectl and helm need the others (they share the cluster's
    objects). One fake process runs one call, so loading its tool's group alone keeps its start-up near a bare
    interpreter's, as a real tool's start-up scaled by FAKECLOUD_TIME_SCALE would be."""
    with _loaded:
        for module in pkgutil.iter_modules(handlers.__path__):
            if tool is None or module.name.startswith("gcloud_") == (tool == "gcloud"):
                importlib.import_module(f"{handlers.__name__}.{module.name}")


def _injected_failure(state: core.State, ctx: core.Ctx) -> tuple[int, str, str] | None:
    """FAKECLOUD_FAIL="PATTERN:COUNT:KIND;...": the first COUNT calls whose words contain PATTERN fail.

    KIND is one of FAULT_TEXT's keys; an unknown kind is an error of the test (exit 3), not a silent default."""
    spec = os.environ.get("FAKECLOUD_FAIL", "").strip()
    if not spec:
        return None
    tool = ctx.tool
    words = " ".join([tool, *ctx.argv])
    for entry in [e for e in spec.split(";") if e.strip()]:
        pattern, count, kind = entry.rsplit(":", 2)
        kind = kind.strip()
        if kind not in FAULT_TEXT:
            return 3, f"fakecloud: FAKECLOUD_FAIL kind {kind!r} is unknown; use one of {', '.join(FAULT_TEXT)}", kind
        if pattern.strip() not in words:
            continue
        with state.locked():
            used = state.get("_fail", pattern) or {"n": 0}
            if used["n"] >= int(count):
                continue
            state.put("_fail", pattern, {"n": used["n"] + 1})
        text = GCLOUD_503.get(ctx.words[0], FAULT_TEXT[kind][tool]) if tool == "gcloud" and kind == "transient" \
            else FAULT_TEXT[kind][tool]
        if tool == "gcloud" and ctx.words == ("container", "clusters", "list") and kind == "partial":
            ctx.out("[]")  # lib/surface/container/clusters/list.py: a warning, and the clusters GKE did return
            where = ctx.flag("--location") or ctx.flag("--region") or "us-central1"
            return 0, f"WARNING: The following zones did not respond: {where}. List results may be incomplete.", kind
        if tool == "gcloud" and ctx.words in MULTI_SCOPE_LISTS:
            # These lists warn and exit 0 with what they got (nothing here) when a request of theirs fails.
            ctx.out("[]")
            reason = text.split(")", 1)[-1].strip().removeprefix("Could not fetch resource:").strip(" -\n")
            return 0, f"WARNING: Some requests did not succeed.\n - {reason}\n", kind
        if tool == "helm" and ctx.words == ("uninstall",):
            return _uninstall_unread(ctx, text, kind)
        # gcloud names the failing command: ERROR: (gcloud.compute.networks.create) ...
        return 1, text.replace("(gcloud)", f"({ctx.command_name()})", 1), kind
    return None


def _uninstall_unread(ctx: core.Ctx, text: str, kind: str) -> tuple[int, str, str]:
    """helm uninstall reads the release's history first (pkg/action/uninstall.go); a failed read is said after
    the release's name. With --ignore-not-found (helm 3.13 to 3.19) any failed read counts as a missing release:
    'release "X" uninstalled', exit 0, and nothing is uninstalled."""
    if ctx.flag("--ignore-not-found"):
        ctx.out("\n".join(f'release "{name}" uninstalled' for name in ctx.positionals))
        return 0, "", kind
    reason = re.sub(r"^Error: (INSTALLATION FAILED: |UPGRADE FAILED: |Kubernetes cluster unreachable: )?", "", text)
    release = ctx.positionals[0] if ctx.positionals else ""
    return 1, f"Error: uninstall: Release not loaded: {release}: query: failed to query with labels: {reason}", kind


# What gcloud 528 prints for an HTTP 503, by API (checked against the real gcloud answering a local server):
# compute's batch helper, apitools' HttpError for Lustre and Service Networking, GKE's own ResponseError.
GCLOUD_503 = {
    "compute": "ERROR: (gcloud) Could not fetch resource:\n - The service is currently unavailable.",
    "lustre": "ERROR: (gcloud) HttpError accessing <https://lustre.googleapis.com/v1/...>: response: <{'status': "
              "'503', 'content-type': 'application/json; charset=UTF-8'}>, content <{\n  \"error\": {\n    "
              "\"code\": 503,\n    \"message\": \"The service is currently unavailable.\",\n    "
              "\"status\": \"UNAVAILABLE\"\n  }\n}\n>",
    "container": "ERROR: (gcloud) ResponseError: code=503, message=The service is currently unavailable.",
}
GCLOUD_503["services"] = GCLOUD_503["lustre"].replace("lustre.googleapis.com/v1", "servicenetworking.googleapis.com/v1")
# `gcloud compute networks subnets list` and `compute addresses list` gather several scopes' answers.
MULTI_SCOPE_LISTS = (("compute", "networks", "subnets", "list"), ("compute", "addresses", "list"))


def dispatch(tool: str, argv: list[str], *, stdin: str | None, stdout: TextIO, stderr: TextIO,
             launched: float | None = None, environ: Mapping[str, str] | None = None) -> int:
    """One call of a fake tool: stdin None means "read the process's stdin if a handler asks".

    launched: when the process was started (before Python's start-up), logged beside `start` so a log reader
    can tell a call that waited for another from one that only waited for a CPU.
    environ: the environment the tool runs with (default: this process's); gcloud's printing obeys its
    CLOUDSDK_CORE_* properties there (gcloud_output), helm its HELM_KUBEAPISERVER."""
    environ = os.environ if environ is None else environ
    shown = Shown.read(argv, environ) if tool == "gcloud" else Shown()
    if shown == Shown():
        return _dispatch(tool, argv, stdin=stdin, stdout=stdout, stderr=stderr, launched=launched, environ=environ)
    out, err = io.StringIO(), io.StringIO()
    code = _dispatch(tool, argv, stdin=stdin, stdout=out, stderr=err, launched=launched, environ=environ)
    printed, said = shown.shape(out.getvalue(), err.getvalue())
    stdout.write(printed)
    stderr.write(said)
    stdout.flush()
    return code


def _dispatch(tool: str, argv: list[str], *, stdin: str | None, stdout: TextIO, stderr: TextIO,
              launched: float | None, environ: Mapping[str, str]) -> int:
    root = os.environ.get("FAKECLOUD_STATE")
    if not root:
        stderr.write(f"fake {tool}: FAKECLOUD_STATE is not set\n")
        return 3
    state = core.State(Path(root))
    load_handlers(tool)
    ctx = core.parse(tool, argv)
    ctx.state, ctx.stdout, ctx.stderr, ctx.environ = state, stdout, stderr, environ
    if stdin is not None:
        ctx._stdin = stdin
    registered = core.REGISTRY.get((tool, ctx.words))
    started = time.time()
    code = 0
    if registered is None:
        stderr.write(f"ERROR: ({tool}) fakecloud has no handler for: {' '.join([tool, *argv])}\n")
        code = 2
    else:
        ctx.latency = registered.latency
        handler = registered.handler
        if tool == "kubectl":
            kuberc.apply_defaults(ctx)
            if ctx.words[:1] == ("delete",):
                handler = _asking_first(handler)
        failure = _injected_failure(state, ctx)
        if failure and failure[2] in AFTER_WORK:
            try:
                handler(ctx)
            except core.Fail:
                pass
            stdout.flush()
            code = failure[0]
            stderr.write(failure[1] + "\n")
        elif failure:
            code, message, kind = failure
            if kind not in AT_ONCE:
                ctx.work(min(registered.latency, 5.0))
            if message:
                stderr.write(message + "\n")
        else:
            try:
                code = handler(ctx) or 0
            except core.Fail as fail:
                code = fail.code
                stderr.write(fail.stderr.rstrip("\n") + "\n")
    # The runner lowers a background command's priority from its parent just after the fork; a fake call at
    # scale 0 may end first (a real gcloud's start-up takes 0.7 s). A test of priorities has it read later.
    settle = float(environ.get("FAKECLOUD_PRIORITY_SETTLE") or 0)
    if settle:
        time.sleep(max(0.0, (launched or started) + settle - time.time()))
    record = {"tool": tool, "argv": argv, "start": started, "launched": launched or started, "end": time.time(),
              "exit": code,
              "mutating": bool(registered and registered.mutating),
              "nice": os.getpriority(os.PRIO_PROCESS, 0)}  # the CPU priority the caller gave the process
    with open(state.root / "calls.jsonl", "a") as log:  # one line at a time, without the state's lock
        fcntl.flock(log, fcntl.LOCK_EX)
        log.write(json.dumps(record) + "\n")
    stdout.flush()
    return code


def _asking_first(handler: core.Handler) -> core.Handler:
    """kubectl delete: with --interactive (a kuberc default can set it) it deletes only on a y from stdin."""
    def delete(ctx: core.Ctx) -> int | None:
        return handler(ctx) if kuberc.delete_confirmed(ctx) else 0
    return delete


def process_started() -> float | None:
    """This process's start time (epoch seconds) from /proc, or None where there is no /proc."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])  # since boot
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def main(tool: str, argv: list[str]) -> int:
    return dispatch(tool, argv, stdin=None, stdout=sys.stdout, stderr=sys.stderr, launched=process_started())
