"""The per project+cluster lock that keeps two changing runs from interleaving, on one machine and across
machines.

- On this machine: a lock file (~/.cache/nemo-rl-gke/<project>-<cluster>.lock); it frees itself when the
  process ends, even if it crashed.
- Across machines (two laptops, a laptop and CI): a lease object in the deployment's bucket,
  gs://BUCKET/nemo-rl-gke/lock-<cluster>.json, with the holder's host, pid, command, start and expiry. It is
  created only if absent (`ifGenerationMatch=0`) and replaced or released only at the generation read, so two
  machines can never both hold it; an expired lease (a crashed holder) is taken over; `--force-unlock` takes
  over a live one and says whose. Without a bucket yet (the first `up`), only the local lock applies until
  the bucket exists. A lease this machine's own run left behind (SIGKILL, a crash, a third Ctrl-C
  while it let go) is taken over by this machine's next run, with a note: the generation it took is kept
  beside the local lock file until it is released (left_record), and only that generation of a lease of this
  host whose pid is gone matches (and, on Linux, only if /etc/machine-id is this machine's).
A second run refuses at once (exit 1) and says who holds the lock.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from invoke.exceptions import Exit

from .settings import Settings

if TYPE_CHECKING:
    from google.cloud.storage import Blob  # untyped library: Any to mypy, named for the reader


class LeaseBody(TypedDict, total=False):
    """The lease object's JSON (another machine's write may lack any key)."""

    host: str
    pid: int
    command: str
    since: str  # UTC, ISO 8601
    expires: float  # epoch seconds


def lock_path(s: Settings) -> Path:
    import os

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nemo-rl-gke"
    return base / f"{s.PROJECT_ID}-{s.CLUSTER_NAME}.lock"


def left_record(s: Settings) -> Path:
    """Beside the lock file: the generation of the lease this machine's run holds, until it lets go of it."""
    return lock_path(s).with_suffix(".lease")


def _kept(s: Settings) -> object:
    """left_record's JSON; None when there is none (the last run here let go) or it cannot be read."""
    import json

    try:
        return json.loads(left_record(s).read_text())
    except (OSError, ValueError):
        return None


def _where(s: Settings) -> str:
    return f"gs://{s.bucket}/{lease_name(s)}"


LEASE_SECONDS = 3 * 3600  # longer than any one task (Lustre and a cluster: under an hour each)
# A run renews its lease while it lasts, every third of it (storage.export waits up to 6 h; a question may wait
# longer): in the object's metadata, so its generation, which every later request is conditioned on, stays.
RENEW_SECONDS = LEASE_SECONDS / 3


def lease_name(s: Settings) -> str:
    return f"nemo-rl-gke/lock-{s.CLUSTER_NAME}.json"


def lease_body(what: str, now: float, *, host: str, pid: int) -> LeaseBody:
    import time

    return {"host": host, "pid": pid, "command": f"invoke {what}",
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)), "expires": now + LEASE_SECONDS}


def _expires(body: LeaseBody) -> float:
    """The lease's expiry in epoch seconds; 0 (expired) when it does not say so as a finite number."""
    import math

    try:
        expires = float(body.get("expires") or 0)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return expires if math.isfinite(expires) and 0 <= expires < 1e11 else 0.0


def holder_text(body: LeaseBody) -> str:
    import time

    expires = _expires(body)
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)) if expires else "?"
    return (f"`{body.get('command', '?')}` on {body.get('host', '?')} (pid {body.get('pid', '?')}, since "
            f"{body.get('since', '?')}, lease until {until})")


