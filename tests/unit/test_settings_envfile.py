"""Reading the settings file strictly, and finding it: a line that does not parse is an error naming the
file and the line; an unknown key is a warning naming the closest key; `.env` is found next to tasks.py from
any subdirectory of the project; ENV_FILE wins; a real run refuses the placeholder project through ENV_FILE."""

from __future__ import annotations

from pathlib import Path

import pytest

from nemo_rl_gke.settings import ConfigError, load
from support.fake import read_env_example


def _text(**values: str) -> str:
    return "".join(f"{k}={v}\n" for k, v in {**read_env_example(), "PROJECT_ID": "real-project", **values}.items())


def _load(tmp_path: Path, text: str | bytes, **kw):
    (tmp_path / ".env").write_bytes(text.encode() if isinstance(text, str) else text)
    warnings: list[str] = []
    return load(allow_example=False, environ=kw.pop("environ", {}), cwd=tmp_path, warn=warnings.append, **kw), \
        warnings


def _line_of(text: str, start: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(start))


@pytest.mark.parametrize("key,broken", [("SPOT", "'true"), ("GPU_TYPE", '"h200'), ("CLUSTER_NAME", "'nemo-rl")])
def test_load_unclosed_quote_is_an_error_naming_file_and_line(tmp_path, key, broken):
    text = _text(**{key: broken})
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, text)
    line = _line_of(text, f"{key}=")
    assert (caught.value.key, f"line {line} of {tmp_path / '.env'}" in str(caught.value), key in str(caught.value)) \
        == (f".env line {line}", True, True), str(caught.value)


def test_load_quote_closed_lines_later_is_an_error_not_a_multiline_value(tmp_path):
    # dotenv accepts SPOT='true…(more lines)…' as one value spanning lines: silently wrong, so refused.
    text = _text(SPOT="'true", LUSTRE_NAME="nemo-lustre'")
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, text)
    assert caught.value.key == f".env line {_line_of(text, 'SPOT=')}" and "closing quote" in str(caught.value)


def test_load_line_without_equals_is_an_error(tmp_path):
    text = _text() + "this is not a setting\n"
    with pytest.raises(ConfigError, match=r"\.env line \d+"):
        _load(tmp_path, text)


@pytest.mark.parametrize(("line", "shown"), [
    ("GPU_TYPE:h200", "'GPU_TYPE:h200'"), ("export GPU_TYPE", "'export GPU_TYPE'"),
    ("HF_TOKEN:hf_abc", "'HF_TOKEN:***'"), ("HF_TOKEN hf_abc", "'HF_TOKEN ***'"),
    ("export HF_TOKEN hf_abc", "'export HF_TOKEN ***'"), ("HF_TOKEN='hf_abc", "'HF_TOKEN=***'"),
    ("hf_abc more", "'(not shown)'"), ("export HF_TOKEN # abc", "'export HF_TOKEN ***'"),
    ("WANDB_API_KEY: #abc", "'WANDB_API_KEY:***'"), ("HF_TOKEN  # hf_abc", "'HF_TOKEN ***'"),
    ("GPU_TYPE # abc", "'GPU_TYPE # abc'")])
def test_load_line_without_equals_or_not_parsing_is_an_error_that_never_shows_a_secret(tmp_path, line, shown):
    text = _text() + line + "\n"
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, text)
    fix = str(caught.value).split(" is not valid: ", 1)[1]
    assert (caught.value.key, f"={shown} is not valid" in str(caught.value), "abc" in fix) == \
        (f".env line {text.count(chr(10))}", True, False), str(caught.value)


def test_load_a_word_alone_that_names_no_setting_is_ignored_with_a_warning_that_does_not_echo_it(tmp_path):
    # Another tool's pass-through `VAR` (docker compose), or a token pasted on a line of its own.
    s, warnings = _load(tmp_path, _text() + "OTHER_TOOL_VAR\nhf_abc\n")
    assert s.GPU_TYPE == "b200" and len(warnings) == 2 and "names no setting" in warnings[1], warnings
    assert not any("hf_abc" in w or "OTHER_TOOL_VAR" in w for w in warnings), warnings


