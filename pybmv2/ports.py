"""Switch ports attached to Linux interfaces through AF_PACKET sockets.

Linux takes the 802.1Q tag out of a received frame before a packet socket sees it and hands
it over beside the frame (``PACKET_AUXDATA``), whether the NIC or the stack removed it. A
port puts the tag back where it was, as libpcap does for BMv2, so that the switch sees the
frame that was on the wire; frames it sends keep their tags (a packet socket sends the bytes
as given).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import errno
import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from pybmv2.errors import PacketIOError
from pybmv2.offload import VNET_HDR, frames_of

__all__ = ["Port", "PortSpec", "close_ports", "parse_port_spec"]

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_OUTGOING = 4
PACKET_AUXDATA = 8
#: every frame in and out carries a virtio_net_hdr first (super-packets, pybmv2.offload)
PACKET_VNET_HDR = 15
#: tpacket_auxdata.tp_status bits: a VLAN tag was removed; its TPID is known
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
ETH_P_8021Q = 0x8100
#: struct tpacket_auxdata: status, len, snaplen, mac, net, vlan_tci, vlan_tpid
_AUXDATA = struct.Struct("=IIIHHHH")
_ANCILLARY_SPACE = socket.CMSG_SPACE(_AUXDATA.size)
#: what a socket reports once when its interface goes down or is deleted
_GONE = (errno.ENETDOWN, errno.ENODEV, errno.ENXIO)
#: ignore frames our own socket sent (Linux >= 4.20)
PACKET_IGNORE_OUTGOING = 23
#: SO_SNDBUFFORCE: a send buffer beyond net.core.wmem_max (root)
SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)
SEND_BUFFER_BYTES = 16 << 20
"""A port's socket may have this much in its interface's queue (the kernel doubles it).

A frame stays charged to the socket that sent it until the interface's queue (htb's, on a
shaped link) lets it go. With the kernel's default of 208 KiB, a shaped port refused the
20th 9,000-byte frame of a burst (19 of 200 went in, each costing about 11 KiB of the budget,
against 90 or so 1,500-byte frames): a hidden buffer of 171 KB that dropped what the
interface's own 1,000-packet queue would have held. 32 MiB holds 1,000 jumbo frames, so the
interface's queue, the one ``tc -s qdisc`` shows, is the port's buffer."""


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


def restore_vlan_tag(frame: bytes, ancillary: list[tuple[int, int, bytes]]) -> bytes:
    """``frame`` with the 802.1Q tag that the kernel reported in ``PACKET_AUXDATA`` put back
    after the MAC addresses (the TPID is 0x8100 unless the kernel says otherwise).

    >>> aux = _AUXDATA.pack(TP_STATUS_VLAN_VALID, 18, 18, 0, 0, 5, 0)
    >>> restore_vlan_tag(bytes(12) + b"\\x08\\x00", [(SOL_PACKET, PACKET_AUXDATA, aux)])[12:].hex()
    '810000050800'
    """
    for level, kind, data in ancillary:
        if level != SOL_PACKET or kind != PACKET_AUXDATA or len(data) < _AUXDATA.size:
            continue
        status, _, _, _, _, tci, tpid = _AUXDATA.unpack_from(data)
        if not status & TP_STATUS_VLAN_VALID or len(frame) < 12:
            return frame
        if not status & TP_STATUS_VLAN_TPID_VALID or not tpid:
            tpid = ETH_P_8021Q
        return frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]
    return frame


def _set_send_buffer(sock: socket.socket) -> None:
    """:data:`SEND_BUFFER_BYTES` (forced as root; as much as ``wmem_max`` allows otherwise)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, SEND_BUFFER_BYTES)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)


class Port:
    """A raw socket bound to one interface, in promiscuous mode.

    With ``super_packets`` the socket carries a ``virtio_net_hdr`` before each frame: the
    native engine's I/O thread forwards a super-packet whole, and :meth:`receive` (the
    Python engine's path) hands over the frames it stands for, one at a time, checksums
    complete (:func:`pybmv2.offload.frames_of`)."""

    def __init__(self, spec: PortSpec, *, super_packets: bool = False) -> None:
        self.spec = spec
        self.super_packets = super_packets
        self._pending: collections.deque[bytes] = collections.deque()
        try:
            # protocol 0: the socket takes no frame until it is bound to its interface (opened
            # with ETH_P_ALL, it would queue every interface's frames until the bind)
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        except OSError as exc:
            raise PacketIOError(f"cannot open a raw socket for {spec.iface}: {exc.strerror} (needs root)") from exc
        try:
            sock.bind((spec.iface, ETH_P_ALL))
            ifindex = socket.if_nametoindex(spec.iface)
            mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
            sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
            with contextlib.suppress(OSError):
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            if super_packets:
                sock.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
            _set_send_buffer(sock)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            raise PacketIOError(f"cannot attach to interface {spec.iface!r}: {exc.strerror}") from exc
        self.sock = sock

    def fileno(self) -> int:
        return self.sock.fileno()

    def receive(self) -> bytes | None:
        """One received frame as it was on the wire (an 802.1Q tag the kernel took out is
        put back), or None when there is nothing (or only our own output)."""
        if self._pending:
            return self._pending.popleft()
        try:
            data, ancillary, _, addr = self.sock.recvmsg(65535 + 64 + VNET_HDR.size, _ANCILLARY_SPACE)
        except BlockingIOError:
            return None
        except OSError as exc:  # the interface went down or away: its error, taken once
            if exc.errno in _GONE:
                return None
            raise
        if addr[2] == PACKET_OUTGOING:
            return None
        if self.super_packets:
            head, data = data[:VNET_HDR.size], data[VNET_HDR.size:]
            data = restore_vlan_tag(data, ancillary) if ancillary else data
            frames = frames_of(head + data)
            self._pending.extend(frames[1:])
            return frames[0]
        return restore_vlan_tag(data, ancillary) if ancillary else data

    def send(self, frame: bytes) -> None:
        """Send a whole frame (its checksums complete: on a super-packet port, with an
        empty ``virtio_net_hdr``)."""
        try:
            self.sock.send(bytes(VNET_HDR.size) + frame if self.super_packets else frame)
        except OSError as exc:
            raise PacketIOError(f"send on {self.spec.iface} failed: {exc.strerror}") from exc

    def close(self) -> None:
        self.sock.close()


def close_ports(ports: Iterable[Port]) -> None:
    """Close many ports at once. Closing a packet socket waits for an RCU grace period in
    the kernel (``synchronize_net``, 8-16 ms here), so a switch of 128 ports took 1.5 s to
    close them one after another; closed from threads (``close`` releases the interpreter)
    they share their grace periods."""
    ports = list(ports)
    if len(ports) <= 2:
        for port in ports:
            port.close()
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(32, len(ports))) as pool:
        list(pool.map(Port.close, ports))
