"""The inventory: every step's existence answered from one listing per kind, fetched once, in parallel; what
the run itself created or deleted asked again by describe; the leftover scan reading the same lists."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from rounds import call_rounds  # noqa: E402


def _ok(done, what):
    assert done.code == 0, f"{what}:\n{done.output[-3000:]}"
    return done


def _words(call) -> str:
    return " ".join([call["tool"], *call["argv"]])


def test_inventory_rerun_of_up_lists_once_in_one_round(cloud):
    _ok(cloud.invoke("up", "--yes"), "up")
    before = len(cloud.calls())
    # Real processes: their launch times tell a call that waited for another from one that waited for a CPU.
    # The lists take their typical second (FACTS §6), so a machine slow to start 10 processes (sh starts them
    # one at a time) cannot make a call look as if it waited for another that ended first.
    _ok(cloud.invoke("up", "--yes", process=True, FAKECLOUD_TIME_SCALE="1"), "up again")
    calls = cloud.calls()[before:]
    assert len(calls) <= 10, "\n".join(_words(c)[:150] for c in calls)
    assert not [c for c in calls if c["mutating"]]
    # Only what a list cannot tell: the GPU pool's size now (its instance groups), after the cluster's list.
    asked = [_words(c) for c in calls if " describe " in _words(c) or "get-credentials" in _words(c)]
    assert all("instance-groups managed describe" in w for w in asked), asked
    assert call_rounds(calls) <= 2, [(_words(c)[:60], c["start"], c["end"]) for c in calls]
    assert call_rounds([c for c in calls if "instance-groups" not in c["argv"]]) == 1
    gcloud_lists = [c for c in calls if c["tool"] == "gcloud" and "list" in c["argv"]]
    assert len(gcloud_lists) == 7 and all(any(a.startswith("--filter=") for a in c["argv"]) or "vpc-peerings"
                                          in c["argv"] for c in gcloud_lists)


def test_inventory_plan_and_status_ask_the_lists(cloud):
    _ok(cloud.invoke("up", "--yes"), "up")
    for task in ("plan", "status"):
        before = len(cloud.calls())
        done = _ok(cloud.invoke(task), task)
        asked = [_words(c) for c in cloud.calls()[before:]]
        assert not [w for w in asked if "networks describe" in w or "subnets describe" in w], (task, asked)
        if task == "plan":
            assert "up would create 0 of" in done.stdout, done.stdout


def test_status_answers_from_the_lists_then_reads_the_rest_at_once(cloud):
    # status used to describe the cluster, the GPU pool and the Lustre instance the lists had just returned,
    # ask helm again whether Ray is deployed, and read Ray and the latest run one after the other: 21 calls in
    # 9 rounds. The lists, then the pool's size now beside Ray's pods and GPUs and the latest run: 3 rounds.
    _ok(cloud.invoke("up", "--yes"), "up")
    before = len(cloud.calls())
    # At the real typical latencies (a list 1 s, kubectl get 0.3 s): a loaded machine slow to start a dozen
    # processes cannot make a call look as if it waited for one that ended first.
    done = _ok(cloud.invoke("status", process=True, FAKECLOUD_TIME_SCALE="1"), "status")
    calls = cloud.calls()[before:]
    words = [_words(c) for c in calls]
    described = [w for w in words if " describe " in w]
    assert all("instance-groups managed describe" in w for w in described), described
    assert sum(w.startswith("helm status ") for w in words) == 1, words
    # Ray's pods once, for the Ray part and the latest run's (they were read twice, at the same time).
    assert sum(" get pods " in w for w in words) == 1, words
    assert call_rounds(calls) <= 3, [(w[:80], c["launched"], c["end"]) for w, c in zip(words, calls, strict=True)]
    assert len(calls) <= 15, words
    # The ages still come, from the listed createTime of the cluster and of the Lustre instance.
    for row in ("Standard cluster nemo-rl", "Lustre instance nemo-lustre"):
        line = next(line for line in done.stdout.splitlines() if row in line)
        assert " min " in line, line
    assert "Ray sees 16 of 16 GPUs" in done.stdout and "latest job: none" in done.stdout


def test_status_says_a_read_after_the_table_failed_and_prints_the_rest(cloud):
    _ok(cloud.invoke("up", "--yes"), "up")
    broken = {"FAKECLOUD_FAIL": "--selector=ray.io/cluster=nemo-rl:99:permanent"}
    done = _ok(cloud.invoke("status", **broken), "status")
    assert "Standard cluster nemo-rl" in done.stdout and "now: about $" in done.stdout
    # Said whole: the tool's own words (the first line of the ray part's used to name the command only).
    ray = done.stderr.split("ray: could not read status: ", 1)[1].split("job: could not")[0]
    assert ray.startswith("kubectl failed with exit code 1: kubectl ") and "injected permanent failure" in ray
    job = done.stderr.split("job: could not read status: ", 1)[1]
    assert job.startswith("cannot list the Ray pods: ") and "injected permanent failure" in job, done.stderr
    assert "latest job" not in done.stdout, done.output  # no read is no answer, not "none"
    as_json = cloud.invoke("status", "--json", **broken)
    assert as_json.code == 1 and "injected permanent failure" in as_json.stderr, as_json.output[-2000:]
    # Still the one document a script reads (it used to print nothing): the parts not read are null, and said.
    document = json.loads(as_json.stdout)
    assert (document["ray"], document["latest_job"], sorted(document["errors"])) == (None, None, ["latest_job", "ray"])
    assert "injected permanent failure" in document["errors"]["ray"], document["errors"]
    assert any(row["name"] and row["state"] == "present" for row in document["resources"])


def test_inventory_first_up_answers_everything_from_lists_and_nothing_in_a_missing_cluster(cloud):
    _ok(cloud.invoke("up", "--yes"), "up")
    calls = cloud.calls()
    first_create = next(i for i, c in enumerate(calls) if c["mutating"])
    asked = [_words(c) for c in calls[:first_create]]
    # The questions before anything is created: the lists (and kubectl, which finds no context yet). The
    # project number is asked once, by the bucket's binding, which starts with the first creates.
    assert not [w for w in asked if " describe " in w and "projects describe" not in w], asked
    assert sum(" list " in w for w in asked) == 7
    assert sum("projects describe" in _words(c) for c in calls) == 1


@pytest.mark.parametrize("tasks", [("up", "--yes"), ("net.create", "cluster.create", "storage.create")])
def test_inventory_a_cluster_this_run_created_is_known_empty_and_one_object_changes_itself_only(cloud, tasks):
    # Before: each object in a new cluster was asked with its own `kubectl get` (the cluster's create, and
    # each object applied since, made the namespace's listing stale) on its turn: the layer tasks, which
    # ask each step then (`up` asks everything once, before it starts).
    _ok(cloud.invoke(*tasks), " ".join(tasks))
    calls = [_words(c) for c in cloud.calls()]
    created = next(i for i, w in enumerate(calls) if w.startswith("gcloud container clusters create"))
    # `get TYPE NAME` (a namespace's one listing is `get TYPE/NAME TYPE/NAME …`; a run that did not make the
    # cluster lists it once, like storage.create here)
    one_by_one = [w for w in calls[created:] if w.startswith("kubectl") and " get " in w
                  and "/" not in w.split(" get ")[1].split()[0] and "--selector=" not in w]
    assert one_by_one == [], one_by_one


def test_inventory_existence_in_an_empty_project_needs_no_project_number(cloud, monkeypatch):
    # `up` asks every step whether it exists before it starts anything: with no bucket, neither the bucket
    # nor its binding needs the project number, so no `gcloud projects describe` delays the start.
    steps, runner = _steps_and_runner(cloud, monkeypatch)
    before = len(cloud.calls())
    assert not any(step.exists(runner) for step in steps if not step.always)
    asked = [_words(c) for c in cloud.calls()[before:]]
    assert asked and not [w for w in asked if "projects describe" in w], asked


def _steps_and_runner(cloud, monkeypatch):
    from nemo_rl_gke.resources import all_steps
    from nemo_rl_gke.runner import Runner
    from nemo_rl_gke.settings import load
    from support.inprocess import FakeTools

    for key, value in cloud.process_env().items():
        monkeypatch.setenv(key, value)
    s = load(allow_example=False, cwd=cloud.workdir, environ={})
    runner = Runner(out=io.StringIO(), err=io.StringIO(), poll_seconds=0, backoff_seconds=0, tools=FakeTools())
    return all_steps(s), runner


def test_inventory_what_the_run_created_is_asked_again(cloud, monkeypatch):
    steps, r = _steps_and_runner(cloud, monkeypatch)
    by_name = {st.name: st for st in steps}
    network = by_name["net.gvnic-network"]
    assert network.exists(r) is False  # from the lists
    before = len(cloud.calls())
    assert by_name["net.rdma-network"].exists(r) is False
    assert len(cloud.calls()) == before  # the same snapshot: nothing asked
    network.create(r)  # through the step: its kind is now changed for this run
    after_create = len(cloud.calls())
    assert network.exists(r) is True  # not the stale "absent" of the list
    assert "networks describe" in _words(cloud.calls()[after_create])
    # A kind nobody changed still answers from the snapshot.
    before = len(cloud.calls())
    assert by_name["net.gvnic-firewall"].exists(r) is False and len(cloud.calls()) == before


def test_inventory_down_scan_lists_instead_of_describing(cloud):
    _ok(cloud.invoke("up", "--yes"), "up")
    before = len(cloud.calls())
    _ok(cloud.invoke("down", "--yes", "--delete-data"), "down")
    calls = [_words(c) for c in cloud.calls()[before:]]
    first_delete = next(i for i, c in enumerate(cloud.calls()[before:]) if c["mutating"])
    # The kept bucket's binding needs the project number; the peering that told it is gone, but the
    # teardown's own inventory read it there: no `gcloud projects describe` at all.
    assert not [w for w in calls[first_delete:] if " describe " in w], calls
    assert not [w for w in calls if "projects describe" in w]
    # Each kind is listed once more, for the scan, and only after the last delete of that kind ended (the
    # peering's list before its delete is its fresh read of the ranges) or, for the teardown's last delete (the
    # main VPC), once it is the only one left: after every other delete ended.
    timed = cloud.calls()[before:]
    for kind in ("compute networks", "compute networks subnets", "compute firewall-rules", "container clusters",
                 "lustre instances", "compute addresses", "services vpc-peerings"):
        lists = [i for i, w in enumerate(calls) if w.startswith(f"gcloud {kind} list")]
        deletes = [i for i, w in enumerate(calls) if w.startswith(f"gcloud {kind} delete")]
        if kind == "compute networks":
            others = [c["end"] for c in timed if c["mutating"] and " delete default " not in _words(c) + " "]
            # `launched` is the process's start time from /proc: in clock ticks (10 ms), rounded down
            tick = 1 / os.sysconf("SC_CLK_TCK")
            assert deletes and timed[lists[-1]]["launched"] + tick >= max(others), (kind, calls)
        else:
            assert deletes and lists[-1] > deletes[-1], (kind, calls)
        assert len([i for i in lists if i > first_delete]) == (2 if "peerings" in kind else 1), (kind, calls)


def test_leftover_lists_start_once_every_step_asking_that_kind_has_ended():
    import threading

    from nemo_rl_gke.resources.leftovers import EarlyLists
    from nemo_rl_gke.runner import Runner
    from nemo_rl_gke.steps import Step

    class Fresh:
        fetched: list[set[str]] = []
        low: list[bool] = []
        fetching = threading.Semaphore(0)

        def askers(self):
            return {"cluster": {"c.cluster", "c.pool"}, "network": {"n.net"}, "kube:default": {"r.ray", "x.kept"}}

        def prefetch(self, r, kinds):
            from nemo_rl_gke import tools

            self.fetched.append(kinds)
            self.low.append(getattr(tools._priority, "low", False))  # behind the deletes still running
            self.fetching.release()

    fresh = Fresh()
    steps = {name: Step(name, name, lambda r: True, None) for name in ("c.cluster", "c.pool", "n.net", "r.ray")}
    listen = EarlyLists(Runner(out=io.StringIO(), err=io.StringIO()), fresh, list(steps.values()))
    listen(steps["c.cluster"], "running", 0.0)
    listen(steps["c.cluster"], "deleted", 1.0)  # the GPU pool still runs: no cluster list yet
    listen(steps["r.ray"], "deleted", 1.0)  # x.kept is not part of this teardown
    assert fresh.fetching.acquire(timeout=5) and fresh.fetched == [{"kube:default"}]
    listen(steps["c.pool"], "failed", 1.0)
    assert fresh.fetching.acquire(timeout=5) and fresh.fetched == [{"kube:default"}, {"cluster"}]
    listen(steps["r.ray"], "deleted", 1.0)  # an end seen twice starts nothing again
    assert not fresh.fetching.acquire(timeout=0.2) and fresh.fetched == [{"kube:default"}, {"cluster"}]
    assert fresh.low == [True, True]


def test_teardown_reads_the_runs_beside_the_lists_with_yes(cloud, monkeypatch):
    # The export check's `get pods` starts while the lists are still out: each list here waits for it.
    import threading

    from nemo_rl_gke.settings import load
    from nemo_rl_gke.steps import Consent
    from nemo_rl_gke.tasks.teardown import _teardown_plan

    _ok(cloud.invoke("up", "--yes"), "up")
    steps, r = _steps_and_runner(cloud, monkeypatch)
    asked = threading.Event()
    waited: list[bool] = []
    seam = r.tools

    class Gated:
        def run(self, argv, *, stdin, timeout):
            if argv[0] == "kubectl" and "pods" in argv:
                asked.set()
            elif argv[0] == "gcloud" and "list" in argv:
                waited.append(asked.wait(5))
            return seam.run(argv, stdin=stdin, timeout=timeout)

    r.tools = Gated()
    s = load(allow_example=False, cwd=cloud.workdir, environ={})
    _teardown_plan(r, s, steps, Consent(delete_data=True), "down", read_ahead=True)
    assert len(waited) == 7 and all(waited), waited


def test_presence_checks_run_all_at_once_so_direct_questions_never_queue_behind_the_lists():
    # Most checks wait for the inventory's lists; a few ask their tool directly (helm status, the prefetch
    # Jobs by label). With a bounded pool the direct ones queued behind 16 waiting checks, a round later.
    import threading
    import time

    from nemo_rl_gke.runner import Runner
    from nemo_rl_gke.steps import Step
    from nemo_rl_gke.tasks.context import present_map

    lists_done = threading.Event()

    def waits_for_the_lists(r) -> bool:
        return lists_done.wait(5)

    def asks_its_tool(r) -> bool:
        lists_done.set()  # stands for "answered at once": the waiting checks end as soon as it has run
        return True

    steps = [Step(f"x.listed-{i}", f"listed {i}", waits_for_the_lists, lambda r: None) for i in range(20)]
    steps.append(Step("x.direct", "direct", asks_its_tool, lambda r: None))
    started = time.monotonic()
    present = present_map(Runner(out=io.StringIO(), err=io.StringIO()), steps)
    assert all(present.values()) and time.monotonic() - started < 2.5


def test_a_layers_teardown_scans_that_layer_only(cloud):
    # `clean.ray` deletes the Ray release; its leftover scan used to list every kind in the project (9 lists).
    _ok(cloud.invoke("up", "--yes"), "up")
    before = len(cloud.calls())
    _ok(cloud.invoke("clean.ray", "--yes"), "clean.ray")
    calls = [_words(c) for c in cloud.calls()[before:]]
    gcloud_lists = [w.split(" --")[0] for w in calls if w.startswith("gcloud") and " list" in w]
    assert gcloud_lists == ["gcloud container clusters list"] * 2, calls  # the teardown's, then the scan's
    # (+2: the Ray release's guard lists /data/runs in the head pod before Ray goes: get pods, exec)
    assert "helm uninstall" in " ".join(calls) and len(calls) <= 8, calls


@pytest.mark.parametrize(("task", "rounds"), [("clean.ray", 2), ("clean.cluster", 3)])
def test_a_layers_teardown_reads_from_its_listing_before_its_first_delete(cloud, task, rounds):
    # A layer's steps lost the run's inventory: the plan listed every cluster of the project unfiltered for the
    # other deployments, asked the cluster's objects one describe at a time, and took the guards' reads only
    # after it (clean.cluster: 13 reads in 4 rounds before its delete; clean.ray: 3 rounds).
    _ok(cloud.invoke("up", "--yes"), "up")
    before = len(cloud.calls())
    # The first delete is refused at once (an injected fault): what matters is what was read before it.
    stop = {"FAKECLOUD_FAIL": f"{'helm uninstall' if task == 'clean.ray' else 'clusters delete'}:1:refused"}
    done = cloud.invoke(task, "--yes", process=True, FAKECLOUD_TIME_SCALE="1", **stop)
    assert done.code == 1 and "injected permanent failure" in done.stderr, done.output[-3000:]
    calls = cloud.calls()[before:]
    first = min(c["launched"] for c in calls if c["mutating"]) + 1 / os.sysconf("SC_CLK_TCK")
    reads = [c for c in calls if c["end"] <= first and not c["mutating"]]
    words = [_words(c) for c in reads]
    assert not [w for w in words if w.startswith("gcloud container clusters list") and "--filter=" not in w], words
    assert not [w for w in words if " describe " in w], words
    assert call_rounds(reads) <= rounds, [(w[:80], c["launched"], c["end"]) for w, c in zip(words, reads,
                                                                                          strict=True)]


@pytest.mark.parametrize("kind", ["compute networks subnets list", "compute addresses list"])
def test_inventory_a_list_that_exits_0_after_a_failed_request_is_no_answer(cloud, kind):
    # Real gcloud: these two lists warn "Some requests did not succeed" and exit 0 with what they got (here
    # nothing) on a 503 of their own. Read as "none exist", `down` skipped the nine subnets (or the range), and
    # the network's delete then failed on them (or the range stayed behind unseen).
    _ok(cloud.invoke("up", "--yes"), "up")
    before = len(cloud.calls())
    done = _ok(cloud.invoke("down", "--yes", "--delete-data", FAKECLOUD_FAIL=f"{kind}:1:transient"), "down")
    answered = [c for c in cloud.calls()[before:] if _words(c).startswith(f"gcloud {kind}")]
    assert answered[0]["exit"] == 0  # the failed list, as gcloud gives it
    assert cloud.resources() == {}, sorted(cloud.resources())
    assert "nothing of ours is left" in done.stderr, done.stderr[-2000:]



def test_leftover_scan_that_cannot_read_a_list_says_so_instead_of_nothing_is_left(cloud):
    _ok(cloud.invoke("up", "--yes"), "up")
    # Every subnets list answers as gcloud does after a 503: exit 0, nothing, a warning. The steps then ask
    # each subnet by describe and delete them; the scan has no list to check with.
    done = _ok(cloud.invoke("down", "--yes", "--delete-data",
                            FAKECLOUD_FAIL="compute networks subnets list:99:transient"), "down")
    assert cloud.resources() == {}, sorted(cloud.resources())
    assert "? could not list subnets: WARNING: Some requests did not succeed." in done.stderr, done.stderr[-2000:]
    assert "nothing of ours is left" not in done.stderr
    assert "down: nothing of ours was found except what is kept on purpose (above), but 1 check(s) could not be " \
           "read" in done.stderr


def test_down_with_yes_reads_everything_its_guards_need_before_the_first_delete_in_two_rounds(cloud):
    # With --yes nothing is asked between the plan and the deletes: the lists, the head pod and its /data/runs
    # (data guard), and the pods mounting the Lustre claim (claim guard) are read beside one another. The claim
    # guard's `kubectl get pods` used to wait for the others, a third round before the first delete.
    _ok(cloud.invoke("up", "--yes"), "up")
    before = len(cloud.calls())
    # At the typical latencies (a list 1 s, kubectl get 0.3 s; the bucket's lease is taken beside them): a loaded
    # machine slow to start a dozen processes cannot make a call look as if it waited for one that ended first.
    # The first deletes fail at once, so the run ends there instead of waiting out the teardown.
    first_deletes = "firewall-rules delete:1:refused;helm uninstall:1:refused;delete jobs:1:refused"
    done = cloud.invoke("down", "--yes", process=True, FAKECLOUD_TIME_SCALE="1", FAKECLOUD_FAIL=first_deletes)
    assert done.code == 1 and "injected permanent failure" in done.stderr, done.output[-3000:]
    calls = cloud.calls()[before:]
    # `launched` is /proc's start time in clock ticks (10 ms), rounded down: a read that ended just before the
    # first delete started may look as if it ended up to a tick after it.
    first = min(c["launched"] for c in calls if c["mutating"]) + 1 / os.sysconf("SC_CLK_TCK")
    reads = [c for c in calls if c["end"] <= first and not c["mutating"]]
    assert any(w.endswith("get pods --namespace=default --output=json") for w in map(_words, reads)), \
        [_words(c) for c in reads]  # the claim guard's read, before the first delete
    # ... which also finds the head pod for the data guard: the namespace's pods are asked once.
    assert sum(" get pods " in _words(c) for c in reads) == 1, [_words(c) for c in reads]
    assert any(" exec " in _words(c) for c in reads)  # the data guard's listing of /data/runs, read ahead
    assert call_rounds(reads) <= 2, [(_words(c)[:80], c["launched"], c["end"]) for c in reads]


def test_leftover_lists_the_last_steps_kinds_while_it_runs_and_trusts_only_its_delete():
    import threading

    from nemo_rl_gke.resources.leftovers import EarlyLists
    from nemo_rl_gke.runner import Runner
    from nemo_rl_gke.steps import Step

    class Fresh:
        def __init__(self):
            self.fetched: list[str] = []
            self.fetching = threading.Semaphore(0)

        def askers(self):
            return {"cluster": {"c.cluster", "c.pool"}, "network": {"n.net", "n.other"}}

        def prefetch(self, r, kinds):
            self.fetched += sorted(kinds)
            self.fetching.release()

        def forget(self, kinds):
            forgotten.append(set(kinds))

    def run(last_outcome: str, last: str = "n.net"):
        fresh = Fresh()
        steps = {name: Step(name, name, lambda r: True, None) for name in ("c.cluster", "n.net", "n.other")}
        steps["c.pool"] = Step("c.pool", "c.pool", lambda r: True, None, parent="c.cluster")
        listen = EarlyLists(Runner(out=io.StringIO(), err=io.StringIO()), fresh, list(steps.values()))
        listen(steps[last], "running", 0.0)  # the last one starts while the others still run
        for name in [n for n in ("c.pool", "n.other", "c.cluster", "n.net") if n != last]:
            listen(steps[name], "running", 0.0)
            listen(steps[name], "deleted", 1.0)
        assert fresh.fetching.acquire(timeout=5)
        while len(fresh.fetched) < 2 and fresh.fetching.acquire(timeout=5):  # one prefetch or two
            pass
        assert sorted(fresh.fetched) == ["cluster", "network"]  # the network already, its last step running
        assert listen.trusted() == set()  # nothing is trusted before its delete ended
        listen(steps[last], last_outcome, 1.0)
        assert not fresh.fetching.acquire(timeout=0.2)  # each kind is listed once
        return listen.trusted()

    forgotten: list[set[str]] = []
    assert run("deleted") == {"n.net"} and run("absent") == {"n.net"} and forgotten == []
    # A failed delete is no proof: its resource is looked for as before, in a listing taken again.
    assert run("failed") == set() and forgotten == [{"network"}]
    assert run("deleted", last="c.cluster") == {"c.cluster", "c.pool"}  # what goes with the cluster goes too


def test_down_lists_the_main_vpc_while_it_goes_and_still_finds_a_leftover_of_ours(cloud):
    # The teardown's last delete (a VPC) no longer makes the scan wait for its end to list networks (the unit
    # test above: the listing starts once it is the only step left). A network of ours the teardown does not
    # delete is still found in that listing, and networks are not listed twice.
    from support.fake import read_env_example

    env = read_env_example()
    _ok(cloud.invoke("up", "--yes"), "up")
    made = subprocess.run(["gcloud", "compute", "networks", "create", "nemo-old-net", f"--project={env['PROJECT_ID']}",
                           "--subnet-mode=custom", "--description=managed-by=nemo-rl-gke"],
                          env=cloud.process_env(), capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    before = len(cloud.calls())
    done = cloud.invoke("down", "--yes", "--delete-data", process=True, FAKECLOUD_TIME_SCALE="0.005")
    assert done.code == 1, done.output[-3000:]
    assert "still there after down" in done.stderr and "network nemo-old-net (description" in done.stderr
    assert "default" not in done.stderr.split("still there after down")[1], done.stderr  # the VPC that went
    calls = cloud.calls()[before:]
    first_delete = min(c["launched"] for c in calls if c["mutating"])
    lists = [c for c in calls if _words(c).startswith("gcloud compute networks list") and c["launched"] > first_delete]
    assert len(lists) == 1, [_words(c)[:60] for c in calls]  # the scan's, taken once (beside the last delete)
