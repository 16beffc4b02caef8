"""The data guard: what must hold before the Lustre instance or the bucket is deleted, attached to their steps
in storage_steps.py (so every delete path runs it). The export check lists /data/runs in the Ray head pod and
gs://BUCKET/runs/ and compares names and sizes; running runs block. When the head pod is gone, the newest record
(within 24 h) answers: the listing the Ray release's guard takes as Ray goes away, or an export after it (an
export before it misses what runs wrote since). Also `storage.export` itself, which writes its record."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .. import gcs, gcs_client
from ..commands import buckets, exports, lustre
from ..runner import Runner
from ..settings import Settings
from ..steps import Guard
from ..tools import ToolError
from . import head_pod
from .inventory import Inventory, short

# The instance's describe as a dict (state, capacity_gib, ip), or None when it does not exist.
LustreState = Callable[[Runner, Settings], "dict[str, Any] | None"]


RunsListing = tuple[dict[str, int], set[str], str]  # files under /data/runs -> size, running run ids, the pod


def lustre_runs(r: Runner, s: Settings, inv: Inventory | None = None) -> RunsListing | None:
    """(files under /data/runs -> size, running run ids, the pod asked), or None with no head pod to ask."""
    found, kept = _read_ahead_taken(inv)
    if found:
        return kept
    pod = head_pod.running_head(r, s, inv)
    listed = None if pod is None else _listing(r, s, pod)
    if inv is not None and listed is not None:
        inv.handoff.keep(READ_AHEAD, listed)
    return listed


def _read_ahead_taken(inv: Inventory | None) -> tuple[bool, RunsListing | None]:
    """(found, the listing) the teardown read ahead, left for its other guard, which reads the same moment."""
    if inv is None:
        return False, None
    found, kept = inv.handoff.take(READ_AHEAD)
    if found:
        inv.handoff.keep(READ_AHEAD, kept)
    return found, kept


def _listing(r: Runner, s: Settings, pod: str) -> RunsListing | None:
    result = r.query(head_pod.kubectl_exec(s, pod),
                     stdin=exports.RUNS_LISTING_SCRIPT, ok_codes=(0,), timeout=300)
    if result is None:
        return None
    files, _, running = exports.parse_runs_listing(result.stdout)
    return files, running, pod


READ_AHEAD = "/data/runs listing"


def read_ahead(r: Runner, s: Settings, inv: Inventory, pods: list[dict[str, Any]] | None = None) -> None:
    """The export check's read, taken beside a teardown's listing round when nothing is asked between it and
    the deletes (`--yes`): the guard then uses it instead of asking the head pod again (~2 calls off the
    critical path). It asks kubectl first (no cluster check, no credentials); any doubt (kubectl did not
    answer, the exec failed) leaves nothing, and the guard reads as it always does. pods: the namespace's
    pods as the teardown just listed them (the head pod is among them), instead of asking for the head."""
    if r.dry:
        return
    try:
        answered, pod = head_pod.listed_head(r, s) if pods is None else (True, head_pod.head_among(pods))
        if answered:
            inv.handoff.keep(READ_AHEAD, None if pod is None else _listing(r, s, pod))
    except ToolError:
        return


def export_check(r: Runner, s: Settings, inv: Inventory | None = None) -> tuple[dict[str, str], str]:
    """(run id -> why it is not safely in the bucket, how that was established). Empty: every run is there.

    With a head pod: /data/runs and gs://BUCKET/runs/ listed now, file by file. Without one: the newest record
    of less than a day, the listing taken as Ray went away (final; a listing taken while Ray ran proves
    nothing) or a full export that wrote something, and every file it saw on /data (or in the bucket) is still
    in the bucket; a run that was running when Ray went blocks until an export after it."""
    bucket_files = exports.bucket_run_files(gcs.list_prefix(s, exports.RUNS_PREFIX))
    where = f"gs://{s.bucket}/{exports.RUNS_PREFIX}"
    listed = lustre_runs(r, s, inv)
    if listed is not None:
        files, running, pod = listed
        runs = {path.split("/", 1)[0] for path in files}
        missing = exports.unexported_runs(files, bucket_files, running)
        return missing, f"listed /data/runs in pod {pod} ({len(runs)} runs, {len(files)} files) and {where}"
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    how = f"no Ray head pod to list /data; the records in gs://{s.bucket}/nemo-rl-gke/"
    written = gcs.read_written_record(s, exports.CHECK_MARKER)
    check = None if written is None else written[0]
    checked = exports.parse_export_record(check)
    text = gcs.read_export_record(s)
    records = [(rec, raw, kind) for rec, raw, kind in ((checked, check, "check"),
                                                       (exports.parse_export_record(text), text, "export"))
               if rec is not None]
    if written is not None and checked is None:
        # Edited, empty, or written by another version: it may have said that Ray was deployed again, and
        # dropped, an older export answered, blind to what runs wrote since. It trusts nothing, as of when it
        # was written, so only a full export after it answers.
        when = written[1]
        records.append(({"when": when, "time": when.isoformat(), "unreadable": True}, check, "check"))
    if not records:
        return {"(every run)": "no export recorded, and no Ray head pod to list /data/runs"}, how
    # The newest says what /data/runs held last: the listing taken as Ray went away (after which nothing
    # writes there) beats an older export, which misses what runs wrote after it; an export after Ray went
    # away beats that listing, unless it proves nothing (it copied nothing, or one run only: then the older
    # record answers).
    hours = exports.EXPORT_FRESH.total_seconds() / 3600
    why = ""
    for record, raw, kind in sorted(records, key=lambda found: found[0]["when"], reverse=True):
        if kind == "export" and not exports.export_is_fresh(raw, now):
            copied = exports.copied(record)
            why = why or (f"the last export ({record.get('time')}) copied nothing" if copied == 0 else
                          f"the last full export is from {record.get('time')} (more than {hours:.0f} h ago, or "
                          f"of one run only)")
            continue
        if kind == "check" and (not record.get("final") or not exports.check_is_fresh(raw, now)):
            reason = (
                f"gs://{s.bucket}/{exports.CHECK_MARKER}, written at {record.get('time')}, is not a record this "
                f"tool can read (edited, or written by another version), so what /data/runs held then is not known"
                if record.get("unreadable") else
                f"the last listing of /data/runs is from {record.get('time')}, more than {hours:.0f} h ago"
                if record.get("final") and isinstance(record.get("lustre_files"), dict) else
                f"Ray was deployed again at {record.get('time')}: what its runs wrote since is not known"
                if record.get("deployed") else
                f"Ray went away at {record.get('time')} without a listing of /data/runs (its head could not be "
                f"read), so what its runs wrote last is not known")
            return {"(every run)": f"{why}; before it, {reason}" if why else reason}, how
        seen = record.get("lustre_files")
        seen = seen if isinstance(seen, dict) else record.get("objects") or {}
        what = ("listing taken as Ray went away" if record.get("final") else
                "listing" if kind == "check" else "export")
        word = ("running as Ray went away (it may have written after that listing): `invoke storage.export` "
                "copies it" if record.get("final") else "still running")
        missing = exports.unexported_runs({k: int(v) for k, v in seen.items()}, bucket_files,
                                          set(record.get("running") or ()), word)
        final = (_final_listing_before(records, record)  # an export that listed no /data: the bucket only
                 if kind == "export" and not isinstance(record.get("lustre_files"), dict) else None)
        if final is None:
            return missing, f"{how}: the {what} of {record.get('time')}"
        # An export made without a head pod saw the bucket only (its objects), so it cannot show a file it left
        # out. The listing taken as Ray went away saw every file on /data (nothing writes there since): each
        # must be in the bucket too. Presence only: a run that was still running may have grown since.
        on_data = {path: bucket_files.get(path, int(size)) for path, size in final["lustre_files"].items()}
        for run, why_not in exports.unexported_runs(on_data, bucket_files).items():
            missing[run] = "; ".join(filter(None, (missing.get(run), f"{why_not}, though on /data as Ray went away "
                                                                  f"({final.get('time')})")))
        return missing, (f"{how}: the export of {record.get('time')}, and the listing taken as Ray went away "
                         f"({final.get('time')})")
    return {"(every run)": why}, how


def _final_listing_before(records: list[tuple[dict[str, Any], Any, str]], export: dict[str, Any]
                          ) -> dict[str, Any] | None:
    """The listing of /data/runs taken as Ray went away, if it is older than this export and readable."""
    for record, _raw, kind in records:
        if (kind == "check" and record.get("final") and isinstance(record.get("lustre_files"), dict)
                and record["when"] <= export["when"]):
            return record
    return None


def record_check(r: Runner, s: Settings, files: dict[str, int] | None, *, final: bool = False,
                 running: list[str] | None = None, deployed: bool = False) -> None:
    """Remember /data/runs for the export check without a head pod: final, the listing taken as Ray goes away
    (with the runs still running then); files None: nothing to trust (the head could not be read as Ray went,
    or Ray was deployed again: deployed). Best effort: without a bucket there is nowhere to keep it."""
    from datetime import UTC, datetime

    lustre_path, uri, _ = exports.export_paths(s, None)
    text = exports.export_record(s, lustre_path, uri, datetime.now(UTC), copied=-1, lustre_files=files,
                                 final=final, running=running, deployed=deployed)
    try:
        gcs.write_export_record(s, text, exports.CHECK_MARKER)
    except gcs_client.StorageError as exc:
        r.say(f"note: /data/runs was not recorded in the bucket for the export check "
              f"({str(exc).splitlines()[0][:160]})", err=True)


def ray_deployed(r: Runner, s: Settings) -> None:
    """Before Ray is deployed (created or upgraded): its runs will write /data/runs again, so no earlier listing
    may answer for it once its head is gone."""
    if not r.dry:
        record_check(r, s, None, deployed=True)


def lustre_guard(s: Settings, inv: Inventory | None, lustre_state: LustreState,
                 volume_check: Callable[[Runner], None] | None = None) -> Guard:
    """The Lustre step's guard. lustre_state: storage_steps' describe of the instance (None: it is gone);
    volume_check: storage_steps.volume_held_elsewhere (a volume another claim holds refuses too)."""

    def guard(r: Runner, consent: Any) -> None:
        if r.dry:
            r.say(f"# a real run first checks that every run under /data/runs is in gs://{s.bucket}/"
                  f"{exports.RUNS_PREFIX} (same files and sizes) and that none is running")
            return
        listed = inv.listed(r, "Lustre instance") if inv is not None else None
        found = ([i for i in listed if short(i.get("name")) == s.LUSTRE_NAME] if listed is not None
                 else [info] if (info := lustre_state(r, s)) is not None else [])
        if not found:
            return
        if found[0].get("state") == "DELETING":  # an earlier delete goes on in Google Cloud: nothing left to keep
            r.say(f"Lustre instance {s.LUSTRE_NAME} is DELETING already (an earlier teardown's delete goes on in "
                  f"Google Cloud): its files are going whatever this run does; not checked for an export.", err=True)
            return
        if found[0].get("state") == "CREATING":  # an interrupted `up`: it was never ACTIVE, so never mounted
            # (the guard asked for an export, which Lustre refuses until the instance is ACTIVE: a dead end)
            r.say(f"Lustre instance {s.LUSTRE_NAME} is still CREATING: it was never ready, so nothing was ever "
                  f"written to it; not checked for an export.", err=True)
            return
        missing, how = export_check(r, s, inv)
        if volume_check is not None:
            volume_check(r)
        if not missing:
            r.say(f"export verified: every run on Lustre {s.LUSTRE_NAME} is in gs://{s.bucket}/"
                  f"{exports.RUNS_PREFIX} ({how}).", err=True)
            return
        lines = "\n".join(f"  - {run}: {why}" for run, why in missing.items())
        if not consent.delete_unexported:
            raise ToolError(f"refusing to delete Lustre instance {s.LUSTRE_NAME}: these runs are not safely in "
                            f"gs://{s.bucket}/{exports.RUNS_PREFIX} ({how}):\n{lines}\nRun `invoke storage.export` "
                            f"(stop running jobs first: `invoke job.stop ID`), then run this again; or add "
                            f"--delete-unexported to delete them anyway.", 1)
        r.say(f"--delete-unexported: deleting Lustre instance {s.LUSTRE_NAME} loses these runs ({how}):\n{lines}",
              err=True)
        if consent.ask is None:
            raise ToolError("refusing to lose unexported runs without a confirmation (nobody to ask).", 1)
        consent.ask(f"Delete Lustre instance {s.LUSTRE_NAME} and lose the {len(missing)} run(s) listed above?")

    return guard


FINAL_RECORDED = "final /data/runs listing recorded"


def _runs_now(r: Runner, s: Settings, inv: Inventory | None) -> RunsListing | None:
    """/data/runs from the teardown's read-ahead, else from the head kubectl lists at once (no listing round of
    the whole project for a layer's teardown), else as the export check reads it (credentials first)."""
    found, kept = _read_ahead_taken(inv)
    if found:
        return kept
    answered, pod = head_pod.listed_head(r, s)
    if answered:
        return None if pod is None else _listing(r, s, pod)
    return lustre_runs(r, s)