def test_load_a_setting_with_a_colon_and_a_comment_is_told_its_value_without_the_comment(tmp_path):
    with pytest.raises(ConfigError, match=r"write GPU_TYPE=h200 \(or delete"):
        _load(tmp_path, _text() + "GPU_TYPE: h200  # the big one\n")
    with pytest.raises(ConfigError, match=r"\(the value of MY_VAR\)"):  # the key's name, never the value
        _load(tmp_path, _text() + "MY_VAR='open\n")


def test_load_non_utf8_byte_is_an_error_naming_the_line(tmp_path):
    text = _text().encode() + b"CLUSTER_NAME=caf\xe9\n"
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, text)
    lines = text.count(b"\n")
    assert (caught.value.key, "0xe9" in str(caught.value)) == (f".env line {lines}", True)


def test_load_unknown_key_warns_naming_the_closest_key(tmp_path):
    s, warnings = _load(tmp_path, _text() + "GPU_TPYE=h200\nCLUSTER_NAM=x\nWHATEVER_ELSE=1\n")
    assert s.GPU_TYPE == "b200"
    assert [("did you mean GPU_TYPE?" in w, "did you mean CLUSTER_NAME?" in w) for w in warnings[:2]] == \
        [(True, False), (False, True)]
    assert "WHATEVER_ELSE" in warnings[2] and "did you mean" not in warnings[2]


@pytest.mark.parametrize(("line", "says"), [("gpu_type=h200", "write GPU_TYPE=h200"),
                                            ("hf_token=hf_abc", "write HF_TOKEN=…")])
def test_load_a_setting_in_lower_case_is_an_error_not_a_default(tmp_path, line, says):
    # It only warned ("did you mean GPU_TYPE?") and the run went on with b200.
    with pytest.raises(ConfigError, match=r"settings are upper case") as caught:
        _load(tmp_path, _text() + line + "\n")
    assert says in str(caught.value) and "abc" not in str(caught.value), str(caught.value)


def test_load_comments_export_and_quotes_still_parse(tmp_path):
    text = _text(CLUSTER_NAME='"quoted-name"', GPU_NODES="3 # three nodes") + "# a comment\n\nexport SPOT=false\n"
    s, warnings = _load(tmp_path, text)
    assert (s.CLUSTER_NAME, s.GPU_NODES, s.SPOT, warnings) == ("quoted-name", 3, False, [])


def test_load_windows_file_with_bom_and_crlf_reads_like_any_other(tmp_path):
    s, warnings = _load(tmp_path, b"\xef\xbb\xbf" + _text(CLUSTER_NAME="win").replace("\n", "\r\n").encode())
    assert (s.PROJECT_ID, s.CLUSTER_NAME, warnings) == ("real-project", "win", [])


def test_load_finds_env_next_to_tasks_py_from_a_subdirectory(tmp_path):
    (tmp_path / "tasks.py").write_text("")
    (tmp_path / ".env").write_text(_text(CLUSTER_NAME="root-cluster"))
    sub = tmp_path / "manifests" / "ray-cluster"
    sub.mkdir(parents=True)
    s = load(allow_example=False, environ={}, cwd=sub)
    assert (s.CLUSTER_NAME, s.source) == ("root-cluster", str(tmp_path / ".env"))


def test_load_does_not_look_above_the_project_root(tmp_path):
    (tmp_path / ".env").write_text(_text(CLUSTER_NAME="outside"))
    project = tmp_path / "project"
    (project / "manifests").mkdir(parents=True)
    (project / "tasks.py").write_text("")
    with pytest.raises(ConfigError, match="no .env found"):
        load(allow_example=False, environ={}, cwd=project / "manifests")