def take_lease(blob_of: Callable[[], Blob], body: LeaseBody, now: float, *, force: bool,
               left: Callable[[int, LeaseBody], bool] | None = None) -> tuple[int | None, str]:
    """Create the lease object, or replace an expired one (or any, with force), at the generation read.

    left(generation, body): whether the lease held is one a run of this machine took and left (it ended without
    letting go; left_by_a_run_here): replaced too.

    blob_of(): a fresh google-cloud-storage Blob for the lease. Returns (our generation or None if someone else
    holds it, a note: whose lease was overridden, or who holds it). Pure over the Blob API. The create comes
    first (one request when nobody holds the lock); a NotFound from it means the bucket does not exist, and
    propagates."""
    import json

    from google.api_core import exceptions

    bounded = _bounded()
    blob = blob_of()
    mine = json.loads(json.dumps(body))  # as read back
    try:  # the precondition makes the create atomic: of two machines, one gets 412
        blob.upload_from_string(json.dumps(body), content_type="application/json", if_generation_match=0,
                                **bounded)
        return int(blob.generation or 0), ""
    except exceptions.PreconditionFailed:
        held = blob_of()
    try:
        held.reload(**bounded)
    except exceptions.NotFound:  # released between our create and our read: start again
        return take_lease(blob_of, body, now, force=force, left=left)
    read = int(held.generation or 0)  # the generation every later request is conditioned on
    try:
        current: LeaseBody = json.loads(held.download_as_bytes(if_generation_match=read, **bounded) or b"{}")
    except exceptions.NotFound:  # released meanwhile: start again
        return take_lease(blob_of, body, now, force=force, left=left)
    except (exceptions.PreconditionFailed, ValueError):
        current = {}
    if not isinstance(current, dict):  # another writer's JSON that is not an object: no lease to honour
        current = {}
    if current == mine:
        # Our own create: it was written, but its answer was lost and the library's retry got 412 (a retried
        # conditional write that had succeeded). The body names this process and its start to the second.
        return read, ""
    current = _as_renewed(current, held)
    expired = _expires(current) <= now
    ours = left is not None and left(read, current)
    if not (expired or force or ours):
        return None, holder_text(current)
    replacing = blob_of()
    try:
        replacing.upload_from_string(json.dumps(body), content_type="application/json",
                                     if_generation_match=read, **bounded)
        generation = int(replacing.generation or 0)
    except exceptions.PreconditionFailed:  # another machine took it between our read and write, or we did
        found = _written_by_us(blob_of(), mine, bounded)
        if found is None:
            return None, "another run took the lock at this moment"
        generation = found  # the write went through, its answer was lost and the library's retry got 412
    if ours and not expired:
        note = f"lock left by this machine's {holder_text(current)}: that run ended without releasing it"
    else:
        note = f"{'expired' if expired else 'live'} lock of {holder_text(current)}"
    return generation, note


def _written_by_us(blob: Blob, mine: LeaseBody, bounded: dict[str, Any]) -> int | None:
    """The lease's generation if it holds exactly our body (host, pid, command, since, expires), else None."""
    import json

    from google.api_core import exceptions

    try:
        blob.reload(**bounded)
        generation = int(blob.generation or 0)
        held = json.loads(blob.download_as_bytes(if_generation_match=generation, **bounded) or b"{}")
    except (exceptions.NotFound, exceptions.PreconditionFailed, ValueError):
        return None
    return generation if held == mine else None


def _renewed_until(blob: Blob) -> float:
    """The expiry a renewal wrote in the lease's metadata (epoch seconds), 0 without one."""
    try:
        until = float((getattr(blob, "metadata", None) or {}).get("expires") or 0)
    except (TypeError, ValueError):
        return 0.0
    return _expires({"expires": until})


def _as_renewed(body: LeaseBody, blob: Blob) -> LeaseBody:
    """The lease's body with the expiry its holder's last renewal (renew_lease) gave it, when that is later."""
    renewed = _renewed_until(blob)
    return {**body, "expires": renewed} if body and renewed > _expires(body) else body


def renew_lease(blob: Blob, generation: int, now: float) -> bool:
    """Extend our lease to now + LEASE_SECONDS (its metadata's `expires`, which take_lease reads beside the
    body's). False when it is no longer ours (taken over, or gone)."""
    from google.api_core import exceptions

    blob.metadata = {"expires": repr(now + LEASE_SECONDS)}
    try:
        blob.patch(if_generation_match=generation, **_bounded())
    except (exceptions.NotFound, exceptions.PreconditionFailed):
        return False
    return True


RETRY_RENEW_SECONDS = 120.0  # after a failed renewal: two misses in a row must not let the lease lapse