def final_listing_guard(s: Settings, inv: Inventory | None, release_present: Callable[[Runner], bool]) -> Guard:
    """The guard of the Ray release and of the cluster (whose delete takes Ray with it): /data/runs as the head
    pod sees it just before Ray goes, recorded in the bucket as final. Once the head is gone nothing writes
    /data/runs, so that is the listing a later export check without a head pod may trust. A Ray whose head
    cannot be listed leaves a record that trusts nothing. Taken once per teardown, with --delete-data too (a
    Lustre kept for another deployment, or a delete that fails after Ray went, is checked later from it)."""

    def guard(r: Runner, consent: Any) -> None:
        if inv is not None:
            done, _ = inv.handoff.take(FINAL_RECORDED)
            inv.handoff.keep(FINAL_RECORDED, True)
            if done:
                return
        if r.dry:
            r.say("# a real run first records /data/runs as the Ray head sees it (the export check's answer once "
                  "Ray is gone)")
            return
        try:
            listed = _runs_now(r, s, inv)
        except ToolError:  # the head cannot be read: Ray still goes, and the record then trusts nothing
            listed = None
        if listed is None and not release_present(r):
            return  # no Ray (gone already): the record taken when it went stands
        if listed is not None and listed[1]:  # a teardown stopped training runs without a word
            r.say(f"note: this stops the running run(s) {', '.join(sorted(listed[1]))} with Ray; each resumes from "
                  f"its latest checkpoint with `invoke job.submit JOB --id=ID` once Ray is back.", err=True)
        record_check(r, s, listed[0] if listed is not None else None, final=listed is not None,
                     running=sorted(listed[1]) if listed is not None else None)

    return guard


