from __future__ import annotations

import os

import pytest

# The tests' own google-cloud-storage clients (the product's turns it off itself, gcs_client.NO_BUCKET_METADATA):
# without it, each leaves a thread fetching bucket metadata that outlives its emulator, retrying with `random`
# for up to two minutes, under a later test's Hypothesis (which then warned of a changed global random state).
os.environ.setdefault("DISABLE_GCS_PYTHON_CLIENT_OTEL_BUCKET_METADATA", "1")

from reliability import counts
from support.fake import FakeCloud


@pytest.fixture
def fake(tmp_path) -> FakeCloud:
    """A fake cloud with a valid .env (planted secrets) in a fresh working directory."""
    cloud = FakeCloud(tmp_path)
    cloud.write_env()
    return cloud


@pytest.fixture
def pythons_sigint():
    """SIGINT at Python's own handler while the test runs, as `invoke` starts with it (the test runner may have
    set another), and as it was afterwards."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


# ---- the reliability suite's counts line, summed over pytest-xdist workers --------------------------
def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand the counts to the controller
        workeroutput["reliability_counts"] = dict(counts.COUNTS)
        workeroutput["reliability_not_on_fake"] = sorted(counts.NOT_ON_FAKE)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    out = getattr(node, "workeroutput", {}) or {}
    counts.COUNTS.update(out.get("reliability_counts", {}))
    counts.NOT_ON_FAKE.update(out.get("reliability_not_on_fake", []))


def pytest_terminal_summary(terminalreporter):
    c = counts.COUNTS
    if not c:
        return
    line = (f"reliability: {c['cases']} cases, {c['faults']} faults injected, {c['files']} files scanned"
            + (f", {c['runs']} task runs" if c["runs"] else ""))
    if counts.NOT_ON_FAKE:
        line += f"; dry-run only: {', '.join(sorted(counts.NOT_ON_FAKE))}"
    terminalreporter.write_line(line)
