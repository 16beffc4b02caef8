"""A real local GCS JSON API (gcp-storage-emulator) for the google-cloud-storage code.

`running_emulator()` starts it in a thread on a free 127.0.0.1 port, in memory, and yields its
STORAGE_EMULATOR_HOST value (the scheme is required). The `gcs_emulator` fixture also sets that variable
for the test, so `nemo_rl_gke.gcs_client.client()` talks to it with anonymous credentials; subprocesses (the
fake-cloud flows) get it through their environment.

The emulator keeps what IAM policies it is given and lists with prefix/delimiter, but it drops bucket
location, uniform access and hierarchical namespace at creation: tests assert those on the request.
"""

from __future__ import annotations

import contextlib
import logging
import socket
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_emulator(project_number: str = DEFAULT_PROJECT_NUMBER, data_dir: str | None = None
                     ) -> Iterator[Emulator]:
    """In memory, or on disk in data_dir (a copy of which a later emulator can start from)."""
    from gcp_storage_emulator.server import create_server

    logging.getLogger("gcp_storage_emulator").setLevel(logging.WARNING)
    port = _free_port()
    server = create_server("127.0.0.1", port, in_memory=data_dir is None, data_dir=data_dir,
                           project_number=project_number)
    server.start()
    try:
        yield Emulator(f"http://127.0.0.1:{port}", project_number, server)
    finally:
        # Stopping waits out the server loop's 0.5 s poll; nobody needs to wait for it (each emulator has its own
        # port), so it stops in the background and the test goes on.
        threading.Thread(target=server.stop, name="gcs-emulator-stop", daemon=True).start()


@pytest.fixture
def gcs_emulator(monkeypatch) -> Iterator[Emulator]:
    with running_emulator() as emulator:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.host)
        yield emulator
