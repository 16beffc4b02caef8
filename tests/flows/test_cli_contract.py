"""The command-line contract of DESIGN.md for the foundation: list, dry runs, bad input, secrets."""

from __future__ import annotations

import shutil

import pytest

from support.fake import REPO, FakeCloud

NAMESPACES = ("net", "cluster", "storage", "ray", "job", "clean")


def bare(tmp_path) -> FakeCloud:
    """A working directory with no .env at all (a fresh clone's situation)."""
    cloud = FakeCloud(tmp_path)
    cloud.workdir.mkdir(parents=True)
    return cloud


def test_list_shows_every_namespace(tmp_path):
    done = bare(tmp_path).invoke("--list")
    assert done.code == 0
    for namespace in NAMESPACES:
        assert f"  {namespace}." in done.stdout or f"  {namespace} " in done.stdout


@pytest.mark.parametrize("told_not_to", [False, True])
def test_invoke_keeps_our_bytecode_unless_python_is_told_not_to(tmp_path, told_not_to):
    # Invoke turns bytecode writing off for what tasks.py imports: the whole package was compiled on every run.
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    if told_not_to:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "--list"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, check=False)
    ours = list((tmp_path / "pycache").rglob("nemo_rl_gke/tasks/clean.*.pyc"))
    assert (done.returncode, len(ours)) == (0, 0 if told_not_to else 1), done.stderr


def test_dry_h200_cluster_create_without_env_prints_the_plan(tmp_path):
    cloud = bare(tmp_path)
    done = cloud.invoke("--dry", "cluster.create", "--gpu=h200")
    assert done.code == 0, done.output
    assert ".env.example" in done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("$ ")]
    pool = next(line for line in lines if "node-pools create" in line)
    assert "--machine-type=a3-ultragpu-8g" in pool and "type=nvidia-h200-141gb,count=8" in pool
    assert pool.count("--additional-node-network") == 9
    assert any("apply --filename=-" in line and "network-mapping" in line for line in lines)
    assert cloud.calls() == []  # nothing ran, not even the fake


def test_bad_gpu_type_exits_2_naming_the_key_and_runs_nothing(tmp_path):
    cloud = bare(tmp_path)
    done = cloud.invoke("--dry", "cluster.create", GPU_TYPE="a100")
    assert done.code == 2
    assert "GPU_TYPE" in done.stderr and "b200" in done.stderr and "h200" in done.stderr
    assert "Traceback" not in done.output and "$ " not in done.stdout
    assert cloud.calls() == []


def test_real_run_without_env_refuses_with_exit_2(tmp_path):
    cloud = bare(tmp_path)
    done = cloud.invoke("net.create")
    assert done.code == 2 and "no .env" in done.stderr
    assert cloud.calls() == []


def test_dry_run_never_prints_a_secret_from_the_environment(tmp_path):
    cloud = bare(tmp_path)
    done = cloud.invoke("--dry", "net.create", "cluster.create", HF_TOKEN="hf_SECRETVALUE",
                        WANDB_API_KEY="wandb_SECRETVALUE")
    assert done.code == 0, done.output
    assert "SECRETVALUE" not in done.output


def test_missing_tool_exits_127(fake):
    done = fake.invoke("net.create", PATH=str(shutil.which("python3")).rsplit("/", 1)[0])
    assert done.code == 127 and "gcloud is not on PATH" in done.stderr


def test_env_example_ships_with_the_repository():
    assert (REPO / ".env.example").is_file()
