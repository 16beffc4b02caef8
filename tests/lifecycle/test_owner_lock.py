"""The deployment's lock across machines: a lease object in the bucket, created only if absent and replaced only
at the generation read. The race needs Cloud Storage's preconditions: tested on a blob that enforces them, and
through google-cloud-storage on the emulator (tests/support/gcs_emulator makes it answer ifGenerationMatch with
412, as GCS does); the flows go through the real `invoke`."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import pytest
from google.api_core import exceptions

from nemo_rl_gke import lock
from support.fake import (
    FakeCloud,
    children,
    example_settings,
    live_members,
    press_ctrl_c,
    read_env_example,
    running,
)

PROJECT = read_env_example()["PROJECT_ID"]
BUCKET = f"nemo-rl-{PROJECT}"


class Store:
    """One object with a generation, enforcing ifGenerationMatch as Cloud Storage does (412 otherwise)."""

    def __init__(self):
        self.data: bytes | None = None
        self.generation = 0

    def blob(self):
        return Blob(self)


class Blob:
    """Every request must be bounded as our other Cloud Storage calls are (gcs_client): the library's default
    retries for 120 s, and a signal (Ctrl-C too) waits for the lease's take and release."""

    def __init__(self, store: Store):
        self.store, self.generation = store, None

    def reload(self, *, timeout, retry):
        _bounded(timeout, retry)
        if self.store.data is None:
            raise exceptions.NotFound("no lease")
        self.generation = self.store.generation

    def download_as_bytes(self, if_generation_match=None, *, timeout, retry):
        _bounded(timeout, retry)
        if if_generation_match is not None and if_generation_match != self.store.generation:
            raise exceptions.PreconditionFailed("generation")
        return self.store.data

    def upload_from_string(self, text, content_type=None, if_generation_match=None, *, timeout, retry):
        _bounded(timeout, retry)
        current = self.store.generation if self.store.data is not None else 0
        if if_generation_match is not None and if_generation_match != current:
            raise exceptions.PreconditionFailed("generation")
        self.store.data, self.store.generation = text.encode(), self.store.generation + 1
        self.generation = self.store.generation

    def delete(self, if_generation_match=None, *, timeout, retry):
        _bounded(timeout, retry)
        if if_generation_match is not None and if_generation_match != self.store.generation:
            raise exceptions.PreconditionFailed("generation")
        self.store.data = None


def _bounded(timeout, retry) -> None:
    from nemo_rl_gke import gcs_client

    assert (timeout, retry.timeout) == (gcs_client.CALL_TIMEOUT, gcs_client.DEADLINE_SECONDS)


def body(host, now, *, expires_in=3600):
    return {**lock.lease_body("up", now, host=host, pid=1), "expires": now + expires_in}


def test_owner_lock_second_machine_is_refused_and_named():
    store, now = Store(), time.time()
    first, _ = lock.take_lease(store.blob, body("laptop-1", now), now, force=False)
    second, note = lock.take_lease(store.blob, body("laptop-2", now), now, force=False)
    assert (first is not None, second, "laptop-1" in note, "invoke up" in note) == (True, None, True, True)


@pytest.mark.parametrize("written", [b'{"expires": "x", "host": "h"}', b"[]", b'{"expires": 1e400}',
                                     b'{"expires": NaN}', b'{"expires": 1e300, "pid": 1e300}'])
def test_owner_lock_a_lease_another_writer_left_unreadable_is_taken_over_without_a_traceback(written):
    # Anyone with the bucket may write it: float("x"), [].get and time.gmtime(1e300) raised in every up and down.
    store, now = Store(), time.time()
    lock.take_lease(store.blob, body("other", now - 7200, expires_in=60), now - 7200, force=False)
    store.data = written
    taken, note = lock.take_lease(store.blob, body("laptop-2", now), now, force=False)
    assert taken is not None and note.startswith("expired lock of"), note


def test_owner_lock_expired_lease_is_taken_over():
    store, now = Store(), time.time()
    lock.take_lease(store.blob, body("crashed", now - 7200, expires_in=60), now - 7200, force=False)
    taken, note = lock.take_lease(store.blob, body("laptop-2", now), now, force=False)
    assert taken is not None and note.startswith("expired lock of") and "crashed" in note


def test_owner_lock_force_takes_over_a_live_lease_and_says_whose():
    store, now = Store(), time.time()
    lock.take_lease(store.blob, body("laptop-1", now), now, force=False)
    taken, note = lock.take_lease(store.blob, body("laptop-2", now), now, force=True)
    assert taken is not None and note.startswith("live lock of") and "laptop-1" in note


def test_owner_lock_release_after_a_take_over_leaves_the_new_holders_lease():
    store, now = Store(), time.time()
    mine, _ = lock.take_lease(store.blob, body("laptop-1", now), now, force=False)
    lock.take_lease(store.blob, body("laptop-2", now), now, force=True)
    lock.release_lease(store.blob(), mine)
    assert json.loads(store.data)["host"] == "laptop-2"


