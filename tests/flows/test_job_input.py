"""Hostile input to the job tasks (issue 18), through `invoke` on the fake cloud: one clear message, exit 2, no
traceback, and no kubectl call when the cause is in the input."""

from __future__ import annotations

import pytest
from flows.test_job_flow import FAST, finished, pod_root, seed_cluster, wait_for


@pytest.fixture
def cloud(fake):
    seed_cluster(fake)
    return fake


@pytest.mark.parametrize("argv", [
    ["job.logs", "--lines=abc"], ["job.stop", "--grace=abc"], ["job.logs", "--lines=0"],
    ["job.logs", "--id=BAD ID"], ["job.stop", "--id=../../etc"], ["job.status", "--id=x;rm"],
    ["job.checkpoints", "--id=UPPER"], ["job.metrics", "--id=-x-"],
    ["job.metrics", "--plot=/nonexistent/x.png"], ["job.metrics", "--plot=/tmp"], ["job.metrics", "--plot=x.jpg"],
    ["job.submit", "gemma3-gsm8k", "--set", "cluster={num_nodes:4,gpus_per_node:8}"],
    ["job.submit", "gemma3-gsm8k", "--set", "policy.dtensor_cfg={tensor_parallel_size:3}"],
    ["job.submit", "gemma3-gsm8k", "--set", "cluster=[4,8]"],
    ["job.submit", "gemma3-gsm8k", "--set", "grpo.max_num_steps=500"],
    ["job.submit", "gemma3-gsm8k", "--set", "policy.dtensor_cfg.pipeline_parallel_size=2"],
    ["job.submit", "gemma3-gsm8k", "--max-restarts=abc"],
    ["job.submit", "gemma3-gsm8k", "--set", "max_restarts=-1"],
], ids=lambda argv: " ".join(argv)[:60])
def test_job_input_bad_value_is_exit_2_before_any_call(cloud, argv):
    before = len(cloud.calls())
    done = cloud.invoke(*argv)
    assert done.code == 2, done.output
    assert "Traceback" not in done.output and done.stderr.startswith("error: ")
    assert len(cloud.calls()) == before


def test_job_input_steps_beyond_the_epoch_say_the_arithmetic(cloud):
    done = cloud.invoke("job.submit", "gemma3-gsm8k", "--set", "grpo.max_num_steps=500")
    assert "1 x 467 = 467 steps: the run would end at step 467" in done.stderr


def test_job_input_plot_without_a_value_writes_metrics_of_the_run(cloud):
    assert cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=plotme", *FAST).code == 0
    wait_for(lambda: finished(cloud, "plotme"), "the run to finish")
    done = cloud.invoke("job.metrics", "--plot")
    assert done.code == 0, done.output
    png = cloud.workdir / "metrics-plotme.png"
    assert png.read_bytes()[:4] == b"\x89PNG" and "plot written to metrics-plotme.png" in done.stdout
    assert (pod_root(cloud) / "data" / "runs" / "plotme").is_dir()


def test_job_input_cadence_warning_on_submit(cloud):
    done = cloud.invoke("--dry", "job.submit", "gemma3-gsm8k", "--set", "checkpointing.save_period=40")
    assert done.code == 0, done.output
    assert "warning: checkpointing.save_period=40" in done.stderr
    assert "--set checkpointing.save_period=18" in done.stderr
