"""cli.bare_run_ids: a bare token after a task that takes an optional run id becomes --id=TOKEN; flags, their
values, task names, a second bare token and whatever follows `--` are left alone (the real tasks' contexts)."""

from __future__ import annotations

import sys

import pytest
from invoke import Program

from nemo_rl_gke.tasks import cli
from support.fake import REPO

sys.path.insert(0, str(REPO))
import tasks  # noqa: E402  (the repository's Invoke entry point)

CONTEXTS = tasks.ns.to_contexts()
CORE = Program().initial_context.flags


def rewrite(*tokens: str) -> list[str]:
    return cli.bare_run_ids(list(tokens), CONTEXTS, CORE)


@pytest.mark.parametrize(("argv", "expected"), [
    (["job.status", "r1"], ["job.status", "--id=r1"]),
    (["job.status", "--id=r1"], ["job.status", "--id=r1"]),
    (["job.status", "-i", "r1"], ["job.status", "-i", "r1"]),
    (["job.status"], ["job.status"]),
    (["job.logs", "r1", "--follow"], ["job.logs", "--id=r1", "--follow"]),
    (["job.logs", "--lines", "50", "r1"], ["job.logs", "--lines", "50", "--id=r1"]),
    (["job.logs", "-l", "50", "r1"], ["job.logs", "-l", "50", "--id=r1"]),
    (["job.metrics", "--plot", "x.png", "r1"], ["job.metrics", "--plot", "x.png", "--id=r1"]),
    (["job.stop", "--grace=5", "r1"], ["job.stop", "--grace=5", "--id=r1"]),
    (["job.status", "r1", "job.list"], ["job.status", "--id=r1", "job.list"]),
    (["job.status", "r1", "job.logs", "r2"], ["job.status", "--id=r1", "job.logs", "--id=r2"]),
    (["job.status", "r1", "r2"], ["job.status", "--id=r1", "r2"]),  # Invoke refuses r2
    (["job.status", "--id=r1", "r2"], ["job.status", "--id=r1", "r2"]),
    (["job.status", "--help"], ["job.status", "--help"]),
    (["job.status", "-h"], ["job.status", "-h"]),
    (["job.status", "-f", "other.yaml", "r1"], ["job.status", "-f", "other.yaml", "--id=r1"]),  # core -f FILE
    (["job.status", "status"], ["job.status", "status"]),  # a task name is a task
    (["job.submit", "gemma3-gsm8k"], ["job.submit", "gemma3-gsm8k"]),  # NAME is submit's positional
    (["net.status", "x"], ["net.status", "x"]),  # no run id there
    (["job.status", "--", "r1"], ["job.status", "--", "r1"]),
])
def test_bare_run_id_rewrites_only_the_first_bare_token_of_a_run_id_task(argv, expected):
    assert rewrite(*argv) == expected


def test_bare_run_id_tasks_are_the_job_readers():
    takers = sorted(ctx.name for ctx in CONTEXTS if cli.takes_bare_run_id(ctx))
    assert takers == ["job.checkpoints", "job.logs", "job.metrics", "job.status", "job.stop"]


def test_bare_run_id_reading_the_contexts_twice_keeps_every_flag_help():
    # the rewrite reads the contexts before Invoke's parser does; Invoke's arg_opts pops help as it goes
    first, second = ({ctx.name: ctx for ctx in tasks.ns.to_contexts()} for _ in range(2))
    assert second["job.status"].args["id"].help == first["job.status"].args["id"].help
    assert "also given bare" in second["job.status"].args["id"].help
    assert second["up"].args["yes"].help
