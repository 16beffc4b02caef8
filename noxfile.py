"""Checks. A plain `nox` runs lint, tests, manifests and gcloud; `nox -s bench` and `nox -s k3s` are opt-in."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
nox.options.sessions = ["lint", "tests", "manifests", "gcloud"]
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True
MIN_HELM = (3, 14)


def _crd_env(session: nox.Session) -> dict[str, str]:
    """The CRD schemas live in the shared folder beside the clone; .ci/run sets NRG_CRD_DIR."""
    crds = os.environ.get("NRG_CRD_DIR") or str(ROOT.parent / "shared" / "crds")
    if not Path(crds, "ray.io_rayclusters.yaml").is_file():
        if os.environ.get("CI"):
            session.error(f"NRG_CRD_DIR={crds} holds no CRD schemas; .ci/run must point it at shared/crds")
        session.log(f"no CRD schemas at {crds}: schema tests will skip (set NRG_CRD_DIR)")
    return {"NRG_CRD_DIR": crds}


def _helm_version(helm: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([helm, "version", "--short"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    match = re.search(r"v(\d+)\.(\d+)", out)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _helm_env(session: nox.Session) -> dict[str, str]:
    """A helm >= 3.14: the one on PATH, else the pinned static one in .tools/bin (fetched there if missing)."""
    found = shutil.which("helm")
    if found and (_helm_version(found) or (0, 0)) >= MIN_HELM:
        return {}
    tools = ROOT / ".tools" / "bin"
    if (_helm_version(str(tools / "helm")) or (0, 0)) < MIN_HELM:
        # With the Python that runs nox: it has pip (a uv-made session venv has none), which fetch_helm uses.
        session.run(sys.executable, "scripts/fetch_helm.py", silent=True, external=True)
    return {"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}


def _install(session: nox.Session, extras: str) -> None:
    session.install("--quiet", "-e", f".[{extras}]")


def _pytest_impl(session: nox.Session, *paths: str, env: dict[str, str] | None = None) -> None:
    _install(session, "test")
    args = session.posargs or [*paths]
    session.run("pytest", "-q", "-p", "no:cacheprovider", *args, env={**_crd_env(session), **(env or {})})


# Renders every generated job script into a folder (argv[1]), for shellcheck.
_WRITE_SAMPLE_SCRIPTS = ("import sys, pathlib\nfrom nemo_rl_gke import jobscript\n"
                         "for name, text in jobscript.sample_scripts().items():\n"
                         "    pathlib.Path(sys.argv[1], name + '.sh').write_text(text)\n")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, yamllint, mypy --strict, vulture (dead code), and shellcheck on the job scripts when it is installed."""
    # The package itself too: mypy reads its dependencies' types, and the job scripts are rendered by it.
    _install(session, "lint")
    session.run("ruff", "check", ".")
    session.run("yamllint", "--strict", "-c", ".yamllint.yaml", ".")
    session.run("mypy")  # which files, how strictly: [tool.mypy] in pyproject.toml
    session.run("vulture")  # what it scans and what it may not see: [tool.vulture] and vulture_whitelist.py
    _shellcheck_impl(session)


def _shellcheck_impl(session: nox.Session) -> None:
    """The job scripts (scripts/*.sh.tmpl rendered, and the readers) as they reach the head pod."""
    if not shutil.which("shellcheck"):
        session.log("shellcheck is not installed: the job scripts are not linted (apt-get install shellcheck)")
        return
    with tempfile.TemporaryDirectory() as folder:
        session.run("python", "-c", _WRITE_SAMPLE_SCRIPTS, folder, silent=True)
        scripts = sorted(str(path) for path in Path(folder).glob("*.sh"))
        session.run("shellcheck", "--shell=bash", *scripts, external=True)


@nox.session
def tests(session: nox.Session) -> None:
    """Unit tests, fake-cloud flows and the reliability suite."""
    _pytest_impl(session, "-n", "auto", "tests", "--ignore=tests/manifests", "--ignore=tests/gcloud",
                 "--ignore=tests/k3s", env=_helm_env(session))


@nox.session
def manifests(session: nox.Session) -> None:
    """Every manifest rendered for b200/h200 x standard/autopilot; helm lint/template; schema validation."""
    _pytest_impl(session, "tests/manifests", env=_helm_env(session))


@nox.session
def gcloud(session: nox.Session) -> None:
    """Every gcloud command of the dry-run plans parsed by the real gcloud (exit 2 = our flags are wrong)."""
    if not shutil.which("gcloud"):
        if os.environ.get("CI"):
            session.error("gcloud is not installed on this CI machine")
        session.skip("needs the Google Cloud CLI (gcloud) on PATH: https://cloud.google.com/sdk/docs/install")
    with tempfile.TemporaryDirectory() as config:
        _pytest_impl(session, "tests/gcloud", env={"CLOUDSDK_CONFIG": config, "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"})


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Bring-up and teardown against the fake cloud with simulated latencies: `nox -s bench -- out.json`."""
    _install(session, "test")
    session.run("python", "benchmarks/bench.py", *session.posargs, env=_helm_env(session))


@nox.session(default=False)
def k3s(session: nox.Session) -> None:
    """The chart installed on a real API server (testcontainers K3s); skips without Docker and the image."""
    _pytest_impl(session, "tests/k3s", env=_helm_env(session))
