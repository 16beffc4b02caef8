"""What exists, asked once per run: one `list` per resource kind and one `kubectl get` per namespace.

Every step's existence check answers from an Inventory: the first check fetches every listing its steps
registered, all in parallel through the Runner's pool (one round of calls), and the others read that
snapshot. The snapshot belongs to the step list that `all_steps` built (one run), never to a module.

What the snapshot cannot answer, the step's own describe does: a dry run, a listing that failed (no kubectl
context yet), and what this run has changed since (a create or delete marks its kinds; an object in the cluster
only itself). Waits for readiness (Lustre ACTIVE, Ray pods) always poll describe themselves.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .. import names
from ..commands import gcloud, kubectl, lustre
from ..runner import NO_CONTEXT, Runner
from ..settings import Settings
from ..steps import Action, Check, Handoff, Step
from ..tools import ToolError

Items = list[dict[str, Any]]
Decide = Callable[[Items], bool]


@dataclass(frozen=True)
class Listing:
    """One read-only list command. kind: the leftover scan's word for what it lists."""

    kind: str
    layer: str
    argv: list[str]
    missing_ok: bool = False  # "not found" means an empty list (peerings of a network that is gone, if 404)


def _literal(name: str) -> str:
    """name as a regex literal (our names are letters, digits and '-', which need no escaping)."""
    return re.sub(r"([.^$*+?{}\[\]\\|()])", r"\\\1", name)


def name_filter(wanted: Sequence[str], *, key: str = "name", marker: str = "") -> str:
    """A gcloud --filter selecting our names exactly (anchored regex), or what carries our marker."""
    alternatives = "|".join(_literal(name) for name in sorted(set(wanted)))
    expression = f'{key}~"^({alternatives})$"'
    return f"{expression} OR {marker}" if marker else expression


DESCRIBED = f'description~"{names.DESCRIPTION}"'
LABELLED = f'labels.managed-by~"^{names.MANAGED_BY}$"'


def our_networks(s: Settings) -> list[str]:
    return [s.NETWORK, names.gvnic_network(s), names.rdma_network(s)]


def pool_networks(s: Settings) -> list[str]:
    """The VPCs our GPU pools' extra NICs are on: a cluster whose node pool uses them shares our networks,
    whoever made it."""
    return [names.gvnic_network(s), names.rdma_network(s)]


# A Cluster's node pools' extra NICs, by VPC (GKE's NodePool.networkConfig.additionalNodeNetworkConfigs).
# Explicit slices (`[]`): through an implicit one gcloud looks inside every pool only if the first pool has the
# key, and a default pool without networkConfig would hide a GPU pool on our VPCs.
POOL_NETWORKS_KEY = "nodePools[].networkConfig.additionalNodeNetworkConfigs[].network"


def our_subnets(s: Settings) -> list[str]:
    return [names.gvnic_subnet(s)] + [names.rdma_subnet(s, n) for n in range(names.RDMA_SUBNETS)]


def listings(s: Settings) -> list[Listing]:
    """The gcloud lists of one inventory, one per kind we create (pure). The bucket is listed with the
    storage client; its gcloud equivalent is here for the dry-run text and the gcloud parse check."""
    p = gcloud.project_flag(s)
    lustre_name = f'name~"/instances/{_literal(s.LUSTRE_NAME)}$" OR {LABELLED}'
    return [
        Listing("network", "net", gcloud.networks_list(s, name_filter(our_networks(s), marker=DESCRIBED))),
        Listing("subnet", "net", gcloud.subnets_list(s, name_filter(our_subnets(s), marker=DESCRIBED))),
        Listing("firewall rule", "net",
                gcloud.firewalls_list(s, name_filter([names.gvnic_firewall(s)], marker=DESCRIBED))),
        # Ours by name; other deployments' by label; and a cluster made another way whose node pool is on our
        # VPCs: it shares them as much as a labelled one does. (`=`, not `~`: through two lists, gcloud's
        # filter engine matches a regex against nothing; `=` compares the names, ignoring case.)
        Listing("cluster", "cluster", gcloud.clusters_list(s, name_filter(
            [s.CLUSTER_NAME], marker=f'resourceLabels.managed-by~"^{names.MANAGED_BY}$" OR '
                                     f'{POOL_NETWORKS_KEY}=({" ".join(pool_networks(s))})'))),
        Listing("Lustre instance", "storage", lustre.lustre_list(s, lustre_name)),
        Listing("address range", "storage",
                lustre.range_list(s, name_filter([names.lustre_range(s)], marker=DESCRIBED))),
        Listing("VPC peering", "storage", lustre.peering_list(s), missing_ok=True),
        Listing("bucket", "storage", ["gcloud", "storage", "buckets", "list", p, "--format=json"]),
    ]


