"""A real local GCS JSON API (gcp-storage-emulator) for the google-cloud-storage code.

`running_emulator()` starts it in a thread on a free 127.0.0.1 port, in memory, and yields its
STORAGE_EMULATOR_HOST value (the scheme is required). The `gcs_emulator` fixture also sets that variable
for the test, so `nemo_rl_gke.gcs_client.client()` talks to it with anonymous credentials; subprocesses (the
fake-cloud flows) get it through their environment.

The emulator keeps what IAM policies it is given and lists with prefix/delimiter, but it drops bucket
location, uniform access and hierarchical namespace at creation: tests assert those on the request. It also
ignores `ifGenerationMatch`, which GCS answers with 412 when it does not hold (0: the object must not exist), and
does not name the object's generation in a download's headers, as GCS does: `running_emulator` starts it with
both (fakecloud.storage, which also serves the fake cloud run by hand: tests/fakecloud/bin/fakecloud-storage).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from fakecloud.storage import honour_generation_preconditions

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


@contextlib.contextmanager
def running_emulator(project_number: str = DEFAULT_PROJECT_NUMBER, data_dir: str | None = None
                     ) -> Iterator[Emulator]:
    """In memory, or on disk in data_dir (a copy of which a later emulator can start from)."""
    from gcp_storage_emulator.server import create_server

    logging.getLogger("gcp_storage_emulator").setLevel(logging.WARNING)
    honour_generation_preconditions()
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
