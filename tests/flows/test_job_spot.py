"""Spot-proof runs (issue 17), through `invoke` on the fake cloud: the supervisor in the head pod resumes a run
after a lost node, never after the job's own error, stops at max_restarts, and job.stop ends it even while it
backs off. FAKECLOUD_PREEMPT_AT_STEP makes the NeMo RL stand-in lose a worker pod at that step (Ray's node-loss
error, the fake KubeRay brings the worker back after FAKECLOUD_WORKER_RETURN_SECONDS); FAKECLOUD_JOB_ERROR_AT_STEP
makes it fail with an exception of the job's own. Also: gated models, the in-pod config check, Ray's logs on
/data after a worker is gone.
"""

from __future__ import annotations

import json
import time

import pytest
from flows.test_job_flow import finished, kill_runs, run_dir, seed_cluster, wait_for

QUICK = {"NRG_SUPERVISOR_BACKOFF_SECONDS": "0.2", "NRG_SUPERVISOR_POLL_SECONDS": "0.1",
         "NRG_SUPERVISOR_WATCH_SECONDS": "0.3", "FAKECLOUD_WORKER_RETURN_SECONDS": "1"}
SHORT = ["--set", "grpo.max_num_steps=6", "--set", "checkpointing.save_period=2", "--set", "grpo.val_period=2"]


@pytest.fixture
def cloud(fake):
    seed_cluster(fake)
    yield fake
    kill_runs(fake)


def status(fake, run_id: str) -> tuple[str, str]:
    done = fake.invoke("job.status", f"--id={run_id}")
    assert done.code == 0, done.output
    return done.stdout.splitlines()[0].split(": ", 1)[1], done.stdout


def workers(fake) -> list[str]:
    state = json.loads((fake.state_dir / "resources.json").read_text())
    pods = [o for kind, items in state.items() if kind.startswith("k8s:") for o in items.values()
            if o.get("kind") == "Pod" and o["metadata"]["labels"].get("ray.io/node-type") == "worker"]
    return sorted(p["metadata"]["name"] for p in pods)


def test_job_spot_preempted_at_step_3_resumes_and_succeeds(cloud):
    before = workers(cloud)
    done = cloud.invoke("job.submit", "gemma3-gsm8k", "--id=spot", *SHORT, FAKECLOUD_PREEMPT_AT_STEP="3", **QUICK)
    assert done.code == 0, done.output
    wait_for(lambda: finished(cloud, "spot"), "the run to end", timeout=120)
    state, text = status(cloud, "spot")
    assert state == "succeeded", text
    assert "restarts: 1 (at most 3)" in text and "resumed from step 2 after" in text
    assert workers(cloud) != before and len(workers(cloud)) == 2  # a new worker pod replaced the lost one
    log = (run_dir(cloud, "spot") / "driver.log").read_text()
    resume = "=== nemo-rl-gke: resuming run spot from step 2 after a Ray node was lost"
    assert resume in log or "=== nemo-rl-gke: resuming run spot from step 2 after Ray sees 8 of the 16 GPUs" in log
    first, second = log.split("=== nemo-rl-gke: resuming run spot", 1)
    assert "ActorDiedError" in first and "Step 3/6" in first and "Step 3/6" in second and "Step 1/6" not in second
    listed = cloud.invoke("job.list")
    assert listed.code == 0 and "restarts" in listed.stdout
    metrics = cloud.invoke("job.metrics", "--id=spot")
    assert metrics.code == 0, metrics.output
    assert "6 step(s) of 6" in metrics.stdout  # every step once: continuous across the restart
    ray_logs = cloud.invoke("job.logs", "--id=spot", "--ray")
    assert ray_logs.code == 0, ray_logs.output
    gone = sorted(set(before) - set(workers(cloud)))[0]
    assert f"/data/ray-logs/{gone}/raylet.err" in ray_logs.stdout and "preempted" in ray_logs.stdout


def test_job_spot_job_error_is_not_retried(cloud):
    done = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=bug", *SHORT, FAKECLOUD_JOB_ERROR_AT_STEP="3",
                        **QUICK)
    assert done.code == 0, done.output
    wait_for(lambda: finished(cloud, "bug"), "the run to end", timeout=60)
    state, text = status(cloud, "bug")
    assert state == "failed (exit code 1)" and "restarts: 0" in text
    assert "the job's own error, not retried" in text and "RayTaskError(ValueError)" in text


