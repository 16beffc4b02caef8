from __future__ import annotations

import io
import threading
import time

import pytest

from nemo_rl_gke import graph
from nemo_rl_gke.runner import Runner
from nemo_rl_gke.steps import Consent, GraphError, Step
from nemo_rl_gke.tools import ToolError


class World:
    """Resources as a set of names; each create/delete is recorded in order."""

    def __init__(self, present=()):
        self.present = set(present)
        self.log: list[str] = []
        self.lock = threading.Lock()

    def step(self, name, deps=(), fail=False, slow=0.0, **kw):
        def create(r):
            if fail:
                raise ToolError(f"{name} broke", 5)
            with self.lock:
                self.present.add(name)
                self.log.append(f"create {name}")

        def delete(r):
            time.sleep(slow)
            with self.lock:
                self.present.discard(name)
                self.log.append(f"delete {name}")

        return Step(name, name, lambda r: name in self.present, create, kw.pop("delete", delete), deps=deps, **kw)


def runner(dry=False):
    return Runner(dry=dry, out=io.StringIO(), err=io.StringIO())


def test_apply_creates_dependencies_first_and_skips_what_exists():
    w = World(present={"net.a"})
    steps = [w.step("cluster.c", deps=("net.b",)), w.step("net.a"), w.step("net.b", deps=("net.a",))]
    report = graph.apply(runner(), steps)
    assert w.log == ["create net.b", "create cluster.c"]
    assert [s.name for s in report.by_outcome("exists")] == ["net.a"]


def test_apply_runs_independent_steps_at_the_same_time():
    barrier = threading.Barrier(3, timeout=5)
    steps = [Step(f"net.s{i}", f"s{i}", lambda r: False, lambda r: barrier.wait() and None) for i in range(3)]
    report = graph.apply(runner(), steps)  # would time out (BrokenBarrierError) if run one by one
    assert len(report.by_outcome("created")) == 3


def test_apply_failure_stops_new_steps_and_reports_what_did_not_start():
    w = World()
    steps = [w.step("net.a", fail=True), w.step("net.b", deps=("net.a",)), w.step("net.c")]
    with pytest.raises(GraphError) as caught:
        graph.apply(runner(), steps)
    assert caught.value.exit_code == 5
    assert "net.a broke" in str(caught.value) and "not started: net.b" in str(caught.value)
    assert "create net.b" not in w.log


def test_apply_rejects_cycles_with_exit_1_naming_the_steps_before_creating_anything():
    w = World()
    steps = [w.step("net.c"), w.step("net.a", deps=("net.b",)), w.step("net.b", deps=("net.a",))]
    with pytest.raises(GraphError) as caught:
        graph.apply(runner(), steps)
    assert (caught.value.exit_code, w.log) == (1, [])
    assert "net.a waits for net.b" in str(caught.value) and "net.b waits for net.a" in str(caught.value)


def test_apply_step_waiting_on_a_cycle_is_named_too():
    w = World()
    steps = [w.step("net.a", deps=("net.b",)), w.step("net.b", deps=("net.a",)), w.step("net.d", deps=("net.a",))]
    with pytest.raises(GraphError, match="3 step"):
        graph.apply(runner(), steps)


def test_dry_apply_with_a_cycle_fails_loudly():
    w = World()
    with pytest.raises(GraphError, match="cycle"):
        graph.apply(runner(dry=True), [w.step("net.a", deps=("net.b",)), w.step("net.b", deps=("net.a",))])


def test_destroy_with_a_cycle_in_its_wait_graph_fails_loudly_and_deletes_nothing():
    # No dependency cycle, but through in-cluster objects (deleted with their parent) the cluster waits for
    # the network and the network for the cluster: destroy used to return quietly having deleted nothing.
    w = World(present={"net.x", "cluster.c"})
    steps = [w.step("net.x"), w.step("cluster.c"),
             w.step("cluster.p", deps=("net.x",), delete=None, parent="cluster.c"),
             w.step("net.q", deps=("cluster.c",), delete=None, parent="net.x")]
    graph.order(steps)  # a valid dependency order exists
    with pytest.raises(GraphError) as caught:
        graph.destroy(runner(), steps)
    assert (caught.value.exit_code, w.log) == (1, [])
    assert "net.x waits for cluster.c" in str(caught.value) and "cluster.c waits for net.x" in str(caught.value)


def test_stuck_is_empty_for_a_graph_that_can_run():
    w = World()
    steps = [w.step("net.a"), w.step("net.b", deps=("net.a",))]
    assert graph.stuck(steps, {"net.a": set(), "net.b": {"net.a"}}) == []