def short(name: Any) -> str:
    """The last segment of a resource name or URL ('projects/p/regions/us-central1' -> 'us-central1')."""
    return str(name or "").rstrip("/").rsplit("/", 1)[-1]


def parse_items(stdout: str) -> Items:
    """A list command's JSON: gcloud prints a list; kubectl a List, one object, or nothing at all."""
    try:
        body = json.loads(stdout or "[]")
    except json.JSONDecodeError:
        return []
    if isinstance(body, dict):
        body = body.get("items", []) if str(body.get("kind", "")).endswith("List") else [body]
    return [item for item in body if isinstance(item, dict)]


@dataclass(frozen=True)
class KubeRef:
    word: str  # kubectl's resource word: "serviceaccount", "gkenetworkparamsets.networking.gke.io"
    kind: str  # the object's kind: "ServiceAccount"
    name: str
    namespace: str  # where it lives (the NAMESPACE for cluster-scoped kinds: one call asks both)


class Inventory:
    """The snapshot of one run. Steps register what they ask (`check`, `in_cluster`) when they are built."""

    def __init__(self, s: Settings):
        self.s = s
        self._kinds: set[str] = set()
        self._refs: list[KubeRef] = []
        self._step_kinds: dict[str, set[str]] = {}
        self._in_cluster: set[str] = set()  # steps whose objects live in the cluster (`in_cluster`)
        self._lock = threading.Lock()
        self._items: dict[str, Items | None] = {}  # kind fetched -> items; None: that listing failed
        self.handoff = Handoff()  # what one step of this run read for another
        self._changed: set[str] = set()
        self._empty: set[str] = set()  # known to hold none of ours (the namespaces of a cluster this run made)
        self._project_number = ""
        self._number_lock = threading.Lock()
        # A teardown's: a context of an earlier cluster of the name (re-created elsewhere) is replaced by the new
        # cluster's credentials, not only dropped: without any, its objects would read as absent, and the guards
        # that read the cluster (the Lustre claim's users) would see nothing.
        self.fetch_when_recreated = False
        self.fetched_anew = False  # it did: what was read through the old context meanwhile is to be read again

    # ---- what the steps ask --------------------------------------------------------------------------
    def register(self, step: str, kind: str) -> None:
        """Step will ask the listing of kind (\"project\": the project number)."""
        self._kinds.add(kind)
        self._step_kinds.setdefault(step, set()).add(kind)

    def check(self, step: str, kind: str, decide: Decide, fallback: Check) -> Check:
        """An existence check answered from the listing of kind, else by fallback (the step's describe)."""
        self.register(step, kind)

        def exists(r: Runner) -> bool:
            items = self.listed(r, kind)
            return fallback(r) if items is None else decide(items)

        return exists

    def in_cluster(self, step: str, refs: KubeRef | Sequence[KubeRef], decide: Decide | None,
                   fallback: Check) -> Check:
        """A check of an object in the cluster, from the one `kubectl get` of its namespace. Without our
        cluster (as listed) nothing is in it; a kubectl that cannot answer (no context yet) falls back."""
        refs = [refs] if isinstance(refs, KubeRef) else list(refs)
        ref, kind = refs[0], f"kube:{refs[0].namespace}"
        self._refs.extend(refs)
        self.register(step, kind)
        self.register(step, "cluster")
        self._in_cluster.add(step)

        def found(items: Items) -> bool:
            if decide is not None:
                return decide(items)
            return any(i.get("kind") == ref.kind and (i.get("metadata") or {}).get("name") == ref.name
                       for i in items)

        def exists(r: Runner) -> bool:
            if f"step:{step}" in self._changed:
                return fallback(r)
            clusters = self.listed(r, "cluster")
            if clusters is not None and not self.may_hold_ours(clusters):
                return False
            items = self.listed(r, kind)
            return fallback(r) if items is None else found(items)

        return exists

    def track(self, steps: list[Step]) -> list[Step]:
        """The steps with each create/delete marking what it changes: an object in the cluster itself only; the
        cluster everything in it (one this run created holds none of our objects: known absent, not asked)."""
        kube = {k for k in self._kinds if k.startswith("kube:")}

        def marking(step: Step, action: Action | None, creating: bool) -> Action | None:
            kinds = set(self._step_kinds.get(step.name, ()))
            whole_cluster = kinds == {"cluster"} and not step.parent  # not its node pools
            if step.name in self._in_cluster:
                kinds = {f"step:{step.name}"}  # the others' answers from the namespace's `kubectl get` hold
            elif whole_cluster:
                kinds |= kube
            if action is None or not kinds or not step.mutating:
                return action

            def run(r: Runner) -> str | None:
                if not r.dry:
                    self.changed(kinds)
                outcome = action(r)
                if whole_cluster and creating and outcome is None and not r.dry:
                    with self._lock:  # (not "answered": kubectl itself has not been asked, see kube_answered)
                        self._empty |= kube
                        self._changed -= kube
                return outcome

            return run

        return [replace(step, create=marking(step, step.create, True) or step.create,
                        delete=marking(step, step.delete, False)) for step in steps]

    def changed(self, kinds: set[str]) -> None:
        with self._lock:
            self._changed |= kinds

    def askers(self) -> dict[str, set[str]]:
        """kind -> the names of the steps that ask its listing."""
        return {kind: {step for step, kinds in self._step_kinds.items() if kind in kinds} for kind in self._kinds}

    # ---- the snapshot --------------------------------------------------------------------------------
    def kube_listings(self) -> dict[str, list[str]]:
        """kind -> `kubectl get TYPE/NAME ... --ignore-not-found` argv, one per namespace."""
        by_namespace: dict[str, list[str]] = {}
        for ref in self._refs:
            refs = by_namespace.setdefault(ref.namespace, [])
            if f"{ref.word}/{ref.name}" not in refs:
                refs.append(f"{ref.word}/{ref.name}")
        return {f"kube:{ns}": kubectl.get_named(self.s, refs, namespace=ns) for ns, refs in by_namespace.items()}

    def questions(self) -> list[list[str]]:
        """The listings a real run of these steps asks first, in one parallel round (pure: for a dry run, which
        asks none of them)."""
        gcloud_lists = [item.argv for item in listings(self.s) if item.kind in self._kinds]
        kube = [argv for kind, argv in self.kube_listings().items() if kind in self._kinds]
        return [*gcloud_lists, *kube]

    def _fetch(self, r: Runner, wanted: set[str] | None = None) -> None:
        """Fetch the registered kinds (of wanted, default all) not fetched yet, in one parallel round. Called
        with the lock held."""
        needed = {k for k in self._kinds if k not in self._items and (wanted is None or k in wanted)}
        if not needed:
            return
        gcloud_lists = {item.kind: item for item in listings(self.s) if item.kind in needed}
        kube = {kind: argv for kind, argv in self.kube_listings().items() if kind in needed}
        kinds = [*gcloud_lists, *kube]
        thunks: list[Callable[[], Any]] = []
        for kind in kinds:
            if kind == "cluster":
                thunks.append(functools.partial(self._clusters, r, gcloud_lists[kind]))
            elif kind in gcloud_lists:
                listing = gcloud_lists[kind]
                thunks.append(functools.partial(_ask, r, listing.argv, listing.missing_ok))
            else:
                thunks.append(functools.partial(_ask, r, kube[kind], False))
        # The project number (the bucket's owner, the binding's principal) comes after: from the peering's
        # listing when there is one, else from `gcloud projects describe`.
        self._items.update(zip(kinds, r.parallel(thunks), strict=True))
        self._items.update((kind, None) for kind in needed - set(kinds))  # no listing ("project"): no answer

    def _clusters(self, r: Runner, listing: Listing) -> Items | None:
        """The cluster listing; with it, a kubeconfig context of ours that has outlived its cluster is let go."""
        from . import kube_context

        items = _ask(r, listing.argv, listing.missing_ok)
        if items is not None:
            found = self.cluster(items)
            if kube_context.drop_if_stale(r, self.s, found) and self.fetch_when_recreated and found is not None \
                    and has_endpoint(found):
                r.run(gcloud.get_credentials(self.s))
                self.fetched_anew = True
        return items

    def forget_kube(self) -> None:
        """Drop the kubectl listings: the next question lists the cluster's objects again (through a new context)."""
        self.forget({kind for kind in self._kinds if kind.startswith("kube:")})

    def forget(self, kinds: set[str]) -> None:
        """Drop these kinds' listings: the next question lists them again (a listing taken while a change was
        under way that then did not end as planned)."""
        with self._lock:
            for kind in kinds:
                self._items.pop(kind, None)

    def prefetch(self, r: Runner, kinds: set[str]) -> None:
        """Fetch these kinds now, the others later (the leftover scan lists a kind once its deletes ended)."""
        if not r.dry:
            with self._lock:
                self._fetch(r, kinds)

    def listed(self, r: Runner, kind: str) -> Items | None:
        """The snapshot's items of kind (fetched on first use), or None: no answer from the snapshot."""
        if r.dry or kind in self._changed:
            return None
        with self._lock:
            if kind in self._empty:
                return []
            self._fetch(r)
            if kind in self._changed:
                return None
            return self._items.get(kind)

    def as_listed(self, r: Runner, kind: str) -> Items | None:
        """The snapshot's items of kind even after this run marked the kind changed: what was there before (for
        the step that changes it, marked from its start), or None: no answer from the snapshot."""
        if r.dry:
            return None
        with self._lock:
            self._fetch(r)
            return [] if kind in self._empty else self._items.get(kind)

    def kube_item(self, r: Runner, kind: str, name: str) -> tuple[bool, dict[str, Any] | None]:
        """(the run's `kubectl get` of NAMESPACE answered, the object of kind by name in it): a cluster-scoped
        object our steps read (the PV) is asked in NAMESPACE's call too."""
        items = self.as_listed(r, f"kube:{self.s.NAMESPACE}")
        return items is not None, find_kube(items or [], kind, name)

    def item(self, r: Runner, kind: str, name: str) -> dict[str, Any] | None:
        """Our listed resource of kind by name, from the snapshot even after changes (for what a resource
        keeps for life: its description, its labels); None if the snapshot has no answer or no such item."""
        return next((i for i in self.as_listed(r, kind) or [] if short(i.get("name")) == name), None)

    def kube_answered(self) -> bool:
        """Every kubectl listing of the snapshot answered (the kubeconfig context works)."""
        with self._lock:
            items = dict(self._items)
        kube = [kind for kind in self._kinds if kind.startswith("kube:")]
        return bool(kube) and all(items.get(kind) is not None for kind in kube)

    def project_number(self, r: Runner) -> str:
        """PROJECT_NUMBER from settings, else `gcloud projects describe` once for this inventory."""
        if self.s.PROJECT_NUMBER:
            return self.s.PROJECT_NUMBER
        if r.dry:
            return "PROJECT_NUMBER"
        with self._number_lock:
            if not self._project_number:
                self._project_number = self._number_from_peering(r)
            if not self._project_number:
                from ..tools import ToolError

                result = r.query(gcloud.project_number(self.s), ok_codes=(0,))
                number = (result.stdout if result else "").strip()
                if not number.isdigit():
                    raise ToolError(f"gcloud projects describe {self.s.PROJECT_ID} gave no project number "
                                    f"({number!r}); set PROJECT_NUMBER in .env.", 1)
                self._project_number = number
            return self._project_number

    def knows_number_of(self, other: Inventory) -> None:
        """Take the project number other found (the rescan after a teardown, whose peering may be gone)."""
        with self._number_lock:
            self._project_number = self._project_number or other._project_number

    def _number_from_peering(self, r: Runner) -> str:
        """The project number in the listed peering's network ("projects/NUMBER/global/networks/NAME": Service
        Networking names the consumer project by number); "" without a peering in the snapshot."""
        if "VPC peering" not in self._kinds:
            return ""
        for item in self.listed(r, "VPC peering") or []:
            match = re.fullmatch(r"projects/(\d+)/global/networks/[^/]+", str(item.get("network") or ""))
            if match:
                return match.group(1)
        return ""

    def restrict(self, steps: Sequence[Step]) -> None:
        """Fetch only what these steps ask (a layer's task lists nothing of the other layers)."""
        wanted = {step.name for step in steps}
        self._kinds = {kind for name, kinds in self._step_kinds.items() if name in wanted for kind in kinds}

    def include(self, steps: Sequence[Step]) -> None:
        """Fetch what these steps ask too, from their first question on (another layer's steps a layer task
        needs, asked only when it must know)."""
        wanted = {step.name for step in steps}
        with self._lock:
            self._kinds |= {kind for name, kinds in self._step_kinds.items() if name in wanted for kind in kinds}

    # ---- reading the listings ------------------------------------------------------------------------
    def cluster(self, items: Items) -> dict[str, Any] | None:
        return next((c for c in items if c.get("name") == self.s.CLUSTER_NAME
                     and short(c.get("location") or c.get("zone")) == self.s.region), None)

    def may_hold_ours(self, items: Items) -> bool:
        """Our cluster is listed and has an endpoint: without one, nothing could have put anything in it."""
        found = self.cluster(items)
        return found is not None and has_endpoint(found)


