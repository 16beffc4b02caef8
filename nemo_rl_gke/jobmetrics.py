"""Per-step metrics from a NeMo RL GRPO driver log: reward, validation accuracy, step time. Pure, except
`plot`, which writes a PNG with matplotlib (imported lazily, headless Agg backend).

The driver (examples/run_grpo_math.py, v0.5.0; FACTS §7) prints once per epoch, then per step:

    ========================= Epoch 1/2 =========================
    ========================= Step 12/467 =========================
    ▶ Starting validation at step 10...          (every val_period steps, numbered across epochs)
    📊 Validation Results:
        • Accuracy: 0.4531
    📊 Training Results:
      • Loss: 0.0123
      • Generation KL Error: 0.0010
      • Avg Reward: 0.4375              (dynamic sampling: Avg Filtered Reward and Avg Total Reward)
      • Mean Generation Length: 312.5000
    ⏱️  Timing:
      • Total step time: 95.31s

The step header counts within the epoch (it restarts at 1 in each) and its denominator is
min(steps per epoch, max_num_steps): here steps are counted across epochs, (epoch - 1) x that + step. A
resumed run prints its steps again from the checkpoint on: the last value printed for a step wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_STEP = re.compile(r"=+\s*Step\s+(\d+)\s*/\s*(\d+)\s*=+")
_EPOCH = re.compile(r"=+\s*Epoch\s+(\d+)\s*/\s*(\d+)\s*=+")
_VALIDATION_AT = re.compile(r"(?:Starting validation|validation) at step\s+(\d+)", re.IGNORECASE)
_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"
_REWARD = re.compile(r"Avg (?:Filtered )?Reward:\s*" + _NUMBER)
_TOTAL_REWARD = re.compile(r"Avg Total Reward:\s*" + _NUMBER)
_STEP_TIME = re.compile(r"Total step time:\s*" + _NUMBER + r"\s*s")
_ACCURACY = re.compile(r"^\W*Accuracy:\s*" + _NUMBER)
_LOSS = re.compile(r"^\W*Loss:\s*" + _NUMBER)


@dataclass
class StepMetrics:
    step: int
    reward: float | None = None
    step_time: float | None = None
    loss: float | None = None
    val_accuracy: float | None = None
    total_reward: float | None = None  # dynamic sampling: the reward before filtering
    epoch: int | None = None


@dataclass
class Metrics:
    steps: list[StepMetrics]
    max_steps: int | None = None

    @property
    def validation(self) -> list[tuple[int, float]]:
        return [(s.step, s.val_accuracy) for s in self.steps if s.val_accuracy is not None]


def parse(log: str) -> Metrics:
    by_step: dict[int, StepMetrics] = {}
    current: int | None = None
    validating: int | None = None
    max_steps: int | None = None
    epoch, epochs = 1, 1

    def at(step: int) -> StepMetrics:
        return by_step.setdefault(step, StepMetrics(step))

    for raw in log.splitlines():
        line = _ANSI.sub("", raw).strip()
        if not line:
            continue
        match = _EPOCH.search(line)
        if match:
            epoch, epochs = int(match[1]), int(match[2])
            continue
        match = _STEP.search(line)
        if match:
            per_epoch = int(match[2])
            current = (epoch - 1) * per_epoch + int(match[1])
            max_steps = per_epoch * epochs if epochs > 1 else per_epoch
            # A new step header: a resumed run repeats steps, so forget what the earlier attempt printed.
            by_step[current] = StepMetrics(current, epoch=epoch)
            validating = None
            continue
        match = _VALIDATION_AT.search(line)
        if match:
            validating = int(match[1])
            continue
        match = _ACCURACY.search(line)
        if match and (validating is not None or current is not None):
            at(validating if validating is not None else current).val_accuracy = float(match[1])  # type: ignore[arg-type]
            continue
        if current is None:
            continue
        if (match := _TOTAL_REWARD.search(line)):
            at(current).total_reward = float(match[1])
        elif (match := _REWARD.search(line)):
            at(current).reward = float(match[1])
        elif (match := _STEP_TIME.search(line)):
            at(current).step_time = float(match[1])
        elif (match := _LOSS.search(line)):
            at(current).loss = float(match[1])
    return Metrics(sorted(by_step.values(), key=lambda s: s.step), max_steps)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def rows(metrics: Metrics) -> list[tuple[str, str, str, str]]:
    """(step, avg reward, validation accuracy, step time) as text, for a table."""
    return [(str(s.step), _fmt(s.reward, ".4f"), _fmt(s.val_accuracy, ".4f"), _fmt(s.step_time, ".1f") + "s"
             if s.step_time is not None else "-") for s in metrics.steps]


def summary(metrics: Metrics) -> str:
    if not metrics.steps:
        return "no training steps in the driver log yet"
    rewards = [s.reward for s in metrics.steps if s.reward is not None]
    times = [s.step_time for s in metrics.steps if s.step_time is not None]
    parts = [f"{len(metrics.steps)} step(s)" + (f" of {metrics.max_steps}" if metrics.max_steps else "")]
    if rewards:
        parts.append(f"reward {rewards[0]:.4f} -> {rewards[-1]:.4f}")
    if metrics.validation:
        step, accuracy = metrics.validation[-1]
        parts.append(f"validation accuracy {accuracy:.4f} at step {step}")
    if times:
        parts.append(f"mean step time {sum(times) / len(times):.1f}s")
    return ", ".join(parts)


def plot(metrics: Metrics, path: str, *, title: str = "") -> str:
    """Reward and validation accuracy (left axis) and step time (right axis) per step, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    try:
        rewarded = [s for s in metrics.steps if s.reward is not None]
        top.plot([s.step for s in rewarded], [s.reward for s in rewarded], marker=".", label="avg reward")
        if metrics.validation:
            top.plot(*zip(*metrics.validation, strict=True), marker="o", label="validation accuracy")
        top.set_ylabel("reward / accuracy")
        top.legend(loc="best")
        top.grid(True, alpha=0.3)
        timed = [s for s in metrics.steps if s.step_time is not None]
        bottom.plot([s.step for s in timed], [s.step_time for s in timed], color="gray", marker=".")
        bottom.set_ylabel("step time (s)")
        bottom.set_xlabel("step")
        bottom.grid(True, alpha=0.3)
        if title:
            fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=100)
    finally:
        plt.close(fig)
    return path
