"""Top-level read-only tasks: `plan` (what `up` would do, and what exists but differs) and `status` (what exists,
its age and cost, the Ray cluster and the latest run). Both print tables, or with --json one JSON document.

Examples:
    invoke plan --gpu=h200 --nodes=4
    invoke status
    invoke status --json | jq '.resources[] | select(.state == "present") | .name'
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from invoke.context import Context

from ..settings import Settings
from . import context
from .cluster import FLAG_HELP, cluster_settings
from .context import present_map
from .lifecycle import describe

if TYPE_CHECKING:
    from ..runner import Runner

PLAN_JSON_HELP = (context.JSON_HELP + " Shape: {version, kind: plan, dry_run, project, cluster, settings, resources: "
                  "[{name, title, action: create|leave|run|unknown, differs, cost_per_hour}], create, leave, "
                  "drift: [{name, title, field, have, want}], cost_per_hour: {all_up, now}, caveat}. A dry run "
                  "(dry_run: true) asks nothing: the actions assume nothing exists, as `invoke --dry up` does; drift "
                  "and cost_per_hour.now are null; a note says so.")
STATUS_JSON_HELP = (context.JSON_HELP + " Shape: {version, kind: status, dry_run, project, cluster, settings, "
                    "resources: [{name, title, state: present|absent|unknown, cost_per_hour, age_seconds, "
                    "cost_so_far}], cost_per_hour_now, caveat, ray, latest_job, errors: {ray?, latest_job?}} (a read "
                    "that failed: its part null, the tool's words under errors, exit 1 or the tool's code). A dry "
                    "run (dry_run: true) asks nothing: every state and figure is null, and a note says so.")


def settings_document(s: Settings) -> dict[str, Any]:
    """What the settings ask for, as --json documents show it."""
    capacity = f"reservation:{s.RESERVATION}" if s.RESERVATION else "spot" if s.SPOT else "on-demand"
    return {"gpu": s.gpu.short, "machine_type": s.gpu.machine_type, "mode": s.CLUSTER_MODE, "nodes": s.GPU_NODES,
            "capacity": capacity, "region": s.region, "zone": s.zone}


def _money(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


# ---- plan ------------------------------------------------------------------------------------------
@context.task(help={**FLAG_HELP, "json_": PLAN_JSON_HELP})
def plan(c: Context, gpu: str | None = None, mode: str | None = None, nodes: int | None = None, spot: bool = False,
         reservation: str | None = None, json_: bool = False) -> None:
    """Show what `up` would create and what it would leave as is, with the cost per hour (read-only)."""
    from .. import cost
    from ..resources import all_steps
    from . import drift

    with context.json_output(json_) as out:
        s = cluster_settings(c, gpu, mode, nodes, spot, reservation)
        steps = all_steps(s)
        r = context.runner(c, s)
        r.no_context_is_unknown = True  # no kubeconfig context here: what is in the cluster is unknown, not absent
        present = present_map(r, steps)  # a dry run asks nothing: the offline plan of `invoke --dry up`
        est = cost.estimate(s)
        hourly = cost.hourly_by_step(est, steps)
        found = drift.existing(r, s, present, steps)
        differences = drift.differences(s, found)
        differs = drift.by_step(differences)
        now = drift.cost_now(s, found, steps, _billing(r, steps, present, hourly))
        refused = {d.step for d in drift.blocking(differences)}
        resources: list[dict[str, Any]] = []
        for step in steps:
            known = present[step.name]
            # What `up` refuses on is left (a volume another claim holds counts as missing: `up` stops on it).
            action = ("run" if step.always else "leave" if known or step.name in refused else
                      "create" if known is False else "unknown")
            resources.append({"name": step.name, "title": step.title, "action": action,
                              "differs": differs.get(step.name), "cost_per_hour": _money(hourly.get(step.name))})
        creating = sum(1 for row in resources if row["action"] in ("create", "unknown"))
        leaving = sum(1 for row in resources if row["action"] == "leave")
        if out:
            unknown = {"note": _plan_dry_read(r, steps)} if r.dry else {}
            out.emit({"kind": "plan", "dry_run": r.dry, "project": s.PROJECT_ID, "cluster": s.CLUSTER_NAME,
                      "settings": settings_document(s), "resources": resources, "create": creating,
                      "leave": leaving, "drift": None if r.dry else [d.document() for d in differences],
                      "cost_per_hour": {"all_up": _money(est.total), "now": None if r.dry else _money(now)},
                      "caveat": est.caveat(), **unknown}, secrets=s.secrets)
            return
        rows = [(row["title"], _plan_action(row), cost.money(row["cost_per_hour"]) + "/h"
                 if row["cost_per_hour"] is not None else "") for row in resources]
        title = "plan (dry run: assuming nothing exists)" if r.dry else "plan"
        context.print_table(f"{title}: {describe(s)}", ("resource", "up would", "cost"), rows)
        if r.dry:
            print(f"from nothing, up would create {creating} of {len(steps)}. Everything up: about "
                  f"{cost.money(est.total)}/hour.")
        else:
            print(f"up would create {creating} of {len(steps)} and leave {leaving}. Everything up: about "
                  f"{cost.money(est.total)}/hour; what exists now: about {cost.money(now)}/hour.")
        if differences:
            refuses = ("`invoke up` refuses until they agree" if drift.blocking(differences)
                       else "`invoke up` leaves them so")
            print(f"{len(differs)} existing resource(s) differ from the settings; {refuses}. "
                  f"{drift.advice(differences)}")
        print(f"({est.caveat()})")
        if r.dry:
            _plan_dry_read(r, steps)


def _billing(r: Runner, steps: list[Any], present: dict[str, bool | None],
             hourly: dict[str, float]) -> dict[str, bool | None]:
    """What bills now: what exists, and what is there in another state that `up` would wait for rather than
    create (a cluster or GPU pool PROVISIONING, a Lustre instance CREATING), from the run's listings. Plan said
    "what exists now: about $0.00/hour" after an interrupted first `up` whose cluster and Lustre billed."""
    others = [step for step in steps if hourly.get(step.name) and not present.get(step.name) and step.present]
    return {**present, **present_map(r, others, any_state=True)}


def _plan_dry_read(r: Runner, steps: list[Any]) -> str:
    """What plan would ask, and that it asked nothing: its plan assumes nothing exists."""
    return context.dry_read(r, "plan", "reads what exists and shows what up would create, leave as is, and what "
                                       "differs from the settings; this plan assumes nothing exists yet, as "
                                       "`invoke --dry up` does", context.listing_questions(steps))


def _plan_action(row: dict[str, Any]) -> str:
    text = str({"unknown": "create?"}.get(row["action"], row["action"]))
    if not row["differs"]:
        return text
    return f"leave, but it differs: {row['differs']}" if text == "leave" else f"{text} (it differs: {row['differs']})"


# ---- status ----------------------------------------------------------------------------------------
@context.task(help={"json_": STATUS_JSON_HELP})
def status(c: Context, json_: bool = False) -> None:
    """One table of every resource: state, age and cost per hour; then the Ray cluster and the latest job."""
    from .. import cost
    from ..resources import all_steps
    from ..resources.ray_steps import RELEASE, pods_argv
    from . import drift

    with context.json_output(json_) as out:
        s = context.settings(c)
        steps = all_steps(s)
        r = context.runner(c, s)
        if r.dry:
            note = context.dry_read(r, "status", "shows every resource's state, age and cost per hour, the Ray "
                                                 "cluster and the latest job",
                                    [*context.listing_questions(steps), pods_argv(s)])
            if out:
                out.emit({"kind": "status", "dry_run": True, "project": s.PROJECT_ID, "cluster": s.CLUSTER_NAME,
                          "settings": settings_document(s),
                          "resources": context.not_asked(steps, cost_per_hour=None, age_seconds=None,
                                                         cost_so_far=None),
                          "cost_per_hour_now": None, "caveat": cost.estimate(s).caveat(), "ray": None,
                          "latest_job": None, "errors": {}, "note": note}, secrets=s.secrets)
            return
        r.no_context_is_unknown = True
        # Any state: a Lustre instance still CREATING already bills (plan asks "ready?": what up would do).
        present = _inside_known(r, s, steps, present_map(r, steps, any_state=True))
        # After the lists, three reads at once: the GPU pool's size now (the cluster and the pool are listed),
        # the Ray cluster (deployed: helm was asked with the lists) and the latest run in its head.
        deployed = present.get(RELEASE)
        with r.sharing(pods_argv(s)):  # Ray's pods, read once for the Ray part and the latest run's
            pool, ray, job = r.parallel([
                lambda: _extra(lambda: drift.existing(r, s, present, steps)),
                lambda: _extra(lambda: _ray_part(r, s, deployed, out is not None)),
                lambda: _extra(lambda: _job_part(r, s, deployed, out is not None)),
            ])
        est = cost.estimate(drift.as_found(s, pool.answer()))  # priced as it is, not as set
        hourly = cost.hourly_by_step(est, steps)
        ages = _ages(r, s, steps, present)
        resources: list[dict[str, Any]] = []
        for step in steps:
            if step.always:
                continue
            here = present[step.name]
            rate = hourly.get(step.name, 0.0) if here else 0.0
            age = ages.get(step.name)
            resources.append({"name": step.name, "title": step.title,
                              "state": "present" if here else "absent" if here is False else "unknown",
                              "cost_per_hour": _money(rate) if rate else None, "age_seconds": age,
                              "cost_so_far": _money(rate * age / 3600) if age is not None and rate else None})
        total = sum(hourly.get(name, 0.0) for name, here in present.items() if here)
        if out:
            # A read of Ray or of the latest run that failed: the document still comes (one on stdout, as
            # always), its part null and said under `errors`; the run then exits with the tool's code.
            failed = {name: part for name, part in (("ray", ray), ("latest_job", job)) if part.error is not None}
            out.emit({"kind": "status", "dry_run": r.dry, "project": s.PROJECT_ID, "cluster": s.CLUSTER_NAME,
                      "settings": settings_document(s), "resources": resources,
                      "cost_per_hour_now": _money(total), "caveat": est.caveat(),
                      "ray": ray.value, "latest_job": job.value,
                      "errors": {name: part.said() for name, part in failed.items()}}, secrets=s.secrets)
            for name, part in failed.items():
                part.print(name)
            if failed:
                from invoke.exceptions import Exit

                raise Exit(code=next(getattr(p.error, "exit_code", 1) or 1 for p in failed.values()))
            return
        rows = [(row["title"], row["state"], cost.money(row["cost_per_hour"]) + "/h" if row["cost_per_hour"] else "",
                 _age_text(row["age_seconds"]), cost.money(row["cost_so_far"]) if row["cost_so_far"] else "")
                for row in resources]
        context.print_table(f"status: {describe(s)}", ("resource", "state", "cost", "age", "so far"), rows)
        print(f"now: about {cost.money(total)}/hour ({est.caveat()})")
        for name, part in (("ray", ray), ("job", job)):
            part.print(name)


def _inside_known(r: Runner, s: Settings, steps: list[Any],
                  present: dict[str, bool | None]) -> dict[str, bool | None]:
    """What lives in the cluster is absent when the cluster is, or has no endpoint yet (a create under way, as an
    interrupted `up` leaves it): not "unknown" because this machine has no kubeconfig context for a cluster that
    is not there or cannot give one yet (the steps that ask helm or kubectl directly could not tell)."""
    from ..resources.cluster_steps import CLUSTER, listed_bodies
    from ..resources.inventory import has_endpoint

    body = listed_bodies(r, s, steps).get(CLUSTER) if present.get(CLUSTER) else None
    hollow = body is not None and not has_endpoint(body)  # the cluster is there, but nothing can be in it yet
    parents = {step.name: step.parent for step in steps}
    return {name: False if here is None and (present.get(parents.get(name) or "") is False
                                             or (hollow and parents.get(name) == CLUSTER)) else here
            for name, here in present.items()}


def _age_text(age: float | None) -> str:
    if age is None:
        return ""
    if age >= 2 * 86400:
        return f"{age / 86400:.0f} d"
    if age >= 2 * 3600:
        return f"{age / 3600:.0f} h"
    return f"{age / 60:.0f} min"


def _ages(r: Runner, s: Settings, steps: list[Any], present: dict[str, bool | None]) -> dict[str, float]:
    """Seconds since creation, for the resources that bill by the hour and report a creation time (GKE's
    cluster and the Lustre instance: `createTime`), from this run's lists; described only without a listing."""
    import json

    from .. import cost
    from ..commands import gcloud, lustre
    from ..resources.cluster_steps import CLUSTER, listed_bodies
    from ..resources.inventory import inventory_of

    inv = inventory_of(steps)
    lustre_step = cost.attach_step("lustre", steps)
    listed = {CLUSTER: listed_bodies(r, s, steps).get(CLUSTER)}
    asks = {CLUSTER: gcloud.cluster_describe(s)}
    if lustre_step:
        listed[lustre_step] = inv.item(r, "Lustre instance", s.LUSTRE_NAME) if inv is not None else None
        asks[lustre_step] = lustre.lustre_describe(s)
    wanted = [(name, argv) for name, argv in asks.items() if present.get(name) and listed.get(name) is None]
    answers = r.parallel([functools.partial(r.query, argv) for _, argv in wanted])
    bodies = {name: body for name, body in listed.items() if body is not None}
    for (name, _), result in zip(wanted, answers, strict=True):
        if result is not None and result.ok:
            bodies[name] = json.loads(result.stdout or "{}")
    out = {}
    for name, body in bodies.items():
        created = _parse_time(body.get("createTime") or body.get("creationTimestamp"))
        if created is not None:
            out[name] = max(0.0, _now() - created)
    # The GPU pool and the CPU pool are billed from the cluster's age at most.
    if "cluster.cluster" in out:
        for name in present:
            if name.startswith("cluster.") and name not in out and present[name]:
                out.setdefault(name, out["cluster.cluster"])
    return out


