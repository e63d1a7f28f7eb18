"""close_ports: a switch's ports closed together (each packet socket's close waits for an RCU
grace period in the kernel, so one after another a 128-port switch took 1.5 s to exit)."""

from __future__ import annotations

import socket

import pytest

from pybmv2.ports import Port, close_ports

pytestmark = pytest.mark.unit


def _port() -> Port:
    port = Port.__new__(Port)  # no interface needed: a socket to close is all close() uses
    port.sock, peer = socket.socketpair()
    peer.close()
    return port


@pytest.mark.parametrize("count", [0, 1, 2, 3, 100])
def test_every_port_is_closed(count: int) -> None:
    ports = [_port() for _ in range(count)]
    close_ports(ports)
    assert all(p.sock.fileno() == -1 for p in ports)
