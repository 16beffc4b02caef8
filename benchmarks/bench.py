"""Bring-up and teardown figures on the fake cloud: `nox -s bench -- [out.json] [--scale=0.005]`.

Every latency comes from the fake cloud's handler registrations (FACTS §6 typical seconds), multiplied by
FAKECLOUD_TIME_SCALE, so a run that would take ~45 minutes against Google Cloud takes seconds. Measured in
one run, printed as `name: value` lines, written as JSON to the path given:

  up_seconds, critical_path_seconds, up_vs_critical_path   `invoke up --yes` from nothing vs the graph's bound
  sequential_seconds, up_vs_sequential                     the tutorial's commands one at a time (tutorial.py)
  rerun_vs_up, rerun_mutating_calls                        `invoke up --yes` again with everything present
  down_seconds, down_sequential_seconds, down_vs_sequential `invoke down --yes --delete-data` vs the tutorial's
                                                           cleanup made complete
  list_seconds (median of 10), dry_up_seconds (median of 5, no .env)

and the diagnostics that explain a missed goal: the same `up` at scale 0 (what is left is process start-up
and Python, no simulated latency), the number of calls, and the steps whose create_seconds differ from
the fake's latencies.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "benchmarks")]

import tutorial  # noqa: E402

from reliability.state import comparable  # noqa: E402
from support.fake import TEST_RUNNER_OPTIONS, FakeCloud, read_env_example  # noqa: E402

DEFAULT_SCALE = 0.005
POLL_SECONDS = 10.0  # the Runner's default poll_seconds
GOALS = {  # name: (comparison, bound)
    "up_vs_critical_path": ("<=", 1.05),
    "up_vs_sequential": ("<=", 0.60),
    "rerun_vs_up": ("<=", 0.03),
    "rerun_mutating_calls": ("<=", 0),
    "down_vs_sequential": ("<=", 0.60),
    "list_seconds": ("<=", 0.4),
    "dry_up_seconds": ("<=", 1.0),
}
# The fake command each step's create/delete waits on, to compare the step's create_seconds (used by the
# critical path) with the latency the fake sleeps and FACTS §6.
STEP_COMMANDS = {
    "net.network": ("gcloud", "compute", "networks", "create"),
    "net.gvnic-network": ("gcloud", "compute", "networks", "create"),
    "net.rdma-network": ("gcloud", "compute", "networks", "create"),
    "net.gvnic-subnet": ("gcloud", "compute", "networks", "subnets", "create"),
    "net.gvnic-firewall": ("gcloud", "compute", "firewall-rules", "create"),
    "cluster.cluster": ("gcloud", "container", "clusters", "create"),
    "cluster.credentials": ("gcloud", "container", "clusters", "get-credentials"),
    "cluster.gpu-pool": ("gcloud", "container", "node-pools", "create"),
    "cluster.nccl-installer": ("kubectl", "apply"),
    "cluster.network-mapping": ("kubectl", "apply"),
    "storage.range": ("gcloud", "compute", "addresses", "create"),
    "storage.peering": ("gcloud", "services", "vpc-peerings", "connect"),
    "storage.lustre": ("gcloud", "lustre", "instances", "create"),
    "storage.ksa": ("kubectl", "apply"),
    "storage.secret": ("kubectl", "apply"),
    "storage.pv": ("kubectl", "apply"),
    "storage.pvc": ("kubectl", "apply"),
    "ray.release": ("helm", "upgrade"),
    **{f"net.rdma-subnet-{n}": ("gcloud", "compute", "networks", "subnets", "create") for n in range(8)},
}


def median_seconds(argv: list[str], times: int, cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (user + system) of the command; CPU shows the cost
    without the noise of other load on the machine."""
    import resource

    samples, cpu = [], []
    for _ in range(times):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
        samples.append(time.monotonic() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(f"bench: {' '.join(argv[-2:])} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return statistics.median(samples), statistics.median(cpu)


def latency_check(steps) -> list[str]:
    """Steps whose create_seconds differ from the fake's registered latency of the command they run."""
    sys.path.insert(0, str(REPO / "tests" / "fakecloud"))
    from fakecloud import core, main

    main.load_handlers()
    notes = []
    for step in steps:
        command = STEP_COMMANDS.get(step.name)
        if command is None:
            if step.create_seconds:
                notes.append(f"{step.name}: create_seconds={step.create_seconds:g}, no fake command mapped")
            continue
        registered = core.REGISTRY.get((command[0], command[1:]))
        latency = registered.latency if registered else None
        if latency != step.create_seconds:
            notes.append(f"{step.name}: create_seconds={step.create_seconds:g}, fake `{' '.join(command)}` "
                         f"sleeps {latency}")
    return notes


def cloud(stack: ExitStack, root: Path, scale: float) -> FakeCloud:
    """A fake cloud with a .env, a GCS emulator for the bucket and its own lock directory."""
    from fakecloud.handlers.gcloud_projects import project_number
    from support.gcs_emulator import running_emulator

    # Real processes, as a user's run has them. Polls wait the runner's real interval (10 s) at the same scale:
    # polling without a pause would spend the 2 cores on `describe` processes and slow everything else down.
    fake = FakeCloud(root, processes=True, runner_options={"poll_seconds": POLL_SECONDS * scale})
    fake.write_env()
    emulator = stack.enter_context(running_emulator(project_number(read_env_example()["PROJECT_ID"])))
    fake.env.update(STORAGE_EMULATOR_HOST=emulator.host, XDG_CACHE_HOME=str(root / "cache"),
                    FAKECLOUD_TIME_SCALE=str(scale))
    return fake


def timed_invoke(fake: FakeCloud, *args: str, **env: str) -> float:
    started = time.monotonic()
    done = fake.invoke(*args, timeout=3600, **env)
    seconds = time.monotonic() - started
    if done.code != 0:
        raise SystemExit(f"bench: invoke {' '.join(args)} failed ({done.code}):\n{done.output[-4000:]}")
    return seconds


def sequential(fake: FakeCloud, order, action: str) -> float:
    """The tutorial's order through the same fake cloud, in this process (one Runner, no invoke start-up)."""
    from nemo_rl_gke.resources import all_steps
    from nemo_rl_gke.runner import Runner
    from nemo_rl_gke.settings import load

    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(fake.process_env())
    try:
        s = load(allow_example=False, cwd=fake.workdir, environ={})
        runner = Runner(secrets=s.secrets, out=open(os.devnull, "w"), err=open(os.devnull, "w"),
                        **Runner.options({**TEST_RUNNER_OPTIONS, **fake.runner_options}))
        started = time.monotonic()
        tutorial.run(runner, all_steps(s), order, action)
        return time.monotonic() - started
    finally:
        os.environ.clear()
        os.environ.update(saved)


def measure(scale: float, with_scale0: bool) -> dict[str, object]:
    from nemo_rl_gke import graph
    from nemo_rl_gke.resources import all_steps
    from nemo_rl_gke.settings import load

    figures: dict[str, object] = {"time_scale": scale}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        tmp_path = Path(tmp)
        ours = cloud(stack, tmp_path / "ours", scale)
        s = load(allow_example=False, cwd=ours.workdir, environ={})
        steps = all_steps(s)
        figures["critical_path_seconds"] = graph.critical_path_seconds(steps) * scale
        figures["down_critical_path_seconds"] = graph.critical_path_seconds(steps, deleting=True) * scale
        # The same ratios from the typical latencies alone (no process start-up, no Python): the best any
        # implementation of this graph can do against the tutorial's order.
        figures["sequential_bound_seconds"] = tutorial.bound_seconds(steps, tutorial.UP_ORDER, "create_seconds") * scale
        figures["down_sequential_bound_seconds"] = tutorial.bound_seconds(steps, tutorial.DOWN_ORDER,
                                                                          "delete_seconds") * scale
        figures["up_vs_sequential_bound"] = figures["critical_path_seconds"] / figures["sequential_bound_seconds"]
        figures["down_vs_sequential_bound"] = (figures["down_critical_path_seconds"]
                                               / figures["down_sequential_bound_seconds"])
        figures["latency_mismatches"] = latency_check(steps)
        figures["order_problems"] = tutorial.check_orders([st.name for st in steps], s.autopilot)

        figures["up_seconds"] = timed_invoke(ours, "up", "--yes")
        figures["up_calls"] = len(ours.calls())
        reference = comparable(ours.resources())
        before = len(ours.calls())
        figures["rerun_seconds"] = timed_invoke(ours, "up", "--yes")
        figures["rerun_calls"] = len(ours.calls()) - before
        figures["rerun_mutating_calls"] = len(ours.mutating_calls(since=before))
        before = len(ours.calls())
        figures["down_seconds"] = timed_invoke(ours, "down", "--yes", "--delete-data")
        figures["down_calls"] = len(ours.calls()) - before
        figures["down_left_resources"] = sorted(ours.resources())

        tut = cloud(stack, tmp_path / "tutorial", scale)
        figures["sequential_seconds"] = sequential(tut, tutorial.UP_ORDER, "create")
        figures["sequential_calls"] = len(tut.calls())
        figures["sequential_state_matches_up"] = comparable(tut.resources()) == reference
        figures["down_sequential_seconds"] = sequential(tut, tutorial.DOWN_ORDER, "delete")
        figures["down_sequential_left_resources"] = sorted(tut.resources())

        if with_scale0:
            zero = cloud(stack, tmp_path / "zero", 0.0)
            figures["up_seconds_at_scale_0"] = timed_invoke(zero, "up", "--yes")

        env = ours.process_env()
        invoke = [sys.executable, "-m", "invoke", "--search-root", str(REPO)]
        figures["list_seconds"], figures["list_cpu_seconds"] = median_seconds([*invoke, "--list"], 10, REPO, env)
        fresh = tmp_path / "fresh-clone"
        fresh.mkdir()
        no_env = {k: v for k, v in env.items() if k != "ENV_FILE"}
        figures["dry_up_seconds"], figures["dry_up_cpu_seconds"] = median_seconds([*invoke, "--dry", "up"], 5,
                                                                                  fresh, no_env)
        figures["load_average_1min"] = os.getloadavg()[0]

    figures["up_vs_critical_path"] = figures["up_seconds"] / figures["critical_path_seconds"]
    figures["up_vs_sequential"] = figures["up_seconds"] / figures["sequential_seconds"]
    figures["rerun_vs_up"] = figures["rerun_seconds"] / figures["up_seconds"]
    figures["down_vs_sequential"] = figures["down_seconds"] / figures["down_sequential_seconds"]
    if with_scale0:
        # What the simulated latencies cost `up`, once start-up and Python are taken out.
        figures["up_minus_scale0_vs_critical_path"] = (
            (figures["up_seconds"] - figures["up_seconds_at_scale_0"]) / figures["critical_path_seconds"])
    return figures


def verdicts(figures: dict[str, object]) -> dict[str, bool]:
    return {name: float(figures[name]) <= bound for name, (_, bound) in GOALS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="write the figures as JSON here")
    parser.add_argument("--scale", type=float, default=float(os.environ.get("BENCH_TIME_SCALE", DEFAULT_SCALE)),
                        help=f"FAKECLOUD_TIME_SCALE (default {DEFAULT_SCALE}, or $BENCH_TIME_SCALE)")
    parser.add_argument("--no-scale0", action="store_true", help="skip the diagnostic `up` at scale 0")
    args = parser.parse_args(argv)
    figures = measure(args.scale, not args.no_scale0)
    met = verdicts(figures)
    for name, value in figures.items():
        text = f"{value:.3f}" if isinstance(value, float) else json.dumps(value)
        goal = ""
        if name in GOALS:
            op, bound = GOALS[name]
            goal = f"  (goal {op} {bound}: {'met' if met[name] else 'NOT met'})"
        print(f"{name}: {text}{goal}")
    print(f"goals met: {sum(met.values())} of {len(met)}")
    if args.out:
        Path(args.out).write_text(json.dumps({"figures": figures, "goals": {
            name: {"bound": bound, "met": met[name]} for name, (_, bound) in GOALS.items()}}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
