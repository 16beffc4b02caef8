"""jobmetrics: per-step reward, validation accuracy, step time from a NeMo RL-shaped log; the PNG plot."""

from __future__ import annotations

from nemo_rl_gke import jobmetrics

# NeMo RL v0.5.0's GRPO driver output, abridged, with the colour codes and a resume (steps 3.. printed again).
LOG = """\
▶ Starting validation at step 0...
📊 Validation Results:
    • Accuracy: 0.1250
    • Average response length: 402.1 tokens

========================= Step 1/300 =========================
▶ Preparing batch...
▶ Generating responses for batch of size 1024...
📊 Training Results:
  • Loss: 0.0312
  • Avg Reward: 0.0000
  • Mean Generation Length: 512.0000

⏱️  Timing:
  • Total step time: 95.31s
  • generation: 45.67s (47.9%)

========================= Step 2/300 =========================
\x1b[32m📊 Training Results:\x1b[0m
  • Loss: 0.0290
  • Avg Reward: 0.1875
⏱️  Timing:
  • Total step time: 88.02s

========================= Step 3/300 =========================
  • Avg Reward: 0.9999
(the pod was preempted here)
Loading checkpoint from /data/runs/r/checkpoints/step_2 (resuming at step 3)

========================= Step 3/300 =========================
▶ Starting validation at step 3...
📊 Validation Results:
    • Accuracy: 0.4531
📊 Training Results:
  • Loss: -0.0100
  • Avg Reward: 0.2500
⏱️  Timing:
  • Total step time: 90.5s
"""


def test_jobmetrics_parse_per_step_reward_and_time():
    parsed = jobmetrics.parse(LOG)
    assert [(s.step, s.reward, s.step_time) for s in parsed.steps] == [
        (0, None, None), (1, 0.0, 95.31), (2, 0.1875, 88.02), (3, 0.25, 90.5)]


def test_jobmetrics_parse_validation_accuracy_by_step():
    assert jobmetrics.parse(LOG).validation == [(0, 0.125), (3, 0.4531)]


def test_jobmetrics_parse_max_steps():
    assert jobmetrics.parse(LOG).max_steps == 300


def test_jobmetrics_resumed_step_keeps_the_last_attempt():
    step3 = jobmetrics.parse(LOG).steps[-1]
    assert (step3.reward, step3.loss) == (0.25, -0.01)


def test_jobmetrics_rows_and_summary():
    parsed = jobmetrics.parse(LOG)
    assert jobmetrics.rows(parsed)[1] == ("1", "0.0000", "-", "95.3s")
    assert "reward 0.0000 -> 0.2500" in jobmetrics.summary(parsed)


def test_jobmetrics_empty_log_says_so():
    summary = jobmetrics.summary(jobmetrics.parse("starting Ray...\n"))
    assert summary == "no training steps in the driver log yet"


def test_jobmetrics_plot_writes_a_png(tmp_path):
    path = tmp_path / "metrics.png"
    jobmetrics.plot(jobmetrics.parse(LOG), str(path), title="run r")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- v0.5.0's exact lines (FACTS §7): two epochs, dynamic sampling --------------------------------------------
def _step(step: int, of: int, reward: str, *, validation_at: int | None = None, accuracy: float = 0.0,
          time_s: float = 10.0) -> str:
    text = f"\n{'=' * 25} Step {step}/{of} {'=' * 25}\n▶ Preparing batch...\n▶ Training policy...\n"
    if validation_at is not None:
        text += (f"▶ Starting validation at step {validation_at}...\n\n📊 Validation Results:\n"
                 f"    • Accuracy: {accuracy:.4f}\n    • Average response length: 231.5 tokens\n"
                 f"    • Samples processed: 64\n\n  ⏱️  Validation Timing:\n    • Total validation time: 3.21s\n")
    return text + (f"\n📊 Training Results:\n  • Loss: 0.0100\n  • Generation KL Error: 0.0010\n{reward}"
                   f"  • Mean Generation Length: 301.0000\n\n⏱️  Timing:\n  • Total step time: {time_s:.2f}s\n"
                   f"  • generation: {time_s * 0.6:.2f}s (60.0%)\n")


def _epoch(n: int, of: int) -> str:
    return f"\n{'=' * 25} Epoch {n}/{of} {'=' * 25}\n"


TWO_EPOCHS = (_epoch(1, 2) + _step(1, 3, "  • Avg Reward: 0.1000\n")
              + _step(2, 3, "  • Avg Reward: 0.2000\n", validation_at=2, accuracy=0.3)
              + _step(3, 3, "  • Avg Reward: 0.3000\n")
              + _epoch(2, 2) + _step(1, 3, "  • Avg Reward: 0.4000\n", validation_at=4, accuracy=0.5)
              + _step(2, 3, "  • Avg Reward: 0.5000\n") + _step(3, 3, "  • Avg Reward: 0.6000\n", time_s=20.0))


def test_jobmetrics_two_epochs_count_steps_across_epochs():
    parsed = jobmetrics.parse(TWO_EPOCHS)
    assert [s.step for s in parsed.steps] == [1, 2, 3, 4, 5, 6]
    assert [s.reward for s in parsed.steps] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    assert [s.epoch for s in parsed.steps] == [1, 1, 1, 2, 2, 2]
    assert parsed.validation == [(2, 0.3), (4, 0.5)] and parsed.max_steps == 6
    assert parsed.steps[-1].step_time == 20.0


def test_jobmetrics_two_epochs_resumed_in_epoch_2_overwrites_only_that_step():
    resumed = (TWO_EPOCHS + _epoch(2, 2) + _step(2, 3, "  • Avg Reward: 0.5500\n")
               + _step(3, 3, "  • Avg Reward: 0.6500\n"))
    parsed = jobmetrics.parse(resumed)
    assert [s.reward for s in parsed.steps] == [0.1, 0.2, 0.3, 0.4, 0.55, 0.65]


def test_jobmetrics_dynamic_sampling_reads_the_filtered_and_total_reward():
    log = _epoch(1, 1) + _step(1, 467, "  • Avg Filtered Reward: 0.6250\n  • Avg Total Reward: 0.4100\n")
    (step,) = jobmetrics.parse(log).steps
    assert (step.reward, step.total_reward, step.step_time) == (0.625, 0.41, 10.0)


def test_jobmetrics_parses_what_the_stand_in_prints():
    """The fake cloud's NeMo RL stand-in and these parsers agree (the flows rely on both)."""
    import re
    from pathlib import Path

    source = (Path(__file__).resolve().parents[1] / "fakecloud" / "pod" / "bin" / "uv").read_text()
    for line in ("Epoch {current_epoch + 1}/{max_epochs}", "Step {current_step + 1}/{min(batches, max_steps)}",
                 "• Avg Filtered Reward:", "• Avg Total Reward:", "• Generation KL Error:",
                 "▶ Starting validation at step {step}...", "    • Samples processed:",
                 "  ⏱️  Validation Timing:", "    • Total validation time:"):
        assert line in source, line
    assert not re.search(r"Loading checkpoint|resuming at step", source.split('"""', 2)[2])
