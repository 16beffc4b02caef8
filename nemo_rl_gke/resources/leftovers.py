"""The leftover scan that ends `down` and `clean`: is anything of ours still there (and billing)?

Two ways to find a resource, so neither a renamed prefix nor a missing label hides one:
- by name: every step of the graph with its own delete is asked whether its resource exists;
- by label/description: networks, subnets, firewall rules, clusters, Lustre instances, address ranges,
  peerings and buckets are listed, and those carrying `managed-by=nemo-rl-gke` (or one of our names) count.
Resources kept on purpose (the data `down` keeps without --delete-data, and what it needs) are expected.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import names
from ..runner import Runner, failed_not_found
from ..settings import Settings
from ..tools import ToolError, background
from . import inventory
from .inventory import Listing, parse_items

Argv = list[str]


@dataclass(frozen=True)
class Found:
    kind: str
    name: str
    why: str  # "exists" (asked by name) or "label managed-by=nemo-rl-gke" / "description ..." / "name"

    def line(self) -> str:
        return f"{self.kind} {self.name} ({self.why})"


def listings(s: Settings) -> list[Listing]:
    """Read-only list commands, one per kind of resource we create (pure): the inventory's."""
    return inventory.listings(s)


def our_names(s: Settings) -> dict[str, set[str]]:
    """Names we give, per kind (the main VPC only counts by its description: it may be the user's)."""
    return {
        "network": {names.gvnic_network(s), names.rdma_network(s)},
        "subnet": {names.gvnic_subnet(s)} | {names.rdma_subnet(s, n) for n in range(names.RDMA_SUBNETS)},
        "firewall rule": {names.gvnic_firewall(s)},
        "cluster": {s.CLUSTER_NAME},
        "Lustre instance": {s.LUSTRE_NAME},
        "address range": {names.lustre_range(s)},
        "bucket": {s.bucket},
    }


def _short(name: str) -> str:
    return name.rstrip("/").rsplit("/", 1)[-1]


def _marker(item: dict[str, Any]) -> str:
    for key in ("labels", "resourceLabels"):
        labels = item.get(key) or {}
        if isinstance(labels, dict) and any(v == names.MANAGED_BY for v in labels.values()):
            return f"label managed-by={names.MANAGED_BY}"
    if names.DESCRIPTION in str(item.get("description") or ""):
        return f"description {names.DESCRIPTION}"
    return ""


def deployment_of(item: dict[str, Any]) -> str:
    """The deployment (CLUSTER_NAME) a listed item belongs to, from its labels or description; '' if shared."""
    for key in ("labels", "resourceLabels"):
        labels = item.get(key) or {}
        if isinstance(labels, dict) and labels.get(names.DEPLOYMENT_KEY):
            return str(labels[names.DEPLOYMENT_KEY])
    for word in str(item.get("description") or "").split():
        if word.startswith(f"{names.DEPLOYMENT_KEY}="):
            return word.split("=", 1)[1]
    return ""


def ours(kind: str, items: list[dict[str, Any]], s: Settings) -> list[Found]:
    """The listed items that are ours: carrying our marker, or (where names are ours alone) our name; not
    what belongs to another deployment (its cluster, its firewall rule), which its own `down` deletes."""
    wanted = our_names(s).get(kind, set())
    found = []
    for item in items:
        if deployment_of(item) not in ("", s.CLUSTER_NAME) and kind in ("cluster", "firewall rule"):
            continue
        if kind == "VPC peering":
            ranges = item.get("reservedPeeringRanges") or []
            if names.lustre_range(s) in ranges:
                found.append(Found(kind, _short(str(item.get("service") or "peering")),
                                   f"on {s.NETWORK}, uses range {names.lustre_range(s)}"))
            continue
        name = _short(str(item.get("name") or item.get("id") or ""))
        why = _marker(item)
        # A network, subnet or firewall rule of ours always carries the description; one with our name but
        # without it is someone else's (down leaves it alone), so it is not a leftover.
        if not why and name in wanted and kind not in ("network", "subnet", "firewall rule"):
            why = "name"
        if why:
            found.append(Found(kind, name, why))
    return found


