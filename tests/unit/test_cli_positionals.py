"""DESIGN's `job.status [ID]` form: the run id may be given as a positional, as --id, or left out."""

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
def test_run_id_is_optional_positional_or_flag(name):
    assert parse(name)[name]["id_"] == ""
    assert parse(name, "run-1")[name]["id_"] == "run-1"
    assert parse(name, "--id=run-2")[name]["id_"] == "run-2"


def test_other_flags_still_follow_the_positional():
    assert parse("job.logs", "run-3", "--follow")["job.logs"] == {"id_": "run-3", "follow": True, "lines": 200}


def test_required_positionals_stay_required():
    with pytest.raises(ParseError, match="name"):
        parse("job.submit")