def test_destroy_runs_every_guard_before_deleting_anything():
    w = World(present={"cluster.c", "storage.lustre"})

    def refuse(r, consent):
        raise ToolError("not exported", 1)

    steps = [w.step("cluster.c"), w.step("storage.lustre", holds_data=True, guard=refuse)]
    with pytest.raises(ToolError, match="not exported"):
        graph.destroy(runner(), steps, delete_data=True)
    assert w.log == []


def test_destroy_skips_the_guard_of_a_kept_step():
    w = World(present={"storage.lustre"})
    steps = [w.step("storage.lustre", holds_data=True, guard=lambda r, c: (_ for _ in ()).throw(AssertionError))]
    assert [s.name for s in graph.destroy(runner(), steps).by_outcome("kept")] == ["storage.lustre"]


def test_destroy_keeps_a_step_until_its_own_consent_is_given():
    w = World(present={"storage.bucket", "storage.lustre"})
    steps = [w.step("storage.bucket", holds_data=True, consent="delete_bucket"),
             w.step("storage.lustre", holds_data=True, consent="delete_data")]
    report = graph.destroy(runner(), steps, consent=Consent(delete_data=True))
    assert (w.log, [s.name for s in report.by_outcome("kept")]) == (["delete storage.lustre"], ["storage.bucket"])


def test_destroy_reports_a_kept_step_that_is_gone_as_absent_not_kept():
    w = World(present=set())
    steps = [w.step("storage.lustre", holds_data=True)]
    report = graph.destroy(runner(), steps)
    assert (report.by_outcome("kept"), [s.name for s in report.by_outcome("absent")]) == ([], ["storage.lustre"])


def test_failed_outcome_keeps_its_exception():
    w = World()
    with pytest.raises(GraphError) as caught:
        graph.apply(runner(), [w.step("net.a", fail=True)])
    (failed,) = caught.value.report.outcomes
    assert isinstance(failed.exc, ToolError) and failed.exc.exit_code == 5


def test_dry_apply_prints_in_stable_topological_order():
    w = World()
    r = runner(dry=True)
    graph.apply(r, [w.step("net.b", deps=("net.a",)), w.step("net.a")])
    assert r.out.getvalue().splitlines() == ["# net.a", "# net.b"]


def test_destroy_runs_backwards_and_keeps_data_with_its_dependencies():
    w = World(present={"net.n", "storage.lustre", "storage.peering", "cluster.c"})
    steps = [w.step("net.n"), w.step("storage.peering", deps=("net.n",)),
             w.step("storage.lustre", deps=("storage.peering",), holds_data=True), w.step("cluster.c", deps=("net.n",))]
    report = graph.destroy(runner(), steps)
    assert w.log == ["delete cluster.c"]
    assert {s.name for s in report.by_outcome("kept")} == {"net.n", "storage.peering", "storage.lustre"}
    graph.destroy(runner(), steps, delete_data=True)
    assert w.log[1:] == ["delete storage.lustre", "delete storage.peering", "delete net.n"]


def test_destroy_deletes_a_delete_last_step_after_every_other_and_only_when_it_goes():
    # The bucket holds the deployment's lock: it goes last, after the slow deletes, not beside them.
    w = World(present={"net.n", "storage.bucket", "storage.binding", "cluster.c"})
    steps = [w.step("net.n"), w.step("cluster.c", deps=("net.n",), slow=0.2),
             w.step("storage.bucket", delete_last=True, consent="delete_bucket", holds_data=True),
             w.step("storage.binding", deps=("storage.bucket",))]
    graph.destroy(runner(), steps, consent=Consent(delete_data=True, delete_bucket=True))
    assert w.log[-1] == "delete storage.bucket" and len(w.log) == 4, w.log
    kept = World(present={"net.n", "storage.bucket", "cluster.c"})
    steps = [kept.step("net.n"), kept.step("cluster.c", deps=("net.n",), slow=0.2),
             kept.step("storage.bucket", delete_last=True, consent="delete_bucket", holds_data=True)]
    report = graph.destroy(runner(), steps, consent=Consent(delete_data=True))
    assert kept.log == ["delete cluster.c", "delete net.n"]
    assert [s.name for s in report.by_outcome("kept")] == ["storage.bucket"]


def test_destroy_waits_for_the_parent_of_in_cluster_objects():
    # The GPU pool goes with the cluster; its subnets may only go after the cluster is gone.
    w = World(present={"net.sub", "cluster.c"})
    steps = [w.step("net.sub"), w.step("cluster.c", slow=0.2),
             w.step("cluster.pool", deps=("cluster.c", "net.sub"), delete=None, parent="cluster.c")]
    graph.destroy(runner(), steps)
    assert w.log == ["delete cluster.c", "delete net.sub"]


def test_critical_path_is_the_longest_chain():
    steps = [Step("a.x", "x", lambda r: False, lambda r: None, create_seconds=10),
             Step("a.y", "y", lambda r: False, lambda r: None, deps=("a.x",), create_seconds=5),
             Step("a.z", "z", lambda r: False, lambda r: None, create_seconds=12)]
    assert graph.critical_path_seconds(steps) == 15