def _renewing(blob_of: Callable[[], Blob], generation: int, stop: Any) -> None:
    """The lease renewed every RENEW_SECONDS until stop is set (a failed renewal again after RETRY_RENEW_SECONDS,
    or RENEW_SECONDS for a Forbidden); said once: a lease no longer ours, and renewals failing long enough for it
    to lapse within the hour. A lease this run let go of itself (its bucket deleted) is left quietly."""
    import time

    def still_ours() -> bool:
        return not stop.is_set() and any(held == generation for _s, _what, held in HELD)

    wait, last, said = RENEW_SECONDS, time.monotonic(), False
    while not stop.wait(wait):
        try:
            renewed = renew_lease(blob_of(), generation, time.time())
        except Exception as exc:  # noqa: BLE001 - a failed renewal is tried again
            from google.api_core import exceptions

            wait = RENEW_SECONDS if isinstance(exc, exceptions.Forbidden) else min(RENEW_SECONDS, RETRY_RENEW_SECONDS)
            lapsing = isinstance(exc, exceptions.Forbidden) or time.monotonic() - last > LEASE_SECONDS - RENEW_SECONDS
            if lapsing and not said and still_ours():
                print(f"warning: this run cannot renew its lock ({getattr(exc, 'message', None) or exc}): it lapses "
                      f"{LEASE_SECONDS // 3600:.0f} hours after its last renewal, and another run may then take it.",
                      file=sys.stderr)
                said = True
            continue
        if not renewed:
            if still_ours():  # not the run's own release (or its bucket's delete) racing this renewal
                print("warning: this run's lock was taken over (--force-unlock elsewhere) or removed: another run "
                      "may now change the same deployment.", file=sys.stderr)
            return
        wait, last = RENEW_SECONDS, time.monotonic()


LEASE_PREFIX = "nemo-rl-gke/lock-"  # every deployment's lease in a bucket (lease_name)


def live(blob: Blob) -> bool:
    """A lease object (as listed, with its metadata) that has not expired: its body's or a renewal's expiry."""
    import json
    import time

    from google.api_core import exceptions

    if _renewed_until(blob) > time.time():
        return True
    try:
        body: LeaseBody = json.loads(blob.download_as_bytes(**_bounded()) or b"{}")
    except (exceptions.NotFound, ValueError):
        return False
    return isinstance(body, dict) and _expires(body) > time.time()


def _same_lease(held: Settings, s: Settings) -> bool:
    return held.bucket == s.bucket and lease_name(held) == lease_name(s)


def held_generation(s: Settings) -> int | None:
    """The generation of the deployment's lease this run holds (HELD), None if it holds none."""
    return next((generation for held, _what, generation in HELD if _same_lease(held, s)), None)


def gone_with_bucket(s: Settings) -> None:
    """The teardown deleted this run's lease with its bucket: nothing left to renew or release."""
    HELD[:] = [entry for entry in HELD if not _same_lease(entry[0], s)]


def release_lease(blob: Blob, generation: int) -> None:
    from google.api_core import exceptions

    try:
        blob.delete(if_generation_match=generation, **_bounded())
    except (exceptions.NotFound, exceptions.PreconditionFailed):
        pass  # taken over with --force-unlock, or gone: not ours to delete any more


def _bounded() -> dict[str, Any]:
    """Each lease request's timeout and retries, bounded as every other call of ours (gcs_client): the library's
    default retries for 120 s, and a signal waits for the take or the release (tools.deferring)."""
    from . import gcs_client

    return {"timeout": gcs_client.CALL_TIMEOUT, "retry": gcs_client.retry()}


@contextmanager
def bucket_lease(s: Settings, what: str, *, force: bool = False) -> Iterator[int | None]:
    """Hold the deployment's lease in its bucket (nothing if the bucket does not exist yet), renewed while it is
    held (RENEW_SECONDS). Under state_lock: the record of the lease taken (left_record) is this machine's, one run
    at a time."""
    import threading
    import time

    from . import gcs_client, tools

    bucket = gcs_client.client(s).bucket(s.bucket)  # no request: the lease's create is the first

    def blob_of() -> Blob:
        return bucket.blob(lease_name(s))

    now = time.time()
    record, kept = left_record(s), _kept(s)

    def left(generation: int, body: LeaseBody) -> bool:
        return left_by_a_run_here(s, kept, generation, body)

    generation: int | None = None
    stop = threading.Event()
    try:
        # Ctrl-C, SIGTERM or SIGHUP in the take or the release (tools.deferring) comes after it, inside this try: a
        # lease created without its record, or left unreleased, would refuse every machine for 3 hours.
        with tools.deferring():
            generation, note = _take(s, blob_of, what, now, force, left, record)
        if generation is None:  # no bucket yet (a first `up` creates it): nothing to hold
            yield None
            return
        if note:
            print(f"--force-unlock: took over the {note}." if force else f"note: took over the {note}.",
                  file=sys.stderr)
        renewal = threading.Thread(target=_renewing, args=(blob_of, generation, stop), daemon=True,
                                   name="lease renewal")
        renewal.start()
        yield generation
    finally:
        stop.set()
        if generation is not None:
            with tools.deferring():  # first: nothing between the body's end and the release a signal could cut
                if (s, what, generation) in HELD:  # not when its bucket's delete took the lease (gone_with_bucket)
                    HELD.remove((s, what, generation))
                try:
                    with gcs_client.calling("releasing the lock"):
                        release_lease(blob_of(), generation)
                except Exception as exc:
                    if tools.holding():  # the signal's "interrupted" replaces this error on the way out: say it
                        print(f"error: the lock was not let go (this machine's next run takes it over): {exc}",
                              file=sys.stderr)
                    raise
                record.unlink(missing_ok=True)  # only once let go: a run killed before (SIGKILL) leaves it


