"""Model prefetch on the fake cloud, through invoke: `up` starts one Job per model of PREFETCH_MODELS as soon as the
Lustre claim exists; the Job fills the HF cache on Lustre (after FACTS §6's download time × FAKECLOUD_TIME_SCALE);
`job.submit` waits for a download still running, says so when it failed, and the NeMo RL stand-in downloads only
what the cache lacks; `down` and `clean.storage` delete the Jobs; a dry run prints the apply."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakecloud import hf_cache
from fakecloud.core import State
from nemo_rl_gke import prefetch
from support.fake import FAKE_BIN, Done, FakeCloud

GEMMA, QWEN = "google/gemma-3-27b-it", "Qwen/Qwen2.5-1.5B"
CONTEXT = "gke_my-nemo-project_us-central1_nemo-rl"
FAST = ["--set", "grpo.max_num_steps=2", "--set", "checkpointing.save_period=2", "--set", "grpo.val_period=2"]


@pytest.fixture
def cloud(fake: FakeCloud, tmp_path: Path) -> Iterator[FakeCloud]:
    """The fake cloud with a GCS emulator owned by the fake project's number (the bucket step uses the client)."""
    from fakecloud.handlers.gcloud_projects import project_number
    from support.gcs_emulator import running_emulator

    with running_emulator(project_number("my-nemo-project")) as emulator:
        fake.env["STORAGE_EMULATOR_HOST"] = emulator.host
        fake.env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
        yield fake


def ok(done: Done, what: str = "") -> Done:
    assert done.code == 0, f"{what}\n{done.output}"
    return done


def jobs(fake: FakeCloud) -> dict[str, dict[str, Any]]:
    """The Jobs in the fake cluster, by name (with the fake's private timing keys)."""
    items = State(fake.state_dir).items(f"k8s:{CONTEXT}")
    return {key.split("/", 2)[2]: obj for key, obj in items.items() if key.startswith("Job/")}


