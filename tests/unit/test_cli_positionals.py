"""Invoke's own Parser sees the run id of job.status/logs/stop/checkpoints/metrics as `--id` / `-i` (it has no
optional positional); the bare `job.status ID` of DESIGN is the Program's rewrite of its argv before parsing
(tasks/cli.py, tested in test_cli_bare_run_id and flows/test_cli_run_id). job.submit's NAME stays a required
positional."""

from __future__ import annotations

import sys

import pytest
from invoke.exceptions import ParseError
from invoke.parser import Parser

from support.fake import REPO

sys.path.insert(0, str(REPO))
import tasks  # noqa: E402  (the repository's Invoke entry point)

RUN_ID_TASKS = ("job.status", "job.logs", "job.stop", "job.checkpoints", "job.metrics")


def parse(*argv: str) -> dict[str, dict]:
    result = Parser(contexts=tasks.ns.to_contexts()).parse_argv(list(argv))
    return {context.name: context.as_kwargs for context in result}


@pytest.mark.parametrize("name", RUN_ID_TASKS)
def test_cli_positionals_run_id_is_a_flag_and_may_be_left_out(name):
    assert parse(name)[name]["id_"] is None
    assert parse(name, "--id=run-2")[name]["id_"] == "run-2"
    assert parse(name, "-i", "run-3")[name]["id_"] == "run-3"


@pytest.mark.parametrize("name", RUN_ID_TASKS)
def test_cli_positionals_a_bare_run_id_is_not_taken(name):
    with pytest.raises(ParseError, match="run-1"):
        parse(name, "run-1")


def test_cli_positionals_other_flags_beside_the_id():
    parsed = parse("job.logs", "--id=run-3", "--follow")["job.logs"]
    assert (parsed["id_"], parsed["follow"], parsed["lines"]) == ("run-3", True, 200)


def test_cli_positionals_required_name_stays_required():
    with pytest.raises(ParseError, match="name"):
        parse("job.submit")
    assert parse("job.submit", "gemma3-gsm8k")["job.submit"]["name"] == "gemma3-gsm8k"
