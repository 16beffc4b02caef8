"""Bring-up, re-run, teardown and first-training-step figures on the fake cloud: `nox -s bench -- [out.json]
[--scale=0.05]`. A measurement, not a test: nothing here is asserted by nox's default sessions.

Every latency comes from the fake cloud's handler registrations (FACTS §6 typical seconds), multiplied by
FAKECLOUD_TIME_SCALE, so a run that would take ~45 minutes against Google Cloud takes a couple of minutes.
Printed as `name: value` lines (and written as JSON to the path given):

  up_vs_critical_path        `invoke up --yes` from nothing ÷ the graph's critical path (its own bound)
  down_vs_critical_path      `invoke down --yes --delete-data` ÷ the teardown graph's critical path
  rerun_calls, rerun_rounds, rerun_mutating_calls
                             `invoke up --yes` again with everything present: external processes, the longest
                             chain of calls that waited for one another (calls.jsonl start/end), changes made
  up_calls                   external processes of the first `up`, polls included
  first_step_seconds, first_step_critical_path_seconds, first_step_vs_critical_path
                             `invoke up --yes` then `invoke job.submit gemma3-gsm8k` on a fresh cloud, until the
                             stand-in driver prints `Step 1/`; the bound is the longer of Ray's path and the
                             model download's (after the prefetch step, or after Ray when there is none)
  list_vs_bare_invoke        median `invoke --list` ÷ median `invoke --version`, interleaved (start-up cost),
                             bytecode cached as a user's install has it (`start_up_env`)
  up_overhead_seconds, down_overhead_seconds
                             the same `up` and `down` minus their critical paths: the miss in seconds
  --down-scales=0.2,0.4      also `down` at those scales (down_overhead_seconds_at_S, down_vs_critical_path_at_S):
                             what of its miss is fixed and what grows with the latencies

Every process (invoke, the fake gcloud/kubectl/helm) keeps its bytecode in one temporary cache, written by a
throwaway `up` first, as an installed package and gcloud have theirs (`--compile-every-start`: the old conditions).

and the diagnostics that explain a missed goal: the same `up` at scale 0 (what is left is process start-up
and Python, no simulated latency), the machine's load average, CPU seconds of the invoke start-ups, and the
steps whose create_seconds differ from the fake's latencies. The tutorial's sequential bounds are printed for
reference only (their ratio to our critical path measures FACTS §6's latencies, not us).
"""

from __future__ import annotations

import argparse
import glob
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
from rounds import call_rounds  # noqa: E402

from support.fake import FakeCloud, read_env_example  # noqa: E402

DEFAULT_SCALE = 0.05
POLL_SECONDS = 10.0  # the Runner's default poll_seconds
JOB = "gemma3-gsm8k"
GOALS = {  # name: (comparison, bound), issue 15
    "up_vs_critical_path": ("<=", 1.03),
    "down_vs_critical_path": ("<=", 1.05),
    "rerun_calls": ("<=", 10),
    "rerun_rounds": ("<=", 2),
    "rerun_mutating_calls": ("<=", 0),
    "first_step_vs_critical_path": ("<=", 1.05),
    "list_vs_bare_invoke": ("<=", 1.25),
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


def cloud(stack: ExitStack, root: Path, scale: float, pycache: Path | None = None) -> FakeCloud:
    """A fake cloud with a .env, a GCS emulator for the bucket and its own lock directory. pycache: every
    process (invoke and the fake tools) keeps its bytecode there (`start_up_env`); None: compiled each start."""
    from fakecloud.handlers.gcloud_projects import project_number
    from support.gcs_emulator import running_emulator

    # Real processes, as a user's run has them. Polls wait the runner's real interval (10 s) at the same scale:
    # polling without a pause would spend the 2 cores on `describe` processes and slow everything else down.
    fake = FakeCloud(root, processes=True, runner_options={"poll_seconds": POLL_SECONDS * scale})
    fake.write_env()
    emulator = stack.enter_context(running_emulator(project_number(read_env_example()["PROJECT_ID"])))
    fake.env.update(STORAGE_EMULATOR_HOST=emulator.host, XDG_CACHE_HOME=str(root / "cache"),
                    FAKECLOUD_TIME_SCALE=str(scale))
    if pycache is not None:
        fake.env.update(PYTHONDONTWRITEBYTECODE="", PYTHONPYCACHEPREFIX=str(pycache))  # "": not set, to Python
    else:  # no bytecode read or written (the tests' shared cache would otherwise serve it)
        fake.env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=str(root / "no-bytecode"))
    return fake


