"""jobscript: the bash piped into the head pod is strict, untraced, secret-free, keeps NeMo RL as the image
has it, detaches the driver, and carries overrides verbatim."""

from __future__ import annotations

import re
import subprocess

import pytest

from nemo_rl_gke import jobscript, jobspec


def submission(*extra: str, job: str = "gemma3-gsm8k", run_id: str = "run-1") -> jobscript.Submission:
    spec = jobspec.load(job)
    overrides = jobspec.final_overrides(spec, run_id, list(extra))
    return jobscript.Submission(run_id, spec.name, spec.entry_point, spec.recipe, tuple(overrides))


@pytest.fixture(scope="module")
def script() -> str:
    return jobscript.submit_script(submission())


def test_jobscript_is_strict_and_never_traced(script):
    code = [line for line in script.splitlines() if line and not line.startswith("#")]
    assert code[:2] == ["set -euo pipefail", "set +x"]
    assert not re.search(r"set -[a-z]*x|xtrace|bash -x", script)


def test_jobscript_keeps_nemo_rl_as_the_image_has_it(script):
    assert "git pull" not in script and "git checkout" not in script
    assert not re.search(r"\bsed\b", script)


def test_jobscript_holds_no_secret_reference_but_the_wandb_test(script):
    assert "HF_TOKEN" not in script
    assert [line.strip() for line in script.splitlines() if "WANDB_API_KEY" in line and "#" not in line] == [
        'if [[ -n "${WANDB_API_KEY:-}" ]]; then']


def test_jobscript_detaches_the_driver_in_its_own_session(script):
    assert 'setsid nohup python3 "$RUN/supervisor.py" "$RUN" > /dev/null 2>&1 < /dev/null &' in script


def test_jobscript_runs_in_opt_nemo_rl_with_data_root_from_nrg_pod_root_only(script):
    assert 'ROOT="${NRG_POD_ROOT:-}"' in script and "cd \"$ROOT\"/opt/nemo-rl" in script
    assert 'export HF_HOME="$ROOT"/data/huggingface' in script


def test_jobscript_is_valid_bash(script, tmp_path):
    path = tmp_path / "s.sh"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0


def test_jobscript_overrides_written_verbatim_in_a_quoted_heredoc(script):
    start = "cat > \"$RUN/overrides.new\" <<'NRG_OVERRIDES_EOF'\n"
    body = script.split(start, 1)[1].split("\nNRG_OVERRIDES_EOF\n")[0]
    assert body.splitlines() == list(submission().overrides)


def test_jobscript_heredoc_tag_never_occurs_in_the_body():
    text = jobscript.heredoc('"$F"', "a\nNRG_X\nb", "NRG_X")
    assert text.startswith("cat > \"$F\" <<'NRG_X_'\n") and text.endswith("\nNRG_X_\n")


def test_jobscript_wandb_left_to_the_pod_unless_the_job_chose():
    assert "logger.wandb_enabled=True' >>" in jobscript.submit_script(submission())
    chosen = jobscript.submit_script(submission("logger.wandb_enabled=False"))
    assert "WANDB_API_KEY" not in chosen


KEPT = ["PATH", "HF_TOKEN", "WANDB_API_KEY", "RAY_ADDRESS", "UV_PROJECT_ENVIRONMENT", "HF_HOME", "NCCL_NET",
        "LD_LIBRARY_PATH", "VIRTUAL_ENV", "NEMO_RL_VENV_DIR", "NEMO_RL_COMMIT", "NEMO_RL_PY_EXECUTABLES_SYSTEM",
        "NRL_CONTAINER"]
DROPPED = ["KUBERNETES_SERVICE_HOST", "NEMO_RL_HEAD_SVC_PORT_8265_TCP", "RAY_HEAD_SVC_SERVICE_HOST",
           "KUBERAY_GEN_RAY_START_CMD", "AWS_SECRET_ACCESS_KEY", "RAY_HEAD_PORT", "NEMO_RL_HEAD_SVC_SERVICE_HOST"]


def _driver_env(names: list[str], tmp_path, monkeypatch) -> list[str]:
    """The supervisor's own filter (scripts/supervisor.py with the config job.submit writes)."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("nrg_supervisor", jobscript.SCRIPTS / "supervisor.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "supervisor.json").write_text(json.dumps(submission().supervisor_config()))
    for name in list(__import__("os").environ):
        monkeypatch.delenv(name)
    for name in names:
        monkeypatch.setenv(name, "tcp://10.0.0.1:1" if name.endswith("_PORT") else "x")
    return sorted(module.Supervisor(tmp_path).environment())


def test_jobscript_supervisor_keeps_the_driver_environment_small(tmp_path, monkeypatch):
    assert _driver_env(KEPT + DROPPED, tmp_path, monkeypatch) == sorted(KEPT)


def test_jobscript_gated_model_is_checked_in_the_pod_before_the_driver():
    spec = jobspec.load("gemma3-gsm8k")
    sub = jobscript.Submission("r", spec.name, spec.entry_point, spec.recipe,
                               tuple(jobspec.final_overrides(spec, "r")), gated_model=spec.model_name)
    script = jobscript.submit_script(sub)
    check = script.index("uv run python \"$RUN/check_access.py\" google/gemma-3-27b-it")
    assert check < script.index("setsid nohup python3") and "auth_check(repo)" in script
    assert "check_access.py" not in jobscript.submit_script(submission())


def test_jobscript_overrides_are_checked_with_nemo_rls_loader_before_the_driver(script):
    check = script.index("uv run python \"$RUN/check_config.py\"")
    assert check < script.index('mv "$RUN/overrides.new" "$RUN/overrides"') < script.index("setsid nohup")
    assert "parse_hydra_overrides(config, overrides)" in script


def test_jobscript_supervisor_config_has_the_restart_limit_and_the_gpus():
    config = jobscript.Submission("r", "j", "e", "rc", tuple(jobspec.final_overrides(
        jobspec.load("gemma3-gsm8k"), "r")), max_restarts=5).supervisor_config()
    assert config["max_restarts"] == 5 and config["gpus_needed"] == 16
    assert config["checkpoint_dir"] == "/data/runs/r/checkpoints"


@pytest.mark.parametrize("action", ["list", "status", "checkpoints", "log", "stop", "resolve", "raylogs"])
def test_jobscript_reader_scripts_are_valid_bash(action, tmp_path):
    path = tmp_path / "r.sh"
    path.write_text(jobscript.reader_script(action, "run-1"))
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0


def test_jobscript_follow_stops_with_the_driver():
    assert '--pid="$pid"' in jobscript.logs_script("run-1", follow=True)


@pytest.mark.skipif(__import__("shutil").which("shellcheck") is None,
                    reason="needs shellcheck (apt-get install shellcheck)")
def test_jobscript_every_generated_script_is_shellcheck_clean(tmp_path):
    scripts = jobscript.sample_scripts()
    assert {"submit", "submit-ungated", "logs", "logs-latest", "list", "status", "stop", "raylogs"} <= set(scripts)
    for name, text in scripts.items():
        path = tmp_path / f"{name}.sh"
        path.write_text(text)
        done = subprocess.run(["shellcheck", "--shell=bash", str(path)], capture_output=True, text=True)
        assert done.returncode == 0, f"{name}: {done.stdout}"
