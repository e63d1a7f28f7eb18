"""Readiness by polling with a timeout, then a specific error (p4-utils' wait_condition)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from controller.errors import ReadinessTimeout

__all__ = ["free_tcp_port", "wait_for", "wait_for_tcp"]


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


def _tcp_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def wait_for_tcp(address: str, *, timeout: float, what: str = "") -> float:
    host, _, port = address.rpartition(":")
    return wait_for(lambda: _tcp_open(host or "127.0.0.1", int(port)), timeout=timeout,
                    what=what or f"TCP server at {address}")


def free_tcp_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