def timed_invoke(fake: FakeCloud, *args: str, **env: str) -> float:
    started = time.monotonic()
    done = fake.invoke(*args, timeout=3600, **env)
    seconds = time.monotonic() - started
    if done.code != 0:
        raise SystemExit(f"bench: invoke {' '.join(args)} failed ({done.code}):\n{done.output[-4000:]}")
    return seconds


def start_up_env(env: dict[str, str], pycache: Path) -> dict[str, str]:
    """The environment of the start-up timing: bytecode cached, as a user's install has it (and gcloud's). A
    machine that sets PYTHONDONTWRITEBYTECODE (this one does) would otherwise compile our modules on every start
    (~20 ms, 2x the import itself), which `invoke --version` never imports. The cache goes to a temporary
    prefix, not the repo. (Until tasks.py undid Invoke's own `dont_write_bytecode`, our package was compiled on
    every start even here: Invoke writes no .pyc for what a tasks.py imports unless given --write-pyc.)"""
    out = {key: value for key, value in env.items() if key != "PYTHONDONTWRITEBYTECODE"}
    out["PYTHONPYCACHEPREFIX"] = str(pycache)
    return out


def interleaved_medians(commands: dict[str, list[str]], times: int, cwd: Path, env: dict[str, str]
                        ) -> dict[str, tuple[float, float]]:
    """name -> (median wall seconds, median CPU seconds), the commands taking turns (same machine state)."""
    import resource

    samples: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(times):
        for name, argv in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.monotonic()
            done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
            samples[name].append(time.monotonic() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if done.returncode != 0:
                raise SystemExit(f"bench: {' '.join(argv[-2:])} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return {name: (statistics.median(samples[name]), statistics.median(cpu[name])) for name in commands}


def first_step_bound(steps, model: str) -> float:
    """Typical seconds from nothing to GRPO step 1 with unlimited parallelism: Ray ready, and the model in the
    cache (downloaded by the prefetch step once it has run, else by the driver after Ray). The stand-in driver
    simulates no start-up of its own (FACTS §6's 5 minutes are not in the fake), so none is added."""
    from nemo_rl_gke import graph, prefetch

    def finish(name: str) -> float:  # the longest chain that ends with name: name and what it needs
        needed = graph.needed_by(steps, [name])
        return graph.critical_path_seconds([step for step in steps if step.name in needed])

    ray = finish("ray.release")
    download = prefetch.TYPICAL_SECONDS.get(model, 0.0)
    fetched = [step.name for step in steps if step.name.endswith("model-prefetch")]
    cache = finish(fetched[0]) + download if fetched else ray + download
    return max(ray, cache)


def wait_for_step_one(fake: FakeCloud, started: float, timeout: float) -> float:
    """Seconds since started when a driver log under the Lustre files first shows `Step 1/`."""
    pattern = str(fake.state_dir / "lustre" / "*" / "runs" / "*" / "**" / "*")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in glob.glob(pattern, recursive=True):
            try:
                if os.path.isfile(path) and "Step 1/" in Path(path).read_text(errors="replace"):
                    return time.monotonic() - started
            except OSError:
                continue
        time.sleep(0.05)
    raise SystemExit(f"bench: no `Step 1/` in any driver log after {timeout:.0f} s")


def measure(scale: float, with_scale0: bool, cached: bool = True) -> dict[str, object]:
    from nemo_rl_gke import graph
    from nemo_rl_gke.resources import all_steps
    from nemo_rl_gke.settings import load

    figures: dict[str, object] = {"time_scale": scale, "bytecode_cached": cached}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        tmp_path = Path(tmp)
        pycache = tmp_path / "pycache" if cached else None
        if cached:  # a throwaway `up` writes the bytecode every later process reads, as an install has it
            timed_invoke(cloud(stack, tmp_path / "warm-up", 0.0, pycache), "up", "--yes")
        ours = cloud(stack, tmp_path / "ours", scale, pycache)
        s = load(allow_example=False, cwd=ours.workdir, environ={})
        steps = all_steps(s)
        figures["critical_path_seconds"] = graph.critical_path_seconds(steps) * scale
        figures["down_critical_path_seconds"] = graph.critical_path_seconds(steps, deleting=True) * scale
        # For reference only: the tutorial's order with the same latencies (retired goals, see the docstring).
        figures["up_vs_sequential_bound"] = (graph.critical_path_seconds(steps)
                                             / tutorial.bound_seconds(steps, tutorial.UP_ORDER, "create_seconds"))
        figures["down_vs_sequential_bound"] = (graph.critical_path_seconds(steps, deleting=True)
                                               / tutorial.bound_seconds(steps, tutorial.DOWN_ORDER,
                                                                        "delete_seconds"))
        figures["latency_mismatches"] = latency_check(steps)

        figures["up_seconds"] = timed_invoke(ours, "up", "--yes")
        figures["up_calls"] = len(ours.calls())
        before = len(ours.calls())
        figures["rerun_seconds"] = timed_invoke(ours, "up", "--yes")
        rerun = ours.calls()[before:]
        figures["rerun_calls"] = len(rerun)
        figures["rerun_rounds"] = call_rounds(rerun)
        figures["rerun_mutating_calls"] = len(ours.mutating_calls(since=before))
        figures["rerun_commands"] = [" ".join([c["tool"], *c["argv"][:4]]) for c in rerun]
        before = len(ours.calls())
        figures["down_seconds"] = timed_invoke(ours, "down", "--yes", "--delete-data")
        figures["down_calls"] = len(ours.calls()) - before
        figures["down_left_resources"] = sorted(ours.resources())

        first = cloud(stack, tmp_path / "first-step", scale, pycache)
        model = str(_job_model(JOB))
        figures["first_step_critical_path_seconds"] = first_step_bound(steps, model) * scale
        started = time.monotonic()
        timed_invoke(first, "up", "--yes")
        timed_invoke(first, "job.submit", JOB)
        bound = float(figures["first_step_critical_path_seconds"])  # type: ignore[arg-type]
        figures["first_step_seconds"] = wait_for_step_one(first, started, timeout=bound * 3 + 120)

        if with_scale0:
            zero = cloud(stack, tmp_path / "zero", 0.0, pycache)
            figures["up_seconds_at_scale_0"] = timed_invoke(zero, "up", "--yes")

        env = start_up_env(ours.process_env(), tmp_path / "pycache")
        figures["start_up_bytecode_cached"] = True
        invoke = [sys.executable, "-m", "invoke", "--search-root", str(REPO)]
        commands = {"list": [*invoke, "--list"], "version": [*invoke, "--version"]}
        interleaved_medians(commands, 1, REPO, env)  # warm-up: writes the bytecode both read from then on
        medians = interleaved_medians(commands, 10, REPO, env)
        figures["list_seconds"], figures["list_cpu_seconds"] = medians["list"]
        figures["bare_invoke_seconds"], figures["bare_invoke_cpu_seconds"] = medians["version"]
        figures["load_average_1min"] = os.getloadavg()[0]

    figures["up_vs_critical_path"] = figures["up_seconds"] / figures["critical_path_seconds"]
    figures["down_vs_critical_path"] = figures["down_seconds"] / figures["down_critical_path_seconds"]
    figures["first_step_vs_critical_path"] = (figures["first_step_seconds"]
                                              / figures["first_step_critical_path_seconds"])
    figures["list_vs_bare_invoke"] = figures["list_seconds"] / figures["bare_invoke_seconds"]
    # The same misses in seconds, which do not shrink with the scale as the ratios do.
    figures["up_overhead_seconds"] = figures["up_seconds"] - figures["critical_path_seconds"]
    figures["down_overhead_seconds"] = figures["down_seconds"] - figures["down_critical_path_seconds"]
    if with_scale0:
        # What the simulated latencies cost `up`, once start-up and Python are taken out.
        figures["up_minus_scale0_vs_critical_path"] = (
            (figures["up_seconds"] - figures["up_seconds_at_scale_0"]) / figures["critical_path_seconds"])
    return figures


def down_at_scales(scales: list[float], cached: bool = True) -> dict[str, object]:
    """`down --yes --delete-data` ÷ its critical path at other time scales, each after an `up` at scale 0: how much
    of down's miss is fixed (process start-ups, Python) and how much grows with the latencies (the reads on its
    chain: the first listing, the peering's fresh read, the last scan, which the bound does not count)."""
    from nemo_rl_gke import graph
    from nemo_rl_gke.resources import all_steps
    from nemo_rl_gke.settings import load

    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        tmp_path = Path(tmp)
        pycache = tmp_path / "pycache" if cached else None
        for scale in scales:
            fake = cloud(stack, tmp_path / f"down-{scale:g}", 0.0, pycache)
            timed_invoke(fake, "up", "--yes")
            bound = graph.critical_path_seconds(all_steps(load(allow_example=False, cwd=fake.workdir,
                                                               environ={})), deleting=True) * scale
            fake.env["FAKECLOUD_TIME_SCALE"] = str(scale)
            fake.runner_options = {"poll_seconds": POLL_SECONDS * scale}
            seconds = timed_invoke(fake, "down", "--yes", "--delete-data")
            figures[f"down_overhead_seconds_at_{scale:g}"] = seconds - bound
            figures[f"down_vs_critical_path_at_{scale:g}"] = seconds / bound
    return figures


def _job_model(name: str) -> str:
    import yaml

    model = (yaml.safe_load((REPO / "jobs" / f"{name}.yaml").read_text()) or {}).get("model") or {}
    return str(model.get("name") if isinstance(model, dict) else model)


def verdicts(figures: dict[str, object]) -> dict[str, bool]:
    return {name: float(figures[name]) <= bound for name, (_, bound) in GOALS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", help="write the figures as JSON here")
    parser.add_argument("--scale", type=float, default=float(os.environ.get("BENCH_TIME_SCALE", DEFAULT_SCALE)),
                        help=f"FAKECLOUD_TIME_SCALE (default {DEFAULT_SCALE}, or $BENCH_TIME_SCALE)")
    parser.add_argument("--no-scale0", action="store_true", help="skip the diagnostic `up` at scale 0")
    parser.add_argument("--compile-every-start", action="store_true",
                        help="no bytecode cache for up/down/first step (each process compiles what it imports, as "
                             "on a machine with PYTHONDONTWRITEBYTECODE=1; the bench's conditions before 2026-12-03)")
    parser.add_argument("--down-scales", default="",
                        help="also `down` at these time scales, comma-separated (e.g. 0.2,0.4): its miss in seconds "
                             "and as a ratio at each (a diagnostic; about 5 minutes more for 0.2,0.4)")
    args = parser.parse_args(argv)
    figures = measure(args.scale, not args.no_scale0, cached=not args.compile_every_start)
    if args.down_scales:
        figures.update(down_at_scales([float(x) for x in args.down_scales.split(",") if x.strip()],
                                      cached=not args.compile_every_start))
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
