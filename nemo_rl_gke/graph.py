"""Resources as a dependency graph: one Step per resource, run in parallel where independent.

A Step (steps.py) knows how to ask whether its resource exists (read-only), how to create it, how to delete
it, and which steps it needs first. `apply` creates in dependency order, skipping what exists; `destroy`
walks the graph backwards. Namespace tasks and the lifecycle tasks (`up`, `down`, `plan`) use the same
steps, so there is one list of what we manage.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future

from .runner import Runner, failed_not_found, settled
from .steps import Consent, GraphError, Listener, Outcome, Report, Step
from .tools import ToolError, background, killed_by

INTERRUPTED_TOOL = killed_by(signal.SIGINT)  # what stderr says of a tool Ctrl-C ended (tools.Processes)
# How long a failed step waits to learn whether the same Ctrl-C reached the run (its main thread notes it within
# milliseconds; a loaded machine may take a tenth of a second). Only failures pay it, once per failed step.
INTERRUPT_GRACE_SECONDS = 0.5


def _check_graph(steps: Sequence[Step]) -> None:
    names = [s.name for s in steps]
    if len(set(names)) != len(names):
        raise GraphError(f"duplicate step names: {sorted(n for n in names if names.count(n) > 1)}")


def stuck(steps: Sequence[Step], waits: Mapping[str, set[str]]) -> list[Step]:
    """The steps that could never start: each waits, directly or not, on a cycle (empty: the graph can run)."""
    done: set[str] = set()
    remaining = list(steps)
    progress = True
    while remaining and progress:
        ready = [s for s in remaining if waits[s.name] <= done]
        progress = bool(ready)
        done.update(s.name for s in ready)
        remaining = [s for s in remaining if s.name not in done]
    return remaining


def _stall_error(blocked: Sequence[Step], waits: Mapping[str, set[str]], what: str) -> GraphError:
    detail = "; ".join(f"{s.name} waits for {', '.join(sorted(waits[s.name]))}" for s in blocked)
    return GraphError(f"{what}: {len(blocked)} step(s) can never start (a dependency cycle): {detail}. Nothing "
                      f"was changed by them; this is a bug in the step graph, please report it.", 1)


def order(steps: Sequence[Step]) -> list[Step]:
    """Topological order, stable with respect to the given order (deps outside the selection ignored)."""
    _check_graph(steps)
    present = {s.name for s in steps}
    waits = {s.name: {d for d in s.deps if d in present} for s in steps}
    blocked = stuck(steps, waits)
    if blocked:
        raise _stall_error(blocked, waits, "dependency cycle")
    return _waits_order(steps, waits)


def _waits_order(steps: Sequence[Step], waits: dict[str, set[str]]) -> list[Step]:
    """Stable order in which every step comes after the names it waits for."""
    done: set[str] = set()
    ordered: list[Step] = []
    remaining = list(steps)
    while remaining:
        step = next((s for s in remaining if waits[s.name] <= done), None)
        if step is None:
            raise _stall_error(remaining, waits, "dependency cycle")
        ordered.append(step)
        done.add(step.name)
        remaining.remove(step)
    return ordered


# A step whose longest chain is this share shorter than the graph's longest runs its commands in the background
# (tools.background): it has time to spare, the chain everything waits on has none.
SLACK_SHARE = 0.05


def chains_through(steps: Sequence[Step], waits: Mapping[str, set[str]],
                   seconds: Callable[[Step], float]) -> dict[str, float]:
    """Each step's longest chain of typical seconds: the chain it waits on, itself, and what waits on it."""
    by_name = {s.name: s for s in steps}
    waited_by: dict[str, set[str]] = {name: set() for name in by_name}
    for name, names_ in waits.items():
        for dep in names_:
            waited_by[dep].add(name)
    before: dict[str, float] = {}
    after: dict[str, float] = {}

    def chain(name: str, edges: Mapping[str, set[str]], memo: dict[str, float]) -> float:
        if name not in memo:
            memo[name] = max((seconds(by_name[n]) + chain(n, edges, memo) for n in edges[name]), default=0.0)
        return memo[name]

    return {name: chain(name, waits, before) + seconds(step) + chain(name, waited_by, after)
            for name, step in by_name.items()}


def _with_slack(steps: Sequence[Step], waits: Mapping[str, set[str]], seconds: Callable[[Step], float]) -> set[str]:
    chains = chains_through(steps, waits, seconds)
    longest = max(chains.values(), default=0.0)
    return {name for name, chain in chains.items() if chain < (1 - SLACK_SHARE) * longest}


