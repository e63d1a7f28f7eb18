"""Switch ports attached to Linux interfaces through AF_PACKET sockets."""

from __future__ import annotations

import contextlib
import errno
import socket
import struct
from dataclasses import dataclass

from pybmv2.errors import PacketIOError

__all__ = ["Port", "PortSpec", "parse_port_spec"]

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_OUTGOING = 4
#: what a socket reports once when its interface goes down or is deleted
_GONE = (errno.ENETDOWN, errno.ENODEV, errno.ENXIO)
#: ignore frames our own socket sent (Linux >= 4.20)
PACKET_IGNORE_OUTGOING = 23


@dataclass(frozen=True, slots=True)
class PortSpec:
    number: int
    iface: str


def parse_port_spec(text: str) -> PortSpec:
    """Parse simple_switch's ``-i PORT@IFACE``.

    >>> parse_port_spec("3@s1-eth3")
    PortSpec(number=3, iface='s1-eth3')
    """
    num, sep, iface = text.partition("@")
    if not sep or not num.isdigit() or not iface:
        raise PacketIOError(f"bad interface spec {text!r}: expected PORT@IFACE, e.g. 1@veth0")
    number = int(num)
    if not 0 <= number < 511:
        raise PacketIOError(f"bad port number {number} in {text!r}: must be 0..510")
    return PortSpec(number, iface)


class Port:
    """A raw socket bound to one interface, in promiscuous mode."""

    def __init__(self, spec: PortSpec) -> None:
        self.spec = spec
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        except OSError as exc:
            raise PacketIOError(f"cannot open a raw socket for {spec.iface}: {exc.strerror} (needs root)") from exc
        try:
            sock.bind((spec.iface, 0))
            ifindex = socket.if_nametoindex(spec.iface)
            mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
            sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
            with contextlib.suppress(OSError):
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise PacketIOError(f"cannot attach to interface {spec.iface!r}: {exc.strerror}") from exc
        self.sock = sock

    def fileno(self) -> int:
        return self.sock.fileno()

    def receive(self) -> bytes | None:
        """One received frame, or None when there is nothing (or only our own output)."""
        try:
            data, addr = self.sock.recvfrom(65535)
        except BlockingIOError:
            return None
        except OSError as exc:  # the interface went down or away: its error, taken once
            if exc.errno in _GONE:
                return None
            raise
        if addr[2] == PACKET_OUTGOING:
            return None
        return data

    def send(self, frame: bytes) -> None:
        try:
            self.sock.send(frame)
        except OSError as exc:
            raise PacketIOError(f"send on {self.spec.iface} failed: {exc.strerror}") from exc

    def close(self) -> None:
        self.sock.close()
