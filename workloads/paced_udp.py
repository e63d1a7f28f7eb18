"""Constant-rate UDP between the hosts of an emulation, every datagram timed and counted.

Run in the hosts' namespaces::

    python -m workloads.paced_udp recv BIND_IP --seconds S [--idle S]
    python -m workloads.paced_udp send SRC_ID DST_IP[,DST_IP...] --levels PPS:S[,PPS:S...] [--size B]

The sender goes through its *levels* in order: ``PPS`` datagrams a second for ``S`` seconds
each (a staircase of offered loads), paced on a timetable (a late datagram is sent at once,
never skipped), cycling through its destinations. Each datagram carries ``(source id,
sequence number, level, send time)``; times are ``time.monotonic()``, one clock for every
namespace of the machine and the one a schedule's epoch is given on. The receiver records,
per datagram, the source, sequence number, level, send and arrival times and the IP TTL it
arrived with (how many routers decremented it), and stops ``idle`` seconds after the last
datagram once ``seconds`` have passed. Both print one JSON document on stdout: the sender
``{"sent": [per level], ...}``, the receiver ``{"rows": [[src, seq, level, sent, arrived,
ttl], ...]}``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import struct
import sys
import time
from collections.abc import Sequence

from mlfabric_base.numbers import nonnegative_float, parse_finite, positive_float

__all__ = ["HEADER", "PORT", "build_parser", "main", "receive", "send"]

PORT = 9100
#: source id, sequence number, level, send time (monotonic seconds)
HEADER = struct.Struct("!IIHd")
#: the Linux ancillary message type of IP_RECVTTL's value (IP_TTL)
_IP_TTL = getattr(socket, "IP_TTL", 2)
_IP_RECVTTL = getattr(socket, "IP_RECVTTL", 12)


def send(src_id: int, dsts: Sequence[str], *, levels: Sequence[tuple[float, float]],
         size: int) -> dict[str, list[float]]:
    """For each ``(pps, seconds)`` of ``levels`` in turn, send ``pps`` datagrams of ``size``
    bytes a second for ``seconds``, round-robin over ``dsts``; per level, the datagrams sent
    and its start and end times."""
    if not dsts or not levels or any(pps <= 0 or secs <= 0 for pps, secs in levels):
        raise ValueError(f"need destinations and levels with pps > 0, seconds > 0 (got {list(dsts)}, {list(levels)})")
    pad = b"\0" * max(0, size - HEADER.size)
    out: dict[str, list[float]] = {"sent": [], "start": [], "end": []}
    seq = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for level, (pps, seconds) in enumerate(levels):
            gap = 1.0 / pps
            start = time.monotonic()
            end = start + seconds
            n = 0
            while (due := start + n * gap) < end:
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                with contextlib.suppress(OSError):  # ENOBUFS (a full qdisc): lost at the host
                    s.sendto(HEADER.pack(src_id, seq, level, time.monotonic()) + pad, (dsts[seq % len(dsts)], PORT))
                n += 1
                seq += 1
            out["sent"].append(n)
            out["start"].append(start)
            out["end"].append(max(end, time.monotonic()))
    return out


def receive(bind: str, *, seconds: float, idle: float) -> list[list[float]]:
    """``[src, seq, level, sent, arrived, ttl]`` of every datagram until ``idle`` seconds without
    one, once ``seconds`` have passed."""
    rows: list[list[float]] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.setsockopt(socket.IPPROTO_IP, _IP_RECVTTL, 1)
        s.bind((bind, PORT))
        deadline = time.monotonic() + seconds
        while True:
            now = time.monotonic()
            s.settimeout(max(idle, deadline - now))
            try:
                data, anc, _, _ = s.recvmsg(2048, socket.CMSG_SPACE(4))
            except TimeoutError:
                break
            arrived = time.monotonic()
            if len(data) < HEADER.size:
                continue
            src, seq, level, stamp = HEADER.unpack_from(data)
            ttl = -1
            for cmsg_level, kind, value in anc:
                if cmsg_level == socket.IPPROTO_IP and kind == _IP_TTL and len(value) >= 4:
                    ttl = int.from_bytes(value[:4], sys.byteorder)
            rows.append([src, seq, level, stamp, arrived, ttl])
    return rows


def _levels(text: str) -> list[tuple[float, float]]:
    """``"100:1.5,200:1"`` -> ``[(100.0, 1.5), (200.0, 1.0)]``."""
    try:
        return [(parse_finite(p), parse_finite(t)) for p, t in (item.split(":") for item in text.split(","))]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"levels are PPS:SECONDS[,PPS:SECONDS...], got {text!r}") from exc


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workloads.paced_udp", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    r = sub.add_parser("recv")
    r.add_argument("bind")
    r.add_argument("--seconds", type=positive_float, required=True, help="listen at least this long")
    r.add_argument("--idle", type=nonnegative_float, default=1.0, help="then stop after this long without a datagram")
    s = sub.add_parser("send")
    s.add_argument("src_id", type=int)
    s.add_argument("dsts", help="destination addresses, comma-separated (used in turn)")
    s.add_argument("--levels", type=_levels, required=True, metavar="PPS:S[,PPS:S...]",
                   help="offered loads in turn: datagrams a second and for how long")
    s.add_argument("--size", type=int, default=1000, help="UDP payload bytes (>= 16)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if a.role == "recv":
        print(json.dumps({"rows": receive(a.bind, seconds=a.seconds, idle=a.idle)}))
    else:
        print(json.dumps(send(a.src_id, a.dsts.split(","), levels=a.levels, size=a.size)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