def _buckets(s: Settings) -> list[dict[str, Any]] | None:
    """Buckets through the google-cloud-storage client the storage layer uses (None: list with gcloud)."""
    try:
        from .. import gcs
    except ImportError:
        return None
    return [dict(bucket) for bucket in gcs.list_buckets(s)]


def _tokens(title: str) -> set[str]:
    """The words of a step title, as resource names: 'bucket gs://b (us-central1)' -> {'bucket', 'b', ...}."""
    return {word.strip("(),:").removeprefix("gs://") for word in title.split()}


def _expected(found: Found, kept_titles: Sequence[str]) -> bool:
    return any(found.name in _tokens(title) for title in kept_titles)


class EarlyLists:
    """A teardown's listener that fetches a kind of the scan's inventory (fresh) as soon as every step of the
    teardown that asks it has ended (deleted, absent, kept or failed): the scan that follows the last delete
    then waits only for the kinds whose deletes ended last. Each listing still runs once; read-only.

    The teardown's last step (the one still running once every other has ended: at typical latencies `down`'s
    main VPC) does not make the scan wait for its end: its kinds are listed while it runs, and if it then ends
    "deleted" or "absent" (its tool said so: gcloud and kubectl deletes wait for the deletion, and "absent" is a
    NOT_FOUND) the scan counts it, and what goes with it (a cluster's node pool), as gone (`trusted`). Everything
    else that listing shows is a leftover as before. Ended any other way (failed, interrupted), its kinds are
    listed again."""

    def __init__(self, r: Runner, fresh: inventory.Inventory, steps: Sequence[Any]):
        self._r, self._fresh = r, fresh
        self._going = {step.name for step in steps}
        self._children = {step.name: {other.name for other in steps if getattr(other, "parent", None) == step.name}
                          for step in steps}
        self._waiting = {kind: names_ & self._going for kind, names_ in fresh.askers().items()
                         if names_ & self._going}
        self._started: set[str] = set()
        self._ended: dict[str, str] = {}
        self._last: str | None = None  # the step listed while it ran
        self._early: set[str] = set()  # the kinds listed while it ran
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def __call__(self, step: Any, state: str, seconds: float) -> None:
        with self._lock:
            if state == "running":
                self._started.add(step.name)
            else:
                self._ended[step.name] = state
            ended = set(self._ended)
            running = self._going - ended
            last = next(iter(running)) if len(running) == 1 and running <= self._started else None
            ready = set()
            for kind, names_ in self._waiting.items():
                left = names_ - ended
                if not left or (last is not None and left == {last}):
                    ready.add(kind)
                    if left:
                        self._last = last
                        self._early.add(kind)
            for kind in ready:
                del self._waiting[kind]
        if ready:
            thread = threading.Thread(target=_prefetch, args=(self._r, self._fresh, ready), daemon=True)
            with self._lock:
                self._threads.append(thread)
            thread.start()

    def wait(self) -> None:
        """Until every listing started has ended (the scan may not have needed all of them: none is left
        running when the teardown ends). Each is one bounded command."""
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join()

    def trusted(self) -> set[str]:
        """The step listed while it ran, if its delete then ended "deleted" or "absent", with the steps that go
        with it. Ended otherwise: none, and the kinds listed while it ran are listed again for the scan."""
        with self._lock:
            last, early = self._last, set(self._early)
            outcome = self._ended.get(last) if last is not None else None
        if last is None or outcome is None:  # none, or still running: nothing to trust yet
            return set()
        if outcome not in GONE:
            self.wait()  # the early listings are in before they are dropped
            self._fresh.forget(early)
            return set()
        return {last} | self._children.get(last, set())