def bucket_guard(s: Settings) -> Guard:
    def guard(r: Runner, consent: Any) -> None:
        if r.dry:
            r.say(f"# a real run first asks, naming gs://{s.bucket} with its object count and size")
            return
        bucket = gcs.get_bucket(gcs_client.client(s), s)
        if bucket is None or not gcs.is_ours(bucket):
            return  # nothing to delete, or the user's own (its delete keeps it and says so)
        held = gcs.summary(s)
        if held is None:
            return
        question = (f"Delete bucket gs://{s.bucket} with its {held['objects']} objects ({size_text(held['bytes'])}), "
                    f"the exported checkpoints among them?")
        r.say(f"--delete-bucket: gs://{s.bucket} holds {held['objects']} objects, {size_text(held['bytes'])}.",
              err=True)
        if consent.ask is None:
            raise ToolError(f"refusing to delete gs://{s.bucket} without a confirmation (nobody to ask).", 1)
        consent.ask(question)

    return guard


def export(r: Runner, s: Settings, run: str | None) -> list[tuple[str, int]]:
    """Managed Lustre's export-data to the bucket, then what the bucket holds there, and a record of both.

    The record counts as an export only if this export wrote objects (new generations), or wrote none after one of
    the same path and instance that did (Managed Lustre copies only files not in the bucket yet, or changed: then
    nothing had changed). An export of nothing else proves nothing (the path may hold nothing, or not what the
    pods wrote). With a head pod, /data/runs is listed too and any run missing from the bucket is named."""
    from datetime import UTC, datetime

    lustre_path, uri, prefix = exports.export_paths(s, run)
    earlier = None if r.dry else exports.parse_export_record(gcs.read_export_record(s))
    before = {} if r.dry else gcs.generations(s, prefix)
    counted = _export_and_wait(r, s, lustre_path, uri)
    if r.dry:
        gcs.show(r, buckets.list_equivalent(s, prefix))
        return []
    after = gcs.generations(s, prefix)
    copied = sum(1 for name, gen in after.items() if before.get(name) != gen)
    # Nothing new only by the operation's own counters: objects it skipped as already in the bucket, none failed
    # (an export that found nothing at all proves nothing; proto3 JSON leaves a zero counter out).
    unchanged = copied == 0 and counted is not None and counted.get("objectsSkippedCount", 0) > 0 \
        and not counted.get("objectsFailedCount")
    proven, since = _unchanged_since(s, earlier, lustre_path) if unchanged else (0, "")
    objects = gcs.list_prefix(s, prefix)
    listed = lustre_runs(r, s) if run is None else None
    files, running = (listed[0], sorted(listed[1])) if listed is not None else (None, [])
    gcs.write_export_record(s, exports.export_record(
        s, lustre_path, uri, datetime.now(UTC), copied=copied or proven,
        objects=exports.bucket_run_files(objects), lustre_files=files, running=running, unchanged_since=since))
    total = sum(size for _, size in objects)
    r.say(f"gs://{s.bucket}/{prefix}: {len(objects)} objects, {size_text(total)} ({copied} written by this export)")
    for name, size in objects:
        r.say(f"  {size_text(size):>10}  gs://{s.bucket}/{name}")
    if files is not None:
        missing = exports.unexported_runs(files, exports.bucket_run_files(objects), set(running))
        for run_id, why in missing.items():
            r.say(f"not exported: {run_id}: {why}", err=True)
    if since:
        r.say(f"this export copied nothing new: Managed Lustre copies only what is not in the bucket yet or has "
              f"changed, and the export of {since} wrote the rest; it counts, as of now.", err=True)
    elif copied == 0:
        r.say("this export copied nothing, so it does not count as an export of /data/runs.", err=True)
    if run is not None and not objects:  # a mistyped id exported nothing, and said "0 objects" with exit 0
        raise ToolError(f"nothing of run {run} is in gs://{s.bucket}/{prefix}: /data/runs/{run} does not exist or "
                        f"holds no file yet (`invoke job.list` lists the runs; an id is a directory under /data/runs).",
                        1)
    return objects


