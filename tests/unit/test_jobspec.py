"""jobspec: job files load, Hydra overrides are checked for form, NeMo RL v0.5.0's rules each refuse with
their own message naming the numbers, and the tutorial's job passes."""

from __future__ import annotations

import pytest

from nemo_rl_gke import jobspec
from nemo_rl_gke.settings import ConfigError

B200 = {"gpu_nodes": 2, "gpus_per_node": 8, "gpu_name": "nvidia-b200"}


def problems(name: str, *extra: str, **cluster) -> list[str]:
    spec = jobspec.load(name)
    overrides = jobspec.final_overrides(spec, "run-1", list(extra))
    try:
        jobspec.validate(spec, overrides, **{**B200, **cluster})
    except jobspec.JobError as exc:
        return exc.problems
    return []


@pytest.mark.parametrize("name", ["gemma3-gsm8k", "qwen2.5-1.5b-gsm8k"])
def test_jobspec_shipped_jobs_pass(name):
    assert problems(name) == []


def test_jobspec_tutorial_job_has_the_tutorial_topology():
    values = jobspec.effective(jobspec.final_overrides(jobspec.load("gemma3-gsm8k"), "r"))
    wanted = {
        "cluster.num_nodes": "2",
        "cluster.gpus_per_node": "8",
        "policy.generation.colocated.enabled": "False",
        "policy.generation.colocated.resources.num_nodes": "1",
        "policy.generation.colocated.resources.gpus_per_node": "8",
        "policy.generation.vllm_cfg.tensor_parallel_size": "8",
        "policy.dtensor_cfg.tensor_parallel_size": "8",
        "grpo.num_prompts_per_step": "16",
        "grpo.num_generations_per_prompt": "64",
        "grpo.max_num_steps": "300",
    }
    assert {k: values[k] for k in wanted} == wanted


def test_jobspec_unknown_job_names_the_known_ones():
    with pytest.raises(ConfigError, match="gemma3-gsm8k"):
        jobspec.load("no-such-job")


def test_jobspec_job_file_with_unknown_field_is_refused(tmp_path):
    (tmp_path / "x.yaml").write_text((jobspec.JOBS_DIR / "gemma3-gsm8k.yaml").read_text() + "colour: red\n")
    with pytest.raises(ConfigError, match="colour"):
        jobspec.load("x", tmp_path)


# ---- one failing case per rule, each with its message --------------------------------------------------
RULES = [
    # (job, overrides, a fragment that names the numbers)
    ("gemma3-gsm8k", ["policy.generation.colocated.resources.num_nodes=0"],
     "policy.generation.colocated.resources.num_nodes=0: with policy.generation.colocated.enabled=False and "
     "cluster.num_nodes=2, vLLM needs at least 1 node"),
    ("gemma3-gsm8k", ["policy.generation.colocated.resources.gpus_per_node=4"],
     "policy.generation.colocated.resources.gpus_per_node=4 must equal cluster.gpus_per_node=8"),
    ("gemma3-gsm8k", ["policy.generation.colocated.resources.num_nodes=2"],
     "cluster.num_nodes=2 minus 2 inference node(s) leaves 0 node(s) to train on"),
    ("gemma3-gsm8k", ["cluster.num_nodes=1", "policy.generation.colocated.resources.gpus_per_node=8"],
     "policy.generation.colocated.resources.gpus_per_node=8: on one node vLLM needs between 1 and 7 of the "
     "cluster.gpus_per_node=8 GPUs"),
    ("gemma3-gsm8k", ["policy.generation.vllm_cfg.pipeline_parallel_size=3"],
     "vLLM runs on 1 node(s) x 8 GPUs = 8 GPUs, not divisible by "
     "policy.generation.vllm_cfg.tensor_parallel_size=8 x policy.generation.vllm_cfg.pipeline_parallel_size=3 = 24"),
    ("gemma3-gsm8k", ["policy.dtensor_cfg.tensor_parallel_size=16"],
     "the policy trains on 1 node(s) x 8 GPUs = 8 GPUs, not divisible by "
     "policy.dtensor_cfg.tensor_parallel_size=16"),
    ("gemma3-gsm8k", ["policy.dtensor_cfg.tensor_parallel_size=32", "cluster.num_nodes=5",
                      "policy.generation.colocated.resources.num_nodes=1"],
     "policy.dtensor_cfg.tensor_parallel_size=32 must divide google/gemma-3-27b-it's 32 attention heads and "
     "16 KV heads; use one of 1, 2, 4, 8, 16"),
    ("gemma3-gsm8k", ["++policy.dtensor_cfg.context_parallel_size=2"],
     "policy.dtensor_cfg.context_parallel_size=2: google/gemma-3-27b-it has no context parallelism"),
    ("gemma3-gsm8k", ["grpo.num_generations_per_prompt=16"],
     "grpo.num_prompts_per_step=16 x grpo.num_generations_per_prompt=16 = 256 samples per step is not a "
     "multiple of policy.train_global_batch_size=512: no optimizer step would ever happen"),
    ("gemma3-gsm8k", ["cluster.num_nodes=3"],
     "cluster.num_nodes=3 but the Ray cluster has GPU_NODES=2 GPU worker(s)"),
    ("gemma3-gsm8k", ["cluster.gpus_per_node=16"],
     "cluster.gpus_per_node=16 but a nvidia-b200 node has 8 GPUs"),
    ("gemma3-gsm8k", ["grpo.max_num_steps=many"], "grpo.max_num_steps=many must be a whole number >= 1"),
]


