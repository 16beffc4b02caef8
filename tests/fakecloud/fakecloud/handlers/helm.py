"""helm: releases per kubectl context (`upgrade --install`, `uninstall`, `status`, `list`), and `template`
handed to a real helm when one is on PATH behind the fake.

Installing the ray-cluster chart stores the release, a RayCluster object and its pods (see ray_pods.py);
the pods become Ready after the typical latency (FACTS §6: helm install + Ray pods Ready, 600 s).
Releases live in state kind 'helm:<context>' under 'namespace/name', so a cluster delete removes them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from .. import kubeconfig
from ..core import Ctx, Fail, command
from . import ray_pods
from .kubectl_objects import namespaces

INSTALL_SECONDS = 600  # helm install + Ray pods Ready (image pull), FACTS §6
HELM_CALL_SECONDS = 3  # the helm call itself: one custom object to apply
UNINSTALL_SECONDS = 30


def _context(ctx: Ctx) -> str:
    context = ctx.flag("--kube-context")
    if not context:
        raise Fail(1, "Error: no --kube-context given (the fake insists, as our code always names one)")
    server = ctx.environ.get("HELM_KUBEAPISERVER")
    if server:  # helm's pkg/cli/environment.go: it outranks the context's server
        raise Fail(1, f'Error: Kubernetes cluster unreachable: Get "{server}/version": dial tcp: lookup '
                      f'{server.split("//")[-1].split("/")[0]}: no such host')
    if kubeconfig.reachable(ctx, str(context), helm=True) is None:
        raise Fail(1, f'Error: Kubernetes cluster unreachable: context "{context}" does not exist')
    return str(context)


def _namespace(ctx: Ctx) -> str:
    return str(ctx.flag("--namespace") or "default")


def _release_view(release: dict[str, Any]) -> dict[str, Any]:
    """`helm status -o json`: the release without its chart (helm's status command sets rel.Chart = nil,
    "strip chart metadata from the output"), with the values given (config)."""
    return {
        "name": release["name"],
        "namespace": release["namespace"],
        "version": release["version"],
        "info": {"status": release["status"], "last_deployed": release["updated"]},
        "config": release["values"],
    }


@command("helm", "upgrade", mutating=True, latency=INSTALL_SECONDS)
def upgrade(ctx: Ctx) -> int:
    import yaml

    if not ctx.flag("--install"):
        raise Fail(1, "Error: fakecloud only knows `helm upgrade --install`")
    if len(ctx.positionals) != 2:
        raise Fail(1, f'Error: "helm upgrade" requires 2 arguments, got {ctx.positionals}')
    release, chart = ctx.positionals
    context, namespace = _context(ctx), _namespace(ctx)
    if namespace not in namespaces(ctx, context) and not ctx.flag("--create-namespace"):
        # `upgrade --install` of a new release returns runInstall's error as it is (cmd/helm/upgrade.go); only
        # `helm install` says "INSTALLATION FAILED:" (cmd/helm/install.go), and an upgrade "UPGRADE FAILED:".
        raise Fail(1, f'Error: create: failed to create: namespaces "{namespace}" not found')
    if ctx.flag("--set") or ctx.flag("--set-string"):
        raise Fail(1, "Error: fakecloud: our code passes values on stdin, never with --set")
    source = ctx.flag("--values")
    text = ctx.stdin() if source == "-" else Path(str(source)).read_text() if source else ""
    values = yaml.safe_load(text) or {}
    ctx.work(HELM_CALL_SECONDS)
    kind, key = f"helm:{context}", f"{namespace}/{release}"
    last = ctx.state.get(kind, key)
    # A release left by a helm stopped mid-way (a test plants its status): `upgrade --install` of an existing
    # release upgrades, and helm 3.17 refuses a pending one (pkg/action/upgrade.go) and one whose uninstall was
    # cut short, which has no deployed revision; a failed one is upgraded.
    if last and str(last.get("status", "")).startswith("pending-"):
        raise Fail(1, "Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress")
    if last and last.get("status") == "uninstalling":
        raise Fail(1, f'Error: UPGRADE FAILED: "{release}" has no deployed releases')
    # Then the values, read and checked as the chart is rendered, before any object is built.
    _check_values(release, chart, namespace, text, "UPGRADE FAILED: " if last else "")
    if kubeconfig.missing_kind(ctx, context, "ray.io/v1", "RayCluster"):  # no Ray operator add-on
        failed = ("UPGRADE FAILED: unable to build kubernetes objects from current release manifest"
                  if ctx.state.get(kind, key) else "unable to build kubernetes objects from release manifest")
        name = ray_pods.cluster_name(release, values)
        raise Fail(1, f"Error: {failed}: {kubeconfig.no_mapping(name, namespace, '', 'ray.io/v1', 'RayCluster')}")
    with ctx.state.locked():
        old = ctx.state.get(kind, key)
        entry = {
            "name": release,
            "namespace": namespace,
            "chart": chart,
            "values": values,
            "version": (old["version"] + 1) if old else 1,
            "status": "deployed",
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        ctx.state.put(kind, key, entry)
    ray_pods.sync(
        ctx,
        context,
        namespace,
        release,
        values,
        ready_in=INSTALL_SECONDS - HELM_CALL_SECONDS,
    )
    verb = "upgraded" if old else "has been installed"
    ctx.out(
        f'Release "{release}" {verb}. Happy Helming!\nNAME: {release}\nNAMESPACE: {namespace}\n'
        f"STATUS: deployed\nREVISION: {entry['version']}"
    )
    return 0


@command("helm", "install", mutating=True, latency=INSTALL_SECONDS)
def install(ctx: Ctx) -> int:
    raise Fail(1, "Error: fakecloud: use `helm upgrade --install` (idempotent), as our code does")


@command("helm", "uninstall", mutating=True, latency=UNINSTALL_SECONDS)
def uninstall(ctx: Ctx) -> int:
    if not ctx.positionals:
        raise Fail(1, 'Error: "helm uninstall" requires at least 1 argument')
    context, namespace = _context(ctx), _namespace(ctx)
    code = 0
    for release in ctx.positionals:
        entry = ctx.state.get(f"helm:{context}", f"{namespace}/{release}")
        if entry is not None and kubeconfig.missing_kind(ctx, context, "ray.io/v1", "RayCluster"):
            # helm 3.17 marks it uninstalling, then cannot build its objects (no RayCluster kind served): it
            # says only this, without --debug, and the release stays (pkg/action/uninstall.go).
            ctx.state.put(f"helm:{context}", f"{namespace}/{release}", {**entry, "status": "uninstalling"})
            ctx.err(f"Error: failed to delete release: {release}")
            code = 1
            continue
        if not ctx.state.delete(f"helm:{context}", f"{namespace}/{release}"):
            if ctx.flag("--ignore-not-found"):  # helm says so all the same (cmd/helm/uninstall.go)
                ctx.out(f'release "{release}" uninstalled')
                continue
            ctx.err(f"Error: uninstall: Release not loaded: {release}: release: not found")
            code = 1
            continue
        ray_pods.remove(ctx, context, namespace, release)
        ctx.work()
        ctx.out(f'release "{release}" uninstalled')
    return code


@command("helm", "status", latency=1)
def status(ctx: Ctx) -> int:
    import json

    if not ctx.positionals:
        raise Fail(1, 'Error: "helm status" requires 1 argument')
    context, namespace = _context(ctx), _namespace(ctx)
    ctx.work()  # its read of the release from the API server: the latency it was registered with
    release = ctx.state.get(f"helm:{context}", f"{namespace}/{ctx.positionals[0]}")
    if release is None:
        raise Fail(1, "Error: release: not found")
    ctx.out(json.dumps(_release_view(release)))
    return 0


@command("helm", "list", latency=1)
def list_(ctx: Ctx) -> int:
    import json

    context, namespace = _context(ctx), _namespace(ctx)
    ctx.work()
    rows = [
        {
            "name": r["name"],
            "namespace": r["namespace"],
            "revision": str(r["version"]),
            "status": r["status"],
            "chart": Path(r["chart"]).name,
            "updated": r["updated"],
        }
        for key, r in sorted(ctx.state.items(f"helm:{context}").items())
        if ctx.flag("--all-namespaces") or key.startswith(f"{namespace}/")
    ]
    ctx.out(json.dumps(rows))
    return 0


@command("helm", "version", latency=0)
def version(ctx: Ctx) -> int:
    ctx.out("v3.17.3+gfakecloud")
    return 0


def real_helm() -> str | None:
    """The first helm on PATH that is not this fake (or FAKECLOUD_REAL_HELM)."""
    chosen = os.environ.get("FAKECLOUD_REAL_HELM")
    if chosen:
        return chosen
    ours = Path(__file__).resolve().parents[2] / "bin"
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if folder and Path(folder).resolve() != ours:
            found = shutil.which("helm", path=folder)
            if found:
                return found
    return None


def _needed_real_helm(verb: str) -> str:
    helm = real_helm()
    if helm is None:
        raise Fail(127, f"fakecloud: `helm {verb}` needs a real helm behind the fake on PATH (python "
                        f"scripts/fetch_helm.py puts one in .tools/bin)")
    return helm


def _check_values(release: str, chart: str, namespace: str, values_text: str, failed: str) -> None:
    """The values as helm reads them: Go's YAML (which takes "0123456789012345" or "1e5" unquoted for a number,
    where PyYAML reads a string), then the chart's values.schema.json and its templates; the real helm does
    both, so an upgrade fails where the real one would, in its words (failed: the prefix helm puts before them,
    "UPGRADE FAILED: " for an existing release, none for a new one)."""
    import hashlib
    import tempfile

    argv = [_needed_real_helm("upgrade"), "template", release, chart, f"--namespace={namespace}", "--values=-"]
    # The answer depends on the chart's files, the argv and the values only: a check that passed is remembered
    # (most flows send the same values), so the suite pays helm's start-up once per distinct input.
    # Comment lines say nothing to helm (our header names the .env file, another per test): not in the key.
    read = "\n".join(line for line in values_text.splitlines() if not line.startswith("#"))
    digest = hashlib.sha256("\0".join([*argv, read]).encode())
    root = Path(chart)
    for path in sorted(root.rglob("*")) if root.is_dir() else []:
        if path.is_file():
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    passed = Path(tempfile.gettempdir()) / f"fakecloud-helm-values-{os.getuid()}" / digest.hexdigest()
    if passed.exists():
        return
    done = subprocess.run(argv, input=values_text, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise Fail(1, f"Error: {failed}{done.stderr.strip().removeprefix('Error: ')}")
    passed.parent.mkdir(exist_ok=True)
    passed.touch()


@command("helm", "template", latency=0)
def template(ctx: Ctx) -> int:
    """Rendering is local and offline: the real helm does it, so the fake's output is the chart's."""
    helm = _needed_real_helm("template")
    done = subprocess.run([helm, *ctx.argv], input=ctx.stdin(), capture_output=True, text=True, check=False)
    ctx.out(done.stdout)
    if done.stderr:
        ctx.err(done.stderr)
    return done.returncode