def test_owner_lock_a_lease_this_machine_left_is_taken_over_only_when_it_is_that_very_lease():
    import socket

    s, store, now = example_settings(), Store(), time.time()
    where = f"gs://nemo-rl-{PROJECT}/nemo-rl-gke/lock-nemo-rl.json"
    here, dead = socket.gethostname(), 2 ** 22 + 12345  # above any pid this machine hands out
    left, _ = lock.take_lease(store.blob, {**body(here, now), "pid": dead}, now, force=False)  # never let go
    kept = {"generation": left, "lease": where, "machine": lock._machine()}
    assert lock.left_by_a_run_here(s, kept, left, {**body(here, now), "pid": dead})
    for record, lease in (({**kept, "generation": left + 1}, {}),  # a later lease than the one kept
                          ({**kept, "lease": "gs://other/nemo-rl-gke/lock-nemo-rl.json"}, {}),  # another bucket
                          ({**kept, "machine": "another-machine-sharing-this-home"}, {}),
                          (None, {}),  # the last run here let go
                          (kept, {"host": "laptop-of-someone-else"}),
                          (kept, {"pid": os.getpid()})):  # its run is alive (the lock file was deleted under it)
        assert not lock.left_by_a_run_here(s, record, left, {**body(here, now), "pid": dead, **lease})
    assert lock.take_lease(store.blob, body(here, now), now, force=False, left=lambda *_: False)[0] is None
    generation, note = lock.take_lease(store.blob, body(here, now), now, force=False,
                                       left=lambda g, held: g == left and held["pid"] == dead)
    assert generation == left + 1 and note.startswith(f"lock left by this machine's `invoke up` on {here}"), note



def test_owner_lock_free_lock_is_taken_in_one_request():
    store, now, asked = Store(), time.time(), []

    class Counted(Blob):
        def reload(self, **bounded):
            asked.append("reload")
            super().reload(**bounded)

        def upload_from_string(self, text, content_type=None, if_generation_match=None, **bounded):
            asked.append("create")
            super().upload_from_string(text, content_type, if_generation_match, **bounded)

    taken, _ = lock.take_lease(lambda: Counted(store), body("laptop-1", now), now, force=False)
    assert taken and asked == ["create"]


class LostAnswer(Blob):
    """A write Cloud Storage makes whose answer is lost (a 503 or a dropped connection after the commit): the
    library's retry of the conditional write then gets 412 (Google's retry strategy: preconditions make a retry
    safe, not successful)."""

    def upload_from_string(self, text, content_type=None, if_generation_match=None, **bounded):
        super().upload_from_string(text, content_type, if_generation_match, **bounded)
        raise exceptions.PreconditionFailed("the retried request: the object's generation has changed")


def test_owner_lock_a_create_whose_answer_was_lost_is_ours_not_another_runs():
    # Before: refused, naming this very run as the holder, and the next run here too until the lease expired.
    store, now = Store(), time.time()
    taken, note = lock.take_lease(lambda: LostAnswer(store), body("laptop-1", now), now, force=False)
    assert (taken, note) == (store.generation, "")
    lock.release_lease(Blob(store), taken)
    assert store.data is None


def test_owner_lock_a_replace_whose_answer_was_lost_is_ours_and_says_whose_lease_it_replaced():
    store, now = Store(), time.time()
    Blob(store).upload_from_string(json.dumps(body("laptop-0", now, expires_in=-1)), **lock._bounded())
    taken, note = lock.take_lease(lambda: LostAnswer(store), body("laptop-1", now), now, force=False)
    assert (taken, "expired lock of `invoke up` on laptop-0" in note) == (store.generation, True), note
    assert json.loads(store.data)["host"] == "laptop-1"


def test_owner_lock_create_race_loser_reads_the_winner():
    store, now = Store(), time.time()

    class Racing(Blob):
        def upload_from_string(self, text, content_type=None, if_generation_match=None, **bounded):
            if store.data is None:  # the other machine wins between our existence check and our create
                Blob(store).upload_from_string(json.dumps(body("winner", now)), if_generation_match=0, **bounded)
            super().upload_from_string(text, content_type, if_generation_match, **bounded)

    taken, note = lock.take_lease(lambda: Racing(store), body("loser", now), now, force=False)
    assert (taken, "winner" in note) == (None, True)


def test_owner_lock_race_and_stale_release_through_cloud_storage():
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage
    from google.cloud.storage import Blob as GcsBlob

    from support.gcs_emulator import running_emulator

    with running_emulator() as emulator:
        _race_and_stale_release(storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                                               client_options={"api_endpoint": emulator.host}), GcsBlob)


def _race_and_stale_release(client, GcsBlob) -> None:  # noqa: N803 - the class
    bucket, now = client.create_bucket("lease-race"), time.time()
    name = "nemo-rl-gke/lock-nemo-rl.json"

    class Racing(GcsBlob):
        def upload_from_string(self, data, *args, **kwargs):
            if not bucket.blob(name).exists():  # the other machine wins between our existence check and create
                bucket.blob(name).upload_from_string(json.dumps(body("winner", now)), if_generation_match=0)
            super().upload_from_string(data, *args, **kwargs)

    taken, note = lock.take_lease(lambda: Racing(name, bucket), body("loser", now), now, force=False)
    assert (taken, "winner" in note) == (None, True)
    winner = bucket.get_blob(name).generation
    forced, _ = lock.take_lease(lambda: bucket.blob(name), body("laptop-2", now), now, force=True)
    assert forced and forced != winner
    lock.release_lease(bucket.blob(name), winner)  # the winner's late release: not its lease any more
    assert json.loads(bucket.blob(name).download_as_bytes())["host"] == "laptop-2"
    lock.release_lease(bucket.blob(name), forced)
    assert bucket.get_blob(name) is None
    # A download names the generation it read, as GCS's headers do (the Blob's generation was None after it).
    bucket.blob(name).upload_from_string(json.dumps(body("laptop-3", now, expires_in=-1)))
    read = bucket.blob(name)
    read.download_as_bytes()
    assert read.generation == bucket.get_blob(name).generation

    class TakenMeanwhile(GcsBlob):  # another machine replaces the expired lease between our read and our write
        def download_as_bytes(self, *args, **kwargs):
            data = super().download_as_bytes(*args, **kwargs)
            bucket.blob(name).upload_from_string(json.dumps(body("laptop-4", now)))
            return data

    assert lock.take_lease(lambda: TakenMeanwhile(name, bucket), body("laptop-5", now), now, force=False) == (
        None, "another run took the lock at this moment")
    assert json.loads(bucket.blob(name).download_as_bytes())["host"] == "laptop-4"