def _take(s: Settings, blob_of: Callable[[], Blob], what: str, now: float, force: bool,
          left: Callable[[int, LeaseBody], bool], record: Path) -> tuple[int | None, str]:
    """bucket_lease's take: (generation, note), (None, "") without a bucket; the lease taken is added to HELD
    and its record written. A lease held by another run: Exit 1, naming it."""
    import json
    import os
    import socket

    from google.api_core import exceptions

    from . import gcs, gcs_client

    seen: list[LeaseBody] = []  # the lease found held, for the refusal's words

    def seeing(generation: int, body: LeaseBody) -> bool:
        seen.append(body)
        return left(generation, body)

    try:
        with gcs_client.calling("taking the lock"):
            generation, note = take_lease(blob_of, lease_body(what, now, host=socket.gethostname(),
                                                              pid=os.getpid()), now, force=force, left=seeing)
    except exceptions.NotFound:  # no bucket yet (a first `up` creates it): nothing to hold
        return None, ""
    except exceptions.Forbidden as exc:
        raise gcs.unreachable(s, f"access denied: {getattr(exc, 'message', exc)}") from None
    except exceptions.GoogleAPICallError as exc:
        raise gcs_client.api_error(f"taking the lock in gs://{s.bucket}", exc) from None
    if generation is None:
        holder = seen[-1] if seen else {}
        # Not when the refusal is a race lost at this moment (the lease seen is the one another run just replaced).
        named_here = note == holder_text(holder) and _named_here_and_gone(holder)
        here = (f" It names this host, where pid {holder.get('pid')} is not running: a run of this machine that "
                f"ended before it noted the lease it took, or another machine with the same host name. If it was "
                f"yours, run again with --force-unlock." if named_here else "")
        raise Exit(f"error: another run holds the lock of {s.PROJECT_ID}/{s.CLUSTER_NAME} "
                   f"({_where(s)}): {note}. Two runs must not interleave; wait for it to "
                   f"finish (a run that is still going renews its lease). If that run is gone (its machine "
                   f"crashed), run again with --force-unlock, or wait for the lease to expire.{here}", code=1)
    HELD.append((s, what, generation))
    try:  # whole or not at all (a kill mid-write must not leave an empty record): written aside, then renamed
        aside = record.with_suffix(f".lease.{os.getpid()}")
        aside.write_text(json.dumps({"generation": generation, "lease": _where(s), "machine": _machine()}))
        os.replace(aside, record)
    except OSError as exc:  # a convenience for a run that ends without letting go: not worth stopping for
        print(f"note: could not write {record} ({exc.strerror}): if this run is killed, its lease refuses "
              f"the next run here too until it expires (or --force-unlock).", file=sys.stderr)
    return generation, note


# The leases this process holds now (bucket_lease): (settings, command, generation).
HELD: list[tuple[Settings, str, int]] = []


@contextmanager
def deployment_lock(s: Settings, what: str, *, force: bool = False) -> Iterator[None]:
    """Both locks: this machine's, then the bucket's lease (every machine sees it)."""
    with state_lock(s, what), bucket_lease(s, what, force=force):
        yield


def stop_if_taken_over() -> None:
    """After a question was answered (context.confirm): stop (exit 1) if a lease this run holds is no longer its
    own. An answer may come hours later: past the lease's expiry another machine may take it over, and
    `--force-unlock` takes over a live one. A lease that cannot be read is no proof: nothing is said."""
    for s, what, generation in list(HELD):
        try:
            now = _lease_now(s)
        except Exception:  # noqa: BLE001 - an unreadable lease is no proof it was taken over
            continue
        if now is not None and now[0] == generation:
            continue
        holder = holder_text(now[1]) if now is not None and now[1] else "no one (the lease is gone)"
        raise Exit(f"error: while the question waited, the lock of {s.PROJECT_ID}/{s.CLUSTER_NAME} was taken over; "
                   f"it is now held by {holder}. `invoke {what}` stops here: run it again once that run has "
                   f"ended.", code=1)


