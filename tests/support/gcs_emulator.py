"""A real local GCS JSON API (gcp-storage-emulator) for the google-cloud-storage code.

`running_emulator()` starts it in a thread on a free 127.0.0.1 port, in memory, and yields its
STORAGE_EMULATOR_HOST value (the scheme is required). The `gcs_emulator` fixture also sets that variable
for the test, so `nemo_rl_gke.gcs_client.client()` talks to it with anonymous credentials; subprocesses (the
fake-cloud flows) get it through their environment.

The emulator keeps what IAM policies it is given and lists with prefix/delimiter, but it drops bucket
location, uniform access and hierarchical namespace at creation: tests assert those on the request. It also
ignores `ifGenerationMatch`, which GCS answers with 412 when it does not hold (0: the object must not exist):
`running_emulator` makes its object reads, writes and deletes honour it, as the lock's lease relies on it. Nor
does it name the object's generation in a download's headers (x-goog-generation), as GCS does: added too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

# The emulator's own default, used when a test does not say which project owns its buckets.
DEFAULT_PROJECT_NUMBER = "1234"


@dataclass
class Emulator:
    host: str  # http://127.0.0.1:PORT
    project_number: str
    server: object

    def wipe(self) -> None:
        self.server.wipe()  # type: ignore[attr-defined]


def stop_in_background(server: object) -> None:
    """Stopping waits out the server loop's 0.5 s poll; nobody needs to wait for it (each emulator has its own
    port), so it stops in the background and the test goes on."""
    threading.Thread(target=server.stop, name="gcs-emulator-stop", daemon=True).start()  # type: ignore[attr-defined]


def start_on_a_port_of_its_own(server: object) -> int:
    """Start an emulator made with port 0 and return the port its server bound: the kernel's choice, held from
    the bind on. (A port found free, closed, then bound by the emulator's thread could be taken in between by
    another worker's process; the thread then died on EADDRINUSE and `start()`, which waits for it with no
    timeout, hung the run.)"""
    server.start()  # type: ignore[attr-defined]
    return int(server._api._httpd.server_address[1])  # type: ignore[attr-defined]


PRECONDITION_FAILED = {"error": {"code": 412, "message": "At least one of the pre-conditions you specified did "
                                                     "not hold.", "errors": [{"reason": "conditionNotMet"}]}}


def _honour_generation_preconditions() -> None:
    """Wrap the emulator's object handlers (once per process): an `ifGenerationMatch` that does not hold answers
    412, as GCS does, before the handler runs; 0 holds only while the object does not exist."""
    from http import HTTPStatus

    from gcp_storage_emulator import server
    from gcp_storage_emulator.exceptions import NotFound
    from gcp_storage_emulator.handlers import objects

    if getattr(objects, "_nrg_generation_preconditions", False):
        return

    def object_name(request) -> str:
        if request.params.get("object_id"):
            return request.params["object_id"]
        if request.query.get("name"):
            return request.query["name"][0]
        data = request.data or {}
        return (data.get("meta") or data).get("name") or ""

    def guarded(handler):
        def wrapped(request, response, storage, *args, **kwargs):
            wanted = (request.query.get("ifGenerationMatch") or [None])[0]
            current = None
            try:
                current = storage.get_file_obj(request.params["bucket_name"], object_name(request))
            except (NotFound, KeyError):
                pass
            if wanted is not None and str((current or {}).get("generation") or "0") != str(wanted):
                response.status = HTTPStatus.PRECONDITION_FAILED
                response.json(PRECONDITION_FAILED)
                return None
            answer = handler(request, response, storage, *args, **kwargs)
            if handler is objects.download and current and response.status == HTTPStatus.OK:
                # GCS names the object's generation in a download's headers, and google-cloud-storage sets the
                # Blob's generation from them (None without): a precondition on it after a download holds.
                response["x-goog-generation"] = str(current.get("generation"))
                response["x-goog-metageneration"] = str(current.get("metageneration", "1"))
            return answer

        return wrapped

    swapped = {handler: guarded(handler) for handler in (objects.insert, objects.get, objects.delete,
                                                         objects.download, objects.upload_partial, objects.patch)}
    for _regex, handlers in server.HANDLERS:
        for method, handler in list(handlers.items()):
            if handler in swapped:
                handlers[method] = swapped[handler]
    objects.insert = swapped[objects.insert]  # the server's fallback for uploads posted without /upload
    objects._nrg_generation_preconditions = True


@contextlib.contextmanager
def running_emulator(project_number: str = DEFAULT_PROJECT_NUMBER, data_dir: str | None = None
                     ) -> Iterator[Emulator]:
    """In memory, or on disk in data_dir (a copy of which a later emulator can start from)."""
    from gcp_storage_emulator.server import create_server

    logging.getLogger("gcp_storage_emulator").setLevel(logging.WARNING)
    _honour_generation_preconditions()
    server = create_server("127.0.0.1", 0, in_memory=data_dir is None, data_dir=data_dir,
                           project_number=project_number)
    port = start_on_a_port_of_its_own(server)
    try:
        yield Emulator(f"http://127.0.0.1:{port}", project_number, server)
    finally:
        stop_in_background(server)


@pytest.fixture
def gcs_emulator(monkeypatch) -> Iterator[Emulator]:
    with running_emulator() as emulator:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.host)
        yield emulator
