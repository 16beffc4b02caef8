"""Usage through the real `invoke` command: -h and --help print Invoke's usage on every task (exit 0, nothing
runs), int flags show INT and refuse a bad value with exit 2, unknown flags and a missing NAME exit 2."""

from __future__ import annotations

import sys

import pytest

from support.fake import REPO, FakeCloud

sys.path.insert(0, str(REPO))
import tasks  # noqa: E402  (the repository's Invoke entry point)

TASKS = sorted(tasks.ns.task_names)
INT_FLAGS = sorted((name, max(arg.names, key=len)) for name, ctx in ((c.name, c) for c in tasks.ns.to_contexts())
                   for arg in ctx.args.values() if arg.kind is int and not arg.positional)
BAD_NUMBERS = ("abc", "٣", "9" * 5000, "1.5", "")


@pytest.fixture(scope="module")
def cloud(tmp_path_factory) -> FakeCloud:
    fake = FakeCloud(tmp_path_factory.mktemp("usage"), processes=True)  # the real `invoke` command
    fake.workdir.mkdir(parents=True)
    return fake


@pytest.mark.parametrize("name", TASKS)
def test_usage_help_and_h_print_the_task_usage(cloud, name):
    for flag in ("--help", "-h"):
        done = cloud.invoke(name, flag)
        assert done.code == 0, (flag, done.output)
        assert done.stdout.startswith(f"Usage: inv[oke] [--core-opts] {name} "), (flag, done.output)
        assert "Traceback" not in done.output and done.stderr == ""
    assert cloud.calls() == []


def test_usage_no_task_takes_h_as_a_short_flag():
    for ctx in tasks.ns.to_contexts():
        assert "-h" not in ctx.flags, ctx.name


def test_usage_every_int_flag_is_listed():
    # The flags the issue names are typed; nothing else needs a look here.
    wanted = {("ray.dashboard", "port"), ("ray.deploy", "timeout"), ("ray.deploy", "nodes"),
              ("ray.deploy", "head-cpu"), ("ray.render", "head-memory"), ("cluster.create", "nodes")}
    assert wanted <= set(INT_FLAGS)


@pytest.mark.parametrize(("index", "task_flag"), list(enumerate(INT_FLAGS)))
def test_usage_int_flag_shows_int_and_refuses_a_bad_value_with_exit_2(cloud, index, task_flag):
    name, flag = task_flag
    value = BAD_NUMBERS[index % len(BAD_NUMBERS)]
    done = cloud.invoke("--dry", name, f"--{flag}={value}")
    assert done.code == 2, done.output
    assert f"--{flag}=" in done.stderr and "whole number" in done.stderr
    assert "Traceback" not in done.output and len(done.stderr) < 400
    assert cloud.calls() == []


def test_usage_help_shows_a_value_placeholder_for_int_flags(cloud):
    done = cloud.invoke("ray.deploy", "--help")
    assert "--timeout=INT" in done.stdout and "--nodes=INT" in done.stdout and "--head-cpu=INT" in done.stdout


@pytest.mark.parametrize("argv", [
    ("net.create", "--nope"),
    ("ray.render", "--head-cpu"),  # a value is needed
    ("job.submit",),  # NAME is missing
    ("job.submit", "--nope"),  # a flag where NAME goes
    ("job.status", "run-1", "run-2"),  # one run id, bare or --id
])
def test_usage_errors_exit_2_without_running_anything(cloud, argv):
    done = cloud.invoke("--dry", *argv)
    assert done.code == 2, done.output
    assert done.stderr.startswith("error: ") and "Traceback" not in done.output
    assert "$ " not in done.stdout


def test_usage_a_flag_without_its_value_is_named_plainly(cloud):
    done = cloud.invoke("--dry", "ray.render", "--head-cpu")
    assert done.stderr == "error: --head-cpu needs a value (--head-cpu=INT).\n"
    done = cloud.invoke("--dry", "cluster.create", "--reservation")
    assert done.stderr.endswith("error: --reservation needs a value (--reservation=VALUE).\n")


def test_usage_spot_with_reservation_names_both_flags(cloud):
    done = cloud.invoke("--dry", "cluster.create", "--spot", "--reservation=r")
    assert done.code == 2
    assert "--spot and --reservation exclude each other" in done.stderr
    assert "--spot='--reservation'" not in done.stderr


def test_usage_run_id_is_the_id_flag(cloud):
    done = cloud.invoke("--dry", "job.status", "--id=run-7")
    assert done.code == 0, done.output
    short = cloud.invoke("--dry", "job.status", "-i", "run-7")
    assert short.code == 0, short.output
