"""What a step of the resource graph is: how it asks whether its resource exists, creates it, deletes it, what it
needs first, whether it holds data (and the consent and guard a teardown needs for it); and what running steps
produces (outcomes, a report, GraphError). graph.py runs them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .runner import Runner
from .tools import ToolError

# An action may return an outcome word ("exists" when a create raced another, "kept" when a delete found
# the resource is not ours); None means the plain outcome ("created", "deleted").
Action = Callable[[Runner], "str | None"]
Check = Callable[[Runner], bool]


@dataclass(frozen=True)
class Consent:
    """What a teardown may delete beyond what is always ours to delete: the task's flags, and how to ask.

    A step names the flag it needs (`Step.consent`); without it, destroy keeps the step and what it needs.
    `ask(question)` confirms on a terminal (`--yes` answers); it raises to cancel. None: nobody to ask, so a
    guard that needs an answer refuses."""
    delete_data: bool = False  # the Lustre instance (after a verified export)
    delete_unexported: bool = False  # ... even when runs on it are not in the bucket
    delete_bucket: bool = False  # the bucket, the durable home of exported checkpoints
    ask: Callable[[str], None] | None = None

    def gives(self, flag: str) -> bool:
        # A flag no task has ("user_owned": GS_BUCKET_EXISTING) is never given: such a step is always kept.
        return bool(getattr(self, flag, False)) if flag else True


# A guard runs before destroy deletes anything (the cluster is still there to ask): it raises to refuse.
Guard = Callable[[Runner, Consent], None]


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
    consent: str = ""  # the Consent flag destroy needs to delete it ("" with holds_data: "delete_data")
    guard: Guard | None = None  # checked before any delete of a teardown that would delete this step
    present: Check | None = None  # exists in any state (a Lustre instance still CREATING); default: exists
    # In the cluster, in any state, from the run's listings (the leftover scan's question, which `exists` answers
    # where it means the same: a RayCluster exists for `up` only once its pods were all Ready).
    listed: Check | None = None
    shared: bool = False  # other deployments (CLUSTER_NAMEs) in the project may use it: networks, storage
    # Its delete waits for every other delete of the teardown: the bucket, which holds the deployment's lock (the
    # lease object): deleted early, the rest of the teardown ran with no lock for another machine to meet.
    delete_last: bool = False

    def is_present(self, runner: Runner) -> bool:
        """There is something to delete or keep (`exists` may mean "ready": what `apply` skips)."""
        return (self.present or self.exists)(runner)

    @property
    def layer(self) -> str:
        return self.name.split(".", 1)[0]

    def needs(self) -> str:
        """The consent flag without which destroy keeps this step ("" if none)."""
        return self.consent or ("delete_data" if self.holds_data else "")


@dataclass
class Outcome:
    step: Step
    outcome: str  # created exists ran deleted absent kept with-parent failed skipped
    seconds: float = 0.0
    error: str = ""
    exc: BaseException | None = field(default=None, repr=False, compare=False)  # the failure, for its exit code


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def by_outcome(self, outcome: str) -> list[Step]:
        return [o.step for o in self.outcomes if o.outcome == outcome]


class GraphError(ToolError):
    """A graph that failed (a step's error, exit code of the first) or cannot run (a cycle, a stall: exit 1)."""

    def __init__(self, message: str, exit_code: int = 1, report: Report | None = None):
        super().__init__(message, exit_code)
        self.report = report if report is not None else Report()


Listener = Callable[[Step, str, float], None]


@dataclass
class Handoff:
    """What one step of a run read for another of the same run (the data guard's read ahead of /data/runs, the
    describe that saw Lustre ready), each taken once."""

    _kept: dict[str, Any] = field(default_factory=dict)

    def keep(self, key: str, value: Any) -> None:
        self._kept[key] = value

    def take(self, key: str) -> tuple[bool, Any]:
        """(found, value) of what was kept under key; a second take finds nothing."""
        return key in self._kept, self._kept.pop(key, None)
