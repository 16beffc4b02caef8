"""`kubectl port-forward TYPE/NAME LOCAL:REMOTE ...`: listens on 127.0.0.1 (and ::1) as kubectl does, answers each
connection with a small HTTP page, and runs until SIGINT (then exit 0: kubectl 1.32 turns only os.Interrupt into
a clean stop; SIGTERM kills it, as it kills this fake).

In kubectl's words and order (kubectl's cmd/portforward, client-go's tools/portforward):
- a Service that does not exist: `Error from server (NotFound): services "X" not found`;
- a Service with no pod: kubectl waits --pod-running-timeout (1 min; × FAKECLOUD_TIME_SCALE here), then
  `error: timed out waiting for the condition`;
- a REMOTE that is not one of the Service's ports: `error: Service X does not have a service port N`;
- its pod not Running: `error: unable to forward port because pod is not running. Current status=Pending`;
- a local port taken: `Unable to listen on port N: Listeners failed to create with the following errors: [...]`,
  then `error: unable to listen on any of the requested ports: [{N M}]`;
- on each connection: `Handling connection for N`.
A context that outlived its cluster hangs, then fails, in store_kind (kubeconfig.reachable).
"""

from __future__ import annotations

import signal
import socket
import sys
import threading
from typing import Any

from ..core import Ctx, Fail, command
from .kubectl_objects import _selected, key_of, kind_of, namespace_of, store_kind, with_status


def _target(ctx: Ctx) -> tuple[str, str]:
    if not ctx.positionals:
        raise Fail(1, "error: TYPE/NAME and list of ports are required for port-forward")
    word, _, name = ctx.positionals[0].partition("/")
    return (kind_of(word), name) if name else ("Pod", word)


def _ports(ctx: Ctx) -> list[tuple[int, int]]:
    specs = ctx.positionals[1:]
    if not specs:
        raise Fail(1, "error: TYPE/NAME and list of ports are required for port-forward")
    out = []
    for spec in specs:
        local, _, remote = spec.partition(":")
        out.append((int(local), int(remote or local)))
    return out


def _pod_of(ctx: Ctx, skind: str, namespace: str, kind: str, name: str, ports: list[tuple[int, int]]
            ) -> dict[str, Any]:
    if kind == "Pod":
        pod = ctx.state.get(skind, key_of("Pod", namespace, name))
        if pod is None:
            raise Fail(1, f'Error from server (NotFound): pods "{name}" not found')
        return pod
    service = ctx.state.get(skind, key_of(kind, namespace, name))
    if service is None:
        raise Fail(1, f'Error from server (NotFound): {kind.lower()}s "{name}" not found')
    selector = ",".join(f"{k}={v}" for k, v in (service.get("spec", {}).get("selector") or {}).items())
    pods = [o for o in ctx.state.list(skind) if o.get("kind") == "Pod"
            and o.get("metadata", {}).get("namespace") == namespace and _selected(o, selector)]
    if not pods:
        ctx.work(60)  # kubectl's default --pod-running-timeout, which our commands keep
        raise Fail(1, "error: timed out waiting for the condition")
    served = {p.get("port") for p in service.get("spec", {}).get("ports", [])}
    for _, remote in ports:
        if remote not in served:
            raise Fail(1, f"error: Service {name} does not have a service port {remote}")
    return pods[0]


def _listen(local: int) -> list[socket.socket]:
    """Listeners on 127.0.0.1 and ::1; kubectl needs one of the two."""
    sockets, errors = [], []
    for family, host, label in ((socket.AF_INET, "127.0.0.1", "tcp4"), (socket.AF_INET6, "::1", "tcp6")):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.bind((host, local))
            sock.listen(8)
            sockets.append(sock)
        except OSError as exc:
            shown = f"[{host}]" if ":" in host else host
            reason = "address already in use" if exc.errno == 98 else (exc.strerror or str(exc)).lower()
            errors.append(f"unable to create listener: Error listen {label} {shown}:{local}: bind: {reason}")
    if not sockets:
        raise OSError(" ".join(errors))
    return sockets


def _serve(ctx: Ctx, sock: socket.socket, local: int) -> None:
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        ctx.out(f"Handling connection for {local}")
        (ctx.stdout or sys.stdout).flush()
        with conn:
            body = b"<html><title>Ray Dashboard (fakecloud)</title></html>"
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: " + str(len(body)).encode()
                         + b"\r\nConnection: close\r\n\r\n" + body)


@command("kubectl", "port-forward", latency=0.3)
def port_forward(ctx: Ctx) -> int:
    kind, name = _target(ctx)
    ports = _ports(ctx)
    skind = store_kind(ctx)
    ctx.work()
    namespace = namespace_of(kind, None, ctx)
    pod = _pod_of(ctx, skind, namespace, kind, name, ports)
    phase = with_status(pod).get("status", {}).get("phase") or "Running"
    if phase != "Running":
        raise Fail(1, f"error: unable to forward port because pod is not running. Current status={phase}")
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())  # SIGTERM: Python's default, killed as kubectl 1.32 is
    listening = []
    for local, remote in ports:
        try:
            sockets = _listen(local)
        except OSError as exc:
            ctx.err(f"Unable to listen on port {local}: Listeners failed to create with the following errors: "
                    f"[{exc}]")
            continue
        for sock in sockets:
            host = "[::1]" if sock.family == socket.AF_INET6 else "127.0.0.1"
            ctx.out(f"Forwarding from {host}:{local} -> {remote}")
        listening += [(sock, local) for sock in sockets]
    if not listening:
        raise Fail(1, "error: unable to listen on any of the requested ports: ["
                   + " ".join(f"{{{local} {remote}}}" for local, remote in ports) + "]")
    (ctx.stdout or sys.stdout).flush()
    for sock, local in listening:
        threading.Thread(target=_serve, args=(ctx, sock, local), daemon=True).start()
    while not stop.wait(0.2):
        pass
    for sock, _ in listening:
        sock.close()
    return 0
