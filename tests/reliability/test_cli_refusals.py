"""Through the command line, a sample of generated invalid inputs: exit 2, the key in the message, no
traceback, no external call at all (the fake cloud's calls log stays empty). Subprocesses are slow, so
this is a small sample of what test_generated_inputs.py checks in process."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reliability import counts, generated
from support.fake import TEST_HF_TOKEN, TEST_WANDB_KEY, FakeCloud

CLI = settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                     HealthCheck.filter_too_much])
# One task per kind of caller: the lifecycle, a namespace create, a read-only status.
TASKS = (["up", "--yes"], ["net.create"], ["storage.status"])
# Values that an environment variable can carry (no NUL); the rest are covered in process.
CLI_KEYS = ("PROJECT_ID", "CLUSTER_NAME", "GPU_TYPE", "GPU_NODES", "LUSTRE_CAPACITY_GIB", "SPOT", "HF_TOKEN",
            "NEMO_RL_IMAGE", "NODE_LOCATION", "RDMA_NETWORK_PREFIX")


@pytest.fixture(scope="module")
def cli_cloud(tmp_path_factory) -> FakeCloud:
    cloud = FakeCloud(tmp_path_factory.mktemp("cli"))
    cloud.write_env()
    return cloud


def refused(cloud: FakeCloud, args: list[str], **env: str):
    log = cloud.state_dir / "calls.jsonl"
    log.unlink(missing_ok=True)
    done = cloud.invoke(*args, **env)
    return done, cloud.calls()


@pytest.mark.parametrize("key", CLI_KEYS)
@CLI
@given(data=st.data())
def test_cli_invalid_setting_exits_2_naming_the_key_before_any_call(cli_cloud, key, data):
    overrides = data.draw(generated.INVALID[key].filter(lambda o: all("\0" not in v for v in o.values())))
    task = data.draw(st.sampled_from(TASKS))
    counts.add("cases")
    done, calls = refused(cli_cloud, task, **overrides)
    # A short invalid token ("A") is a substring of any message: look for it echoed as a value instead.
    bad_token = overrides.get("HF_TOKEN", "\0")
    leaked = [v for v in (TEST_HF_TOKEN, TEST_WANDB_KEY, f"'{bad_token}'", f"={bad_token}") if v in done.output]
    assert (done.code, key in done.stderr, "Traceback" in done.output, calls, leaked) == (2, True, False, [], []), (
        overrides, done.output[-1500:])


@CLI
@given(text=generated.invalid_override.filter(lambda t: "\0" not in t))
def test_cli_invalid_set_override_exits_2_naming_set_before_any_call(cli_cloud, text):
    counts.add("cases")
    done, calls = refused(cli_cloud, ["job.submit", "gemma3-gsm8k", f"--set={text}"])
    assert (done.code, "--set" in done.stderr, "Traceback" in done.output, calls) == (2, True, False, []), (
        text, done.output[-1500:])


# ---- hostile settings through the real `invoke`: exit 2, one message, no traceback, no call ------------------
OFFLINE_TASKS = (["--dry", "up"], ["ray.render"])
UNICODE_DIGITS = "٠١٢٣٤٥٦٧٨٩０１２３４５６７８９०१२३"


def _env_file_bytes(**values: bytes) -> bytes:
    from support.fake import read_env_example

    merged = {k: v.encode() for k, v in read_env_example().items()} | values
    return b"".join(k.encode() + b"=" + v + b"\n" for k, v in merged.items())


hostile_file = st.one_of(
    st.builds(lambda key, junk: {key: b"x" + junk + b"\xff"}, st.sampled_from(CLI_KEYS), st.binary(max_size=20)),
    st.builds(lambda key, n: {key: b"9" * n}, st.sampled_from(("GPU_NODES", "LUSTRE_CAPACITY_GIB")),
              st.integers(4_400, 20_000)),
    st.builds(lambda key, quote: {key: quote + b"value"}, st.sampled_from(CLI_KEYS), st.sampled_from([b"'", b'"'])),
)
hostile_env = st.one_of(
    st.builds(lambda key, digits: {key: digits}, st.sampled_from(("GPU_NODES", "LUSTRE_CAPACITY_GIB",
                                                                   "LUSTRE_THROUGHPUT")),
              st.text(UNICODE_DIGITS, min_size=1, max_size=6)),
    st.builds(lambda n: {"GKE_VERSION": f"1.{n}.2-gke.1422000"}, st.text(UNICODE_DIGITS, min_size=2, max_size=2)),
    st.builds(lambda key, n: {key: "a" * n}, st.sampled_from(CLI_KEYS), st.integers(5_000, 10_000)),
    st.builds(lambda n: {"ENV_FILE": "e" * n}, st.integers(5_000, 10_000)),
)


def _one_clear_message(done) -> bool:
    return (done.code, "Traceback" in done.output, len(done.stderr) < 1500) == (2, False, True)


@CLI
@given(values=hostile_file, task=st.sampled_from(OFFLINE_TASKS))
def test_cli_hostile_env_file_exits_2_with_one_message(cli_cloud, values, task):
    counts.add("cases")
    env_file = cli_cloud.workdir / ".env"
    saved = env_file.read_bytes()
    try:
        env_file.write_bytes(_env_file_bytes(**values))
        done, calls = refused(cli_cloud, task)
    finally:
        env_file.write_bytes(saved)
    assert (_one_clear_message(done), ".env line" in done.stderr or next(iter(values)) in done.stderr, calls) == \
        (True, True, []), (values, done.output[-1500:])


@pytest.mark.parametrize(("line", "says"), [
    ("GPU_TYPE:h200", "write GPU_TYPE=h200"), ("export GPU_TYPE", "write GPU_TYPE=value"),
    ("GPU_TYPE", "write GPU_TYPE=value"), ("HF_TOKEN:hf_PLANTEDsecret9", "write HF_TOKEN=…")])
@pytest.mark.parametrize("task", [["--dry", "up"], ["plan"], ["net.status"]])
def test_cli_env_line_without_equals_exits_2_naming_the_line_before_any_call(cli_cloud, line, says, task):
    """python-dotenv reads `GPU_TYPE:h200` or `export GPU_TYPE` as a key with no value: the setting kept its
    default (b200) with a warning at most, and `up` would have made the pool nobody asked for. A token pasted on a
    line of its own is never echoed."""
    env_file = cli_cloud.workdir / ".env"
    saved = env_file.read_bytes()
    try:
        env_file.write_bytes(saved + line.encode() + b"\n")
        done, calls = refused(cli_cloud, task)
    finally:
        env_file.write_bytes(saved)
    number = saved.count(b"\n") + 1
    assert (_one_clear_message(done), f".env line {number}" in done.stderr, says in done.stderr, calls) == \
        (True, True, True, []), done.output[-1500:]
    assert "PLANTEDsecret9" not in done.output


@CLI
@given(values=hostile_env, task=st.sampled_from(OFFLINE_TASKS))
def test_cli_hostile_environment_exits_2_with_one_message(cli_cloud, values, task):
    counts.add("cases")
    done, calls = refused(cli_cloud, task, **values)
    assert (_one_clear_message(done), next(iter(values)) in done.stderr, calls) == (True, True, []), (
        {k: v[:80] for k, v in values.items()}, done.output[-1500:])
