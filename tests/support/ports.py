"""Local ports for a run to bind later, chosen below the kernel's ephemeral range (32768-60999 on Linux).

A port found free by binding port 0 and closing it is one the kernel hands out again: to another worker's
emulator or port-forward, between the test's close and the run's bind (a CI run once failed so). Nothing in the
suite binds a fixed port, so below that range a port free now stays free for the run.
"""

from __future__ import annotations

import errno
import random
import socket

LOW = range(20000, 32768)


def _free_on(family: int, address: str, port: int) -> bool | None:
    """True if port is free on address, False if taken, None if this machine has no such address."""
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, port))
        except OSError as error:
            return False if error.errno == errno.EADDRINUSE else None
    return True


def quiet_ports(count: int = 1) -> list[int]:
    """count distinct ports below the ephemeral range, free on 127.0.0.1 and on ::1 (where there is one)."""
    found: list[int] = []
    for port in random.sample(LOW, 400):
        if _free_on(socket.AF_INET, "127.0.0.1", port) and _free_on(socket.AF_INET6, "::1", port) is not False:
            found.append(port)
            if len(found) == count:
                return found
    raise AssertionError(f"fewer than {count} ports below 32768 free on both 127.0.0.1 and ::1")