def _run_graph(runner: Runner, steps: Sequence[Step], ready_after: Callable[[Step], Iterable[str]],
               work: Callable[[Step], str], listener: Listener | None, max_workers: int,
               seconds: Callable[[Step], float]) -> Report:
    """Run work(step) for each step once every name in ready_after(step) has finished; parallel. seconds: the
    step's typical latency in this run (0 when it has nothing to do), for the steps with time to spare."""
    _check_graph(steps)
    present = {s.name for s in steps}
    waits = {s.name: {d for d in ready_after(s) if d in present} for s in steps}
    blocked = stuck(steps, waits)
    if blocked:  # before anything runs: a half-run graph that then stalls would leave things half-made
        raise _stall_error(blocked, waits, "the step graph cannot run")
    spare = _with_slack(steps, waits, seconds)
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
            with background(step.name in spare):
                outcome = work(step)
        except Exception as exc:  # noqa: BLE001 - every failure is reported, then the graph stops
            # Ctrl-C on a terminal reaches our tools too (the whole foreground group): a tool it ended was
            # interrupted, not failed, whichever of the two signals was seen first. A tool it hit before its own
            # start (sh's fork, before exec) does not say "killed by SIGINT": the run's Ctrl-C, which the main
            # thread notes a moment later, tells then.
            interrupted = INTERRUPTED_TOOL in str(exc) or runner.interrupted_within(INTERRUPT_GRACE_SECONDS)
            state = "interrupted" if interrupted else "failed"
            outcome_ = Outcome(step, state, time.monotonic() - started, str(exc), exc)
            with lock:
                report.outcomes.append(outcome_)
                failed.append(outcome_)
            notify(step, state, outcome_.seconds)
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
        _schedule(runner, pending, waits, finished, failed, run_one, max_workers)
    if failed:
        _raise_failed(steps, report, finished, failed)
    return report


def _schedule(runner: Runner, pending: list[Step], waits: dict[str, set[str]], finished: set[str],
              failed: list[Outcome], run_one: Callable[[Step], None], max_workers: int) -> None:
    """Start each pending step on the runner's pool once what it waits for has finished; after a failure
    start nothing new and let the running ones end."""
    running: dict[Future[None], Step] = {}
    with runner.pool(max_workers) as pool:  # Ctrl-C ends the workers' waits at once
        while pending or running:
            if not failed:
                for step in [s for s in pending if waits[s.name] <= finished]:
                    pending.remove(step)
                    running[pool.submit(run_one, step)] = step
            if not running:
                if pending and not failed:
                    # Nothing runs and steps still wait: never a silent return (checked above, kept as a net).
                    raise _stall_error(pending, {s.name: waits[s.name] - finished for s in pending},
                                       "the step graph stalled")
                break
            done = settled(running, first=True)
            for future in done:
                running.pop(future)


def _raise_failed(steps: Sequence[Step], report: Report, finished: set[str], failed: list[Outcome]) -> None:
    """GraphError naming every failed step and what was not started (skipped), with the first failure's code."""
    not_started = [s for s in steps if s.name not in finished and s.name not in {f.step.name for f in failed}]
    for step in not_started:
        report.outcomes.append(Outcome(step, "skipped"))
    lines = [f"{o.step.title}: {o.error}" for o in failed]
    if not_started:
        lines.append("not started: " + ", ".join(s.title for s in not_started))
    raise GraphError("\n".join(lines), getattr(failed[0].exc, "exit_code", 1), report)


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
            # "exists": it found nothing to do (credentials that this run's kubectl listings already used).
            return step.create(runner) or "ran"
        answer = None if known is None else known.get(step.name)
        if answer is None:
            answer = step.exists(runner)
        if answer:
            return "exists"
        return step.create(runner) or "created"

    order(steps)

    def seconds(step: Step) -> float:
        return 0.0 if known is not None and known.get(step.name) else step.create_seconds

    return _run_graph(runner, steps, lambda s: s.deps, work, listener, max_workers, seconds)