def has_endpoint(cluster: dict[str, Any]) -> bool:
    """GKE has given the cluster (as gcloud describes or lists it) an endpoint: a create under way has none for
    its first minutes (an interrupted `up` leaves one so), and gcloud refuses its credentials then ("missing
    endpoint. Is it still PROVISIONING?"). Without one nothing of ours is in it: nothing could reach it."""
    return bool(cluster.get("endpoint")) or cluster.get("status") != "PROVISIONING"


def _ask(r: Runner, argv: list[str], missing_ok: bool) -> Items | None:
    try:
        result = r.query(argv, ok_codes=range(256))
    except ToolError as exc:  # no kubeconfig context, to a read-only overview (Runner.no_context_is_unknown)
        if NO_CONTEXT.search(str(exc)):
            return None  # no answer: each step asks for itself, and cannot tell either
        raise
    if result is None:
        return None
    if result.complete:
        return parse_items(result.stdout)
    if result.ok:  # exit 0, but a request failed: not an answer (each step then asks for itself)
        return None
    return [] if missing_ok and result.not_found else None


def named(name: str, *, region: str = "") -> Decide:
    """Decide: an item with this name (and, for regional kinds, in this region) is listed."""
    return lambda items: any(short(i.get("name")) == name and (not region or short(i.get("region")) == region)
                             for i in items)


def inventory_of(steps: Sequence[Step]) -> Inventory | None:
    """The inventory a step list was built with (`all_steps`, `layer_steps`), if any."""
    found = getattr(steps, "inventory", None)
    return found if isinstance(found, Inventory) else None


def find_kube(items: Items, kind: str, name: str) -> dict[str, Any] | None:
    """The Kubernetes object of kind by name among a kubectl listing's items."""
    return next((i for i in items if i.get("kind") == kind and (i.get("metadata") or {}).get("name") == name), None)


class StepList(list[Step]):
    """Steps with the inventory their checks share, and the whole graph they were chosen from (a layer's steps
    need steps of other layers)."""

    def __init__(self, steps: Sequence[Step], inventory: Inventory, whole: Sequence[Step] | None = None):
        super().__init__(steps)
        self.inventory = inventory
        self.whole: list[Step] = list(steps if whole is None else whole)
