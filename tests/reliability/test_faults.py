"""Fault injection: each mutating call of `up` and of `down` fails, transiently (retried, the run succeeds)
and permanently (the run stops with a clear message, no traceback); a re-run then ends in the same state
as a clean run, having made each create/delete exactly as often as the clean run did (no duplicates).

Patterns are substrings of the fake's call line (`tool argv…`), one per mutating call. The transient run
puts a fault on every mutating call at once. The permanent faults are all armed at once too, each firing
once: every run stops at the first wave of steps that hits one (independent steps already running are let
finish, so a wave may use several), and the run after it goes on from there, until a run succeeds. That is
a permanent failure and a re-run for every mutating call, in about as many runs as the graph has waves.
Faults cannot be injected into the bucket and its IAM binding: they go through the google-cloud-storage
client (the GCS emulator), not a process.
"""

from __future__ import annotations

import json
from contextlib import ExitStack

import pytest

from reliability import counts
from reliability.cloud import buckets, copy_state, make_cloud, run, state, successful_mutations

RDMA_SUBNETS = [f"subnets create nemo-rdma-sub-{n} " for n in range(8)]
UP_FAULTS = [
    "compute networks create default ", "compute networks create nemo-gvnic-net ",
    "compute networks create nemo-rdma-net ", "subnets create nemo-gvnic-sub ", *RDMA_SUBNETS,
    "firewall-rules create ", "container clusters create ", "node-pools create ", "addresses create ",
    "vpc-peerings connect ", "lustre instances create ", "apply --filename=-", "apply --filename=https",
    "helm upgrade ",
]
DOWN_FAULTS = [
    "helm uninstall ", "delete jobs ", "delete secret ", "delete persistentvolumeclaim ", "delete serviceaccount ",
    "delete persistentvolume lustre-pv", "lustre instances delete ", "container clusters delete ",
    "vpc-peerings delete ", "addresses delete ", "subnets delete nemo-gvnic-sub ",
    *[f"subnets delete nemo-rdma-sub-{n} " for n in range(8)], "firewall-rules delete ",
    "compute networks delete default ", "compute networks delete nemo-gvnic-net ",
    "compute networks delete nemo-rdma-net ",
]


def spec(patterns: list[str], kind: str) -> str:
    return ";".join(f"{p}:1:{kind}" for p in patterns)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """One clean `up` (the reference state and its mutating calls) and a clean `down` of a copy of it."""
    with ExitStack() as stack:
        ref = make_cloud(stack, tmp_path_factory.mktemp("clean-up"))
        done = run(ref, "up", "--yes")
        assert done.code == 0, done.output[-3000:]
        gone = make_cloud(stack, tmp_path_factory.mktemp("clean-down"))
        copy_state(ref, gone)
        done = run(gone, "down", "--yes", "--delete-data")
        assert done.code == 0, done.output[-3000:]
        yield {"cloud": ref, "state": state(ref), "buckets": buckets(ref),
               "up_calls": successful_mutations(ref.calls()), "down_calls": successful_mutations(gone.calls())}


@pytest.fixture
def stack():
    with ExitStack() as s:
        yield s


def matching(patterns: list[str], lines) -> dict[str, list[str]]:
    return {p: sorted({line for line in lines if p in line + " "}) for p in patterns}


def test_fault_patterns_cover_every_mutating_call_of_up(clean):
    lines = list(clean["up_calls"])
    assert [line for line in lines if not any(p in line + " " for p in UP_FAULTS)] == []


def test_fault_patterns_each_match_one_mutating_call_of_up(clean):
    found = matching(UP_FAULTS, clean["up_calls"])
    assert {p: len(v) for p, v in found.items() if len(v) != 1} == {}


def test_fault_patterns_cover_every_mutating_call_of_down(clean):
    lines = list(clean["down_calls"])
    assert [line for line in lines if not any(p in line + " " for p in DOWN_FAULTS)] == []


def test_fault_patterns_each_match_one_mutating_call_of_down(clean):
    found = matching(DOWN_FAULTS, clean["down_calls"])
    assert {p: len(v) for p, v in found.items() if len(v) != 1} == {}


def fired(fake) -> set[str]:
    """The patterns whose injected failure has been used (the fake counts them in its state file)."""
    path = fake.state_dir / "resources.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    return {p for p, used in data.get("_fail", {}).items() if used.get("n")}


def until_success(fake, args: list[str], patterns: list[str]) -> dict:
    """Re-run with every permanent fault armed until a run succeeds; what each failed run said."""
    env = {"FAKECLOUD_FAIL": spec(patterns, "permanent")}
    failures = []
    for _ in range(len(patterns) + 1):
        done = run(fake, *args, **env)
        if done.code == 0:
            return {"failures": failures, "fired": fired(fake), "last": done}
        failures.append(done)
    raise AssertionError(f"{args} still failing after {len(patterns) + 1} runs:\n{failures[-1].output[-2000:]}")


