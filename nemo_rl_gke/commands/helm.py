"""helm argv builders (pure). Every call that talks to a cluster names its context and namespace, so a
stale current-context can never point a release at another cluster.

Values always reach helm through `--values=-` (stdin, written by the runner) or a values file, never
through `--set`: the generated values are long, and a typo in a `--set` key is silently ignored unless the
chart's schema rejects it (ours does).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .. import names
from ..settings import Settings

Argv = list[str]
# How long helm may take for the install itself. The RayCluster is one custom object; the pods' readiness
# is awaited by ray.deploy, because helm's --wait does not understand a RayCluster (it returns at once).
INSTALL_TIMEOUT = "10m"
# helm uninstall of a release that is not there (its history is empty): "Error: uninstall: Release not loaded:
# NAME: release: not found". A history it could not read says why after the name (query: failed to ...).
RELEASE_GONE = re.compile(r"Release not loaded: \S+: release: not found")


def chart_path(chart: Path, cwd: Path | None = None) -> str:
    """The chart relative to the working directory when below it (short dry-run lines), else absolute."""
    cwd = cwd or Path.cwd()
    try:
        return os.path.relpath(chart, cwd) if chart.resolve().is_relative_to(cwd.resolve()) else str(chart)
    except ValueError:  # another drive on Windows
        return str(chart)


def _cluster(s: Settings) -> Argv:
    return [f"--kube-context={s.kube_context}", f"--namespace={s.NAMESPACE}"]


def _values(values_file: str) -> Argv:
    return [f"--values={values_file}"]


def upgrade_install(s: Settings, chart: str, *, values_file: str = "-", wait: bool = False,
                    timeout: str = INSTALL_TIMEOUT, release: str = names.RAY_RELEASE) -> Argv:
    """Idempotent install: creates the release, or upgrades it to the current values.

    --reset-values: the release gets exactly the generated values, never a leftover from an earlier run.
    wait=False by default: see INSTALL_TIMEOUT.
    """
    argv = ["helm", "upgrade", "--install", release, chart, *_cluster(s), *_values(values_file),
            "--reset-values", f"--timeout={timeout}"]
    if wait:
        argv.append("--wait")
    return argv


def template(s: Settings, chart: str, *, values_file: str = "-", release: str = names.RAY_RELEASE) -> Argv:
    """Render offline: no cluster is contacted, so no context either."""
    return ["helm", "template", release, chart, f"--namespace={s.NAMESPACE}", *_values(values_file)]


def uninstall(s: Settings, *, wait: bool = True, release: str = names.RAY_RELEASE) -> Argv:
    # --wait: helm waits for the release's own objects (the RayCluster) to go, not for the pods KubeRay deletes
    # after it (background cascade): they may still be shutting down when it returns (what follows waits for
    # them where it matters). A missing release is not an error: RELEASE_GONE counts as done. Not helm's
    # --ignore-not-found: in helm 3.13 to 3.19 it answers 'release "X" uninstalled' and 0 whenever the release
    # could not be read, a 503 or a Forbidden from the API server too (pkg/action/uninstall.go), and nothing is
    # uninstalled.
    argv = ["helm", "uninstall", release, *_cluster(s)]
    return argv + (["--wait", f"--timeout={INSTALL_TIMEOUT}"] if wait else [])


def status(s: Settings, *, release: str = names.RAY_RELEASE) -> Argv:
    return ["helm", "status", release, *_cluster(s), "--output=json"]
