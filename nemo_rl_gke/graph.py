"""Resources as a dependency graph: one Step per resource, run in parallel where independent.

A Step knows how to ask whether its resource exists (read-only), how to create it, how to delete it,
and which steps it needs first. `apply` creates in dependency order, skipping what exists; `destroy`
walks the graph backwards. Namespace tasks and the lifecycle tasks (`up`, `down`, `plan`) use the same
steps, so there is one list of what we manage.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from .runner import Runner, ToolError

# An action may return an outcome word ("exists" when a create raced another, "kept" when a delete found
# the resource is not ours); None means the plain outcome ("created", "deleted").
Action = Callable[[Runner], "str | None"]
Check = Callable[[Runner], bool]


@dataclass(frozen=True)
class Step:
    name: str  # "net.gvnic-network": layer, then resource
    title: str  # what a person calls it: "gVNIC network nemo-gvnic-net"
    exists: Check
    create: Action
    delete: Action | None = None  # None: goes away with `parent` (objects inside the cluster)
    deps: tuple[str, ...] = ()
    holds_data: bool = False  # deleting it destroys the user's checkpoints or data
    always: bool = False  # no resource behind it (get-credentials): runs on every apply, never "exists"
    create_seconds: float = 0.0  # typical latency, FACTS §6: for the critical path and the progress board
    delete_seconds: float = 0.0
    mutating: bool = True  # False for steps that only write local state (kubeconfig)
    parent: str = ""  # the step whose deletion removes this one too (the cluster, for in-cluster objects)

    @property
    def layer(self) -> str:
        return self.name.split(".", 1)[0]


OUTCOMES = ("created", "exists", "ran", "deleted", "absent", "kept", "with-parent", "failed", "skipped")


@dataclass
class Outcome:
    step: Step
    outcome: str
    seconds: float = 0.0
    error: str = ""


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def by_outcome(self, outcome: str) -> list[Step]:
        return [o.step for o in self.outcomes if o.outcome == outcome]


class GraphError(ToolError):
    def __init__(self, message: str, exit_code: int, report: Report):
        super().__init__(message, exit_code)
        self.report = report


Listener = Callable[[Step, str, float], None]


def _check_graph(steps: Sequence[Step]) -> None:
    names = [s.name for s in steps]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate step names: {sorted(n for n in names if names.count(n) > 1)}")


def order(steps: Sequence[Step]) -> list[Step]:
    """Topological order, stable with respect to the given order (deps outside the selection ignored)."""
    _check_graph(steps)
    present = {s.name for s in steps}
    done: set[str] = set()
    ordered: list[Step] = []
    remaining = list(steps)
    while remaining:
        for step in remaining:
            if all(d in done or d not in present for d in step.deps):
                ordered.append(step)
                done.add(step.name)
                remaining.remove(step)
                break
        else:
            raise ValueError(f"dependency cycle among {[s.name for s in remaining]}")
    return ordered


def _waits_order(steps: Sequence[Step], waits: dict[str, set[str]]) -> list[Step]:
    """Stable order in which every step comes after the names it waits for."""
    done: set[str] = set()
    ordered: list[Step] = []
    remaining = list(steps)
    while remaining:
        step = next((s for s in remaining if waits[s.name] <= done), remaining[0])
        ordered.append(step)
        done.add(step.name)
        remaining.remove(step)
    return ordered


def _run_graph(runner: Runner, steps: Sequence[Step], ready_after: Callable[[Step], Iterable[str]],
               work: Callable[[Step], str], listener: Listener | None, max_workers: int) -> Report:
    """Run work(step) for each step once every name in ready_after(step) has finished; parallel."""
    _check_graph(steps)
    present = {s.name for s in steps}
    waits = {s.name: {d for d in ready_after(s) if d in present} for s in steps}
    report = Report()
    lock = threading.Lock()
    finished: set[str] = set()
    failed: list[Outcome] = []

    def notify(step: Step, state: str, seconds: float) -> None:
        if listener is not None:
            listener(step, state, seconds)

    def run_one(step: Step) -> None:
        started = time.monotonic()
        notify(step, "running", 0.0)
        try:
            outcome = work(step)
        except Exception as exc:  # noqa: BLE001 - every failure is reported, then the graph stops
            outcome_ = Outcome(step, "failed", time.monotonic() - started, str(exc))
            outcome_.exc = exc  # type: ignore[attr-defined]
            with lock:
                report.outcomes.append(outcome_)
                failed.append(outcome_)
            notify(step, "failed", outcome_.seconds)
            return
        seconds = time.monotonic() - started
        with lock:
            report.outcomes.append(Outcome(step, outcome, seconds))
            finished.add(step.name)
        notify(step, outcome, seconds)

    # Dry runs follow `waits` (deps forward, dependents backward) so a teardown plan prints deletes in order.
    pending = _waits_order(steps, waits) if runner.dry else list(steps)
    if runner.dry:
        # A dry run prints the plan in one stable order; nothing to wait for.
        for step in pending:
            run_one(step)
            if failed:
                break
    else:
        running: dict[Future[None], Step] = {}
        with ThreadPoolExecutor(max_workers=max_workers) as pool:
            while pending or running:
                if not failed:
                    for step in [s for s in pending if waits[s.name] <= finished]:
                        pending.remove(step)
                        running[pool.submit(run_one, step)] = step
                if not running:
                    break  # failed, or nothing can start (cannot happen after order() validated the graph)
                done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in done:
                    running.pop(future)
    if failed:
        not_started = [s for s in steps if s.name not in finished and s.name not in {f.step.name for f in failed}]
        for step in not_started:
            report.outcomes.append(Outcome(step, "skipped"))
        first = failed[0]
        lines = [f"{o.step.title}: {o.error}" for o in failed]
        if not_started:
            lines.append("not started: " + ", ".join(s.title for s in not_started))
        code = getattr(getattr(first, "exc", None), "exit_code", 1)
        raise GraphError("\n".join(lines), code, report)
    order(steps)  # validates there was no cycle (the dry path already did)
    return report


def apply(runner: Runner, steps: Sequence[Step], *, listener: Listener | None = None, max_workers: int = 16,
          known: Mapping[str, bool | None] | None = None) -> Report:
    """Create every step whose resource does not exist, dependencies first, independent ones in parallel.

    known: answers already obtained (`up` asks every step before it shows its plan); a step known to exist
    is not asked again, one known to be missing is created at once (a create that meets "already exists"
    still counts as done), and an unknown one (None, or absent from the map) is asked on its turn."""

    def work(step: Step) -> str:
        if runner.dry:
            runner.say(f"# {step.title}")
        if step.always:
            step.create(runner)
            return "ran"
        answer = None if known is None else known.get(step.name)
        if answer is None:
            answer = step.exists(runner)
        if answer:
            return "exists"
        return step.create(runner) or "created"

    order(steps)
    return _run_graph(runner, steps, lambda s: s.deps, work, listener, max_workers)


def destroy(runner: Runner, steps: Sequence[Step], *, delete_data: bool = False, listener: Listener | None = None,
            max_workers: int = 16) -> Report:
    """Delete in reverse dependency order. Without delete_data, steps that hold data are kept, and so is
    everything they depend on (a kept Lustre instance keeps its peering, range and network)."""
    order(steps)
    present = {s.name: s for s in steps}
    dependents: dict[str, set[str]] = {name: set() for name in present}
    for step in steps:
        # What lives inside a parent is gone only when the parent is: its dependencies wait for the parent
        # (the RDMA subnets cannot go while the cluster's GPU nodes still use them).
        waiter = step.parent if step.delete is None and step.parent in present else step.name
        for dep in step.deps:
            if dep in present and dep != waiter:
                dependents[dep].add(waiter)
                # A dependency that goes away with its parent (credentials, the GPU pool: with the cluster):
                # the parent waits for this step's own delete too (helm uninstall needs the cluster).
                parent = present[dep].parent
                if present[dep].delete is None and parent in present and parent != waiter:
                    dependents[parent].add(waiter)
    kept = set() if delete_data else needed_by(steps, [step.name for step in steps if step.holds_data])

    def work(step: Step) -> str:
        if step.name in kept:
            return "kept"
        if step.delete is None:
            return "with-parent"
        if runner.dry:
            # A dry teardown shows every delete it would make, as if everything existed.
            runner.say(f"# delete {step.title}")
        elif not step.always and not step.exists(runner):
            return "absent"
        return step.delete(runner) or "deleted"

    return _run_graph(runner, steps, lambda s: dependents[s.name], work, listener, max_workers)


def needed_by(steps: Sequence[Step], names: Iterable[str]) -> set[str]:
    """The named steps and every step they depend on, directly or not (deps outside `steps` ignored)."""
    present = {step.name: step for step in steps}
    found: set[str] = set()
    pending = [name for name in names if name in present]
    while pending:
        name = pending.pop()
        if name not in found:
            found.add(name)
            pending.extend(dep for dep in present[name].deps if dep in present)
    return found


def reverse_order(steps: Sequence[Step]) -> list[Step]:
    return list(reversed(order(steps)))


def critical_path_seconds(steps: Sequence[Step], *, deleting: bool = False) -> float:
    """The lower bound on wall time with unlimited parallelism: the longest chain of typical latencies."""
    present = {s.name: s for s in steps}
    memo: dict[str, float] = {}
    if not deleting:
        def finish(name: str) -> float:
            if name not in memo:
                step = present[name]
                memo[name] = step.create_seconds + max((finish(d) for d in step.deps if d in present), default=0.0)
            return memo[name]
    else:
        dependents: dict[str, list[str]] = {n: [] for n in present}
        for step in steps:
            for dep in step.deps:
                if dep in present:
                    dependents[dep].append(step.name)

        def finish(name: str) -> float:
            if name not in memo:
                step = present[name]
                memo[name] = step.delete_seconds + max((finish(d) for d in dependents[name]), default=0.0)
            return memo[name]
    return max((finish(n) for n in present), default=0.0)