def test_owner_lock_a_renewed_lease_outlives_its_first_term_and_no_more():
    """storage.export waits up to 6 hours under a 3-hour lease: its renewals (the object's metadata, the
    generation kept) must hold off another machine after the body's expiry, and only until the renewed one."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    from support.gcs_emulator import running_emulator

    with running_emulator() as emulator:
        client = storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": emulator.host})
        bucket, now = client.create_bucket("lease-renew"), time.time()
        name = "nemo-rl-gke/lock-nemo-rl.json"
        taken, _ = lock.take_lease(lambda: bucket.blob(name), lock.lease_body("storage.export", now, host="laptop-1",
                                                                               pid=1), now, force=False)
        assert taken and lock.renew_lease(bucket.blob(name), taken, now + 2 * 3600)
        assert bucket.get_blob(name).generation == taken  # every later request is conditioned on it
        later = now + lock.LEASE_SECONDS + 60  # the body's expiry has passed, the renewal's has not
        refused, note = lock.take_lease(lambda: bucket.blob(name), body("laptop-2", later), later, force=False)
        assert (refused, "laptop-1" in note) == (None, True), note
        ended = now + 2 * 3600 + lock.LEASE_SECONDS + 60
        replaced, note = lock.take_lease(lambda: bucket.blob(name), body("laptop-2", ended), ended, force=False)
        assert replaced and "expired lock" in note
        assert not lock.renew_lease(bucket.blob(name), taken, ended)  # not ours any more: never renewed again


def test_owner_lock_a_teardown_past_its_first_term_still_refuses_job_submit(tmp_path, monkeypatch):
    from nemo_rl_gke import gcs_client
    from support.gcs_emulator import running_emulator

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    s = example_settings()
    with running_emulator() as emulator:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.host)
        gcs_client.client(s).create_bucket(s.bucket)
        blob = gcs_client.client(s).bucket(s.bucket).blob(lock.lease_name(s))
        started = time.time() - lock.LEASE_SECONDS - 60  # a long `down` on another machine, renewed since
        blob.upload_from_string(json.dumps(lock.lease_body("down", started, host="ci-runner-7", pid=4242)))
        assert lock.teardown_holding(s) is None  # its first term is over
        assert lock.renew_lease(gcs_client.client(s).bucket(s.bucket).get_blob(lock.lease_name(s)),
                                blob.generation, time.time())
        assert "ci-runner-7" in (lock.teardown_holding(s) or "")


def test_owner_lock_a_failed_renewal_is_tried_again_soon_and_a_release_racing_one_is_not_a_takeover(monkeypatch,
                                                                                                       capsys):
    import threading

    tries: list[str] = []

    def renew(blob, generation, now):
        tries.append("try")
        if len(tries) == 1:
            raise exceptions.ServiceUnavailable("a blip")
        if len(tries) == 2:
            return True
        stop.set()  # the run's own release, racing this renewal: its 404 says nothing
        return False

    monkeypatch.setattr(lock, "renew_lease", renew)
    monkeypatch.setattr(lock, "RENEW_SECONDS", 5.0)
    monkeypatch.setattr(lock, "RETRY_RENEW_SECONDS", 0.01)
    stop = threading.Event()
    started = time.monotonic()
    waits: list[float] = []
    real_wait = stop.wait

    def wait(seconds):
        waits.append(seconds)
        return real_wait(0.01)  # the test does not wait the real intervals

    monkeypatch.setattr(stop, "wait", wait)
    lock._renewing(lambda: None, 1, stop)
    assert tries == ["try"] * 3 and waits[:3] == [5.0, 0.01, 5.0], waits
    assert "taken over" not in capsys.readouterr().err and time.monotonic() - started < 5


def test_owner_lock_renewals_failing_long_enough_to_lapse_are_said_once_and_a_lease_let_go_of_is_not(
        monkeypatch, capsys):
    import threading

    calls: list[str] = []
    stop = threading.Event()

    def failing(blob, generation, now):
        calls.append("try")
        if len(calls) >= 6:
            stop.set()
        raise exceptions.ServiceUnavailable("an outage")

    monkeypatch.setattr(lock, "renew_lease", failing)
    monkeypatch.setattr(lock, "LEASE_SECONDS", 0.05)
    monkeypatch.setattr(lock, "RENEW_SECONDS", 0.01)
    monkeypatch.setattr(lock, "RETRY_RENEW_SECONDS", 0.01)
    monkeypatch.setattr(lock, "HELD", [(example_settings(), "storage.export", 1)])
    lock._renewing(lambda: None, 1, stop)
    assert capsys.readouterr().err.count("cannot renew its lock (an outage)") == 1
    # Its bucket deleted by this very teardown (gone_with_bucket): a renewal's 404 says nothing.
    monkeypatch.setattr(lock, "renew_lease", lambda blob, generation, now: False)
    monkeypatch.setattr(lock, "HELD", [])
    lock._renewing(lambda: None, 1, threading.Event())
    assert "taken over" not in capsys.readouterr().err


def test_owner_lock_is_renewed_while_it_is_held(tmp_path, monkeypatch):
    from nemo_rl_gke import gcs_client
    from support.gcs_emulator import running_emulator

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(lock, "RENEW_SECONDS", 0.05)
    s = example_settings()
    with running_emulator() as emulator:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.host)
        gcs_client.client(s).create_bucket(s.bucket)
        with lock.bucket_lease(s, "storage.export") as generation:
            blob = gcs_client.client(s).bucket(s.bucket).blob(lock.lease_name(s))
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                blob.reload()
                if (blob.metadata or {}).get("expires"):
                    break
                time.sleep(0.05)
            renewed = float((blob.metadata or {}).get("expires", 0))
            assert blob.generation == generation
            assert renewed > json.loads(blob.download_as_bytes())["expires"], blob.metadata
        assert gcs_client.client(s).bucket(s.bucket).get_blob(lock.lease_name(s)) is None  # let go


def _client(cloud: FakeCloud):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                          client_options={"api_endpoint": cloud.env["STORAGE_EMULATOR_HOST"]})


def _plant_lease(cloud: FakeCloud, *, expires_in: float) -> None:
    now = time.time()
    lease = {**lock.lease_body("up", now, host="ci-runner-7", pid=4242), "expires": now + expires_in}
    _client(cloud).bucket(BUCKET).blob("nemo-rl-gke/lock-nemo-rl.json").upload_from_string(json.dumps(lease))


def test_owner_lock_the_fake_clouds_own_storage_refuses_a_second_create_as_cloud_storage_does(tmp_path):
    """A fake cloud started without running_emulator (its own in-process emulator) enforces ifGenerationMatch
    too: else a second machine's create would overwrite a live lease, whatever ran before in this process."""
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parents[1]
    script = (  # a fresh interpreter, as a test worker where no running_emulator has wrapped the handlers yet
        "import sys; from pathlib import Path; from google.api_core import exceptions\n"
        "from support.fake import FakeCloud\n"
        "from google.auth.credentials import AnonymousCredentials; from google.cloud import storage\n"
        "fresh = FakeCloud(Path(sys.argv[1])); fresh.write_env()\n"
        "host = fresh.process_env()['STORAGE_EMULATOR_HOST']\n"
        "client = storage.Client(project='p', credentials=AnonymousCredentials(),\n"
        "                        client_options={'api_endpoint': host})\n"
        "blob = client.create_bucket('lease-check').blob('nemo-rl-gke/lock-nemo-rl.json')\n"
        "blob.upload_from_string('{}', if_generation_match=0)\n"
        "try:\n"
        "    blob.upload_from_string('{}', if_generation_match=0)\n"
        "except exceptions.PreconditionFailed:\n"
        "    print('412')\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True,
                          timeout=60, cwd=tests, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(tests), str(tests / "fakecloud"), os.environ.get("PYTHONPATH", "")])})
    assert (done.returncode, done.stdout.strip()) == (0, "412"), done.stderr[-2000:]


