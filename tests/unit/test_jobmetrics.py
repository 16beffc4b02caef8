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