def test_load_env_file_wins_over_the_project_env(tmp_path):
    (tmp_path / "tasks.py").write_text("")
    (tmp_path / ".env").write_text(_text(CLUSTER_NAME="root-cluster"))
    (tmp_path / "other.env").write_text(_text(CLUSTER_NAME="other-cluster"))
    (tmp_path / "sub").mkdir()
    s = load(allow_example=False, environ={"ENV_FILE": "../other.env"}, cwd=tmp_path / "sub")
    assert s.CLUSTER_NAME == "other-cluster"


@pytest.mark.parametrize("env_file", ["x" * 10_000, "/", "bad\udcffname"])
def test_load_env_file_that_cannot_be_a_file_is_a_short_error(tmp_path, env_file):
    with pytest.raises(ConfigError) as caught:
        load(allow_example=True, environ={"ENV_FILE": env_file}, cwd=tmp_path)
    assert (caught.value.key, len(str(caught.value)) < 200) == ("ENV_FILE", True)


def test_load_real_run_refuses_env_file_with_the_placeholder_project(tmp_path):
    example = Path(__file__).resolve().parents[2] / ".env.example"
    with pytest.raises(ConfigError, match="placeholder"):
        load(allow_example=False, environ={"ENV_FILE": str(example)}, cwd=tmp_path)
    # A dry run may use it (it shows the plan), and so may a real run that names its own project.
    assert load(allow_example=True, environ={"ENV_FILE": str(example)}, cwd=tmp_path).PROJECT_ID == "my-nemo-project"
    assert load(allow_example=False, environ={"ENV_FILE": str(example), "PROJECT_ID": "mine-123"},
                cwd=tmp_path).PROJECT_ID == "mine-123"


def test_the_example_names_a_bucket_from_the_users_project(tmp_path):
    """Bucket names are global: .env.example's GS_BUCKET=nemo-rl-my-nemo-project stayed in every copy that set
    only PROJECT_ID (as the README's own sed does), so every user's `up` asked for the same bucket, the first one's
    making it and every other's refused (another project's). Empty, it follows PROJECT_ID."""
    example = Path(__file__).resolve().parents[2] / ".env.example"
    assert load(allow_example=False, environ={"ENV_FILE": str(example), "PROJECT_ID": "mine-123"},
                cwd=tmp_path).bucket == "nemo-rl-mine-123"


def test_cli_from_a_subdirectory_reads_the_env_next_to_tasks_py(tmp_path):
    """`cd manifests && invoke --dry up`, through the real invoke: Invoke finds tasks.py upward, and so
    does the settings loader for .env."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "tasks.py").write_text((repo / "tasks.py").read_text())
    (tmp_path / ".env").write_text(_text(CLUSTER_NAME="from-the-root-env"))
    (tmp_path / "manifests").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in read_env_example() and k != "ENV_FILE"}
    done = subprocess.run([sys.executable, "-m", "invoke", "--dry", "cluster.create"], cwd=tmp_path / "manifests",
                          env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode, "from-the-root-env" in done.stdout, "placeholder" in done.stderr) == (0, True, False), \
        done.stdout[-800:] + done.stderr[-800:]


@pytest.mark.parametrize("text", [
    _text(HF_TOKEN='"hf_PLANTEDsecret123'),  # a quote not closed
    _text(WANDB_API_KEY="'PLANTEDwandb456", LUSTRE_NAME="nemo-lustre'"),  # closed lines later
    _text().encode() + b"HF_TOKEN=hf_PLANTED\xe9secret\n",  # not UTF-8
])
def test_cli_env_line_that_does_not_parse_never_shows_a_secret(tmp_path, text):
    """Through the real invoke: the error names the file and line, and shows a token's line as KEY=***."""
    import os
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    path = tmp_path / "secret.env"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    env = {**{k: v for k, v in os.environ.items() if k not in read_env_example()}, "ENV_FILE": str(path)}
    done = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(repo), "--dry", "up"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "secret.env line" in done.stderr, done.stderr[-800:]
    assert "PLANTED" not in done.stdout + done.stderr and "=***" in done.stderr, done.stderr[-800:]
