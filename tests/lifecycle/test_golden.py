"""Golden transcripts of `invoke --dry up` and `invoke --dry down --yes --delete-data` for b200/h200 ×
standard/autopilot, from a directory without .env (the .env.example fallback). Any change to the plan shows
up as a diff here. After an intended change: `UPDATE_GOLDEN=1 pytest tests/lifecycle/test_golden.py`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nemo_rl_gke.settings import GPU_PROFILES
from support.fake import REPO, FakeCloud

GOLDEN = REPO / "tests" / "golden" / "transcripts"
VARIANTS = [(gpu, mode) for gpu in GPU_PROFILES for mode in ("standard", "autopilot")]  # each GPU profile


def transcript(tmp_path: Path, task: str, gpu: str, mode: str) -> str:
    fake = FakeCloud(tmp_path)
    fake.workdir.mkdir(parents=True, exist_ok=True)
    if task == "up":
        done = fake.invoke("--dry", "up", f"--gpu={gpu}", f"--mode={mode}")
    else:
        done = fake.invoke("--dry", "down", "--yes", "--delete-data", GPU_TYPE=gpu, CLUSTER_MODE=mode)
    assert done.code == 0, done.output
    # The chart is named by its absolute path: the same transcript from any clone.
    return done.stdout.replace(str(REPO), "<repo>")


@pytest.mark.parametrize("task", ["up", "down"])
@pytest.mark.parametrize(("gpu", "mode"), VARIANTS)
def test_golden_dry_transcript_matches(tmp_path, task, gpu, mode):
    path = GOLDEN / f"{task}-{gpu}-{mode}.txt"
    text = transcript(tmp_path, task, gpu, mode)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no golden file {path}: run UPDATE_GOLDEN=1 pytest tests/lifecycle/test_golden.py"
    assert text == path.read_text(), f"{path.name} changed; if intended: UPDATE_GOLDEN=1 pytest {__file__}"