def destroy(runner: Runner, steps: Sequence[Step], *, delete_data: bool = False, consent: Consent | None = None,
            listener: Listener | None = None, max_workers: int = 16,
            known: Mapping[str, bool | None] | None = None, keep: Iterable[str] = ()) -> Report:
    """Delete in reverse dependency order. A step that needs a consent not given (`Step.needs`) is kept, and
    so is everything it depends on (a kept Lustre instance keeps its peering, range and network). Kept steps
    are reported "kept" only if they exist ("absent" otherwise). Before anything is deleted, every guard of
    a step that would be deleted runs (the Lustre export check): one refusal and nothing is deleted.

    consent: the teardown's flags (default: `delete_data` alone, no one to ask). known: `Step.is_present`
    answers the caller already has (a step known absent is not asked again). keep: names kept whatever the
    consent (what another deployment still uses), with what they depend on."""
    consent = consent if consent is not None else Consent(delete_data=delete_data)
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
    kept = kept_steps(steps, consent, keep)
    for last in [step for step in steps if step.delete_last and step.name not in kept]:
        dependents[last.name] |= {step.name for step in steps if step.name != last.name and not step.delete_last}
    blocked = stuck(steps, {name: set(waiting) for name, waiting in dependents.items()})
    if blocked:
        raise _stall_error(blocked, dependents, "the teardown graph cannot run")
    for step in steps:
        if step.guard is not None and step.name not in kept and step.delete is not None:
            step.guard(runner, consent)

    def exists(step: Step) -> bool:
        answer = None if known is None else known.get(step.name)
        return step.is_present(runner) if answer is None else answer

    def work(step: Step) -> str:
        if step.name in kept:
            # "kept" names only what is there: a second `down` keeps nothing that the first one deleted.
            if runner.dry or step.always:
                return "kept"
            try:
                return "kept" if exists(step) else "absent"
            except ToolError as exc:  # a peering of a network that is gone: gone too; otherwise say kept
                return "absent" if failed_not_found(exc) else "kept"
        if step.delete is None:
            return "with-parent"
        if runner.dry:
            # A dry teardown shows every delete it would make, as if everything existed.
            runner.say(f"# delete {step.title}")
        elif not step.always and not exists(step):
            return "absent"
        return step.delete(runner) or "deleted"

    def seconds(step: Step) -> float:
        gone = step.name in kept or (known is not None and known.get(step.name) is False)
        return 0.0 if gone else step.delete_seconds

    return _run_graph(runner, steps, lambda s: dependents[s.name], work, listener, max_workers, seconds)


def kept_steps(steps: Sequence[Step], consent: Consent, keep: Iterable[str] = ()) -> set[str]:
    """What a teardown with this consent keeps: each step whose consent is missing, the names in keep, and
    what they depend on."""
    return needed_by(steps, [step.name for step in steps if not consent.gives(step.needs())] + list(keep))


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


def outside_needs(whole: Sequence[Step], chosen: Iterable[str]) -> dict[str, list[str]]:
    """For each chosen step that needs steps outside `chosen` (a layer task's steps and another layer's), those
    steps, by name in graph order. An `always` step outside has nothing to ask (credentials): what it needs
    stands in for it."""
    by_name = {step.name: step for step in whole}
    inside = set(chosen)

    def needs(name: str) -> set[str]:
        found: set[str] = set()
        for dep in by_name[name].deps:
            if dep in inside or dep not in by_name:
                continue
            found |= needs(dep) if by_name[dep].always else {dep}
        return found

    return {name: [step.name for step in whole if step.name in wanted]
            for name in by_name if name in inside and (wanted := needs(name))}


def foundations(whole: Sequence[Step], names: Iterable[str]) -> list[str]:
    """The named steps that no other of them needs, directly or not (in graph order): a cluster that exists was
    made on its network, so asking the cluster answers for both."""
    wanted = set(names)
    beneath = needed_by(whole, [dep for step in whole if step.name in wanted for dep in step.deps])
    return [step.name for step in whole if step.name in wanted - beneath]


def critical_path_seconds(steps: Sequence[Step], *, deleting: bool = False) -> float:
    """The lower bound on wall time with unlimited parallelism: the longest chain of typical latencies."""
    present = {s.name for s in steps}
    waits: dict[str, set[str]] = {s.name: set() for s in steps}
    for step in steps:
        for dep in step.deps:
            if dep in present:  # a delete waits for what depends on it, a create for its dependencies
                first, then = (step.name, dep) if deleting else (dep, step.name)
                waits[then].add(first)
    chains = chains_through(steps, waits, lambda s: s.delete_seconds if deleting else s.create_seconds)
    return max(chains.values(), default=0.0)
