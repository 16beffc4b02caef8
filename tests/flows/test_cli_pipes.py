"""A reader that goes away (`invoke … | head`, `| grep -m1`): through the real `invoke` command.

Output to a pipe nobody reads any more is dropped; the work goes on to its end (a bring-up is never left half
done, its lease held, because a pager was closed); a command that only makes output (a followed log) ends.
A reader going away is not an error: exit 0, no traceback. The pipe is closed before or while the run writes,
as `head` does once it has its lines.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from flows.test_job_flow import kill_runs, run_dir, seed_cluster, wait_for

from support.fake import REPO, FakeCloud


def start(fake: FakeCloud, *args: str, **env: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "invoke", "--search-root", str(REPO), *args]
    return subprocess.Popen(argv, cwd=fake.workdir, env=fake.process_env(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)


def ended(proc: subprocess.Popen, *, timeout: float) -> tuple[int, str]:
    """(exit code, stderr); the test fails, the process killed, if it has not ended in time."""
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"still running {timeout:.0f} s after its reader went away")
    return proc.returncode, err.decode()


def reader_gone_at_once(fake: FakeCloud, *args: str, timeout: float = 60, **env: str) -> tuple[int, str]:
    proc = start(fake, *args, **env)
    assert proc.stdout is not None
    proc.stdout.close()
    return ended(proc, timeout=timeout)


@pytest.mark.parametrize("args", [("--list",), ("up", "--help"), ("--dry", "up"), ("plan",)],
                         ids=["list", "help", "dry-up", "plan"])
def test_pipes_output_to_a_closed_pipe_is_dropped_quietly(fake, args):
    code, err = reader_gone_at_once(fake, *args)
    assert "Traceback" not in err and "Broken pipe" not in err and "BrokenPipe" not in err, err
    assert code == 0, err


def test_pipes_up_goes_to_its_end_when_its_reader_goes(fake):
    """`invoke up --yes 2>&1 | head -12`: the pager closes while the graph runs (before: exit 1, half done); the
    rest of the board and notes go nowhere, the bring-up completes, the lease is let go."""
    proc = start(fake, "up", "--yes")
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    while not proc.stderr.readline().startswith(b"$ gcloud compute networks create"):  # the graph has started
        pass
    proc.stderr.close()
    try:
        proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("up did not end")
    assert proc.returncode == 0
    status = fake.invoke("status", process=True)
    assert status.code == 0, status.output
    assert "absent" not in status.stdout.lower(), status.stdout
    down = fake.invoke("down", "--yes", process=True)  # no --force-unlock: up let go of its lease
    assert down.code == 0, down.output


@pytest.fixture
def cloud(fake):
    seed_cluster(fake)
    yield fake
    kill_runs(fake)


def test_pipes_a_followed_log_ends_when_its_reader_goes(cloud):
    """`invoke job.logs RUN --follow | grep -m1 'Step 2/'` ends once grep has its line (it followed forever)."""
    done = cloud.invoke("job.submit", "gemma3-gsm8k", "--id=long", "--set", "grpo.max_num_steps=400",
                        NRG_STANDIN_STEP_SECONDS="0.2")
    assert done.code == 0, done.output
    log = run_dir(cloud, "long") / "driver.log"
    wait_for(lambda: log.exists() and "Step 1/400" in log.read_text(), "step 1 in the driver log")
    proc = start(cloud, "job.logs", "long", "--follow")
    assert proc.stdout is not None
    started = time.monotonic()
    while b"Step 2/" not in proc.stdout.readline():
        assert time.monotonic() - started < 60, "no step 2 in the followed log"
    proc.stdout.close()
    code, err = ended(proc, timeout=30)
    assert "Traceback" not in err and "Broken pipe" not in err, err
    assert code == 0, err
