"""The Hugging Face cache of the fake cloud: what a model download costs, and the cache's shape on disk.

Both downloaders of the fake use it: the prefetch Job (handlers/kubectl_jobs.py, `hf download REPO`) and the NeMo
RL stand-in driver (pod/bin/uv), which downloads a model its cache lacks, as NeMo RL's from_pretrained does.
The layout is huggingface_hub's: HF_HOME/hub/models--OWNER--NAME/{refs/main, snapshots/<commit>/...}; a model
counts as cached once its snapshot has config.json (the stand-ins write a few small files, not the weights).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

# Typical download into the HF cache on Lustre (FACTS §6): gemma-3-27b-it ≈ 55 GB in 8 min, Qwen2.5-1.5B ≈ 3 GB
# in 30 s. A model FACTS does not list: 1 min.
DOWNLOAD_SECONDS = {"google/gemma-3-27b-it": 480.0, "Qwen/Qwen2.5-1.5B": 30.0}
OTHER_MODEL_SECONDS = 60.0
SNAPSHOT_FILES = ("tokenizer.json", "model.safetensors.index.json", "config.json")  # config.json last: "cached"


def download_seconds(model: str) -> float:
    """The typical (unscaled) time to download `model` into an empty cache."""
    return DOWNLOAD_SECONDS.get(model, OTHER_MODEL_SECONDS)


def repo_dir(hf_home: Path, model: str) -> Path:
    owner, _, name = model.partition("/")
    return hf_home / "hub" / f"models--{owner}--{name}"


def commit_of(model: str) -> str:
    return hashlib.sha1(model.encode()).hexdigest()


def cached(hf_home: Path, model: str) -> bool:
    return (repo_dir(hf_home, model) / "snapshots" / commit_of(model) / "config.json").is_file()


def fill(hf_home: Path, model: str) -> None:
    """Write the model's snapshot into the cache (what a finished download leaves); safe to repeat."""
    repo = repo_dir(hf_home, model)
    snapshot = repo / "snapshots" / commit_of(model)
    snapshot.mkdir(parents=True, exist_ok=True)
    for name in SNAPSHOT_FILES:
        path = snapshot / name
        if not path.exists():
            tmp = path.with_name(f".{name}.{os.getpid()}")
            tmp.write_text(f'{{"_name_or_path": "{model}"}}\n')
            os.replace(tmp, path)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit_of(model))