def kubectl(fake: FakeCloud, *argv: str) -> str:
    done = subprocess.run([str(FAKE_BIN / "kubectl"), f"--context={CONTEXT}", *argv], env=fake.process_env(),
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def cache(fake: FakeCloud) -> Path:
    return Path(fake.state_dir) / "lustre" / "nemo-lustre" / "huggingface"


def downloads(fake: FakeCloud) -> list[dict[str, Any]]:
    """What the stand-in driver had to fetch itself (its own record)."""
    log = fake.state_dir / "podfs" / CONTEXT / "var" / "log" / "standin-downloads.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def submit_and_finish(fake: FakeCloud, job: str, run_id: str, *, process: bool = False, **env: str) -> Done:
    done = ok(fake.invoke("job.submit", job, f"--id={run_id}", *FAST, process=process, **env), "job.submit")
    log = fake.state_dir / "podfs" / CONTEXT / "data" / "runs" / run_id
    deadline = time.monotonic() + 90
    while not (log / "exit_code").exists():
        assert time.monotonic() < deadline, f"run {run_id} did not finish"
        time.sleep(0.05)
    assert (log / "exit_code").read_text().strip() == "0", (log / "driver.log").read_text()
    assert "Step 1/" in (log / "driver.log").read_text()
    return done


def test_prefetch_flow_up_runs_the_job_and_the_driver_does_not_download_again(cloud: FakeCloud) -> None:
    fake = cloud
    done = ok(fake.invoke("up", "--yes"), "up")
    assert f"model prefetch {GEMMA}" in done.stderr and "model download started in the cluster" in done.stderr
    (name, job), = jobs(fake).items()
    assert name == prefetch.job_name(GEMMA) and job["metadata"]["annotations"][prefetch.MODEL_ANNOTATION] == GEMMA
    listed = kubectl(fake, "get", "jobs", "--namespace=default", f"--selector={prefetch.SELECTOR}", "--output=json")
    assert {m: st.state for m, st in prefetch.job_states(listed).items()} == {GEMMA: "complete"}
    assert hf_cache.cached(cache(fake), GEMMA)  # the Job ran (time scale 0: at once) into Lustre's HF cache

    done = submit_and_finish(fake, "gemma3-gsm8k", "warm")
    assert "prefetch" not in done.stderr  # complete: nothing to wait for, nothing to say
    assert downloads(fake) == []  # the driver found the model in the cache

    calls = fake.calls()
    start = len(calls)
    ok(fake.invoke("down", "--yes"), "down")
    argvs = [" ".join(c["argv"]) for c in fake.calls()[start:]]
    deleted = next(i for i, a in enumerate(argvs) if a.startswith(f"--context={CONTEXT} delete jobs "))
    assert f"--selector={prefetch.SELECTOR}" in argvs[deleted]
    assert deleted < next(i for i, a in enumerate(argvs) if "persistentvolumeclaim lustre-pvc" in a
                          and " delete " in f" {a} ")
    assert jobs(fake) == {}


def test_prefetch_flow_submit_reads_the_head_and_the_prefetch_job_at_once(cloud: FakeCloud) -> None:
    # job.submit asked for the prefetch Job only after the head pod and Ray's GPUs: a third round of reads
    # before the submission. It is read beside them now.
    import sys

    from support.fake import REPO

    sys.path.insert(0, str(REPO / "benchmarks"))
    from rounds import call_rounds

    fake = cloud
    ok(fake.invoke("up", "--yes"), "up")
    start = len(fake.calls())
    submit_and_finish(fake, "gemma3-gsm8k", "at-once", process=True, FAKECLOUD_TIME_SCALE="1")
    calls = fake.calls()[start:]
    words = [" ".join([c["tool"], *c["argv"]]) for c in calls]
    sent = next(c for c, w in zip(calls, words, strict=True) if " exec -i " in w and w.endswith(" -- bash"))
    ahead = [(c, w) for c, w in zip(calls, words, strict=True) if c["end"] <= sent["launched"]]
    assert any(" get jobs " in w for _, w in ahead) and any(" get pods " in w for _, w in ahead), words
    assert call_rounds([c for c, _ in ahead]) == 2, [(w[:80], c["launched"], c["end"]) for c, w in ahead]


def test_prefetch_flow_submit_waits_for_a_prefetch_still_running(cloud: FakeCloud) -> None:
    fake = cloud
    ok(fake.invoke("up", "--yes", PREFETCH_MODELS=""), "up without prefetch")
    assert jobs(fake) == {}
    # Everything else exists: this `up` only starts the download, which takes 480 s × 0.01 in the fake.
    began = time.monotonic()
    again = ok(fake.invoke("up", "--yes", FAKECLOUD_TIME_SCALE="0.01"), "up with prefetch")
    assert "will create 1 of" in again.stderr
    job = jobs(fake)[prefetch.job_name(GEMMA)]
    assert job["_done_at"] - job["_started"] == pytest.approx(4.8, abs=0.1)
    assert time.monotonic() - began < 4.8 and not hf_cache.cached(cache(fake), GEMMA)  # up did not wait

    done = submit_and_finish(fake, "gemma3-gsm8k", "waited", FAKECLOUD_TIME_SCALE="0.01")
    assert f"{GEMMA} is still being downloaded by the prefetch Job {prefetch.job_name(GEMMA)}" in done.stderr
    assert f"✓ model prefetch {GEMMA} (Job {prefetch.job_name(GEMMA)})" in done.stderr
    assert time.time() >= job["_done_at"]
    assert downloads(fake) == []  # submitted after the download: the driver never raced it


def test_prefetch_flow_failed_prefetch_is_said_the_driver_downloads_and_up_retries(cloud: FakeCloud) -> None:
    fake = cloud
    env = {"PREFETCH_MODELS": QWEN}
    ok(fake.invoke("up", "--yes", FAKECLOUD_HF_NO_ACCESS=QWEN, **env), "up")
    (failed,) = jobs(fake).values()
    assert failed["_outcome"] == "Failed" and not hf_cache.cached(cache(fake), QWEN)

    done = submit_and_finish(fake, "qwen2.5-1.5b-gsm8k", "own-download", **env)
    assert (f"warning: the prefetch of {QWEN} failed (BackoffLimitExceeded: Job has reached the specified backoff "
            "limit); the driver downloads it itself") in done.stderr
    assert [(d["model"], d["waited_for_prefetch"]) for d in downloads(fake)] == [(QWEN, False)]

    retried = ok(fake.invoke("up", "--yes", **env), "up again")
    assert f"the earlier download of {QWEN} failed" in retried.stderr
    (again,) = jobs(fake).values()
    assert again["_outcome"] == "Complete" and again["_created"] > failed["_created"]

    ok(fake.invoke("clean.ray", "--yes", **env), "clean.ray")  # the Ray pods mount the claim clean.storage deletes
    ok(fake.invoke("clean.storage", "--yes", **env), "clean.storage")
    assert jobs(fake) == {} and State(fake.state_dir).get("kubecontext", CONTEXT) is not None


def test_prefetch_flow_without_prefetch_the_driver_pays_the_download(cloud: FakeCloud) -> None:
    fake = cloud
    env = {"PREFETCH_MODELS": "", "FAKECLOUD_TIME_SCALE": "0.01"}
    ok(fake.invoke("up", "--yes", PREFETCH_MODELS=""), "up")
    submit_and_finish(fake, "qwen2.5-1.5b-gsm8k", "cold", **env)
    (download,) = downloads(fake)
    assert download["model"] == QWEN and not download["waited_for_prefetch"]
    assert download["seconds"] >= 30 * 0.01  # FACTS §6: Qwen2.5-1.5B in 30 s, at the test's time scale
    submit_and_finish(fake, "qwen2.5-1.5b-gsm8k", "warm", **env)
    assert len(downloads(fake)) == 1  # the second run finds it in the cache the first one filled


def test_prefetch_flow_dry_up_prints_the_apply_after_the_claim_and_dry_down_the_delete(fake: FakeCloud) -> None:
    up = ok(fake.invoke("--dry", "up")).stdout.splitlines()
    title = next(i for i, line in enumerate(up) if line.startswith(f"# model prefetch {GEMMA} -> /data/huggingface"))
    assert up[title + 1] == (f"$ kubectl --context={CONTEXT} apply --filename=-  # stdin: manifests/"
                             f"model-prefetch-job.yaml rendered (1 Job(s): {GEMMA})")
    assert up.index("# PersistentVolumeClaim default/lustre-pvc") < title < next(
        i for i, line in enumerate(up) if line.startswith("# Ray cluster"))

    down = ok(fake.invoke("--dry", "down", "--yes")).stdout.splitlines()
    delete = down.index(f"$ kubectl --context={CONTEXT} delete jobs --selector={prefetch.SELECTOR} "
                        f"--namespace=default --ignore-not-found --timeout=10m")
    assert delete < next(i for i, line in enumerate(down) if "delete persistentvolumeclaim lustre-pvc" in line)

    none = ok(fake.invoke("--dry", "up", PREFETCH_MODELS="")).stdout
    assert "model-prefetch-job.yaml" not in none and " delete jobs " not in none
    assert fake.calls() == []


def test_prefetch_flow_down_after_prefetch_models_is_emptied_deletes_the_earlier_jobs(cloud: FakeCloud) -> None:
    """An `up` started a prefetch Job; PREFETCH_MODELS emptied since. Its ended pod still mounts the Lustre claim
    (Kubernetes keeps a claim while any pod placed on a node mounts it, whatever its phase), and with no prefetch
    step the teardown neither deleted the Job nor let the claim go: it told the user to delete a Job nemo-rl-gke
    made. The step stays with no models, for the teardowns. Through the real `invoke` command."""
    fake = cloud
    ok(fake.invoke("up", "--yes"), "up")
    (name,) = jobs(fake)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"{name}-x7k2p", "namespace": "default",
                        "labels": {**dict(kv.split("=") for kv in prefetch.SELECTOR.split(",")),
                                   "batch.kubernetes.io/job-name": name, "job-name": name}},
           "spec": {"nodeName": "gke-nemo-rl-default-pool-1", "volumes": [
               {"name": "data", "persistentVolumeClaim": {"claimName": "lustre-pvc"}}]},
           "status": {"phase": "Succeeded"}}
    state = State(fake.state_dir)
    with state.locked():
        state.put(f"k8s:{CONTEXT}", f"Pod/default/{name}-x7k2p", pod)
    fake.write_env(PREFETCH_MODELS="")
    up = ok(fake.invoke("up", "--yes"), "up without prefetch")  # nothing to start, nothing asked of the Jobs
    assert "model-prefetch-job.yaml" not in up.output
    down = fake.invoke("down", "--yes", process=True)
    assert down.code == 0, down.output[-3000:]
    assert "in use by" not in down.stderr and jobs(fake) == {}
    assert not any(k.startswith(("PersistentVolumeClaim/", "Pod/")) for k in State(fake.state_dir).items(
        f"k8s:{CONTEXT}"))


def test_prefetch_flow_bad_setting_exits_2_before_any_call(fake: FakeCloud) -> None:
    done = fake.invoke("--dry", "up", PREFETCH_MODELS="gemma-3-27b-it")
    assert done.code == 2
    assert "PREFETCH_MODELS='gemma-3-27b-it' is not valid" in done.stderr and "owner/name" in done.stderr
    assert "Traceback" not in done.output and fake.calls() == []
