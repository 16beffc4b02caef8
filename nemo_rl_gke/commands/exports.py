"""The data guard's pure half: where runs live (/data/runs on Lustre, gs://BUCKET/runs/), the export records
written next to the data, the read-only listing script run in the Ray head pod, and which runs are not safely
in the bucket (same file names and sizes, none running). resources/storage_steps.py runs them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from ..settings import Settings
from .lustre import volume_handle

# Runs live at /data/runs/<id>/ in the pods (the PV is mounted at /data): /runs/<id> on the filesystem.
RUNS_PATH = "/runs"


# The bucket mirrors the Lustre layout: gs://BUCKET/runs/<id>/...
RUNS_PREFIX = "runs/"


# A small JSON object in the bucket recording each export; storage.delete reads it before deleting data.
EXPORT_MARKER = "nemo-rl-gke/last-export.json"


EXPORT_FRESH = timedelta(hours=24)


# What the data guard last verified by listing /data/runs (same format, "copied": -1): a teardown interrupted
# after the Ray head pod was gone can still rely on it when re-run.
CHECK_MARKER = "nemo-rl-gke/last-check.json"


def export_record(s: Settings, lustre_path: str, gcs_uri: str, when: datetime, *, copied: int = 0,
                  objects: dict[str, int] | None = None, lustre_files: dict[str, int] | None = None,
                  running: list[str] | None = None, final: bool = False, deployed: bool = False,
                  unchanged_since: str = "") -> str:
    """What one export did, written next to the data: how many objects it wrote (new generations), what the
    bucket held under runs/ afterwards, and what /data/runs held (None: no head pod to ask). final: the
    listing taken as Ray went away, after which nothing writes /data/runs (the only one a check without a
    head pod may trust); deployed: written as Ray is deployed again (no earlier listing answers). unchanged_since:
    an export that copied nothing new after one of the same path that wrote objects (that one's time): Managed
    Lustre copies only what is not in the bucket yet or has changed, so all there is was already there."""
    return json.dumps({"instance": volume_handle(s), "lustre_path": lustre_path, "gcs_uri": gcs_uri,
                       "time": when.astimezone(UTC).isoformat(), "copied": copied, "objects": objects or {},
                       "lustre_files": lustre_files, "running": running or [], **({"final": True} if final else {}),
                       **({"deployed": True} if deployed else {}),
                       **({"unchanged_since": unchanged_since} if unchanged_since else {})},
                      sort_keys=True)


def parse_export_record(record_json: str | None) -> dict[str, Any] | None:
    """The record as a dict, or None if there is none or it does not parse (a corrupt record proves nothing)."""
    if not record_json:
        return None
    try:
        record = json.loads(record_json)
        record["when"] = datetime.fromisoformat(record["time"])
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(record, dict) or record["when"].tzinfo is None:  # a time without its zone: not ours
        return None
    # Anyone with the bucket may edit it: what is not in our shape proves nothing (and raises nothing).
    for key in ("lustre_files", "objects"):
        files = record.get(key)
        if files is not None and not (isinstance(files, dict) and all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
                for k, v in files.items())):
            return None
    running = record.get("running")
    if running is not None and not (isinstance(running, list) and all(isinstance(r, str) for r in running)):
        return None
    if any(not isinstance(record.get(key, False), bool) for key in ("final", "deployed")):  # "false" is truthy
        return None
    return record


def copied(record: dict[str, Any]) -> int:
    """How many objects the record's export wrote; 0 when it does not say so as a number (proves nothing)."""
    try:
        return int(record.get("copied") or 0)
    except (TypeError, ValueError, OverflowError):
        return 0


def check_is_fresh(record_json: str | None, now: datetime) -> bool:
    """A verification by listing (/data/runs seen, every file in the bucket) less than EXPORT_FRESH ago."""
    record = parse_export_record(record_json)
    return (record is not None and isinstance(record.get("lustre_files"), dict)
            and now - record["when"] < EXPORT_FRESH)


def export_is_fresh(record_json: str | None, now: datetime) -> bool:
    """A full export (every run) that wrote at least one object, less than EXPORT_FRESH ago."""
    record = parse_export_record(record_json)
    if record is None:
        return False
    return (record.get("lustre_path") == RUNS_PATH and copied(record) > 0
            and now - record["when"] < EXPORT_FRESH)


# Read-only: every file under /data/runs with its size, and the runs still running (a pid, no exit code,
# and the process alive, as job.status judges it). NRG_POD_ROOT is empty in a real pod (the fake's pod root).
RUNS_LISTING_SCRIPT = r"""set -u
runs="${NRG_POD_ROOT:-}/data/runs"
[ -d "$runs" ] || exit 0
cd "$runs" || exit 0
for d in */; do
  d="${d%/}"
  [ -d "$d" ] || continue
  echo "run $d"
  if [ -s "$d/pid" ] && [ ! -e "$d/exit_code" ] && kill -0 "$(cat "$d/pid")" 2>/dev/null; then
    echo "running $d"
  fi
done
find . -type f -printf 'file %s %P\n'
"""


def parse_runs_listing(text: str) -> tuple[dict[str, int], set[str], set[str]]:
    """(files under runs/ -> size, run ids, running run ids) from RUNS_LISTING_SCRIPT's output."""
    files: dict[str, int] = {}
    runs: set[str] = set()
    running: set[str] = set()
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "file":
            size, _, path = rest.partition(" ")
            if size.isdigit() and path:
                files[path] = int(size)
                runs.add(path.split("/", 1)[0])
        elif kind == "run" and rest:
            runs.add(rest)
        elif kind == "running" and rest:
            running.add(rest)
    return files, runs, running


def bucket_run_files(objects: list[tuple[str, int]]) -> dict[str, int]:
    """gs://B/runs/<path> objects -> {<path>: size} (folder placeholders left out)."""
    return {name[len(RUNS_PREFIX):]: size for name, size in objects
            if name.startswith(RUNS_PREFIX) and not name.endswith("/")}


def unexported_runs(lustre_files: dict[str, int], bucket_files: dict[str, int],
                    running: set[str] | frozenset[str] = frozenset(),
                    running_word: str = "still running") -> dict[str, str]:
    """run id -> why it is not safely in the bucket: still running (running_word), or files missing or of another
    size.

    A run is exported when every file under /data/runs/<run>/ is at gs://B/runs/<run>/ with the same size."""
    missing: dict[str, list[str]] = {}
    differ: dict[str, list[str]] = {}
    for path, size in sorted(lustre_files.items()):
        run = path.split("/", 1)[0]
        if path not in bucket_files:
            missing.setdefault(run, []).append(path)
        elif bucket_files[path] != size:
            differ.setdefault(run, []).append(path)
    out: dict[str, str] = {}
    for run in sorted(set(missing) | set(differ) | set(running)):
        why = []
        if run in running:
            why.append(running_word)
        if run in missing:
            why.append(f"{len(missing[run])} file(s) not in the bucket (e.g. {missing[run][0]})")
        if run in differ:
            why.append(f"{len(differ[run])} file(s) of another size in the bucket (e.g. {differ[run][0]})")
        out[run] = "; ".join(why)
    return out


def export_paths(s: Settings, run: str | None) -> tuple[str, str, str]:
    """(lustre path, gs:// URI, bucket prefix) of an export: every run, or one run."""
    if run:
        return f"{RUNS_PATH}/{run}", f"gs://{s.bucket}/{RUNS_PREFIX}{run}/", f"{RUNS_PREFIX}{run}/"
    return RUNS_PATH, f"gs://{s.bucket}/{RUNS_PREFIX}", RUNS_PREFIX
