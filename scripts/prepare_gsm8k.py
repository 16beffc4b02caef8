"""Write GSM8K (config `main`) as JSONL for NeMo RL's ResponseDataset: {"question": ..., "answer": "<final>"}.

Runs inside the Ray head pod (job.submit embeds this file in the script it pipes there), once per /data.
GSM8K answers are a rationale ending in `#### 1,234`; NeMo RL v0.5.0's math verifier compares the model's
\\boxed{} answer with the whole `answer` column, so with the raw column every reward is 0. Here the answer
is only the final number, commas removed, so rewards are real.

    python prepare_gsm8k.py --out /data/datasets/gsm8k [--source DIR]

--source reads DIR/{train,test}.jsonl in the raw GSM8K shape instead of Hugging Face (tests, air-gapped).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

SPLITS = {"train": "train.jsonl", "test": "test.jsonl"}
_NUMBER = re.compile(r"^[-+]?[$]?\s*[0-9][0-9,]*(\.[0-9]+)?")


def final_answer(rationale: str) -> str:
    """The text after the last `####`, without thousands separators, currency signs or a trailing period."""
    if "####" not in rationale:
        raise ValueError(f"no '####' in GSM8K answer: {rationale[-80:]!r}")
    tail = rationale.rsplit("####", 1)[1].strip()
    match = _NUMBER.match(tail)
    if match:
        tail = match.group(0)
    tail = tail.replace(",", "").replace("$", "").replace(" ", "").rstrip(".")
    if tail.startswith("+"):
        tail = tail[1:]
    if not tail:
        raise ValueError(f"empty final answer in GSM8K answer: {rationale[-80:]!r}")
    return tail


def convert(rows: Iterable[dict]) -> Iterator[dict]:
    for row in rows:
        yield {"question": row["question"].strip(), "answer": final_answer(row["answer"])}


def _write(path: Path, rows: Iterable[dict]) -> int:
    """Atomically: a half-written file is never seen by a job that starts meanwhile."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    count = 0
    with open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    os.replace(tmp, path)
    return count


def _read_jsonl(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def _rows(split: str, source: Path | None) -> Iterable[dict]:
    if source is not None:
        return _read_jsonl(source / SPLITS[split])
    from datasets import load_dataset

    return load_dataset("openai/gsm8k", "main", split=split)


def prepare(out: Path, source: Path | None = None) -> dict[str, int]:
    out.mkdir(parents=True, exist_ok=True)
    return {split: _write(out / name, convert(_rows(split, source))) for split, name in SPLITS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="directory for train.jsonl and test.jsonl")
    parser.add_argument("--source", type=Path, help="read raw GSM8K JSONL from here instead of Hugging Face")
    args = parser.parse_args(argv)
    counts = prepare(args.out, args.source)
    print("GSM8K ready: " + ", ".join(f"{split} {n} rows" for split, n in counts.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
