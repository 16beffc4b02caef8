"""Generated settings values and job overrides: every invalid one is refused naming its key, every valid
one gives commands (argv lists of plain strings, no secret in them). The real gcloud parses a sample of
the valid ones in tests/gcloud/test_gcloud_generated.py."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_rl_gke import jobspec
from nemo_rl_gke.settings import KEYS, ConfigError
from reliability import counts, generated

EXAMPLES = 25
FAST = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                             HealthCheck.filter_too_much])


def test_generators_cover_every_settings_key():
    assert (sorted(generated.VALID), sorted(generated.INVALID)) == (sorted(KEYS), sorted(KEYS))


@pytest.mark.parametrize("key", KEYS)
@FAST
@given(data=st.data())
def test_settings_invalid_value_raises_config_error_naming_the_key(key, data):
    overrides = data.draw(generated.INVALID[key])
    counts.add("cases")
    with pytest.raises(ConfigError) as caught:
        generated.base().with_overrides(**overrides)
    assert caught.value.key == key, (overrides, str(caught.value))


@pytest.mark.parametrize("key", KEYS)
@FAST
@given(data=st.data())
def test_settings_valid_value_builds_commands_without_secrets(key, data):
    overrides = data.draw(generated.VALID[key])
    counts.add("cases")
    s = generated.base().with_overrides(**overrides)
    argvs = generated.commands(s)
    words = [w for argv in argvs for w in argv]
    assert all(isinstance(w, str) for w in words)
    assert not [w for w in words for secret in s.secrets if secret in w]


@settings(max_examples=150, deadline=None)
@given(text=generated.invalid_override)
def test_override_invalid_form_raises_config_error_naming_set(text):
    counts.add("cases")
    with pytest.raises(ConfigError) as caught:
        jobspec.final_overrides(jobspec.load("gemma3-gsm8k"), "run-1", [text])
    assert caught.value.key == "--set"


@settings(max_examples=150, deadline=None)
@given(text=generated.valid_override)
def test_override_valid_form_reaches_the_driver_verbatim(text):
    counts.add("cases")
    final = jobspec.final_overrides(jobspec.load("gemma3-gsm8k"), "run-1", [text])
    assert text in final


NUMERIC_RULE_KEYS = (jobspec.MAX_STEPS, jobspec.PROMPTS, jobspec.GENERATIONS, jobspec.GLOBAL_BATCH,
                     jobspec.VLLM_TP, jobspec.POLICY_TP)


@settings(max_examples=100, deadline=None)
@given(key=st.sampled_from(NUMERIC_RULE_KEYS),
       value=st.text("abcxyz-.,+ 0123456789", min_size=1, max_size=8).filter(lambda v: not v.strip().isdigit()))
def test_override_non_number_for_a_rule_key_is_refused_naming_the_key(key, value):
    counts.add("cases")
    spec = jobspec.load("gemma3-gsm8k")
    overrides = jobspec.final_overrides(spec, "run-1", [f"{key}={value}"])
    with pytest.raises(ConfigError) as caught:
        jobspec.validate(spec, overrides, gpu_nodes=2, gpus_per_node=8, gpu_name="nvidia-b200")
    assert key in str(caught.value)
