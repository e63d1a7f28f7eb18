"""Readiness by polling with a timeout, then a specific error (p4-utils' wait_condition)."""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Callable, Collection
from pathlib import Path

from controller.errors import ReadinessTimeout

__all__ = ["free_tcp_port", "tcp_open", "wait_for", "wait_for_tcp"]


def wait_for(condition: Callable[[], bool], *, timeout: float, what: str, interval: float = 0.02) -> float:
    """Poll ``condition`` until true; return the seconds waited or raise ReadinessTimeout."""
    start = time.monotonic()
    deadline = start + timeout
    while True:
        if condition():
            return time.monotonic() - start
        if time.monotonic() >= deadline:
            raise ReadinessTimeout(f"{what} not ready after {timeout:.1f} s")
        time.sleep(interval)


def tcp_open(host: str, port: int) -> bool:
    """A listener accepts on host:port (a TCP self-connection does not count)."""
    try:
        with socket.create_connection((host, port), timeout=0.2) as sock:
            return sock.getsockname() != sock.getpeername()
    except OSError:
        return False


def wait_for_tcp(address: str, *, timeout: float, what: str = "") -> float:
    host, _, port = address.rpartition(":")
    return wait_for(lambda: tcp_open(host or "127.0.0.1", int(port)), timeout=timeout,
                    what=what or f"TCP server at {address}")


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999



def free_tcp_port(exclude: Collection[int] = ()) -> int:
    """A TCP port on 127.0.0.1, free a moment ago, outside the kernel's ephemeral range,
    and not one of ``exclude`` (ports already handed out but not bound yet: without it, two
    switches started together could be given the same port).

    Ports from the ephemeral range can be handed to an outgoing connection (even one to
    the same port, a self-connection) before the server binds them; servers of the
    emulation therefore get ports below that range.
    """
    low, _ = _ephemeral_range()
    base, span = 20000, max(1000, min(low, 32768) - 20000)
    start = random.randrange(span)  # concurrent callers rarely probe the same ports
    for i in range(span):
        port = base + (start + i) % span
        if port in exclude:
            continue
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise ReadinessTimeout(f"no free TCP port in {base}..{base + span - 1}")
