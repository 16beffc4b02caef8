"""The fake cloud's Cloud Storage: gcp-storage-emulator, made to answer as GCS does where the lock's lease relies
on it. The emulator ignores `ifGenerationMatch`, which GCS answers with 412 when it does not hold (0: the object
must not exist), and names no generation in a download's headers (x-goog-generation): both are added here.

`fakecloud-storage PORT PROJECT_ID` (tests/fakecloud/bin, beside the fake gcloud) serves it on 127.0.0.1:PORT,
in memory, its buckets owned by the fake project's number, as the fake gcloud gives it: the fake cloud run by hand
(README). The tests start it in their own process (tests/support/gcs_emulator.py, tests/support/fake.py).
"""

from __future__ import annotations

PRECONDITION_FAILED = {"error": {"code": 412, "message": "At least one of the pre-conditions you specified did "
                                                     "not hold.", "errors": [{"reason": "conditionNotMet"}]}}


def honour_generation_preconditions() -> None:
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


def serve(port: int, project: str) -> None:
    """Serve until interrupted (SIGINT, SIGTERM)."""
    import signal
    import threading

    from gcp_storage_emulator.server import create_server

    from fakecloud.handlers.gcloud_projects import project_number

    honour_generation_preconditions()
    server = create_server("127.0.0.1", port, in_memory=True, project_number=project_number(project))
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    server.start()
    print(f"fakecloud-storage: http://127.0.0.1:{port} (buckets of project {project}, number "
          f"{project_number(project)})", flush=True)
    stop.wait()
    server.stop()