GONE = ("deleted", "absent")  # a step's outcomes that say its resource is not there



def _prefetch(r: Runner, fresh: inventory.Inventory, kinds: set[str]) -> None:
    """In the background (tools.background): the teardown's own deletes and reads still running come first."""
    try:
        with background():
            fresh.prefetch(r, kinds)
    except (Exception, KeyboardInterrupt):  # noqa: BLE001 - the scan fetches what is missing, and reports what
        return  # fails then; Ctrl-C (Interrupted, raised in this thread too): the run is ending, nothing to say


@dataclass
class Scan:
    left: list[Found]
    warnings: list[str]


def scan(r: Runner, s: Settings, steps: Sequence[Any], *, kept: Sequence[Any] = (), layers: Sequence[str] = (),
         gone: set[str] | frozenset[str] = frozenset()) -> Scan:
    """Everything of ours still there, except what was kept on purpose. Read-only. gone: steps whose delete
    ended while their kind was being listed (`EarlyLists.trusted`): neither asked nor found by that listing."""
    layers = tuple(layers) or tuple(dict.fromkeys(step.layer for step in steps))
    kept_names = {step.name for step in kept}
    kept_titles = [step.title for step in kept] + [step.title for step in steps if step.name in gone]
    by_name = [step for step in steps if step.layer in layers and step.delete is not None and not step.always
               and step.name not in kept_names and step.name not in gone]
    selected = [item for item in listings(s) if item.layer in layers]
    warnings: list[str] = []

    def ask(step: Any) -> list[Found]:
        try:
            # A resource of the project in any state (present, not only usable): a Lustre instance still CREATING or
            # a cluster in ERROR bills too, and a step with nothing to create may still have something to delete
            # (the prefetch Jobs with PREFETCH_MODELS emptied). One in the cluster answers from the run's listings
            # (none once the cluster is gone, without asking).
            present = (step.listed or step.exists) if step.parent else step.is_present
            return [Found("resource", step.title, "exists")] if present(r) else []
        except ToolError as exc:
            if not failed_not_found(exc):  # e.g. a peering of a network that is gone: gone too
                warnings.append(f"could not check {step.title}: {str(exc).splitlines()[0]}")
            return []

    snapshot = inventory.inventory_of(steps)

    def listed(item: Listing) -> list[Found]:
        try:
            items = _buckets(s) if item.kind == "bucket" else None
            if items is None and snapshot is not None:
                items = snapshot.listed(r, item.kind)  # the lists the checks by name just read
            if items is None:
                result = r.query(item.argv, ok_codes=range(256))
                if result is None or result.not_found:  # its scope is gone (a network's peerings): none left
                    return []
                if not result.complete:  # a scan that could not list says so: never "nothing left" by silence
                    said = (result.stderr.strip().splitlines() or [f"exit {result.exit_code}"])
                    warnings.append(f"could not list {item.kind}s: {' '.join(said[:2])[:200]}")
                    return []
                items = parse_items(result.stdout)
        except Exception as exc:  # noqa: BLE001 - a scan that cannot list says so and goes on
            warnings.append(f"could not list {item.kind}s: {str(exc).splitlines()[0] if str(exc) else exc}")
            return []
        return [f for f in ours(item.kind, items, s) if not _expected(f, kept_titles)]

    # Both from one inventory: its listings are fetched once, in parallel, by whichever asks first.
    named = r.parallel([functools.partial(ask, st) for st in by_name])
    labelled = r.parallel([functools.partial(listed, it) for it in selected])
    left = [found for group in named for found in group]
    present = [found.name for found in left]
    seen: set[str] = set()
    for found in (f for group in labelled for f in group):
        # Found both by name and by label: reported once, under the step's title.
        if any(found.name in _tokens(title) for title in present):
            continue
        if f"{found.kind}/{found.name}" not in seen:
            seen.add(f"{found.kind}/{found.name}")
            left.append(found)
    return Scan(left, warnings)