def test_owner_lock_held_on_another_machine_refuses_down(cloud, tmp_path):
    assert cloud.invoke("up", "--yes").code == 0
    _plant_lease(cloud, expires_in=3600)
    before = len(cloud.calls())
    done = cloud.invoke("down", "--yes", XDG_CACHE_HOME=str(tmp_path / "another-home"))
    assert (done.code, "ci-runner-7" in done.stderr, "--force-unlock" in done.stderr) == (1, True, True)
    assert "It names this host" not in done.stderr
    assert cloud.mutating_calls(before) == []


def test_owner_lock_taken_beside_a_teardowns_reads_is_released_when_a_read_fails(cloud):
    # A list of the teardown's plan that fails ends the run before anything is deleted; the lease it took first
    # must not outlive it (another machine would be refused for three hours).
    assert cloud.invoke("up", "--yes").code == 0
    before = len(cloud.calls())
    done = cloud.invoke("down", "--yes", process=True, FAKECLOUD_FAIL="container clusters list:9:permanent")
    assert done.code == 1 and "injected permanent failure" in done.stderr, done.output[-3000:]
    assert cloud.mutating_calls(before) == []
    assert _client(cloud).bucket(BUCKET).get_blob("nemo-rl-gke/lock-nemo-rl.json") is None
    assert cloud.invoke("down", "--yes", "--delete-data").code == 0  # and the next run takes it


def test_owner_lock_up_asks_its_question_under_the_lease(cloud, tmp_path):
    # An answer may come minutes after up's lists. up asked before it took the lease: another machine's teardown
    # could then delete what the lists had found, and the answer applied the stale plan (skipping what was gone,
    # failing on what needed it). Now the lease is held while up asks: the other machine is refused.
    from support.fake import in_a_terminal

    assert cloud.invoke("up", "--yes").code == 0
    assert cloud.invoke("clean.ray", "--yes").code == 0  # something for up to create, so it asks
    other = {}

    def another_machines_down():
        before = len(cloud.calls())
        other["done"] = cloud.invoke("down", "--yes", XDG_CACHE_HOME=str(tmp_path / "another-home"))
        other["changes"] = cloud.mutating_calls(before)

    code, printed, _ = in_a_terminal(cloud, ["up"], "y", before_answer=another_machines_down)
    assert "done" in other, printed[-3000:]  # up asked
    refused = other["done"]
    assert (refused.code, "another run holds the lock" in refused.stderr, "`invoke up`" in refused.stderr,
            other["changes"]) == (1, True, True, []), refused.output[-2000:]
    assert code == 0 and "up: done" in printed, printed[-3000:]