def clear(done, what: str) -> bool:
    return (done.code == 1 and "injected permanent failure" in done.stderr and f"{what} stopped" in done.stderr
            and "Traceback" not in done.output)


@pytest.fixture(scope="module")
def up_transient(clean, tmp_path_factory):
    with ExitStack() as stack:
        fake = make_cloud(stack, tmp_path_factory.mktemp("up-transient"))
        counts.add("faults", len(UP_FAULTS))
        done = run(fake, "up", "--yes", FAKECLOUD_FAIL=spec(UP_FAULTS, "transient"))
        before = len(fake.calls())
        rerun = run(fake, "up", "--yes")
        yield {"fake": fake, "done": done, "rerun": rerun, "rerun_mutations": fake.mutating_calls(since=before),
               "buckets": buckets(fake)}


def test_up_transient_fault_on_every_mutating_call_is_retried_once_each(up_transient):
    fake, done = up_transient["fake"], up_transient["done"]
    failed = [c for c in fake.calls() if c["exit"] != 0 and c["mutating"]]
    assert (done.code, len(failed), fired(fake) == set(UP_FAULTS)) == (0, len(UP_FAULTS), True), \
        done.output[-3000:]


def test_up_transient_faults_end_like_a_clean_run(clean, up_transient):
    fake = up_transient["fake"]
    assert (state(fake), up_transient["buckets"], successful_mutations(fake.calls())) == (
        clean["state"], clean["buckets"], clean["up_calls"])


def test_up_transient_faults_then_rerun_makes_no_mutating_call(up_transient):
    assert (up_transient["rerun"].code, up_transient["rerun_mutations"]) == (0, [])


@pytest.fixture(scope="module")
def up_permanent(clean, tmp_path_factory):
    with ExitStack() as stack:
        fake = make_cloud(stack, tmp_path_factory.mktemp("up-permanent"))
        counts.add("faults", len(UP_FAULTS))
        yield {"fake": fake, **until_success(fake, ["up", "--yes"], UP_FAULTS), "buckets": buckets(fake)}


def test_up_permanent_fault_on_every_mutating_call_fires_before_success(up_permanent):
    assert (sorted(set(UP_FAULTS) - up_permanent["fired"]), len(up_permanent["failures"]) >= 2) == ([], True)


def test_up_permanent_faults_each_stop_the_run_with_a_clear_message(up_permanent):
    assert [d.output[-1500:] for d in up_permanent["failures"] if not clear(d, "up")] == []


def test_up_permanent_faults_then_reruns_end_like_a_clean_run(clean, up_permanent):
    fake = up_permanent["fake"]
    assert (state(fake), up_permanent["buckets"], successful_mutations(fake.calls())) == (
        clean["state"], clean["buckets"], clean["up_calls"])


@pytest.fixture(scope="module")
def down_transient(clean, tmp_path_factory):
    with ExitStack() as stack:
        fake = make_cloud(stack, tmp_path_factory.mktemp("down-transient"))
        copy_state(clean["cloud"], fake)
        counts.add("faults", len(DOWN_FAULTS))
        yield {"fake": fake, "done": run(fake, "down", "--yes", "--delete-data",
                                         FAKECLOUD_FAIL=spec(DOWN_FAULTS, "transient"))}


def test_down_transient_fault_on_every_mutating_call_is_retried_once_each(down_transient):
    fake, done = down_transient["fake"], down_transient["done"]
    failed = [c for c in fake.calls() if c["exit"] != 0 and c["mutating"]]
    assert (done.code, len(failed), fired(fake) == set(DOWN_FAULTS)) == (0, len(DOWN_FAULTS), True), \
        done.output[-3000:]


def test_down_transient_faults_end_like_a_clean_run(clean, down_transient):
    fake = down_transient["fake"]
    assert (state(fake), successful_mutations(fake.calls())) == ({}, clean["down_calls"])


@pytest.fixture(scope="module")
def down_permanent(clean, tmp_path_factory):
    with ExitStack() as stack:
        fake = make_cloud(stack, tmp_path_factory.mktemp("down-permanent"))
        copy_state(clean["cloud"], fake)
        counts.add("faults", len(DOWN_FAULTS))
        yield {"fake": fake, **until_success(fake, ["down", "--yes", "--delete-data"], DOWN_FAULTS)}


def test_down_permanent_fault_on_every_mutating_call_fires_before_success(down_permanent):
    assert (sorted(set(DOWN_FAULTS) - down_permanent["fired"]), len(down_permanent["failures"]) >= 2) == ([], True)


def test_down_permanent_faults_each_stop_the_run_with_a_clear_message(down_permanent):
    assert [d.output[-1500:] for d in down_permanent["failures"] if not clear(d, "down")] == []


def test_down_permanent_faults_then_reruns_leave_nothing(clean, down_permanent):
    fake = down_permanent["fake"]
    assert (state(fake), successful_mutations(fake.calls())) == ({}, clean["down_calls"])
