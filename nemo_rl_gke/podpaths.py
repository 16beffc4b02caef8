"""Where things live inside the Ray pods: the Lustre volume at /data, its run directories, the Hugging Face
cache, and the datasets prepared there (pure constants)."""

from __future__ import annotations

# The Lustre volume is mounted at /data on the head and every worker.
DATA = "/data"
RUNS_DIR = f"{DATA}/runs"
# One Hugging Face cache on /data for the pods (the chart's HF_HOME) and the driver alike: NeMo RL copies the
# driver's environment to every worker, so a second path would only split the cache.
HF_HOME = f"{DATA}/huggingface"
DATASETS = {
    # name -> (directory on /data, train file, validation file, input key, output key)
    "gsm8k": (f"{DATA}/datasets/gsm8k", "train.jsonl", "test.jsonl", "question", "answer"),
}
# Rows of each prepared train split (GSM8K config main, train: 7473). NeMo RL's dataloader drops the last
# partial batch, so an epoch is floor(rows / prompts per step) steps (FACTS §7).
TRAIN_ROWS = {"gsm8k": 7473}


def run_dir(run_id: str) -> str:
    return f"{RUNS_DIR}/{run_id}"