def _lease_now(s: Settings) -> tuple[int, LeaseBody] | None:
    """The deployment's lease object as it is now: (its generation, its body; {} if that is not a lease), or None
    when there is none (nor a bucket). Raises what google-cloud-storage raises: the callers decide what a lease
    they cannot read means."""
    import json

    from . import gcs_client

    bounded = _bounded()
    blob = gcs_client.client(s).bucket(s.bucket).get_blob(lease_name(s), **bounded)
    if blob is None:
        return None
    generation = int(blob.generation or 0)  # before the download, which sets it from the response's headers
    body: LeaseBody = json.loads(blob.download_as_bytes(**bounded) or b"{}")
    return generation, _as_renewed(body, blob) if isinstance(body, dict) else {}


TEARDOWN = ("down", "clean", "delete")  # the commands that delete (`down`, `clean.*`, `*.delete`)


def teardown_holding(s: Settings) -> str | None:
    """Who holds the deployment's lock for a teardown, on this machine or another (its live lease), without
    taking it; None when no teardown does (or the lease cannot be read: a submit is not refused on a doubt)."""
    import fcntl
    import json
    import time

    def deleting(command: str) -> bool:
        verb = command.removeprefix("invoke ").split(" ")[0]
        return any(verb == word or verb.startswith(f"{word}.") or verb.endswith(f".{word}") for word in TEARDOWN)

    path = lock_path(s)
    if path.exists():
        with open(path) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(handle, fcntl.LOCK_UN)
            except BlockingIOError:
                try:
                    local = json.loads(handle.read() or "{}")
                except json.JSONDecodeError:
                    local = {}
                local = local if isinstance(local, dict) else {}
                if deleting(str(local.get("what", ""))):
                    return f"`invoke {local['what']}` (pid {local.get('pid', '?')}, since {local.get('since', '?')})"
    try:
        now = _lease_now(s)
        lease: LeaseBody = now[1] if now is not None else {}
        live = _expires(lease) > time.time()
    except Exception:  # noqa: BLE001 - unreadable (or not a lease): not a reason to refuse
        return None
    if now is not None and left_by_a_run_here(s, _kept(s), now[0], lease):
        return None  # this machine's teardown was killed (its lease outlives it): nothing deletes Ray now
    return holder_text(lease) if live and deleting(str(lease.get("command", ""))) else None


def left_by_a_run_here(s: Settings, kept: object, generation: int, body: LeaseBody) -> bool:
    """Whether the deployment's lease at `generation` (its body) is one a run of this machine took and left: this
    machine's record of the lease its run took (kept: left_record's JSON, None if none) names that very lease and
    generation, on this machine, and the lease's host is this one and its pid is gone. The caller holds this
    machine's lock: no run here holds the lease now, and a killed run's pid is gone (a pid alive again refuses)."""
    if not isinstance(kept, dict):
        return False
    return (kept.get("lease") == _where(s) and kept.get("generation") == generation
            and kept.get("machine") == _machine() and _named_here_and_gone(body))


def _named_here_and_gone(body: LeaseBody) -> bool:
    """The lease names this host, and its pid is not running here."""
    import socket

    return body.get("host") == socket.gethostname() and not _alive(body.get("pid"))


def _machine() -> str:
    """This machine (Linux's machine id, kept across reboots; '' elsewhere): a record written by another machine
    that shares this home directory is not this one's."""
    try:
        return Path("/etc/machine-id").read_text().strip()
    except OSError:
        return ""


def _alive(pid: object) -> bool:
    import os

    try:
        os.kill(int(str(pid)), 0)
    except ProcessLookupError:
        return False
    except (ValueError, OSError, OverflowError):
        return True  # not a pid, or another user's process: assume it runs
    return True


@contextmanager
def state_lock(s: Settings, what: str) -> Iterator[Path]:
    """Hold the per project+cluster lock; refuse (exit 1) if another run holds it."""
    import fcntl
    import json
    import os
    import time

    path = lock_path(s)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            try:
                holder = json.loads(handle.read() or "{}")
            except json.JSONDecodeError:
                holder = {}
            who = (f"`invoke {holder.get('what', '?')}` (pid {holder.get('pid', '?')}, "
                   f"since {holder.get('since', '?')})")
            raise Exit(f"error: another run holds {path}: {who} works on {s.PROJECT_ID}/{s.CLUSTER_NAME}. "
                       f"Two runs must not interleave; wait for it to finish, then run this again (the lock "
                       f"frees itself when that process ends).", code=1) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"what": what, "pid": os.getpid(),
                                 "since": time.strftime("%Y-%m-%d %H:%M:%S")}))
        handle.flush()
        try:
            yield path
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
