"""scripts/supervisor.py: which driver failures are the infrastructure's (resumed) and which the job's own (not
retried), the step a restart resumes from, the backoff. The messages are Ray 2.49.2's and NeMo RL v0.5.0's."""

from __future__ import annotations

import importlib.util

import pytest

from nemo_rl_gke import jobscript

_spec = importlib.util.spec_from_file_location("nrg_supervisor", jobscript.SCRIPTS / "supervisor.py")
supervisor = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(supervisor)

NODE_DIED = """\
ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.
\tclass_name: DTensorPolicyWorkerV2
\tactor_id: 5e1c0c2b8f
The actor died because its node has died. Node Id: 0a1b2c
\tthe actor's node was terminated unexpectedly: health check failed due to missing too many heartbeats
"""
HEARTBEATS = ("(raylet) The node with node id: 0a1b and address: 10.52.3.7 and node name: 10.52.3.7 has been "
              "marked dead because the detector has missed too many heartbeats from it.")
SIGTERM = "\tthe actor's node was terminated expectedly: received SIGTERM"
CUDA_OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity"
USER = ("ray.exceptions.RayTaskError(ValueError): ray::DTensorPolicyWorkerV2.train() (pid=1, ip=10.0.0.1)\n"
        "ValueError: Expected input batch_size (64) to match target batch_size (0).")
HYDRA = ("nemo_rl.utils.config.OverridesError: Failed to parse Hydra overrides: Could not override 'grpo.foo'.")
NCCL = ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE) ran for "
        "600012 milliseconds before timing out.")


@pytest.mark.parametrize("tail", [NODE_DIED, HEARTBEATS, SIGTERM], ids=["actor-died", "heartbeats", "sigterm"])
def test_supervisor_node_loss_lines_are_infrastructure(tail):
    assert supervisor.classify(1, tail, 16.0, 16)[0] == "infrastructure"


def test_supervisor_fewer_gpus_than_needed_is_infrastructure_whatever_the_log():
    kind, reason = supervisor.classify(1, "KeyError: 'x'", 8.0, 16)
    assert kind == "infrastructure" and "Ray sees 8 of the 16 GPUs" in reason


@pytest.mark.parametrize(("tail", "what"), [(CUDA_OOM, "out of GPU memory"), (USER, "exception in the job's code"),
                                            (HYDRA, "config override")], ids=["oom", "user", "hydra"])
def test_supervisor_the_jobs_own_errors_are_not_infrastructure(tail, what):
    kind, reason = supervisor.classify(1, tail, 16.0, 16)
    assert kind == "job" and what in reason


def test_supervisor_nccl_timeout_alone_is_the_jobs_when_every_gpu_is_there():
    assert supervisor.classify(1, NCCL, 16.0, 16)[0] == "job"
    assert supervisor.classify(1, NCCL, None, 16)[0] == "infrastructure"


def test_supervisor_exit_without_a_message_is_the_jobs_with_the_code():
    assert supervisor.classify(137, "", 16.0, 16) == ("job", "the driver exited with code 137")


def test_supervisor_resumes_from_the_highest_step_dir_only(tmp_path):
    for name in ("step_2", "step_10", "tmp_step_12", "old_step_11", "step_x"):
        (tmp_path / name).mkdir()
    assert supervisor.latest_step(str(tmp_path)) == 10
    assert supervisor.latest_step(str(tmp_path / "none")) is None


def test_supervisor_backoff_doubles_up_to_the_cap():
    assert [supervisor.backoff(n, 30, 300) for n in range(5)] == [30, 60, 120, 240, 300]


def test_supervisor_a_node_lost_and_back_before_the_driver_gave_up_is_infrastructure():
    kind, reason = supervisor.classify(1, NCCL, 16.0, 16, shortfall_during=8.0)
    assert kind == "infrastructure" and "Ray showed 8 of the 16 GPUs" in reason