def test_chains_through_each_step_and_the_steps_with_time_to_spare():
    waits = {"a": set(), "b": {"a"}, "c": {"a"}}
    steps = [Step(n, n, lambda r: False, lambda r: None) for n in "abc"]
    seconds = {"a": 10.0, "b": 100.0, "c": 1.0}
    assert graph.chains_through(steps, waits, lambda s: seconds[s.name]) == {"a": 110.0, "b": 110.0, "c": 11.0}
    assert graph._with_slack(steps, waits, lambda s: seconds[s.name]) == {"c"}
    assert graph._with_slack(steps, waits, lambda s: 0.0) == set()  # nothing to do: nothing to rank


def _priority_seen(seen: dict[str, bool], name: str) -> None:
    from nemo_rl_gke import tools

    seen[name] = getattr(tools._priority, "low", False)


def test_apply_and_destroy_start_only_the_steps_off_the_critical_path_in_the_background():
    """What a step's commands run at (tools.background): the short branch yields the CPU to the long chain,
    in both directions; a step that has nothing to do (it exists) weighs nothing."""
    seen: dict[str, bool] = {}

    def step(name, deps=(), create_seconds=0, delete_seconds=0):
        return Step(name, name, lambda r: name in present, lambda r: _priority_seen(seen, name),
                    lambda r: _priority_seen(seen, name), deps=deps, create_seconds=create_seconds,
                    delete_seconds=delete_seconds)

    present: set[str] = set()
    steps = [step("net.a", create_seconds=10, delete_seconds=10), step("net.long", ("net.a",), 100, 100),
             step("net.short", ("net.a",), 1, 1)]
    graph.apply(runner(), steps)
    assert seen == {"net.a": False, "net.long": False, "net.short": True}
    seen.clear()
    present.update({"net.a", "net.long", "net.short"})
    graph.destroy(runner(), steps)
    assert seen == {"net.a": False, "net.long": False, "net.short": True}
    seen.clear()
    present.clear()  # the long one exists: the short branch is the chain now
    graph.apply(runner(), steps, known={"net.a": False, "net.long": True, "net.short": False})
    assert seen == {"net.a": False, "net.short": False}


def test_apply_does_not_ask_again_what_it_already_knows():
    asked = []
    steps = [Step(f"net.{n}", n, lambda r, n=n: asked.append(n) or False, lambda r: None) for n in "abc"]
    report = graph.apply(runner(), steps, known={"net.a": True, "net.b": False, "net.c": None})
    assert asked == ["c"]
    assert [s.name for s in report.by_outcome("exists")] == ["net.a"]
    assert sorted(s.name for s in report.by_outcome("created")) == ["net.b", "net.c"]


def test_needed_by_is_the_names_and_their_transitive_dependencies():
    w = World()
    steps = [w.step("net.n"), w.step("storage.range", deps=("net.n",)), w.step("storage.lustre",
             deps=("storage.range", "outside.x")), w.step("cluster.c", deps=("net.n",))]
    assert graph.needed_by(steps, ["storage.lustre"]) == {"storage.lustre", "storage.range", "net.n"}
    assert graph.needed_by(steps, []) == set()


def test_outside_needs_are_the_steps_of_other_layers_each_chosen_step_stands_on():
    w = World()
    steps = [w.step("net.a"), w.step("cluster.c", deps=("net.a",)),
             w.step("cluster.creds", deps=("cluster.c",), always=True),
             w.step("storage.r", deps=("net.a",)), w.step("storage.k", deps=("cluster.creds",)),
             w.step("storage.b")]
    needs = graph.outside_needs(steps, ["storage.r", "storage.k", "storage.b"])
    # An `always` step outside (credentials) has nothing to ask: what it needs stands in for it.
    assert needs == {"storage.r": ["net.a"], "storage.k": ["cluster.c"]}
    assert graph.outside_needs(steps, ["storage.k", "cluster.creds"]) == {"cluster.creds": ["cluster.c"]}
    assert graph.outside_needs(steps, ["net.a"]) == {}


def test_foundations_leave_out_what_another_of_them_stands_on():
    w = World()
    steps = [w.step("net.a"), w.step("net.s", deps=("net.a",)), w.step("cluster.c", deps=("net.a",)),
             w.step("cluster.p", deps=("cluster.c", "net.s"))]
    assert graph.foundations(steps, ["net.a", "cluster.c"]) == ["cluster.c"]
    assert graph.foundations(steps, ["cluster.p", "net.s", "net.a"]) == ["cluster.p"]
    assert graph.foundations(steps, ["net.s", "cluster.c"]) == ["net.s", "cluster.c"]