def _now() -> float:
    import time

    return time.time()


def _parse_time(text: Any) -> float | None:
    from datetime import UTC, datetime

    if not text:
        return None
    try:
        value = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


@dataclass
class _Part:
    """What one of status's reads after the lists gave: its answer (lines, a JSON part), or the error it raised."""

    value: Any = None
    error: Exception | None = None

    def answer(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value

    def said(self) -> str:
        """The failure in the tool's own words (with the command), as the table's run says it on stderr."""
        return str(self.error) or type(self.error).__name__

    def print(self, name: str) -> None:
        """Its lines; a failure to read is said whole (the command and the tool's own words), not fatal: status
        must still print the rest."""
        import sys

        if self.error is not None:
            print(f"{name}: could not read status: {self.said()}", file=sys.stderr)
            return
        for line in self.value:
            print(line)


def _extra(read: Callable[[], Any]) -> _Part:
    try:
        return _Part(read())
    except Exception as exc:  # noqa: BLE001 - said (or raised, for --json) once every read has ended
        return _Part(error=exc)


def _ray_part(r: Runner, s: Settings, deployed: bool | None, as_json: bool) -> Any:
    from .. import raychart
    from .ray import cluster_state, cluster_summary

    if not as_json:
        return cluster_summary(r, s, deployed)
    with _unknown_without_context():  # no kubeconfig context here: every figure unknown, the document whole
        return cluster_state(r, s, deployed)
    return {"deployed": None, "pods": None, "ready_pods": None, "gpus_seen": None,
            "gpus_expected": raychart.expected_gpus(s)}


def _job_part(r: Runner, s: Settings, deployed: bool | None, as_json: bool) -> Any:
    """The latest run; none without asking when there is no Ray cluster (no release, or no cluster at all): its
    head cannot be asked, and that is no failure."""
    from .job_views import latest_run, latest_summary

    if deployed is False:
        return None if as_json else ["latest job: none (no Ray cluster)"]
    if not as_json:
        return latest_summary(r, s)
    with _unknown_without_context():  # no kubeconfig context here: unknown (null), as the Ray part's figures
        return latest_run(r, s)
    return None


@contextmanager
def _unknown_without_context() -> Iterator[None]:
    """For --json: a read kubectl or helm could not make for want of this machine's kubeconfig context is
    swallowed (the caller then answers unknown); the text status says it whole instead."""
    from ..runner import NO_CONTEXT
    from ..tools import ToolError

    try:
        yield
    except ToolError as exc:
        if not NO_CONTEXT.search(str(exc)):
            raise


TASKS = [plan, status]
