"""The in-process seam (tests/support/inprocess.py) routes each command where the real seam would send it: the
fake's own tools to the handlers in-process, anything else (a stub first on PATH, the job shell) to a process."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from support.inprocess import FAKE_BIN, FakeTools, TimedOut, needs_process


@pytest.fixture
def fake_env(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKE_BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKECLOUD_STATE", str(tmp_path / "state"))
    return tmp_path


def test_inprocess_seam_answers_fake_tools_in_process_and_logs_the_call(fake_env):
    tools = FakeTools()
    ran = tools.run(["gcloud", "version"], stdin=None, timeout=None)
    log = (fake_env / "state" / "calls.jsonl").read_text()
    assert (ran.exit_code, "Google Cloud SDK" in ran.stdout, tools.in_process_calls, tools.process_calls,
            '"argv": ["version"]' in log) == (0, True, 1, 0, True)


def test_inprocess_seam_runs_a_stub_first_on_path_as_a_process(fake_env, monkeypatch):
    stub = fake_env / "bin" / "gcloud"
    stub.parent.mkdir()
    stub.write_text(f"#!{sys.executable}\nprint('the stub')\n")
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{stub.parent}{os.pathsep}{os.environ['PATH']}")
    tools = FakeTools()
    ran = tools.run(["gcloud", "version"], stdin=None, timeout=None)
    assert (ran.stdout.strip(), tools.in_process_calls, tools.process_calls) == ("the stub", 0, 1)


def test_inprocess_seam_sends_the_job_shell_to_a_real_process():
    assert (needs_process("kubectl", ["exec", "-i", "pod", "--context=c", "--", "bash", "-s"]),
            needs_process("kubectl", ["exec", "pod", "--", "python", "-c", "x"]),
            needs_process("kubectl", ["get", "pods"])) == (True, False, False)


def test_inprocess_seam_past_its_deadline_refuses_every_call(fake_env):
    with pytest.raises(TimedOut):
        FakeTools(deadline=0).run(["gcloud", "version"], stdin=None, timeout=None)
