"""Stand-in for Hugging Face `datasets` in the fake pod: `load_dataset("openai/gsm8k", "main", split=...)` gives
GSM8K's real row counts (train 7473, test 1319), cycling the GSM8K-shaped sample shipped with the fake pod with
a row number in each question (no download). The row count matters: NeMo RL's epoch is floor(rows / prompts)
steps. Anything else fails loudly, so a script that forgets the `main` config, or asks for another dataset,
breaks here as it would for real."""

from __future__ import annotations

import json
import os
from pathlib import Path

SAMPLE = Path(os.environ.get("NRG_POD_ROOT", "")) / "opt" / "gsm8k-sample"
CALLS = Path(os.environ.get("NRG_POD_ROOT", "")) / "var" / "log" / "datasets-calls.jsonl"
ROWS = {"train": 7473, "test": 1319}


def load_dataset(path, name=None, split=None, **kwargs):
    CALLS.parent.mkdir(parents=True, exist_ok=True)
    with open(CALLS, "a") as log:
        log.write(json.dumps({"path": path, "name": name, "split": split}) + "\n")
    if path != "openai/gsm8k":
        raise FileNotFoundError(f"fake datasets: no dataset {path!r} (only openai/gsm8k)")
    if name != "main":
        raise ValueError("Config name is missing. Please pick one among the available configs: "
                         "['main', 'socratic']")
    if split not in ("train", "test"):
        raise ValueError(f"fake datasets: split must be train or test, not {split!r}")
    with open(SAMPLE / f"{split}.jsonl", encoding="utf-8") as handle:
        sample = [json.loads(line) for line in handle if line.strip()]
    rows = []
    for n in range(ROWS[split]):
        row = dict(sample[n % len(sample)])
        if n >= len(sample):
            row["question"] = f"{row['question']} (row {n})"
        rows.append(row)
    return rows
