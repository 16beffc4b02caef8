"""Ctrl-C while `up` waits for Lustre: the first SIGINT ends the wait, not the next poll (exit 130, "interrupted", no
traceback). The counterpart of the in-process flows that needs a real process: a real `invoke` gets a real SIGINT
while a worker thread of the step graph sleeps between Lustre polls (30 s apart here, as a real wait has them)."""

from __future__ import annotations

import signal
import subprocess
import time
from contextlib import ExitStack

import pytest

from fakecloud.core import State
from reliability.cloud import make_cloud, run
from support.fake import follow


def test_inprocess_ctrl_c_while_up_waits_for_lustre_stops_without_waiting_for_the_next_poll(tmp_path):
    with ExitStack() as stack:
        fake = make_cloud(stack, tmp_path)
        assert run(fake, "up", "--yes").code == 0
        with State(fake.state_dir).locked() as data:  # the instance is back to CREATING for an hour
            for instance in data["lustre"].values():
                instance["_ready_at"] = time.time() + 3600
        fake.runner_options = {"poll_seconds": 60}
        proc = fake.start("up", "--yes", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines, waiting, reader = follow(proc.stderr, until="becoming ready")
        try:
            assert waiting.wait(120), "".join(lines)[-3000:]
            time.sleep(1.0)  # inside the 60 s pause between two polls
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pytest.fail("still running 30 s after Ctrl-C:\n" + "".join(lines)[-3000:])
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        reader.join(10)
        err = "".join(lines)
        # Well under the pause (a loaded machine's start-ups and the lease's release aside, it takes a fraction of a s)
    assert (code, took < 20, "interrupted" in err, "Traceback" in err) == (130, True, True, False), \
            f"took {took:.1f} s\n{err[-3000:]}"


def test_ctrl_c_on_a_terminal_reaches_the_tools_too_and_their_steps_read_interrupted(tmp_path):
    """A terminal's Ctrl-C goes to the whole foreground process group: gcloud dies of SIGINT at the same moment
    `invoke` sees it. The steps whose tool it ended are "interrupted", not "failed", and nothing is retried."""
    import os

    with ExitStack() as stack:
        fake = make_cloud(stack, tmp_path)
        env = {**fake.process_env(), "FAKECLOUD_TIME_SCALE": "0.05"}  # creates take about a second here
        proc = fake.start("up", "--yes", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True)  # its own group, as a terminal's job
        # Once the main VPC is created, the subnets, the cluster and the range start.
        lines, started, reader = follow(proc.stdout, until="main VPC default: created")
        try:
            assert started.wait(120), "".join(lines)[-3000:]
            time.sleep(0.5)
            os.killpg(proc.pid, signal.SIGINT)
            code = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        reader.join(10)
    out = "".join(lines)
    steps = [line for line in out.splitlines() if line.startswith("✗ ")]
    assert (code, out.rstrip().endswith("interrupted"), "Traceback" in out, "transient" in out) == \
        (130, True, False, False), out[-3000:]
    assert steps and all(line.split(": ")[-1].startswith("interrupted") for line in steps), out[-3000:]
