"""The in-process fake cloud is the same fake cloud: `up --yes` run in-process and run with every tool a real
process ends in the same state, through the same changing calls (as a multiset: steps run in parallel) and the same
questions (as a set: how often a poll or a racing cache asks depends on timing), with the same commands echoed and
the same exit code. What the fast flow tests prove in-process holds for real processes."""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack

from reliability.cloud import call_line, make_cloud, run, state


def echoed(stderr: str) -> Counter[str]:
    return Counter(line for line in stderr.splitlines() if line.startswith("$ "))


def test_inprocess_up_matches_up_with_real_processes(tmp_path):
    with ExitStack() as stack:
        fast = make_cloud(stack, tmp_path / "in-process")
        real = make_cloud(stack, tmp_path / "processes")
        real.processes = True
        fast_done, real_done = run(fast, "up", "--yes"), run(real, "up", "--yes")
        assert (fast_done.code, real_done.code) == (0, 0), fast_done.output[-2000:] + real_done.output[-2000:]
        assert state(fast) == state(real)
        assert Counter(map(call_line, fast.mutating_calls())) == Counter(map(call_line, real.mutating_calls()))
        assert set(map(call_line, fast.calls())) == set(map(call_line, real.calls()))
        assert echoed(fast_done.stderr) == echoed(real_done.stderr)
