"""jobspec: job files load, Hydra overrides are checked for form, NeMo RL v0.5.0's rules each refuse with
their own message naming the numbers, and the tutorial's job passes."""

from __future__ import annotations

import pytest

from nemo_rl_gke import jobrules, jobspec, overrides
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
    values = overrides.effective(jobspec.final_overrides(jobspec.load("gemma3-gsm8k"), "r"))
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
    assert overrides.parse_override(text).text == text


@pytest.mark.parametrize("text", ["a.b", "+++a=1", "~a.b", "=1", "a b=1", "a.b=1\nc=2", "-a=1"])
def test_jobspec_override_bad_form_is_config_error(text):
    with pytest.raises(ConfigError, match="--set"):
        overrides.parse_override(text)


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


# ---- issue 13: steps and epochs, config keys, gated models --------------------------------------------------
def test_jobspec_steps_beyond_the_epochs_are_refused_with_the_arithmetic():
    found = problems("gemma3-gsm8k", "grpo.max_num_steps=500")
    assert found == [next(p for p in found if "max_num_steps=500" in p)]
    assert "floor(7473 gsm8k train rows / grpo.num_prompts_per_step=16) = 1 x 467 = 467 steps" in found[0]
    assert "--set grpo.max_num_epochs=2" in found[0]


def test_jobspec_more_epochs_allow_more_steps():
    assert problems("gemma3-gsm8k", "grpo.max_num_steps=500", "grpo.max_num_epochs=2") == []
    assert problems("gemma3-gsm8k", "grpo.max_num_steps=935", "grpo.max_num_epochs=2") != []


def test_jobspec_epochs_field_becomes_max_num_epochs(tmp_path):
    raw = (jobspec.JOBS_DIR / "qwen2.5-1.5b-gsm8k.yaml").read_text().replace("epochs: 1", "epochs: 3")
    (tmp_path / "q.yaml").write_text(raw)
    spec = jobspec.load("q", tmp_path)
    assert spec.epochs == 3 and "grpo.max_num_epochs=3" in jobspec.final_overrides(spec, "r")


def test_jobspec_dtensor_pipeline_parallel_key_is_refused_as_unknown():
    found = problems("gemma3-gsm8k", "policy.dtensor_cfg.pipeline_parallel_size=1")
    assert len(found) == 1 and "has no key policy.dtensor_cfg.pipeline_parallel_size" in found[0]


def test_jobspec_unknown_key_names_the_closest_ones():
    found = problems("qwen2.5-1.5b-gsm8k", "grpo.max_num_step=3")
    assert len(found) == 1 and "Did you mean grpo.max_num_steps" in found[0]


def test_jobspec_plus_on_an_existing_key_is_refused():
    found = problems("qwen2.5-1.5b-gsm8k", "+grpo.val_period=3")
    assert len(found) == 1 and "Could not append to config" in found[0]


def test_jobspec_plus_plus_and_new_plus_keys_pass():
    assert problems("qwen2.5-1.5b-gsm8k", "++grpo.val_period=3", "+extra.thing=1") == []


def test_jobspec_gemma_job_fits_tp8_and_its_tokenizer_follows_the_model():
    spec = jobspec.load("gemma3-gsm8k")
    assert "8n8g-fsdp2tp8" in spec.recipe and spec.gated
    assert jobrules.recipe_default(spec.recipe, "policy.make_sequence_length_divisible_by") == "8"
    overrides = jobspec.final_overrides(spec, "r")
    assert f"policy.tokenizer.name={spec.model_name}" in overrides
    assert "policy.make_sequence_length_divisible_by=${policy.dtensor_cfg.tensor_parallel_size}" in overrides


@pytest.mark.parametrize("text", ["cluster={num_nodes:4,gpus_per_node:8}", "cluster={num_nodes: 4}"])
def test_jobspec_dict_override_of_the_cluster_is_validated_like_the_dotted_form(text):
    found = problems("gemma3-gsm8k", text)
    assert any("cluster.num_nodes=4 but the Ray cluster has GPU_NODES=2" in p for p in found)


def test_jobspec_dict_override_of_dtensor_cfg_is_validated():
    found = problems("gemma3-gsm8k", "policy.dtensor_cfg={tensor_parallel_size:3}")
    assert any("policy.dtensor_cfg.tensor_parallel_size=3 must divide" in p for p in found)


@pytest.mark.parametrize("text", ["cluster=[1,2]", "cluster=4", "cluster={num_nodes:[1,2]}",
                                  "cluster={num_nodes:4", "policy={dtensor_cfg:{tensor_parallel_size:{a:1}}}"])
def test_jobspec_unreadable_override_of_a_validated_key_is_refused(text):
    with pytest.raises(ConfigError):
        problems("gemma3-gsm8k", text)


def test_jobspec_dict_override_with_an_unknown_leaf_is_refused():
    found = problems("gemma3-gsm8k", "policy.dtensor_cfg={foo:1}")
    assert len(found) == 1 and "no key policy.dtensor_cfg.foo" in found[0]


def test_jobspec_job_file_with_non_utf8_bytes_is_config_error(tmp_path):
    (tmp_path / "bad.yaml").write_bytes(b"description: caf\xe9\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        jobspec.load("bad", tmp_path)


def test_jobspec_max_restarts_set_is_taken_out_of_the_overrides():
    overrides, settings = jobspec.split_job_settings(["max_restarts=5", "grpo.val_period=3"])
    assert overrides == ["grpo.val_period=3"] and settings == {"max_restarts": 5}
    with pytest.raises(ConfigError):
        jobspec.split_job_settings(["max_restarts=abc"])


def test_jobspec_cadence_warning_when_a_preemption_would_lose_over_30_minutes():
    spec = jobspec.load("gemma3-gsm8k")
    values = overrides.effective(jobspec.final_overrides(spec, "r", ["checkpointing.save_period=30"]))
    warning = jobrules.cadence_warning(spec, values)
    assert warning and "30 steps" in warning and "--set checkpointing.save_period=18" in warning
    assert jobrules.cadence_warning(spec, overrides.effective(jobspec.final_overrides(spec, "r"))) is None