def test_owner_lock_up_answered_no_lets_go_of_the_lease_it_asked_under(cloud):
    from support.fake import in_a_terminal

    assert cloud.invoke("up", "--yes").code == 0
    assert cloud.invoke("clean.ray", "--yes").code == 0
    held = {}
    code, printed, _ = in_a_terminal(cloud, ["up"], "n", before_answer=lambda: held.update(
        lease=_client(cloud).bucket(BUCKET).get_blob("nemo-rl-gke/lock-nemo-rl.json") is not None))
    assert (code, "cancelled" in printed, held) == (1, True, {"lease": True}), printed[-3000:]
    assert _client(cloud).bucket(BUCKET).get_blob("nemo-rl-gke/lock-nemo-rl.json") is None


# Each question asked under the lease: (argv, its answers in turn; the lease is taken over before the last one,
# the scene after `up`).
QUESTIONS = {
    "up": (["up"], "y", "ray gone"),  # something for up to create, so it asks
    "down": (["down"], "y", "ray gone"),
    "the data guard's, mid-teardown": (["down", "--delete-data", "--delete-unexported"], ["y", "y"],
                                       "a run not in the bucket"),
    "ray.deploy's, before it restarts runs": (["ray.deploy", "--head-cpu=10"], "y", "a run running"),
}


@pytest.mark.parametrize("question", list(QUESTIONS))
def test_owner_lock_taken_over_while_the_question_waits_stops_the_run_after_the_answer(cloud, question):
    # An answer may come hours later: past the lease's 3 hours another machine takes it over (or --force-unlock
    # takes a live one). The run then must not go on as if it still held it.
    from support.fake import in_a_terminal, on_screen, plant_run

    argv, answers, scene = QUESTIONS[question]
    assert cloud.invoke("up", "--yes").code == 0
    if scene == "ray gone":
        assert cloud.invoke("clean.ray", "--yes").code == 0
    else:
        plant_run(cloud, "r1", running=scene == "a run running")
    marks = {}

    def taken_over():
        _plant_lease(cloud, expires_in=3600)  # ci-runner-7's lease now
        marks["before"] = len(cloud.calls())

    code, printed, _ = in_a_terminal(cloud, argv, answers, before_answer=taken_over)
    assert "before" in marks and printed.count("[y/N]") == len(answers), printed[-3000:]  # asked each question
    assert on_screen(printed).count("[y/N] y") == len(answers), on_screen(printed)  # and they stay on the screen
    assert (code, "the lock of my-nemo-project/nemo-rl was taken over" in printed, "ci-runner-7" in printed,
            cloud.mutating_calls(marks["before"])) == (1, True, True, []), printed[-3000:]
    # ... and its lease is left to its holder.
    held = json.loads(_client(cloud).bucket(BUCKET).blob("nemo-rl-gke/lock-nemo-rl.json").download_as_bytes())
    assert held["host"] == "ci-runner-7"


