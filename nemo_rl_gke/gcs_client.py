"""The Cloud Storage client and how its calls fail: the endpoint (STORAGE_EMULATOR_HOST or the public one),
probed once per process so an unreachable one fails in seconds; retries bounded to DEADLINE_SECONDS; every
failure one StorageError naming the endpoint and what to do. google-cloud-storage is imported lazily."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from .settings import Settings
from .tools import ToolError

if TYPE_CHECKING:
    # google-cloud-storage has no type information: these are Any to mypy, named for the reader.
    from google.api_core.retry import Retry
    from google.cloud.storage import Client

P = ParamSpec("P")
R = TypeVar("R")

PUBLIC_ENDPOINT = "https://storage.googleapis.com"
# Bounded: an endpoint that does not answer fails in seconds, naming it (the library's default is 120 s of
# retries ending in a RetryError). Each call: connect and read timeouts, retries for DEADLINE_SECONDS in all.
DEADLINE_SECONDS = 8.0
CALL_TIMEOUT = (3.05, 60.0)
CONNECT_SECONDS = 3.0
_reachable: set[str] = set()


class StorageError(ToolError):
    """A Cloud Storage API call failed (exit 1), with the API's message and what to do."""

    def __init__(self, message: str):
        super().__init__(message, 1)


def endpoint() -> str:
    return os.environ.get("STORAGE_EMULATOR_HOST") or PUBLIC_ENDPOINT


def unreachable_endpoint(detail: str) -> StorageError:
    return StorageError(f"Cloud Storage at {endpoint()} did not answer ({detail}). Check this machine's network "
                        f"(or STORAGE_EMULATOR_HOST, if set) and run the task again.")


def _probe(url: str) -> None:
    """One TCP connect to the endpoint, once per process: an unreachable one fails here in seconds."""
    import socket
    from urllib.parse import urlsplit

    if url in _reachable:
        return
    parts = urlsplit(url if "://" in url else f"http://{url}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=CONNECT_SECONDS):
            pass
    except (OSError, ValueError) as exc:
        raise unreachable_endpoint(f"no connection within {CONNECT_SECONDS:.0f} s: "
                                   f"{exc.strerror or exc.__class__.__name__ if isinstance(exc, OSError) else exc}"
                                   ) from None
    _reachable.add(url)


def retry() -> Retry:
    from google.cloud.storage.retry import DEFAULT_RETRY

    bounded_retry: Retry = DEFAULT_RETRY.with_timeout(DEADLINE_SECONDS)
    return bounded_retry


@contextmanager
def calling(what: str) -> Iterator[None]:
    """Turn a call that ran out of retries, or never connected, into one StorageError naming the endpoint."""
    import requests
    from google.api_core import exceptions

    try:
        yield
    except exceptions.RetryError as exc:
        cause = exc.cause if exc.cause is not None else exc
        raise unreachable_endpoint(f"{what}: gave up after {DEADLINE_SECONDS:.0f} s: "
                                   f"{str(cause).splitlines()[0][:200] if str(cause) else type(cause).__name__}"
                                   ) from None
    except requests.exceptions.RequestException as exc:
        raise unreachable_endpoint(f"{what}: {type(exc).__name__}") from None


def bounded(function: Callable[P, R]) -> Callable[P, R]:
    """Decorate a public function of this module: see `calling`."""
    import functools

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with calling(function.__name__.replace("_", " ")):
            return function(*args, **kwargs)

    return wrapper


# google-cloud-storage 3.17 answers an object call by fetching the bucket's metadata in a thread of its own, for
# OpenTelemetry attributes (we install no OpenTelemetry): a request more per run, on our CPU while our own calls
# wait, retried for up to two minutes when it fails. This is the library's own switch; one set explicitly stands.
NO_BUCKET_METADATA = "DISABLE_GCS_PYTHON_CLIENT_OTEL_BUCKET_METADATA"


def client(s: Settings) -> Client:
    from google.cloud import storage

    os.environ.setdefault(NO_BUCKET_METADATA, "1")
    _probe(endpoint())
    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        anonymous = AnonymousCredentials()  # type: ignore[no-untyped-call]  # google-auth leaves its __init__ untyped
        return storage.Client(project=s.PROJECT_ID, credentials=anonymous)
    try:
        return storage.Client(project=s.PROJECT_ID)
    except Exception as exc:  # google.auth.exceptions.DefaultCredentialsError, imported lazily
        raise StorageError(f"no Google Cloud credentials for the storage client ({exc}). Run "
                           f"`gcloud auth application-default login` and try again.") from None


def api_error(what: str, exc: Exception, *, hint: str = "") -> StorageError:
    message = getattr(exc, "message", None) or str(exc)
    return StorageError(f"Cloud Storage: {what} failed: {message}" + (f"; {hint}" if hint else ""))