def _unchanged_since(s: Settings, earlier: dict[str, Any] | None, lustre_path: str) -> tuple[int, str]:
    """For an export that copied nothing: (what the last export of the same path and instance wrote, its time, or
    the time it stood for) when that one wrote objects; (0, "") otherwise."""
    if not earlier or earlier.get("lustre_path") != lustre_path or earlier.get("instance") != lustre.volume_handle(s):
        return 0, ""
    wrote = exports.copied(earlier)
    if wrote <= 0 or lustre_path != exports.RUNS_PATH:  # a single run's export never counts for the guard
        return 0, ""
    return wrote, str(earlier.get("unchanged_since") or earlier.get("time"))


EXPORT_TIMEOUT_SECONDS = 6 * 3600


def _with_state(r: Runner, s: Settings, exc: ToolError) -> ToolError:
    """A failed export's error, with the instance's state when it is not ACTIVE (one read, on failure only)."""
    from .storage_steps import lustre_state

    try:
        state = str((lustre_state(r, s) or {}).get("state") or "")
    except ToolError:
        return exc
    if state in ("", "ACTIVE"):
        return exc
    what = {"CREATING": "it is still being made (an interrupted `up`): it holds nothing yet, and `invoke up` "
                        "waits for it",
            "DELETING": "Google Cloud is deleting it: its files are going"}.get(
        state, "Google Cloud is working on it (`invoke storage.status` shows when it is ACTIVE again); export then")
    return ToolError(f"{exc}\nLustre instance {s.LUSTRE_NAME} is {state}, not ACTIVE: {what}.", exc.exit_code)