def test_owner_lock_a_run_killed_holding_the_lease_does_not_lock_this_machine_out(cloud, tmp_path):
    # A run killed while it holds the lease (SIGKILL, a crash, a second Ctrl-C while it lets go)
    # leaves it for 3 hours, and every later run was refused, on this very machine too. This machine's next run
    # now takes it over: the run that took it is over (this machine's lock is free). Another machine is still
    # refused, even one with the same host name.
    import signal
    import subprocess

    assert cloud.invoke("up", "--yes").code == 0
    lease = _client(cloud).bucket(BUCKET).blob("nemo-rl-gke/lock-nemo-rl.json")
    record = tmp_path / "cache" / "nemo-rl-gke" / "my-nemo-project-nemo-rl.lease"  # the taken lease's generation
    killed = cloud.start("down", "--yes", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not record.exists() and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # the record appears whole (renamed into place)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait() == -signal.SIGKILL and lease.exists()  # killed while it held the lease
    same_name = cloud.invoke("down", "--yes", XDG_CACHE_HOME=str(tmp_path / "another-home"))
    assert (same_name.code, "another run holds the lock" in same_name.stderr) == (1, True), same_name.output[-2000:]
    # ... and told what it may be: this machine's run that left no record, or a machine with the same host name.
    assert "It names this host, where pid" in same_name.stderr and "If it was yours, run again with --force-unlock" \
        in same_name.stderr
    done = cloud.invoke("down", "--yes")
    assert done.code == 0, done.output[-3000:]
    assert "note: took over the lock left by this machine's `invoke down` on " in done.stderr, done.stderr[-2000:]
    assert (lease.exists(), record.exists()) == (False, False)


def test_owner_lock_force_unlock_says_what_it_overrides(cloud):
    assert cloud.invoke("up", "--yes").code == 0
    _plant_lease(cloud, expires_in=3600)
    done = cloud.invoke("down", "--yes", "--force-unlock")
    assert done.code == 0, done.output[-3000:]
    assert "--force-unlock: took over the live lock of `invoke up` on ci-runner-7" in done.stderr


def test_owner_lock_is_released_after_the_run(cloud):
    assert cloud.invoke("up", "--yes").code == 0
    assert cloud.invoke("up", "--yes").code == 0  # the second up took and released the lease
    assert _client(cloud).bucket(BUCKET).get_blob("nemo-rl-gke/lock-nemo-rl.json") is None


def test_owner_lock_held_by_a_teardown_refuses_job_submit_and_only_a_teardown(cloud, tmp_path):
    # A teardown holds the lock from its record of /data/runs to its deletes: a run started in between goes with
    # Ray and is missing from that record. job.submit refuses while a teardown (on any machine) holds it; it
    # does not take the lock itself, so parallel submits and a submit beside an export still go.
    assert cloud.invoke("up", "--yes").code == 0
    lease_blob = _client(cloud).bucket(BUCKET).blob("nemo-rl-gke/lock-nemo-rl.json")
    now = time.time()
    lease_blob.upload_from_string(json.dumps({**lock.lease_body("down --yes", now, host="ci-runner-7", pid=4242),
                                              "expires": now + 3600}))
    done = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", process=True,  # the real `invoke` command
                        XDG_CACHE_HOME=str(tmp_path / "another-home"))
    assert done.code == 1, done.output[-3000:]
    assert "a teardown is under way: `invoke down --yes` on ci-runner-7" in done.stderr
    assert json.loads(cloud.invoke("job.list", "--json").stdout)["runs"] == []  # no run was started
    lease_blob.upload_from_string(json.dumps({**lock.lease_body("storage.export", now, host="ci-runner-7",
                                                                pid=4242), "expires": now + 3600}))
    started = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=beside-an-export", process=True)
    assert started.code == 0, started.output[-3000:]
    assert json.loads(lease_blob.download_as_bytes())["command"] == "invoke storage.export"  # untouched
    runs = json.loads(cloud.invoke("job.list", "--json").stdout)["runs"]
    assert [run["id"] for run in runs] == ["beside-an-export"]


def test_owner_lock_teardown_holding_reads_this_machines_lock_without_taking_it(tmp_path, monkeypatch):
    from nemo_rl_gke import gcs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(gcs, "get_bucket", lambda *_: None)  # no bucket yet: this machine's lock alone
    s = example_settings()
    assert lock.teardown_holding(s) is None
    for what, held in (("clean.ray", True), ("cluster.delete", True), ("down", True), ("up", False),
                       ("storage.export", False)):
        with lock.state_lock(s, what):
            holder = lock.teardown_holding(s)
            assert (holder is not None) == held, (what, holder)
            assert holder is None or f"`invoke {what}`" in holder
        assert lock.teardown_holding(s) is None  # released: its last words stay in the file, not its hold


def test_owner_lock_a_killed_teardowns_lease_on_this_machine_does_not_refuse_job_submit(cloud, tmp_path):
    # `down` killed (SIGKILL, a crash) leaves its lease for 3 hours; on the machine it ran on
    # (its record of the lease it took, its pid gone) nothing deletes Ray any more: submits go on. Another machine
    # with the same host name (no such record) still sees a teardown under way.
    import socket

    assert cloud.invoke("up", "--yes").code == 0
    now = time.time()
    dead = 2 ** 22 + 12345  # above any pid this machine hands out
    lease = {**lock.lease_body("down --yes", now, host=socket.gethostname(), pid=dead), "expires": now + 3600}
    blob = _client(cloud).bucket(BUCKET).blob("nemo-rl-gke/lock-nemo-rl.json")
    blob.upload_from_string(json.dumps(lease))
    (tmp_path / "cache" / "nemo-rl-gke").mkdir(parents=True, exist_ok=True)
    (tmp_path / "cache" / "nemo-rl-gke" / "my-nemo-project-nemo-rl.lease").write_text(json.dumps(
        {"generation": blob.generation, "lease": f"gs://{BUCKET}/nemo-rl-gke/lock-nemo-rl.json",
         "machine": lock._machine()}))
    elsewhere = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=beside-a-down", process=True,
                             XDG_CACHE_HOME=str(tmp_path / "another-home"))
    assert (elsewhere.code, "a teardown is under way" in elsewhere.stderr) == (1, True), elsewhere.output[-3000:]
    done = cloud.invoke("job.submit", "qwen2.5-1.5b-gsm8k", "--id=after-a-killed-down", process=True)
    assert done.code == 0, done.output[-3000:]


def _end_group(pgid: int) -> list[int]:
    """What was left running in the group (then killed): a test's leftovers must not outlive it."""
    import signal

    left = live_members(pgid)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return left


def _slow_run_of(cloud: FakeCloud, task: str) -> tuple[dict[str, str], Any]:
    """The environment of a run whose cluster takes 15 s to delete and 21 s to create, and the lease's blob; for
    an `up`, the deployment is first taken down (the bucket, and so the lease, stays)."""
    assert cloud.invoke("up", "--yes").code == 0
    if task == "up":
        assert cloud.invoke("down", "--yes", "--delete-data").code == 0
    return (cloud.process_env(FAKECLOUD_TIME_SCALE="0.05"),
            _client(cloud).bucket(BUCKET).blob("nemo-rl-gke/lock-nemo-rl.json"))