@pytest.mark.parametrize(("job", "extra", "message"), RULES, ids=[r[2][:48] for r in RULES])
def test_jobspec_rule_refuses_with_its_message(job, extra, message):
    found = problems(job, *extra)
    assert any(message in p for p in found), found


def test_jobspec_ray_reporting_fewer_gpus_refuses():
    found = problems("gemma3-gsm8k", ray_gpus=8)
    assert found == ["the job needs cluster.num_nodes=2 x cluster.gpus_per_node=8 = 16 GPUs but Ray's ready "
                     "workers have 8: NeMo RL's placement groups would time out. Check `invoke ray.status`."]


def test_jobspec_error_lists_every_broken_rule_and_exits_2_as_config_error():
    spec = jobspec.load("gemma3-gsm8k")
    broken = ["cluster.num_nodes=3", "grpo.num_generations_per_prompt=60"]
    overrides = jobspec.final_overrides(spec, "r", broken)
    with pytest.raises(ConfigError) as caught:
        jobspec.validate(spec, overrides, **B200)
    assert len(caught.value.problems) == 2  # type: ignore[attr-defined]


# ---- overrides -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["a.b=1", "+a.b=x y", "++a.b=", "a.b='q \"x\" $(id); `id`'", "a/b@pkg=v"])
def test_jobspec_override_forms_accepted(text):
    assert jobspec.parse_override(text).text == text


@pytest.mark.parametrize("text", ["a.b", "+++a=1", "~a.b", "=1", "a b=1", "a.b=1\nc=2", "-a=1"])
def test_jobspec_override_bad_form_is_config_error(text):
    with pytest.raises(ConfigError, match="--set"):
        jobspec.parse_override(text)


def test_jobspec_set_replaces_the_same_key_in_place_verbatim():
    spec = jobspec.load("gemma3-gsm8k")
    base = jobspec.final_overrides(spec, "r")
    changed = jobspec.final_overrides(spec, "r", ["++grpo.max_num_steps=400"])
    index = base.index("grpo.max_num_steps=300")
    assert changed[index] == "++grpo.max_num_steps=400" and len(changed) == len(base)


def test_jobspec_set_new_key_is_appended_last():
    spec = jobspec.load("gemma3-gsm8k")
    assert jobspec.final_overrides(spec, "r", ["+x.y=1"])[-1] == "+x.y=1"


def test_jobspec_overrides_point_data_at_prepared_gsm8k_and_state_at_the_run_dir():
    overrides = jobspec.final_overrides(jobspec.load("gemma3-gsm8k"), "run-7")
    assert "+data.train_data_path=/data/datasets/gsm8k/train.jsonl" in overrides
    assert "+data.val_data_path=/data/datasets/gsm8k/test.jsonl" in overrides
    assert "checkpointing.checkpoint_dir=/data/runs/run-7/checkpoints" in overrides
    assert "logger.log_dir=/data/runs/run-7/logs" in overrides
    assert not any("subset" in o or "split" in o for o in overrides)


@pytest.mark.parametrize("run_id", ["", "Upper", "a/b", "-x", "x" * 64])
def test_jobspec_bad_run_id_is_config_error(run_id):
    with pytest.raises(ConfigError, match="--id"):
        jobspec.check_run_id(run_id)
