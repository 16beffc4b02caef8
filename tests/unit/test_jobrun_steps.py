"""scripts/jobrun.py's step count across epochs. NeMo RL v0.5.0's GRPO prints `===== Epoch e/E =====` once per
epoch and `===== Step N/M =====` per step, N restarting at 1 each epoch; the run's step is (e - 1) x M + N. The real
driver logs kilobytes per step (progress lines, timers, the workers' lines Ray forwards), so in epoch 2 and later
the epoch's header lies far behind the last 256 KiB the step is read from: job.status and job.list said step 200
at the run's step 667."""

from __future__ import annotations

import importlib.util

import pytest

from nemo_rl_gke import jobscript

_spec = importlib.util.spec_from_file_location("nrg_jobrun", jobscript.SCRIPTS / "jobrun.py")
jobrun = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(jobrun)  # type: ignore[union-attr]

PER_EPOCH = 467  # GSM8K's 7473 rows in batches of 16


def driver_log(steps_in_epoch_2: int, per_step: int, after_header: int = 0) -> str:
    """Epoch 1 in full, then epoch 2 up to its step `steps_in_epoch_2`; `per_step` bytes of other lines per step;
    `after_header` bytes right after epoch 2's header (moves it against the 256 KiB windows, counted from the
    log's end)."""
    filler = ("x" * 99 + "\n") * (per_step // 100)
    parts = []
    for epoch, steps in ((1, PER_EPOCH), (2, steps_in_epoch_2)):
        parts.append(f"\n{'=' * 25} Epoch {epoch}/2 {'=' * 25}\n")
        if epoch == 2 and after_header:
            parts.append("w" * (after_header - 1) + "\n")
        parts += [f"\n{'=' * 25} Step {n}/{PER_EPOCH} {'=' * 25}\n{filler}" for n in range(1, steps + 1)]
    return "".join(parts)


@pytest.mark.parametrize("per_step", [500, 1500, 8000])
def test_the_step_counts_across_epochs_wherever_the_epochs_header_lies(tmp_path, per_step):
    (tmp_path / "driver.log").write_text(driver_log(200, per_step))
    assert jobrun.last_step(tmp_path) == (PER_EPOCH + 200, 2 * PER_EPOCH)


@pytest.mark.parametrize("delta", range(-100, 101, 9))
def test_a_header_cut_by_a_window_edge_is_still_read(tmp_path, delta):
    """Epoch 2's header (61 bytes) moved across the edge of a 256 KiB window (the windows are counted from the
    log's end), a few bytes at a time: before it, cut by it, after it."""
    base = driver_log(120, 1500)
    header = base.rindex("\n" + "=" * 25 + " Epoch 2/2") + 1
    from_end = len(base) - header
    edge = 2 * jobrun.TAIL_BYTES  # the second window's start, counted from the end
    text = driver_log(120, 1500, after_header=edge - from_end + delta)
    moved = len(text) - (text.rindex("\n" + "=" * 25 + " Epoch 2/2") + 1)
    assert abs(moved - edge - delta) <= 1
    (tmp_path / "driver.log").write_text(text)
    assert jobrun.last_step(tmp_path) == (PER_EPOCH + 120, 2 * PER_EPOCH)


def test_a_new_epochs_header_after_the_last_step_line_does_not_count(tmp_path):
    """Epoch 2 announced, its first step not yet printed: the run is at the end of epoch 1."""
    text = driver_log(0, 1500)
    (tmp_path / "driver.log").write_text(text)
    assert jobrun.last_step(tmp_path) == (PER_EPOCH, 2 * PER_EPOCH)


def test_within_the_first_epoch_and_without_headers(tmp_path):
    log = tmp_path / "driver.log"
    log.write_text(f"\n{'=' * 25} Epoch 1/2 {'=' * 25}\n" + "".join(
        f"\n{'=' * 25} Step {n}/{PER_EPOCH} {'=' * 25}\n" + "y" * 3000 + "\n" for n in range(1, 301)))
    assert jobrun.last_step(tmp_path) == (300, 2 * PER_EPOCH)
    log.write_text("".join(f"Step {n}/40\n" for n in range(1, 13)))
    assert jobrun.last_step(tmp_path) == (12, 40)
    log.write_text("starting\n")
    assert jobrun.last_step(tmp_path) == (None, None)