def _once_running(proc: Any, words: str, read: Callable[[], None] = lambda: None) -> list[int]:
    deadline, pids = time.monotonic() + 60, []
    while not pids and proc.poll() is None and time.monotonic() < deadline:
        read()
        time.sleep(0.05)
        pids = children(proc.pid, words)
    return pids


@pytest.mark.parametrize(("signum", "task", "under_way", "alone"), [
    ("SIGTERM", "down", "container clusters delete", True), ("SIGTERM", "up", "container clusters create", True),
    ("SIGHUP", "down", "container clusters delete", False), ("SIGINT", "down", "container clusters delete", False),
    ("SIGINT", "down", "container clusters delete", True), ("SIGINT", "up", "container clusters create", True)])
def test_owner_lock_a_run_ended_by_sigterm_or_sighup_ends_its_tools_and_lets_go(cloud, signum, task, under_way,
                                                                               alone):
    # A CI's cancel or Kubernetes ends a run with SIGTERM, sent to invoke alone; here the hangup comes to invoke and
    # its tools (a closed terminal's is the next test). Python's default for both ended invoke at once, without its
    # `finally`: the lease stayed three hours (every other machine refused), and after SIGTERM the tools it ran went
    # on deleting with no one to answer them. Now either ends the run as Ctrl-C does: its tools are ended, the lease
    # is let go, the exit code is the shell's 128 + the signal. Ctrl-C as it was, but for a traceback its background
    # scan printed. A Ctrl-C to invoke alone (`kill -INT`, a supervisor's stop) reached no tool: the run waited for
    # the cluster's delete or create to finish (15 s here, minutes in GKE), and said it "deleted".
    import signal
    import subprocess

    number = signal.Signals[signum]
    env, lease = _slow_run_of(cloud, task)
    ended = cloud.start(task, "--yes", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        start_new_session=True)
    try:
        pids = _once_running(ended, under_way)
        assert pids, ended.communicate()[1][-3000:]
        if alone:
            ended.send_signal(number)  # kill PID, a CI's cancel, the kubelet: invoke alone
        else:
            os.killpg(ended.pid, number)  # `kill -HUP -PGID`, or Ctrl-C: to the whole group
        _, err = ended.communicate(timeout=30)
    finally:
        left = _end_group(ended.pid)
    said = "interrupted" if number == signal.SIGINT else f"ended by {signum}"
    assert (ended.returncode, said in err, "Traceback" in err) == (128 + number, True, False), err[-3000:]
    assert "✗ Standard cluster nemo-rl: " in err, err[-3000:]  # ended, not "✓ … deleted" (or created) at its end
    assert (left, running(pids[0])) == ([], False)  # nothing it started is left running
    assert not lease.exists()  # let go: another machine goes on at once


@pytest.mark.parametrize("gap", [0.0, 0.01, 0.03, 0.1])
def test_owner_lock_a_double_ctrl_c_still_ends_the_run_cleanly_and_lets_go(cloud, gap):
    # An impatient user presses Ctrl-C twice. The second one used to land wherever the first one's ending was: in
    # the lease's release (the lease left, 1 run in 42 here), in a lock a thread pool's wait was releasing
    # ("RuntimeError: release unlocked lock", exit 1 and a traceback, 4 in 42). Now it is said and not raised
    # (tests/unit/test_context_cli.py pins the rule): the ending runs to its end. Arriving after the task's end,
    # it meets Python's own handler, which ends the process by SIGINT (-2 here, 130 to a shell), quietly.
    import signal
    import subprocess

    env, lease = _slow_run_of(cloud, "down")
    ended = cloud.start("down", "--yes", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        start_new_session=True)
    try:
        pids = _once_running(ended, "container clusters delete")
        assert pids, ended.communicate()[1][-3000:]
        os.killpg(ended.pid, signal.SIGINT)
        time.sleep(gap)
        try:
            os.killpg(ended.pid, signal.SIGINT)
        except ProcessLookupError:  # already ended
            pass
        _, err = ended.communicate(timeout=30)
    finally:
        time.sleep(0.3)  # the tools it started end on the same Ctrl-C, on their own time
        left = _end_group(ended.pid)
    assert (ended.returncode in (130, -signal.SIGINT), "Traceback" in err) == (True, False), err[-3000:]
    assert (left, lease.exists()) == ([], False)


def test_owner_lock_a_closed_terminal_ends_the_run_and_lets_go(cloud):
    # The terminal `down` runs in is closed: the kernel hangs it up (SIGHUP to the session's leader, invoke) and
    # every write to it fails (EIO) from then on. The run ends its tools, lets go of the lease and ends 129; before,
    # the hangup ended invoke on the spot (and its cluster delete went on here), and once it was handled, a
    # write's EIO was an OSError that replaced the hangup's exit (1) on the way out.
    import fcntl
    import pty
    import select
    import signal
    import subprocess
    import sys
    import termios

    from support.fake import REPO, signals_as_a_terminal_gives_them

    env, lease = _slow_run_of(cloud, "down")
    main, child = pty.openpty()

    def on_its_terminal() -> None:  # a new session (start_new_session) whose controlling terminal is the pty
        signals_as_a_terminal_gives_them()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    ended = subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), "down", "--yes"],
                             cwd=cloud.workdir, env=env, stdin=child, stdout=child, stderr=child,
                             start_new_session=True, preexec_fn=on_its_terminal)
    os.close(child)
    printed = bytearray()

    def read() -> None:
        while select.select([main], [], [], 0)[0]:
            try:
                chunk = os.read(main, 65536)
            except OSError:
                return
            if not chunk:
                return
            printed.extend(chunk)

    closed = False
    try:
        pids = _once_running(ended, "container clusters delete", read)
        assert pids, bytes(printed[-3000:]).decode(errors="replace")
        read()
        os.close(main)  # the terminal window closes
        closed = True
        code = ended.wait(timeout=30)
    finally:
        if not closed:
            os.close(main)
        left = _end_group(ended.pid)
    assert (code, left, running(pids[0])) == (128 + signal.SIGHUP, [], False), \
        bytes(printed[-3000:]).decode(errors="replace")
    assert not lease.exists()


