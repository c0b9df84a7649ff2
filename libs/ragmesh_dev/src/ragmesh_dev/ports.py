"""Port helpers for the local stack and the tests: is a port open, wait for one, pick a free one, hold a refused one.

In-process test servers bind port 0 and read the port the kernel gave (`GrpcService.start()` returns it). Picking
a port (`free_port`) is for what must be told its port before it starts: the engines (PostgreSQL, ArcadeDB) and
the e2e mesh's service processes, which bind the port in their environment.
"""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def wait_port(host: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_open(host, port):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{host}:{port} did not open within {timeout:.0f}s")


def wait_http_ok(url: str, timeout: float, alive: Callable[[], None], every: float = 0.3) -> bool:
    """Polls `GET url` until it answers 200 (True) or `timeout` passes (False); `alive` raises when the process
    that should answer has exited, so a crash is reported at once rather than as a timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive()
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(every)
    return False


LOWEST_PICKED_PORT = 20000
_picked: set[int] = set()


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel gives outgoing connections (Linux: 32768-60999 unless configured)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (for tests and launchers picking ports), never one this process
    picked before.

    It lies below the kernel's ephemeral range when there is room: a port from that range can be taken as the
    source port of an outgoing connection (a service connecting to PostgreSQL, a readiness probe) between the
    pick and the server's bind, which once failed a start with "Failed to bind". Otherwise the kernel picks."""
    import random

    low = ephemeral_range()[0]
    if low - LOWEST_PICKED_PORT >= 1000:
        for _ in range(200):
            port = random.randrange(LOWEST_PICKED_PORT, low)
            if port in _picked:
                continue
            with socket.socket() as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
            _picked.add(port)
            return port
    while True:
        with socket.socket() as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in _picked:
            _picked.add(port)
            return port


@contextmanager
def refused_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port this process holds bound but not listening: a connection to it is refused for as long as the block
    runs, and no other process can take it meanwhile (tests of an unreachable service)."""
    with socket.socket() as s:
        s.bind((host, 0))
        yield int(s.getsockname()[1])
