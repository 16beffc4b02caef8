"""Generated settings values and job overrides: every invalid one is refused naming its key, every valid
one gives commands (argv lists of plain strings, no secret in them). The real gcloud parses a sample of
the valid ones in tests/gcloud/test_gcloud_generated.py."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_rl_gke import jobspec, overrides
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


NUMERIC_RULE_KEYS = (overrides.MAX_STEPS, overrides.PROMPTS, overrides.GENERATIONS, overrides.GLOBAL_BATCH,
                     overrides.VLLM_TP, overrides.POLICY_TP)


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


# ---- hostile input: random bytes, huge numbers, other scripts' digits, very long values ---------------------
UNICODE_DIGITS = "٠١٢٣٤٥٦٧٨٩۰۱۲۳۴۵۶۷۸۹०१२३४५६७८९０１２３４５６７８９𝟎𝟏𝟐"
NUMERIC_KEYS = ("GPU_NODES", "LUSTRE_CAPACITY_GIB", "LUSTRE_THROUGHPUT")
hostile_text = st.one_of(
    st.binary(min_size=1, max_size=80).map(lambda b: b.decode("utf-8", "surrogateescape")),
    st.text(UNICODE_DIGITS + "0123456789.-", min_size=1, max_size=12),
    st.integers(10, 20_000).map(lambda n: "9" * n),
    st.integers(1_000, 12_000).map(lambda n: "a" * n),
    st.text(min_size=1, max_size=40),
)


def _settings_or_config_error(load):
    """What load/validate may do with any input: return Settings, or raise ConfigError. Nothing else."""
    from nemo_rl_gke.settings import Settings

    try:
        result = load()
    except ConfigError as exc:
        assert len(str(exc)) < 600, str(exc)[:200]  # a long value is never echoed whole
        return exc
    except Exception as exc:  # noqa: BLE001 — the point of the test
        raise AssertionError(f"{type(exc).__name__} instead of ConfigError: {str(exc)[:200]}") from exc
    assert isinstance(result, Settings)
    return result


@pytest.mark.parametrize("key", KEYS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=hostile_text)
def test_settings_hostile_value_in_environment_is_settings_or_config_error(key, value, tmp_path_factory):
    from nemo_rl_gke.settings import load

    counts.add("cases")
    workdir = tmp_path_factory.mktemp("env")
    _settings_or_config_error(lambda: load(allow_example=True, environ={key: value}, cwd=workdir))


@pytest.mark.parametrize("key", KEYS)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.one_of(st.binary(min_size=1, max_size=80), hostile_text.map(
    lambda t: t.encode("utf-8", "surrogateescape"))))
def test_settings_hostile_bytes_in_env_file_are_settings_or_config_error(key, raw, tmp_path_factory):
    from nemo_rl_gke.settings import load
    from support.fake import read_env_example

    counts.add("cases")
    workdir = tmp_path_factory.mktemp("file")
    lines = [f"{k}={v}".encode() for k, v in read_env_example().items() if k != key]
    (workdir / ".env").write_bytes(b"\n".join([*lines, key.encode() + b"=" + raw]) + b"\n")
    _settings_or_config_error(lambda: load(allow_example=False, environ={"PROJECT_ID": "real-project"}, cwd=workdir,
                                           warn=lambda _: None))


@pytest.mark.parametrize("key", NUMERIC_KEYS)
@settings(max_examples=30, deadline=None)
@given(value=st.one_of(st.text(UNICODE_DIGITS, min_size=1, max_size=8), st.integers(10, 20_000).map(
    lambda n: "9" * n), st.integers(10, 5_000).map(lambda n: 10 ** n)))
def test_settings_unicode_digits_and_huge_numbers_are_refused_naming_the_key(key, value):
    counts.add("cases")
    with pytest.raises(ConfigError) as caught:
        generated.base().with_overrides(**{key: value})
    assert caught.value.key == key and len(str(caught.value)) < 300


@settings(max_examples=30, deadline=None)
@given(version=st.builds(lambda a, b: f"1.{a}.{b}-gke.1422000", st.text(UNICODE_DIGITS, min_size=1, max_size=3),
                         st.text(UNICODE_DIGITS + "0123456789", min_size=1, max_size=3)))
def test_settings_gke_version_with_other_scripts_digits_is_refused(version):
    counts.add("cases")
    with pytest.raises(ConfigError) as caught:
        generated.base().with_overrides(GKE_VERSION=version)
    assert caught.value.key == "GKE_VERSION"