def test_job_spot_stop_during_the_backoff_ends_it_stopped(cloud):
    env = {**QUICK, "NRG_SUPERVISOR_BACKOFF_SECONDS": "60"}
    done = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=halt", *SHORT, FAKECLOUD_PREEMPT_AT_STEP="3", **env)
    assert done.code == 0, done.output
    phase = run_dir(cloud, "halt") / "phase"
    wait_for(lambda: phase.exists() and phase.read_text().startswith("backing off"), "the backoff", timeout=60)
    began = time.monotonic()
    stopped = cloud.invoke("job.stop", "--id=halt")
    assert stopped.code == 0, stopped.output
    assert time.monotonic() - began < 20
    state, text = status(cloud, "halt")
    assert state == "stopped" and "restarts: 0" in text
    time.sleep(1)
    assert "resuming run halt" not in (run_dir(cloud, "halt") / "driver.log").read_text()


def test_job_spot_run_that_keeps_being_preempted_stops_at_max_restarts(cloud):
    done = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=flaky", *SHORT, "--max-restarts=2",
                        FAKECLOUD_PREEMPT_AT_STEP="3", FAKECLOUD_PREEMPT_TIMES="99", **QUICK)
    assert done.code == 0, done.output
    wait_for(lambda: finished(cloud, "flaky"), "the run to end", timeout=120)
    state, text = status(cloud, "flaky")
    assert state == "failed (exit code 1)" and "restarts: 2 (at most 2)" in text
    assert "max_restarts=2 reached" in text
    assert (run_dir(cloud, "flaky") / "driver.log").read_text().count("resuming run flaky from step 2") == 2


def test_job_spot_max_restarts_set_reaches_the_supervisor_not_nemo_rl(cloud):
    done = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=mr", *SHORT, "--set", "max_restarts=7")
    assert done.code == 0, done.output
    config = json.loads((run_dir(cloud, "mr") / "supervisor.json").read_text())
    assert config["max_restarts"] == 7
    assert "max_restarts" not in (run_dir(cloud, "mr") / "overrides").read_text()


# ---- gated models, the in-pod config check ---------------------------------------------------------------
def test_job_spot_gated_model_without_hf_token_is_refused_before_any_call(fake):
    seed_cluster(fake)
    fake.write_env(HF_TOKEN="")
    before = len(fake.calls())
    done = fake.invoke("job.submit", "gemma3-gsm8k")
    assert done.code == 2 and "HF_TOKEN" in done.stderr
    assert "https://huggingface.co/google/gemma-3-27b-it" in done.stderr
    assert len(fake.calls()) == before


def test_job_spot_token_without_access_fails_in_seconds_with_the_licence_url(cloud):
    began = time.monotonic()
    done = cloud.invoke("job.submit", "gemma3-gsm8k", "--id=noaccess", FAKECLOUD_HF_NO_ACCESS="google/gemma-3-27b-it")
    assert done.code != 0 and "https://huggingface.co/google/gemma-3-27b-it" in done.stderr
    assert "no access to the gated model" in done.stderr and time.monotonic() - began < 30
    assert not run_dir(cloud, "noaccess").exists()  # nothing half-made is left behind


def test_job_spot_override_the_recipe_refuses_fails_in_the_pod_naming_the_key(cloud):
    # Offline the key check stops at the null leaf; NeMo RL's loader in the pod refuses it.
    key = "policy.generation.colocated.resources.num_nodes.extra"
    done = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=badkey", "--set", f"{key}=1")
    assert done.code == 2, done.output
    assert "NeMo RL v0.5.0 refuses the overrides" in done.stderr and key in done.stderr
    assert not run_dir(cloud, "badkey").exists()


def test_job_spot_gated_model_without_hf_token_dry_run_shows_the_plan_and_warns(fake):
    seed_cluster(fake)
    fake.write_env(HF_TOKEN="")
    done = fake.invoke("--dry", "job.submit", "gemma3-gsm8k")
    assert done.code == 0 and "warning: HF_TOKEN is empty; a real submit stops here" in done.stderr
    assert done.stdout.startswith("$ kubectl ")


def test_job_spot_stand_in_training_info_has_nemo_rls_keys_and_rules(cloud):
    """training_info.json as v0.5.0 writes it: the metric only on steps that ran validation."""
    done = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=info", "--set", "grpo.max_num_steps=6",
                        "--set", "checkpointing.save_period=2", "--set", "grpo.val_period=3")
    assert done.code == 0, done.output
    wait_for(lambda: finished(cloud, "info"), "the run to end", timeout=60)
    ckpts = run_dir(cloud, "info") / "checkpoints"
    infos = {int(d.name[5:]): json.loads((d / "training_info.json").read_text()) for d in ckpts.glob("step_*")}
    assert sorted(infos) == [2, 4, 6]
    base = {"consumed_samples", "current_step", "current_epoch", "total_steps", "total_valid_tokens"}
    assert set(infos[2]) == base and set(infos[4]) == base  # no validation at 2 or 4
    assert set(infos[6]) == base | {"val_reward", "val:accuracy"}
    assert (infos[6]["total_steps"], infos[6]["current_step"], infos[6]["consumed_samples"]) == (6, 6, 48)
