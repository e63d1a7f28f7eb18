"""Every root qdisc's counters in one network namespace, read over rtnetlink: no process is
started per read, so sampling dozens of interfaces a few times a second costs a little of
one core, not the forks of ``tc -s qdisc show`` in every host.

A reader opens its netlink socket inside the namespace of a given process (a Mininet host's
shell) and keeps it: a socket stays bound to the namespace it was created in. Only the
opening thread switches namespace, and switches back before returning.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct
from dataclasses import dataclass

__all__ = ["QdiscCounters", "QdiscReader"]

_NLMSG = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_TCMSG = struct.Struct("=BxxxiIII")  # family, ifindex, handle, parent, info
_IFINFO = struct.Struct("=BxHiII")  # family, type, index, flags, change
_RTA = struct.Struct("=HH")
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_RTM_NEWLINK, _RTM_GETLINK, _RTM_NEWQDISC, _RTM_GETQDISC = 16, 18, 36, 38
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_IFLA_IFNAME = 3
_TCA_KIND, _TCA_STATS2 = 1, 7
_TCA_STATS_BASIC, _TCA_STATS_QUEUE = 1, 3
_TC_H_ROOT = 0xFFFFFFFF
_CLONE_NEWNET = 0x40000000


@dataclass(frozen=True, slots=True)
class QdiscCounters:
    """One interface's root qdisc: its kind, what it sent, and what it holds now."""

    kind: str
    sent_bytes: int
    sent_packets: int
    qlen: int
    backlog_bytes: int
    drops: int


def _attrs(data: bytes, offset: int) -> dict[int, bytes]:
    out = {}
    while offset + _RTA.size <= len(data):
        length, kind = _RTA.unpack_from(data, offset)
        if length < _RTA.size:
            break
        out[kind & 0x3FFF] = data[offset + _RTA.size:offset + length]
        offset += (length + 3) & ~3
    return out


def parse_qdiscs(payloads: list[bytes]) -> dict[int, QdiscCounters]:
    """Root qdiscs by interface index, from RTM_NEWQDISC payloads (after the netlink header)."""
    out = {}
    for data in payloads:
        _, ifindex, _, parent, _ = _TCMSG.unpack_from(data)
        if parent != _TC_H_ROOT:
            continue
        attrs = _attrs(data, _TCMSG.size)
        stats = _attrs(attrs.get(_TCA_STATS2, b""), 0)
        basic, queue = stats.get(_TCA_STATS_BASIC, b""), stats.get(_TCA_STATS_QUEUE, b"")
        sent_bytes, sent_packets = struct.unpack_from("=QI", basic) if len(basic) >= 12 else (0, 0)
        qlen, backlog, drops = struct.unpack_from("=III", queue) if len(queue) >= 12 else (0, 0, 0)
        kind = attrs.get(_TCA_KIND, b"").rstrip(b"\0").decode(errors="replace")
        out[ifindex] = QdiscCounters(kind, sent_bytes, sent_packets, qlen, backlog, drops)
    return out


def _open_in(pid: int | None) -> socket.socket:
    """A NETLINK_ROUTE socket in ``pid``'s network namespace (None: this thread's)."""
    if pid is None:
        return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    libc = ctypes.CDLL(None, use_errno=True)
    here = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    there = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        if libc.setns(there, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"cannot enter the network namespace of process {pid}")
        try:
            return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        finally:
            if libc.setns(here, _CLONE_NEWNET) != 0:  # never leave this thread in a host's namespace
                raise OSError(ctypes.get_errno(), "cannot return to this process's network namespace")
    finally:
        os.close(here)
        os.close(there)


class QdiscReader:
    """Reads the root qdiscs of one namespace: ``pid``'s (a Mininet host), or this process's.

    >>> r = QdiscReader()
    >>> "lo" in r.interfaces().values()
    True
    >>> r.close()
    """

    def __init__(self, pid: int | None = None) -> None:
        self._sock = _open_in(pid)
        self._sock.bind((0, 0))
        self._seq = 0
        self._names: dict[int, str] = {}

    def _dump(self, msg_type: int, body: bytes, want: int) -> list[bytes]:
        self._seq += 1
        header = _NLMSG.pack(_NLMSG.size + len(body), msg_type, _NLM_F_REQUEST | _NLM_F_DUMP, self._seq, 0)
        self._sock.send(header + body)
        out: list[bytes] = []
        while True:
            data = self._sock.recv(1 << 16)
            offset = 0
            while offset + _NLMSG.size <= len(data):
                length, kind, _, seq, _ = _NLMSG.unpack_from(data, offset)
                if length < _NLMSG.size:
                    return out
                payload = data[offset + _NLMSG.size:offset + length]
                offset += (length + 3) & ~3
                if seq != self._seq:
                    continue
                if kind == _NLMSG_DONE:
                    return out
                if kind == _NLMSG_ERROR:
                    code = -struct.unpack_from("=i", payload)[0]
                    if code:
                        raise OSError(code, os.strerror(code))
                    return out
                if kind == want:
                    out.append(payload)

    def interfaces(self) -> dict[int, str]:
        """Interface names by index (read once, then kept)."""
        if not self._names:
            for data in self._dump(_RTM_GETLINK, _IFINFO.pack(socket.AF_UNSPEC, 0, 0, 0, 0), _RTM_NEWLINK):
                index = _IFINFO.unpack_from(data)[2]
                name = _attrs(data, _IFINFO.size).get(_IFLA_IFNAME, b"").rstrip(b"\0").decode(errors="replace")
                self._names[index] = name
        return self._names

    def read(self) -> dict[str, QdiscCounters]:
        """Every interface's root qdisc, by interface name."""
        names = self.interfaces()
        qdiscs = parse_qdiscs(self._dump(_RTM_GETQDISC, _TCMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0), _RTM_NEWQDISC))
        return {names.get(i, str(i)): c for i, c in qdiscs.items()}

    def close(self) -> None:
        self._sock.close()
