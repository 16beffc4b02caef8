"""scripts/prepare_gsm8k.py: the final answer after ####, without commas, as JSONL for ResponseDataset."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "tests" / "fakecloud" / "pod" / "root" / "opt" / "gsm8k-sample"


def _prepare():
    spec = importlib.util.spec_from_file_location("prepare_gsm8k", REPO / "scripts" / "prepare_gsm8k.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


prepare_gsm8k = _prepare()


@pytest.mark.parametrize(("rationale", "answer"), [
    ("12 * 8 = <<12*8=96>>96 loaves.\n#### 96", "96"),
    ("2,400 + 1,150 = 3,550 people.\n#### 3,550", "3550"),
    ("#### 1,200,000", "1200000"),
    ("4 - 11 = -7 degrees.\n#### -7", "-7"),
    ("-20 + 5 = -15.\n#### -15.", "-15"),
    ("3 * 12 = 36 dollars.\n#### $36", "36"),
    ("9 / 2 = 4.5\n#### 4.5", "4.5"),
    ("7 + 5 = 12.\n####12", "12"),
    ("a #### in the text, then\n#### 5", "5"),
])
def test_job_gsm8k_final_answer(rationale, answer):
    assert prepare_gsm8k.final_answer(rationale) == answer


def test_job_gsm8k_answer_without_marker_is_an_error():
    with pytest.raises(ValueError, match="####"):
        prepare_gsm8k.final_answer("just a rationale")


def test_job_gsm8k_prepare_writes_question_and_final_answer_jsonl(tmp_path):
    counts = prepare_gsm8k.prepare(tmp_path, SAMPLE)
    rows = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert counts == {"train": 5, "test": 3}
    assert [r["answer"] for r in rows] == ["96", "3550", "-7", "36", "1200000"]
    assert set(rows[0]) == {"question", "answer"} and rows[0]["question"].startswith("A baker")


def test_job_gsm8k_prepare_leaves_no_temporary_files(tmp_path):
    prepare_gsm8k.prepare(tmp_path, SAMPLE)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test.jsonl", "train.jsonl"]
