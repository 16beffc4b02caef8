"""`invoke ray.dashboard` for real, on the fake cloud: kubectl port-forward listens on the local port (the fake's
answers a browser's request) until Ctrl-C, which ends it with exit 0 and "dashboard stopped."; without a Ray
cluster, or with the local port taken, it says so at once, before any port-forward."""

from __future__ import annotations

import errno
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable

import pytest

from support.fake import FakeCloud, follow
from support.ports import quiet_ports


def _up(fake: FakeCloud) -> None:
    done = fake.invoke("up", "--yes")
    assert done.code == 0, done.output[-3000:]


def _free_ports(count: int = 1) -> list[int]:
    """Distinct ports free for the run to take (support.ports: below the range other processes are handed)."""
    return quiet_ports(count)


def _dashboard(fake: FakeCloud, *args: str) -> subprocess.Popen[str]:
    return fake.start("ray.dashboard", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _until(seen: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not seen() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_ray_dashboard_forwards_until_ctrl_c(fake):
    _up(fake)
    port, client = _free_ports(2)
    proc = _dashboard(fake, f"--port={port}", "--client", f"--client-port={client}")
    lines, _, _ = follow(proc.stdout)
    try:
        listening = [f"Forwarding from 127.0.0.1:{port} -> 8265\n", f"Forwarding from 127.0.0.1:{client} -> 10001\n"]
        _until(lambda: all(line in lines for line in listening))  # kubectl's, once it listens (and on ::1)
        assert all(line in lines for line in listening), lines
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
            assert page.status == 200 and b"Ray Dashboard" in page.read()
        _until(lambda: f"Handling connection for {port}\n" in lines)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert proc.returncode == 0, err
    assert f"Handling connection for {port}\n" in lines, lines
    assert f"Ray dashboard: http://localhost:{port}" in err and "dashboard stopped." in err
    assert "Traceback" not in err


def test_ray_dashboard_without_a_ray_cluster_says_so_before_forwarding(fake):
    """kubectl would wait a minute for a pod behind the Service (or fail on a Service that is gone)."""
    _up(fake)
    assert fake.invoke("ray.delete", "--yes").code == 0
    done = fake.invoke("ray.dashboard", f"--port={_free_ports()[0]}")
    assert done.code == 1, done.output
    assert "no Ray head pod (labels ray.io/node-type=head, ray.io/cluster=nemo-rl)" in done.stderr
    assert "invoke ray.deploy" in done.stderr and "port-forward" not in done.output


@pytest.mark.parametrize("flag", ["--port", "--client-port"])
def test_ray_dashboard_port_taken_exits_2_naming_the_flag(fake, flag):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        args = [f"{flag}={port}"] + (["--client", f"--port={_free_ports()[0]}"] if flag == "--client-port" else [])
        done = fake.invoke("ray.dashboard", *args)
    assert done.code == 2, done.output
    assert flag in done.stderr and f"port {port} is taken on 127.0.0.1" in done.stderr
    assert fake.calls() == []  # before any command, even a query


def _taken_on_ipv6_only() -> socket.socket:
    """A socket listening on ::1 at a port free on 127.0.0.1 (support.ports). Not port 0: the kernel's IPv4 and
    IPv6 ephemeral ports are handed out apart, and the suite's other workers take IPv4 ones all the time, so ::1's
    port 0 was once taken on 127.0.0.1 too by the time the run checked it, and the refusal rightly named
    127.0.0.1 (CI, stop 38)."""
    taken = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        taken.bind(("::1", quiet_ports()[0]))
    except OSError as error:
        taken.close()
        pytest.skip(f"no IPv6 loopback on this machine ({error})")
    return taken


def test_ray_dashboard_port_taken_on_ipv6_only_is_taken_too(fake):
    """A browser's `localhost` may try ::1 first: there it would reach the other program, not the dashboard."""
    taken = _taken_on_ipv6_only()
    with taken:
        taken.listen(1)
        port = taken.getsockname()[1]
        done = fake.invoke("ray.dashboard", f"--port={port}")
    assert done.code == 2, done.output
    assert f"port {port} is taken on ::1" in done.stderr and fake.calls() == []


def test_ray_dashboard_privileged_port_says_so_not_taken(monkeypatch):
    """As a user who is not root meets it (this suite may run as root: the refusal is planted, for every port)."""
    from nemo_rl_gke.settings import ConfigError
    from nemo_rl_gke.tasks import ray

    def refused(self, address):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(socket.socket, "bind", refused)
    with pytest.raises(ConfigError) as raised:
        ray._free("--port", 80)
    assert "port 80 needs root here (ports below 1024): choose another free port above 1023." in str(raised.value)


def test_ray_dashboard_taken_port_suggests_one_that_is_free():
    from nemo_rl_gke.settings import ConfigError
    from nemo_rl_gke.tasks import ray

    with socket.socket() as taken, socket.socket() as next_one:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        try:
            next_one.bind(("127.0.0.1", port + 1))
            next_one.listen(1)
        except OSError:
            pass  # taken already
        with pytest.raises(ConfigError) as raised:
            ray._free("--client-port", port, other=8266)
    suggested = int(str(raised.value).rsplit("--client-port=", 1)[1].rstrip("."))
    assert suggested not in (port, port + 1, 8266) and 1024 <= suggested <= 65535
    assert ray._refusal(suggested) is None
