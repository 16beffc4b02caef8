from __future__ import annotations

import io
import os
import stat
import sys
import textwrap
import threading
import time

import pytest

from nemo_rl_gke import tools as tools_module
from nemo_rl_gke.runner import ALREADY_EXISTS, Runner
from nemo_rl_gke.tools import MissingTool, ToolError


def make_tool(tmp_path, name: str, body: str) -> str:
    """A small executable on a private PATH; it counts its calls in <name>.count."""
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(tmp_path)


@pytest.fixture
def tool_path(tmp_path, monkeypatch):
    def install(name: str, body: str) -> None:
        make_tool(tmp_path, name, body)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")

    return install


COUNTING = """
import os, sys
count_file = os.path.join(os.path.dirname(__file__), "count")
n = int(open(count_file).read()) + 1 if os.path.exists(count_file) else 1
open(count_file, "w").write(str(n))
"""


def runner(**kw) -> tuple[Runner, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return Runner(out=out, err=err, sleep=lambda s: None, **kw), out, err


def test_dry_run_prints_and_runs_nothing(tool_path, tmp_path):
    tool_path("tool", COUNTING)
    r, out, _ = runner(dry=True)
    result = r.run(["tool", "create", "x y"], dry_stdout="placeholder")
    assert out.getvalue() == "$ tool create 'x y'\n"
    assert result.stdout == "placeholder"
    assert not (tmp_path / "count").exists()


def test_dry_query_assumes_nothing_exists_and_prints_nothing(tool_path, tmp_path):
    tool_path("tool", COUNTING)
    r, out, _ = runner(dry=True)
    assert r.query(["tool", "describe"]) is None and r.exists(["tool", "describe"]) is False
    assert out.getvalue() == "" and not (tmp_path / "count").exists()


def test_secrets_are_redacted_in_commands_stdin_labels_and_errors(tool_path):
    tool_path("tool", "import sys; sys.stderr.write('bad token hf_SECRET1234\\n'); sys.exit(3)")
    r, out, err = runner(dry=False, secrets=("hf_SECRET1234",))
    with pytest.raises(ToolError) as caught:
        r.run(["tool", "--token-hint=hf_SECRET1234"])
    assert caught.value.exit_code == 3
    assert "hf_SECRET1234" not in str(caught.value) + out.getvalue() + err.getvalue()
    assert "***" in str(caught.value)


def test_dry_run_with_shown_stdin_redacts_secrets():
    r, out, _ = runner(dry=True, secrets=("wandbSECRET99",))
    r.run(["kubectl", "apply", "--filename=-"], stdin="key: wandbSECRET99\n", show_stdin=True)
    assert "wandbSECRET99" not in out.getvalue() and "key: ***" in out.getvalue()


def test_transient_errors_are_retried_with_backoff(tool_path, tmp_path):
    tool_path("tool", COUNTING + "if n < 3:\n    sys.stderr.write('ERROR: code=503, Service Unavailable')\n"
                                 "    sys.exit(1)\nprint('ok')\n")
    slept = []
    r = Runner(out=io.StringIO(), err=io.StringIO(), sleep=slept.append, backoff_seconds=2)
    result = r.run(["tool"])
    assert result.stdout.strip() == "ok" and result.attempts == 3
    assert slept == [2, 4]


def test_permanent_errors_fail_at_once_with_the_tools_last_lines(tool_path, tmp_path):
    tool_path("tool", COUNTING + "sys.stderr.write('line1\\nERROR: INVALID_ARGUMENT bad flag\\n'); sys.exit(2)\n")
    r, _, _ = runner()
    with pytest.raises(ToolError) as caught:
        r.run(["tool", "create"])
    assert caught.value.exit_code == 2
    assert "INVALID_ARGUMENT bad flag" in str(caught.value) and "tool create" in str(caught.value)
    assert (tmp_path / "count").read_text() == "1"


def test_accept_pattern_turns_already_exists_into_success(tool_path):
    tool_path("tool", "import sys; sys.stderr.write('The resource x already exists'); sys.exit(1)")
    r, _, _ = runner()
    assert r.run(["tool"], accept=ALREADY_EXISTS).already_exists


def test_missing_tool_is_exit_127_with_install_hint(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(tools_module, "PROJECT_TOOLS", tmp_path / "no-tools")
    r, _, _ = runner()
    with pytest.raises(MissingTool) as caught:
        r.run(["helm", "version"])
    assert caught.value.exit_code == 127 and "install helm" in str(caught.value)


def test_every_call_is_timed_and_recorded(tool_path):
    tool_path("tool", "print('hi')")
    r, _, _ = runner()
    r.run(["tool", "a"], echo=False)
    r.query(["tool", "b"])
    assert [c.argv for c in r.calls] == ["tool a", "tool b"]
    assert all(c.seconds >= 0 and c.exit_code == 0 for c in r.calls)


def test_parallel_runs_thunks_concurrently():
    r, _, _ = runner()
    barrier = threading.Barrier(3, timeout=5)
    assert r.parallel([lambda i=i: (barrier.wait(), i)[1] for i in range(3)]) == [0, 1, 2]


def test_parallel_raises_first_error_after_all_finish():
    r, _, _ = runner()
    finished = []

    def slow():
        time.sleep(0.05)
        finished.append("slow")

    def boom():
        raise ToolError("boom", 4)

    with pytest.raises(ToolError, match="boom"):
        r.parallel([boom, slow])
    assert finished == ["slow"]


def test_runner_poll_ends_its_pause_when_woken():
    """Whoever learns first that the check would now pass (a `kubectl wait` beside the poll) ends the pause."""
    import threading

    ticks: list[float] = []
    r = Runner(out=io.StringIO(), err=io.StringIO(), poll_seconds=60,
               wait_display=lambda label, seconds, done: ticks.append(seconds))
    wake = threading.Event()
    answers = iter([False, True])

    def check() -> bool:
        threading.Timer(0.05, wake.set).start()
        return next(answers)

    assert r.poll("Ray pods Ready", check, timeout=20, wake=wake) is True
    assert len([t for t in ticks if t > 0]) <= 2, ticks  # one slice of the minute's pause, not forty


def test_runner_poll_uses_a_wake_once():
    """A wake ends one pause; left set, it would turn the poll into a loop of checks without pause."""
    import threading

    r = Runner(out=io.StringIO(), err=io.StringIO(), poll_seconds=0.2)
    wake = threading.Event()
    wake.set()
    checks: list[int] = []
    assert r.poll("pods Ready", lambda: bool(checks.append(1)), timeout=1.0, wake=wake) is False
    assert len(checks) <= 8, len(checks)  # ~6: one per 0.2 s pause after the first; a busy loop makes thousands
