"""Two `up` at once against the same project and cluster: the second refuses (the lifecycle's lock) while
the first runs, makes no mutating call, and the first ends with each resource created once."""

from __future__ import annotations

import subprocess
import sys
import time
from contextlib import ExitStack

from reliability.cloud import make_cloud, run, successful_mutations
from support.fake import REPO


def test_second_up_while_first_runs_refuses_and_nothing_is_created_twice(tmp_path):
    with ExitStack() as stack:
        fake = make_cloud(stack, tmp_path)
        # Slow enough that the first run still holds the lock when the second has refused: its critical path
        # lasts about 9 s after the first change, the second's refusal a second or two on a loaded machine.
        env = fake.process_env(FAKECLOUD_TIME_SCALE="0.005")
        argv = [sys.executable, "-m", "invoke", "--search-root", str(REPO), "up", "--yes"]
        first = subprocess.Popen(argv, cwd=fake.workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        deadline = time.monotonic() + 120
        while not fake.mutating_calls() and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.05)
        second = subprocess.run(argv, cwd=fake.workdir, env=env, capture_output=True, text=True, timeout=300)
        overlapped = first.poll() is None  # the second finished while the first still ran
        _, first_err = first.communicate(timeout=600)
        mutations = successful_mutations(fake.calls())
        twice = {line: n for line, n in mutations.items() if n > 1 and "apply --filename=-" not in line}
        before = len(fake.calls())
        rerun = run(fake, "up", "--yes")
        assert (first.returncode, second.returncode, "another run holds" in second.stderr,
                "Traceback" in second.stderr + second.stdout, overlapped, twice) == (
            0, 1, True, False, True, {}), second.stderr[-2000:] + first_err[-2000:]
        assert (rerun.code, fake.mutating_calls(since=before)) == (0, [])
