"""job.* on the fake cloud: the submitted script runs locally against a pod root, with a NeMo RL stand-in
(tests/fakecloud/pod/bin/uv) that records its argv, prints NeMo RL-shaped steps and writes checkpoints.

The cluster context, our Secret (planted HF/W&B values) and Running Ray pods are seeded straight into the
fake cloud: these tests are about jobs, not about bringing a cluster up.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.fake import FAKE_BIN, REPO, TEST_HF_TOKEN, TEST_WANDB_KEY, FakeCloud, live_members

PROJECT = "my-nemo-project"
CONTEXT = f"gke_{PROJECT}_us-central1_nemo-rl"
HEAD = "nemo-rl-head-abcde"
FAST = ["--set", "grpo.max_num_steps=4", "--set", "checkpointing.save_period=2", "--set", "grpo.val_period=2"]


# ---- set-up and helpers ------------------------------------------------------------------------------
def kubectl(fake: FakeCloud, *argv: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(FAKE_BIN / "kubectl"), f"--context={CONTEXT}", *argv], env=fake.process_env(),
                          capture_output=True, text=True, input=input, check=False)


def _pod(name: str, node_type: str, container: str, gpus: int) -> dict:
    spec = {"name": container, "resources": {"limits": {"nvidia.com/gpu": str(gpus)} if gpus else {}},
            "envFrom": [{"secretRef": {"name": "nemo-rl-secrets"}}],
            "env": [{"name": "HF_HOME", "value": "/data/huggingface"},
                    {"name": "NEMO_RL_VENV_DIR", "value": "/opt/ray_venvs"}, {"name": "NRL_CONTAINER", "value": "1"},
                    {"name": "UV_PROJECT_ENVIRONMENT", "value": "/opt/nemo_rl_venv"}]}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"ray.io/cluster": "nemo-rl", "ray.io/node-type": node_type}},
            "spec": {"containers": [spec]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def seed_cluster(fake: FakeCloud, *, workers: int = 2, head: bool = True) -> None:
    from fakecloud.core import State

    State(fake.state_dir).put("kubecontext", CONTEXT, {"name": CONTEXT, "autopilot": False,
                                                        "cluster": f"{PROJECT}/us-central1/nemo-rl"})
    objects = [{"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "nemo-rl-secrets", "namespace": "default"},
                "stringData": {"HF_TOKEN": TEST_HF_TOKEN, "WANDB_API_KEY": TEST_WANDB_KEY}}]
    objects += [_pod(HEAD, "head", "ray-head", 0)] if head else []
    objects += [_pod(f"nemo-rl-workers-worker-{i}", "worker", "ray-worker", 8) for i in range(workers)]
    done = kubectl(fake, "apply", "--filename=-", input="\n---\n".join(json.dumps(o) for o in objects))
    assert done.returncode == 0, done.stderr


def pod_root(fake: FakeCloud) -> Path:
    return fake.state_dir / "podfs" / CONTEXT


def kill_runs(fake: FakeCloud) -> None:
    """Stop whatever a test left running: only the launchers these tests started, by their process group."""
    for pid_file in (pod_root(fake) / "data" / "runs").glob("*/pid"):
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError, PermissionError):
            pass


def run_dir(fake: FakeCloud, run_id: str) -> Path:
    return pod_root(fake) / "data" / "runs" / run_id


def standin_calls(fake: FakeCloud) -> list[dict]:
    log = pod_root(fake) / "var" / "log" / "standin-argv.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def wait_for(check, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def state_of(fake: FakeCloud, run_id: str) -> str:
    done = fake.invoke("job.status", f"--id={run_id}")
    assert done.code == 0, done.output
    return done.stdout.splitlines()[0].split(": ", 1)[1]


def finished(fake: FakeCloud, run_id: str) -> bool:
    return (run_dir(fake, run_id) / "exit_code").exists()


@pytest.fixture
def cloud(fake):
    seed_cluster(fake)
    yield fake
    kill_runs(fake)


# ---- the issue's "done when" ---------------------------------------------------------------------------
def test_job_flow_dry_submit_prints_exec_and_the_script_without_secrets(cloud):
    before = len(cloud.calls())
    done = cloud.invoke("--dry", "job.submit", "gemma3-gsm8k")
    assert done.code == 0, done.output
    assert done.stdout.startswith(f"$ kubectl --context={CONTEXT} exec -i ")
    assert "-- bash <<'EOF'\n" in done.stdout and "set -euo pipefail" in done.stdout
    assert "git pull" not in done.stdout and "set -x" not in done.stdout
    assert TEST_HF_TOKEN not in done.output and TEST_WANDB_KEY not in done.output
    assert len(cloud.calls()) == before


@pytest.mark.parametrize("dry", [["--dry"], []], ids=["dry", "real"])
def test_job_flow_three_nodes_on_two_workers_refused_before_any_command(cloud, dry):
    before = len(cloud.calls())
    done = cloud.invoke(*dry, "job.submit", "gemma3-gsm8k", "--set", "cluster.num_nodes=3", GPU_NODES="2")
    assert done.code == 2
    assert "cluster.num_nodes=3 but the Ray cluster has GPU_NODES=2" in done.stderr
    assert len(cloud.calls()) == before and "$ " not in done.stdout


def test_job_flow_three_nodes_on_two_workers_the_refusals_fix_works_as_written(cloud):
    """The refusal's way to grow the cluster, followed to the letter, lets the job run. It used to say
    `GPU_NODES=3 invoke cluster.create ray.deploy`, which cluster.create refuses (the pool differs)."""
    refused = cloud.invoke("job.submit", "gemma3-gsm8k", "--set", "cluster.num_nodes=3", GPU_NODES="2")
    assert refused.code == 2 and "set GPU_NODES=3 in .env, then `invoke up --resize`" in refused.stderr
    grown = cloud.invoke("up", "--resize", "--yes", GPU_NODES="3")
    assert grown.code == 0, grown.output[-3000:]
    done = cloud.invoke("job.submit", "gemma3-gsm8k", "--set", "cluster.num_nodes=3", GPU_NODES="3")
    assert done.code == 0, done.output[-3000:]


def test_job_flow_job_outlives_its_client_then_stops(cloud, tmp_path):
    """submit --follow, kill the client mid-run: still running; job.stop: stopped; checkpoints, metrics, PNG."""
    argv = [sys.executable, "-m", "invoke", "--search-root", str(REPO), "job.submit", "gemma3-gsm8k",
            "--id=long", "--follow", "--set", "grpo.max_num_steps=400", "--set", "checkpointing.save_period=2",
            "--set", "grpo.val_period=2"]
    client = subprocess.Popen(argv, cwd=cloud.workdir, env=cloud.process_env(NRG_STANDIN_STEP_SECONDS="0.2"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    log = run_dir(cloud, "long") / "driver.log"
    wait_for(lambda: log.exists() and "Step 3/400" in log.read_text(), "step 3 in the driver log")
    os.killpg(client.pid, signal.SIGKILL)  # the laptop drops: invoke, kubectl exec and its shell all die
    client.wait()
    assert state_of(cloud, "long") == "running"
    seen = log.read_text().count("Total step time")
    wait_for(lambda: log.read_text().count("Total step time") > seen + 1, "steps after the client died")
    assert state_of(cloud, "long") == "running"

    stopped = cloud.invoke("job.stop", "--id=long")
    assert stopped.code == 0, stopped.output
    assert "is gone" in stopped.stdout
    assert state_of(cloud, "long") == "stopped"

    ckpts = cloud.invoke("job.checkpoints", "--id=long")
    assert ckpts.code == 0, ckpts.output
    kept = sorted(int(d.name[5:]) for d in (run_dir(cloud, "long") / "checkpoints").glob("step_*"))
    # the recipe's keep_top_k: 3, ranked by val:accuracy, the latest always kept; a stop that lands between a
    # save and its pruning leaves one more (as it would with NeMo RL)
    assert 0 < len(kept) <= 4, kept
    # val:accuracy from training_info.json (the stand-in's accuracy is 0.2 + 0.03 x step, at most 0.95: a slow
    # machine reaches step 25 before the stop)
    accuracy = f"{min(0.95, 0.2 + 0.03 * kept[-1]):.4f}"
    assert f"step_{kept[-1]}" in ckpts.stdout and accuracy in ckpts.stdout, (kept, ckpts.stdout)
    png = tmp_path / "long.png"
    metrics = cloud.invoke("job.metrics", "--id=long", f"--plot={png}")
    assert metrics.code == 0, metrics.output
    assert "avg reward" in metrics.stdout and png.read_bytes()[:4] == b"\x89PNG"


def test_job_flow_status_and_list_count_the_step_across_epochs_in_a_real_sized_log(cloud):
    """The real driver logs kilobytes per step (the stand-in about 0.5), so in epoch 2 the epoch's header is far
    behind the log's last 256 KiB: job.status and job.list said step 200/467 at the run's step 667/934."""
    run = run_dir(cloud, "gemma3-gsm8k-1")
    run.mkdir(parents=True)
    filler = ("▶ Generating responses for batch of size 512... " + "w" * 1400 + "\n")
    lines = []
    for epoch, steps in ((1, 467), (2, 200)):
        lines.append(f"\n{'=' * 25} Epoch {epoch}/2 {'=' * 25}\n")
        lines += [f"\n{'=' * 25} Step {n}/467 {'=' * 25}\n{filler}" for n in range(1, steps + 1)]
    (run / "driver.log").write_text("".join(lines))
    for name, text in (("job", "gemma3-gsm8k"), ("submitted", f"{time.time():.0f}"), ("pid", "999999"),
                       ("exit_code", "0")):
        (run / name).write_text(text + "\n")
    status = cloud.invoke("job.status", "--id=gemma3-gsm8k-1", process=True)  # the real `invoke` command
    assert status.code == 0, status.output[-3000:]
    assert "step: 667/934" in status.stdout, status.stdout
    listed = cloud.invoke("job.list", "--json")
    assert listed.code == 0, listed.output[-3000:]
    (row,) = [r for r in json.loads(listed.stdout)["runs"] if r["id"] == "gemma3-gsm8k-1"]
    assert (row["step"], row["max_steps"]) == (667, 934), row


def test_job_flow_stop_kills_the_whole_process_group(cloud):
    done = cloud.invoke("job.submit", "gemma3-gsm8k", "--id=grp", "--set", "grpo.max_num_steps=400",
                        NRG_STANDIN_STEP_SECONDS="0.2")
    assert done.code == 0, done.output
    wait_for(lambda: standin_calls(cloud), "the stand-in driver to start")
    driver = standin_calls(cloud)[-1]
    assert driver["pgid"] == driver["sid"] == int((run_dir(cloud, "grp") / "pid").read_text())
    assert live_members(driver["pgid"]) != []
    assert cloud.invoke("job.stop", "--id=grp").code == 0
    assert live_members(driver["pgid"]) == []


# ---- each state told apart ---------------------------------------------------------------------------
def test_job_flow_run_to_the_end_succeeds(cloud):
    assert cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=ok", *FAST).code == 0
    wait_for(lambda: finished(cloud, "ok"), "the run to finish")
    assert state_of(cloud, "ok") == "succeeded"


def test_job_flow_driver_failure_is_failed_with_its_exit_code(cloud):
    done = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=bad", *FAST, NRG_STANDIN_FAIL_AT_STEP="2")
    assert done.code == 0, done.output
    wait_for(lambda: finished(cloud, "bad"), "the run to fail")
    assert state_of(cloud, "bad") == "failed (exit code 1)"


def test_job_flow_driver_gone_without_exit_code_is_lost(cloud):
    done = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=gone", "--set", "grpo.max_num_steps=400",
                        NRG_STANDIN_STEP_SECONDS="0.2")
    assert done.code == 0, done.output
    pgid = int((run_dir(cloud, "gone") / "pid").read_text())
    os.killpg(pgid, signal.SIGKILL)  # the head pod restarted, say: nobody wrote an exit code
    wait_for(lambda: state_of(cloud, "gone") != "running", "the group to vanish", timeout=30)
    assert state_of(cloud, "gone") == "lost"


def test_job_flow_list_shows_every_run(cloud):
    for run_id in ("a1", "a2"):
        assert cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", f"--id={run_id}", *FAST).code == 0
    wait_for(lambda: finished(cloud, "a1") and finished(cloud, "a2"), "both runs")
    done = cloud.invoke("job.list")
    assert done.code == 0 and "a1" in done.stdout and "a2" in done.stdout and "succeeded" in done.stdout


# ---- overrides, secrets, data, resume --------------------------------------------------------------------
NASTY = ["+extra.quoted='it''s \"quoted\"'", "+extra.spaces=a b   c", "+extra.subst=$(touch /tmp/nrg-pwned)",
         "+extra.semi=x; rm -rf /", "+extra.tick=`id`", "++extra.all=$HOME ${PATH} \\n \\ ' \" ; | & > <"]


def test_job_flow_overrides_reach_the_driver_byte_for_byte(cloud):
    sets = [arg for text in NASTY for arg in ("--set", text)]
    done = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=nasty", *sets, *FAST)
    assert done.code == 0, done.output
    wait_for(lambda: standin_calls(cloud), "the stand-in driver")
    argv = standin_calls(cloud)[-1]["argv"]
    assert [a for a in argv if a.startswith(("+extra.", "++extra."))] == NASTY
    written = (run_dir(cloud, "nasty") / "overrides").read_text().splitlines()
    assert written[-len(NASTY) - 1:-1] == NASTY  # the last line is logger.wandb_enabled, decided in the pod
    assert not Path("/tmp/nrg-pwned").exists()


def test_job_flow_planted_secrets_appear_nowhere(cloud):
    outputs = [cloud.invoke("--dry", "job.submit", "gemma3-gsm8k").output,
               cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=sec", *FAST).output]
    wait_for(lambda: finished(cloud, "sec"), "the run to finish")
    for task in ("job.status", "job.logs", "job.checkpoints", "job.metrics", "job.list"):
        outputs.append(cloud.invoke(task).output)
    files = [p for p in run_dir(cloud, "sec").rglob("*") if p.is_file()]
    files += list((pod_root(cloud) / "var" / "log").glob("*")) + [cloud.state_dir / "calls.jsonl"]
    texts = outputs + [p.read_text(errors="replace") for p in files]
    leaks = [t[:80] for t in texts if TEST_HF_TOKEN in t or TEST_WANDB_KEY in t]
    assert (leaks, len(files) > 5) == ([], True)


def test_job_flow_driver_environment_is_small_but_has_the_secrets_names(cloud):
    assert cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=env", *FAST).code == 0
    wait_for(lambda: standin_calls(cloud), "the stand-in driver")
    names = set(standin_calls(cloud)[-1]["env_names"])
    assert {"HF_TOKEN", "WANDB_API_KEY", "HF_HOME", "RAY_ADDRESS"} <= names
    # What the image sets and NeMo RL needs (FACTS §7): NEMO_RL_VENV_DIR, NRL_CONTAINER, UV_PROJECT_ENVIRONMENT.
    assert {"NEMO_RL_VENV_DIR", "NRL_CONTAINER", "UV_PROJECT_ENVIRONMENT"} <= names
    assert not {n for n in names if n.startswith("KUBERNETES_") or "_SERVICE_" in n or n == "RAY_HEAD_PORT"}


def test_job_flow_wandb_follows_the_pod_secret(cloud):
    assert cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=wb", *FAST).code == 0
    wait_for(lambda: standin_calls(cloud), "the stand-in driver")
    assert standin_calls(cloud)[-1]["argv"][-1] == "logger.wandb_enabled=True"


def test_job_flow_gsm8k_prepared_once_with_final_answers(cloud):
    for run_id in ("d1", "d2"):
        assert cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", f"--id={run_id}", *FAST).code == 0
    rows = (pod_root(cloud) / "data" / "datasets" / "gsm8k" / "train.jsonl").read_text().splitlines()
    assert [json.loads(r)["answer"] for r in rows][:2] == ["96", "3550"]
    calls = (pod_root(cloud) / "var" / "log" / "datasets-calls.jsonl").read_text().splitlines()
    assert [json.loads(c) for c in calls] == [{"path": "openai/gsm8k", "name": "main", "split": "train"},
                                              {"path": "openai/gsm8k", "name": "main", "split": "test"}]
    wait_for(lambda: finished(cloud, "d1"), "the run")
    assert "Avg Reward: 0.0000" not in (run_dir(cloud, "d1") / "driver.log").read_text()


def test_job_flow_resubmit_same_id_resumes_and_extends(cloud):
    assert cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=res", *FAST).code == 0
    wait_for(lambda: finished(cloud, "res"), "the first attempt")
    again = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=res", *FAST, "--set", "grpo.max_num_steps=6")
    assert again.code == 0 and "resumed: yes" in again.stdout
    wait_for(lambda: finished(cloud, "res"), "the second attempt")
    first, second = standin_calls(cloud)
    ckpt = [a for a in first["argv"] if a.startswith("checkpointing.checkpoint_dir=")]
    assert ckpt == [a for a in second["argv"] if a.startswith("checkpointing.checkpoint_dir=")]
    log = (run_dir(cloud, "res") / "driver.log").read_text()
    # NeMo RL prints no "resuming" line: the second attempt simply starts at the restored step.
    assert log.count("Step 1/") == 1 and "Step 5/6" in log and "Loading checkpoint" not in log
    assert sorted(p.name for p in (run_dir(cloud, "res") / "checkpoints").iterdir()) == [
        "step_2", "step_4", "step_6"]


def test_job_flow_resubmit_while_running_is_refused(cloud):
    args = ("job.submit", "qwen2.5-1.5b-gsm8k", "--id=busy", "--set", "grpo.max_num_steps=400")
    assert cloud.invoke(*args, NRG_STANDIN_STEP_SECONDS="0.2").code == 0
    again = cloud.invoke(*args)
    assert again.code == 2 and "still running" in again.stderr


def test_job_flow_no_head_pod_is_a_clear_error(fake):
    seed_cluster(fake, head=False)
    done = fake.invoke("job.submit", "qwen2.5-1.5b-gsm8k")
    assert done.code == 1 and "no Ray head pod" in done.stderr and "invoke ray.deploy" in done.stderr


def test_job_flow_a_head_pod_on_its_way_out_is_said_so(fake):
    """A job task during a teardown (or `ray.delete`) found only a head being deleted, still Running, and said
    "the Ray head pod … is Running, not Running" (the README walkthrough met it 1 s into a `down`)."""
    seed_cluster(fake, head=False)
    dying = _pod(HEAD, "head", "ray-head", 0)
    dying["metadata"]["deletionTimestamp"] = "2026-12-03T21:00:00Z"
    assert kubectl(fake, "apply", "--filename=-", input=json.dumps(dying)).returncode == 0
    for args in (("job.submit", "qwen2.5-1.5b-gsm8k"), ("job.list",)):
        done = fake.invoke(*args)
        assert done.code == 1, done.output
        assert f"the Ray head pod {HEAD} is being deleted" in done.stderr, done.output
        assert "Running, not Running" not in done.stderr


def test_job_flow_checkpoints_show_what_was_exported_to_the_bucket(cloud):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    from support.gcs_emulator import running_emulator

    assert cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=exp", *FAST).code == 0
    wait_for(lambda: finished(cloud, "exp"), "the run to finish")
    with running_emulator() as emulator:
        client = storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": emulator.host})
        bucket = client.create_bucket("nemo-rl-my-nemo-project")
        bucket.blob("runs/exp/checkpoints/step_2/training_info.json").upload_from_string("{}")
        done = cloud.invoke("job.checkpoints", "--id=exp", STORAGE_EMULATOR_HOST=emulator.host)
    assert done.code == 0, done.output
    assert "gs://nemo-rl-my-nemo-project/runs/exp/" in done.stdout and "checkpoints step_2" in done.stdout


def test_job_tasks_never_pick_a_head_pod_on_its_way_out(fake):
    # After `ray.delete` then `ray.deploy`, the old pods are deleted but still Running for a while (helm's
    # uninstall does not wait for them), with the same labels: a job must go to the new head, and the dying
    # workers' GPUs must not count.
    seed_cluster(fake)
    dying = _pod("nemo-rl-head-00000", "head", "ray-head", 0)  # sorts first
    dying["metadata"]["deletionTimestamp"] = "2026-12-03T21:00:00Z"
    old_worker = _pod("nemo-rl-workers-worker-old", "worker", "ray-worker", 8)
    old_worker["metadata"]["deletionTimestamp"] = "2026-12-03T21:00:00Z"
    done = kubectl(fake, "apply", "--filename=-", input=json.dumps(dying) + "\n---\n" + json.dumps(old_worker))
    assert done.returncode == 0, done.stderr
    listed = fake.invoke("job.list")
    assert listed.code == 0, listed.output
    execs = [c["argv"] for c in fake.calls() if c["tool"] == "kubectl" and "exec" in c["argv"]]
    assert execs and all(HEAD in argv and "nemo-rl-head-00000" not in argv for argv in execs), execs
    status = fake.invoke("ray.status")
    assert status.code == 0, status.output
    assert "nemo-rl-head-00000" not in status.stdout and "worker-old" not in status.stdout, status.stdout


def _ray_queries(fake: FakeCloud, since: int = 0) -> list[list[str]]:
    return [c["argv"] for c in fake.calls()[since:] if c["tool"] == "kubectl" and "exec" in c["argv"]
            and "python" in c["argv"]]


def test_job_readers_ask_the_head_pod_without_starting_a_ray_client(cloud):
    # job.list, status, logs and stop read or signal files on /data: an `import ray; ray.init()` in the head
    # (the GPU count a submit checks) costs each of them seconds on a real cluster, for nothing.
    assert cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=quiet", NRG_STANDIN_STEP_SECONDS="0.2").code == 0
    assert len(_ray_queries(cloud)) == 1  # the submit's GPU check
    seen = len(cloud.calls())
    for args in (("job.list",), ("job.status", "--id=quiet"), ("job.logs", "--id=quiet", "--lines=5"),
                 ("job.checkpoints", "--id=quiet"), ("job.stop", "--id=quiet", "--grace=0")):
        done = cloud.invoke(*args)
        assert done.code == 0, (args, done.output)
    execs = [c for c in cloud.calls()[seen:] if c["tool"] == "kubectl" and "exec" in c["argv"]]
    assert len(execs) == 5 and _ray_queries(cloud, seen) == []


def test_job_submit_refuses_a_head_that_is_running_but_not_ready(fake):
    # KubeRay's readiness probe asks Ray in the head: Running but not Ready means Ray is starting or unhealthy. A
    # submit there would start a driver that cannot reach Ray; the dashboard has nothing to show. Readers still
    # read /data.
    seed_cluster(fake)
    starting = _pod(HEAD, "head", "ray-head", 0)
    starting["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    assert kubectl(fake, "apply", "--filename=-", input=json.dumps(starting)).returncode == 0
    seen = len(fake.calls())
    done = fake.invoke("job.submit", "qwen2.5-1.5b-gsm8k")
    assert done.code == 1, done.output
    assert f"the Ray head pod {HEAD} is Running but not Ready" in done.stderr and "invoke ray.status" in done.stderr
    assert [c for c in fake.calls()[seen:] if c["tool"] == "kubectl" and "exec" in c["argv"]] == []
    dashboard = fake.invoke("ray.dashboard", "--port=18265")
    assert dashboard.code == 1 and "Running but not Ready" in dashboard.stderr, dashboard.output
    listed = fake.invoke("job.list")
    assert listed.code == 0, listed.output


@pytest.mark.parametrize("args", [("job.status", "--id=nosuchrun"), ("job.checkpoints", "--id=nosuchrun"),
                                  ("job.stop", "--id=nosuchrun")])
def test_job_no_such_run_says_so_in_our_words_only(cloud, args):
    # kubectl ends a remote command's failure with its own line, "command terminated with exit code 3": the
    # reader's "no such run" is the answer, not that line.
    done = cloud.invoke(*args)
    assert done.code == 1, done.output
    assert "nosuchrun" in done.stderr and "command terminated" not in done.stderr, done.stderr


@pytest.mark.parametrize(("script", "code"), [("exit 4", 4), ("kill -KILL $$", 137), ("true", 0)])
def test_fake_exec_ends_as_kubectl_does(fake, script, code):
    # kubectl exits with the remote command's code and adds "command terminated with exit code N"; a command a
    # signal ended reports 128 + the signal (the container runtime's way), not Python's negative code.
    seed_cluster(fake)
    done = kubectl(fake, "exec", "-i", HEAD, "--container=ray-head", "--", "bash", input=script + "\n")
    assert done.returncode == code, done.stderr
    said = done.stderr.strip().splitlines()
    assert (said[-1:] == [f"command terminated with exit code {code}"]) if code else said == [], done.stderr


def test_job_submit_whose_stream_dropped_is_not_sent_twice_and_says_how_to_check(cloud):
    # kubectl exec's stream cut after the script started: the script goes on in the pod and starts the run. The
    # runner took the cut for transient and sent the script again, which found its own run "still running" (exit 2,
    # or, sent while the first was still preparing, raced it for the same run directory).
    done = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=dropped", *FAST, process=True,
                        FAKECLOUD_FAIL="-- bash:1:dropped")
    assert done.code == 1 and "connection reset by peer" in done.stderr, done.output[-2000:]
    assert "`invoke job.status --id=dropped` says whether it did" in done.stderr and "still running" not in done.stderr
    execs = [c for c in cloud.calls() if "exec" in c["argv"] and c["argv"][-1:] == ["bash"]]
    assert len(execs) == 1, [c["argv"] for c in execs]
    wait_for(lambda: (run_dir(cloud, "dropped") / "pid").exists(), "the run the script started anyway")


@pytest.mark.parametrize("said", [
    "error: cannot exec into a container in a completed pod; current phase is Failed",  # the head ended meanwhile
    "Error from server (BadRequest): container ray-head is not valid for pod nemo-rl-head-x",  # kubectl <= 1.35
    "error: container ray-head is not valid for pod nemo-rl-head-x out of: ray-head-2",  # kubectl 1.36 checks first
    "The connection to the server 34.1.2.3:443 was refused - did you specify the right host or port?",
])
def test_job_submit_knows_kubectls_refusals_before_any_stream(said):
    # kubectl's words (pkg/cmd/exec, client-go) for an exec that never reached the pod: no "may start anyway".
    from nemo_rl_gke.tasks import job

    assert job._before_any_stream().search(said)


def test_job_submit_that_kubectl_refused_before_any_stream_says_nothing_may_start(cloud):
    # Forbidden (or no such pod): the script never reached the pod, so no "may start anyway".
    done = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=refused", *FAST,
                        FAKECLOUD_FAIL="-- bash:1:permanent")
    assert done.code == 1 and "injected permanent failure" in done.stderr, done.output[-2000:]
    assert "may start anyway" not in done.stderr and not run_dir(cloud, "refused").exists()
