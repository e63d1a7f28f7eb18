"""A switch port's send buffer is not a hidden switch buffer: a burst of jumbo frames into a
shaped interface waits in the interface's queue instead of being refused by the socket."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import Iterator

import pytest

from pybmv2.errors import PacketIOError
from pybmv2.ports import Port, PortSpec

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="veth pairs and tc need root")

FRAMES = 200
MTU = 9000
FRAME = b"\xff" * 6 + b"\x02" * 6 + b"\x08\x00" + bytes(MTU)


def _sh(cmd: str) -> None:
    subprocess.run(cmd, shell=True, check=True, capture_output=True)


@contextlib.contextmanager
def shaped_veth() -> Iterator[str]:
    """A veth pair with MTU 9,000 whose first end is shaped to 10 Mbit/s by htb (drains
    about 140 jumbo frames a second), as a switch port of an emulated link is."""
    a, b = f"sb{os.getpid() % 100000}a", f"sb{os.getpid() % 100000}b"
    _sh(f"ip link add {a} mtu {MTU} type veth peer name {b} mtu {MTU}")
    try:
        _sh(f"ip link set {a} up && ip link set {b} up")
        _sh(f"tc qdisc replace dev {a} root handle 1: htb default 1 r2q 100 && "
            f"tc class replace dev {a} parent 1: classid 1:1 htb rate 10mbit burst 18036 cburst 9018")
        yield a
    finally:
        subprocess.run(["ip", "link", "del", a], capture_output=True)


#: the kernel's usual default send buffer (net.core.wmem_default), set explicitly so that the
#: control does not depend on how this machine is tuned
DEFAULT_SNDBUF = 212_992


def _refused_by_default_socket(iface: str) -> int:
    """Frames a packet socket with the kernel's usual default send buffer refuses (the control)."""
    refused = 0
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, DEFAULT_SNDBUF // 2)  # the kernel doubles it
        s.bind((iface, 0))
        s.setblocking(False)
        for _ in range(FRAMES):
            try:
                s.send(FRAME)
            except BlockingIOError:
                refused += 1
    return refused


def test_a_burst_of_jumbo_frames_waits_in_the_interface_queue() -> None:
    with shaped_veth() as iface:
        port = Port(PortSpec(1, iface))
        try:
            for i in range(FRAMES):  # PacketIOError (EAGAIN) if the socket's budget ran out
                try:
                    port.send(FRAME)
                except PacketIOError as exc:
                    pytest.fail(f"frame {i} of {FRAMES} refused: {exc}")
        finally:
            port.close()


def test_the_kernel_default_would_have_refused_part_of_the_burst() -> None:
    """What the port's buffer guards against, so that the test above can fail."""
    with shaped_veth() as iface:
        assert _refused_by_default_socket(iface) > FRAMES // 2