def _export_and_wait(r: Runner, s: Settings, lustre_path: str, uri: str) -> dict[str, int] | None:
    """Start the export (--async) and follow its operation until done; its counters (None if it reports none). A
    waiting gcloud gives up after 30 minutes with "has not finished in 1800 seconds" while the export goes on:
    checkpoints of a large model take longer. An export with objects it failed to write fails."""
    from . import lustre_operation

    gone = re.compile(rf"/instances/{re.escape(s.LUSTRE_NAME)}' was not found")  # the instance, not the bucket
    try:
        started = r.run(lustre.lustre_export(s, lustre_path, uri), timeout=600, accept=gone)
    except ToolError as exc:  # Lustre refuses to export from an instance that is not ACTIVE: say which state
        raise _with_state(r, s, exc) from None
    if r.dry:
        return None
    if not started.ok:
        raise ToolError(f"Lustre instance {s.LUSTRE_NAME} does not exist in {s.lustre_zone} (project "
                        f"{s.PROJECT_ID}): there is nothing to export. `invoke storage.create` makes it.", 2)
    operation = lustre.operation_id(started.stderr + "\n" + started.stdout)
    if not operation:
        raise ToolError(f"the Lustre export of {lustre_path} to {uri} started, but gcloud named no operation to "
                        f"follow (is core/user_output_enabled off?); nothing counts as exported until it ends: see "
                        f"`gcloud lustre operations list --location={s.lustre_zone}`, then `invoke storage.export`.",
                        1)

    last: dict[str, Any] = {}

    def finished() -> bool:
        found = lustre_operation.describe(r, s, operation)
        if found is None:
            return False
        last.update(found)
        done = lustre_operation.outcome(found)
        if not done[0]:
            return False
        if done[1]:
            raise ToolError(f"the Lustre export of {lustre_path} to {uri} failed: {done[1]}, operation {operation}. "
                            f"Nothing counts as exported; fix what it says, then `invoke storage.export`.", 1)
        return True

    if not r.poll(f"Lustre export {lustre_path} -> {uri}", finished, timeout=EXPORT_TIMEOUT_SECONDS):
        raise ToolError(f"the Lustre export of {lustre_path} to {uri} is still running after "
                        f"{EXPORT_TIMEOUT_SECONDS // 3600} hours (operation {operation}; it goes on in Google): run "
                        f"`invoke storage.export` again once it is done.", 1)
    return lustre_operation.counters(last)


def size_text(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
