"""context.emit_json / json_output (the --json rule) and print_table's never-cut id columns."""

from __future__ import annotations

import io
import json
import re
import sys

import pytest

from nemo_rl_gke.runner import Runner
from nemo_rl_gke.tasks import context

RUN_ID = "qwen2.5-1.5b-gsm8k-20261202-235959-with-a-long-suffix"


def test_context_json_emit_writes_one_versioned_object_and_redacts():
    out = io.StringIO()
    context.emit_json({"runs": [{"id": "a", "token": "hf_SECRET"}], "when": __import__("datetime").date(2026, 1, 2)},
                      out=out, secrets=("hf_SECRET",))
    document = json.loads(out.getvalue())
    assert document == {"version": 1, "runs": [{"id": "a", "token": "***"}], "when": "2026-01-02"}
    assert list(document)[0] == "version" and out.getvalue().endswith("}\n")


def test_context_json_emit_refuses_a_non_object():
    with pytest.raises(TypeError):
        context.emit_json([1, 2], out=io.StringIO())


def test_context_json_output_sends_everything_else_to_stderr(capsys):
    with context.json_output(True) as out:
        r = Runner(dry=True)
        r.say("a runner line")
        r.run(["gcloud", "compute", "networks", "list"])  # a dry run prints its `$` line on stdout
        print("a stray print")
        context.print_table("t", ("id",), [(RUN_ID,)])
        out.emit({"ok": True})
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"version": 1, "ok": True}
    for text in ("a runner line", "$ gcloud compute networks list", "a stray print", RUN_ID):
        assert text in captured.err
    assert sys.stdout is not sys.stderr


def test_context_json_output_disabled_changes_nothing(capsys):
    with context.json_output(False) as out:
        assert out is None
        print("table")
    assert capsys.readouterr().out == "table\n"


def test_context_json_output_two_documents_or_none_is_a_bug():
    with pytest.raises(RuntimeError, match="exactly one"), context.json_output(True) as out:
        out.emit({})
        out.emit({})
    from invoke import Exit

    with pytest.raises(Exit, match="no JSON document"), context.json_output(True):
        pass


def test_context_json_output_lets_a_task_error_through():
    from invoke import Exit

    with pytest.raises(Exit), context.json_output(True):
        raise Exit("error: x", code=2)


def _table(width: int | None, *, terminal: bool) -> str:
    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return terminal

    stream = Stream()
    rows = [(RUN_ID, "running", "step 12 of 500, checkpoint step_10 exported to the bucket")]
    context.print_table("runs", ("id", "state", "progress"), rows, ids=("id",), file=stream, terminal_width=width)
    return stream.getvalue()


@pytest.mark.parametrize("width", [80, 100])
def test_context_print_table_never_cuts_an_id_on_a_terminal(width):
    text = re.sub(r"\x1b\[[0-9;]*m", "", _table(width, terminal=True))
    assert RUN_ID in text and "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    assert "state" in text and "progress" in text and "exported" in text  # the others wrap, whole


def test_context_print_table_too_narrow_a_terminal_gets_wide_lines_not_cut_values():
    text = re.sub(r"\x1b\[[0-9;]*m", "", _table(40, terminal=True))
    assert RUN_ID in text and "state" in text and "progress" in text and "…" not in text


def test_context_print_table_piped_is_as_wide_as_its_content(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    text = _table(None, terminal=False)
    lines = text.splitlines()
    assert any(RUN_ID in line and "step 12 of 500" in line for line in lines)  # one row, one line
    assert "…" not in text


def test_context_print_table_shows_brackets_as_they_are():
    # A tool's reason in a cell, read as rich markup, lost what its brackets held ("[alice@example.com]"), and a
    # "[/…" ended the task on a MarkupError.
    stream = io.StringIO()
    rows = [("Secret default/nemo-rl-secrets", "unknown: account [alice@example.com] has no valid credentials"),
            ("PVC default/lustre-pvc", "unknown: see [/data/runs]")]
    context.print_table("storage [us-central1]", ("resource", "state"), rows, file=stream)
    text = stream.getvalue()
    assert "[alice@example.com]" in text and "[/data/runs]" in text and "storage [us-central1]" in text