def _lease_on_the_emulator(cloud: FakeCloud, monkeypatch: Any, tmp_path: Any) -> tuple[Any, Any]:
    """This process's lease calls pointed at the cloud's GCS emulator, with the bucket made, no signal noted yet:
    (the lease's blob, this machine's record of it)."""
    from nemo_rl_gke import tools
    from nemo_rl_gke.tasks import context

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", cloud.env["STORAGE_EMULATOR_HOST"])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(context, "ENDED_BY", [])
    monkeypatch.setattr(tools, "_EVERY", [])
    _client(cloud).create_bucket(BUCKET)
    record = tmp_path / "cache" / "nemo-rl-gke" / "my-nemo-project-nemo-rl.lease"
    record.parent.mkdir(parents=True)  # state_lock's directory
    return _client(cloud).bucket(BUCKET).blob("nemo-rl-gke/lock-nemo-rl.json"), record


@pytest.mark.parametrize("during", ["take", "release"])
def test_owner_lock_a_signal_in_the_leases_take_or_release_still_lets_it_go(cloud, monkeypatch, tmp_path, during):
    # SIGTERM (or SIGHUP) as Cloud Storage answers the lease's create, or its release: raised there, it left a
    # lease created but never recorded or released (every machine refused for 3 hours, this one too). The take
    # and the release are each one step now (tools.deferring): the signal ends the run after it, and the lease
    # is let go.
    from nemo_rl_gke import tools

    blob, record = _lease_on_the_emulator(cloud, monkeypatch, tmp_path)
    real = getattr(lock, f"{during}_lease")
    body_ran = []

    def signalled(*args, **kwargs):
        answer = real(*args, **kwargs)
        tools.raise_unless_deferred(tools.Ended())  # what the handler does, as the answer comes back
        return answer

    monkeypatch.setattr(lock, f"{during}_lease", signalled)
    with pytest.raises(tools.Ended):
        with lock.bucket_lease(example_settings(), "down"):
            body_ran.append(record.exists())
    assert (body_ran, blob.exists(), record.exists(), lock.HELD) == ([True] if during == "release" else [], False,
                                                                       False, [])


@pytest.mark.parametrize("during", ["take", "release"])
def test_owner_lock_a_ctrl_c_in_the_leases_take_or_release_still_lets_it_go(cloud, monkeypatch, tmp_path, during,
                                                                            pythons_sigint):
    # A real Ctrl-C under a task's handlers (context.ended_like_ctrl_c): as the lease's create answers, or the
    # impatient second one as the release after the first starts. Python's own handler raised it right there: a
    # lease created and never recorded or released, or a release never sent; every machine refused for 3 hours.
    # It still raises KeyboardInterrupt, after the step: the lease is let go.
    import signal

    from nemo_rl_gke.tasks import context

    blob, record = _lease_on_the_emulator(cloud, monkeypatch, tmp_path)
    real = getattr(lock, f"{during}_lease")
    steps = []

    def with_a_ctrl_c(*args, **kwargs):
        if during == "release":
            press_ctrl_c(0.2)
        answer = real(*args, **kwargs)
        if during == "take":
            press_ctrl_c(0.2)
        steps.append(during)
        return answer

    monkeypatch.setattr(lock, f"{during}_lease", with_a_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        with context.ended_like_ctrl_c(), lock.bucket_lease(example_settings(), "down"):
            steps.append("body")
    assert (steps, blob.exists(), record.exists(), lock.HELD) == (
        ["body", "release"] if during == "release" else ["take"], False, False, [])
    assert signal.getsignal(signal.SIGINT) is context._leaving  # until the process is gone


def test_owner_lock_a_release_that_fails_under_a_held_ctrl_c_still_says_the_lock_stayed(cloud, monkeypatch, tmp_path,
                                                                                     capsys, pythons_sigint):
    # A Ctrl-C during the release waits for it (tools.deferring), then its KeyboardInterrupt replaces whatever the
    # release ended with: a release that failed (the bucket unreachable) said only "interrupted", and nothing told
    # the user the lock had stayed. The failure is said first.
    import requests

    from nemo_rl_gke.tasks import context

    blob, _ = _lease_on_the_emulator(cloud, monkeypatch, tmp_path)

    def unreachable(*_args, **_kwargs):
        press_ctrl_c(0.2)  # the handler holds its raise
        raise requests.exceptions.ConnectionError("connection refused")

    monkeypatch.setattr(lock, "release_lease", unreachable)
    with pytest.raises(KeyboardInterrupt):
        with context.ended_like_ctrl_c(), lock.bucket_lease(example_settings(), "down"):
            pass
    err = capsys.readouterr().err
    said = "error: the lock was not let go (this machine's next run takes it over): Cloud Storage at"
    assert (said in err, "(releasing the lock: ConnectionError)" in err, blob.exists()) == (True, True, True), err
