"""A timed UDP probe between two hosts of an emulation: who sent what when, what arrived when.

Run in the hosts' namespaces::

    python -m workloads.udp_probe recv BIND_IP [--idle S]           # prints [[seq, arrived], ...]
    python -m workloads.udp_probe send DST_IP --seconds S --gap G   # prints [sent_0, sent_1, ...]

Times are ``time.monotonic()`` in seconds: one clock for every namespace of the machine, and
the clock the controller gives a schedule's epoch on. The receiver stops after ``--idle``
seconds without a packet.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time
from collections.abc import Sequence

from mlfabric_base.numbers import nonnegative_float, positive_float

__all__ = ["PORT", "build_parser", "main", "receive", "send"]

PORT = 9000
#: the receiver's socket buffer (the kernel caps it at net.core.rmem_max)
RECV_BUFFER_BYTES = 4 << 20
_PROBE = struct.Struct("!I")


def send(dst: str, seconds: float, gap: float) -> list[float]:
    """Send a numbered datagram every ``gap`` seconds for ``seconds``; their send times."""
    times: list[float] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        end = time.monotonic() + seconds
        while (now := time.monotonic()) < end:
            times.append(now)
            s.sendto(_PROBE.pack(len(times) - 1), (dst, PORT))
            time.sleep(gap)
    return times


def receive(bind: str, idle: float) -> list[tuple[int, float]]:
    """``(sequence number, arrival time)`` of every datagram until ``idle`` seconds pass
    without one."""
    got: list[tuple[int, float]] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        # a calendar queue releases a whole slot's held packets at once: the kernel's default
        # 208 KiB of buffer holds ~200 such datagrams, and the rest would be dropped here
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECV_BUFFER_BYTES)
        s.bind((bind, PORT))
        s.settimeout(idle)
        try:
            while True:
                data = s.recv(64)
                got.append((_PROBE.unpack_from(data)[0], time.monotonic()))
        except TimeoutError:
            pass
    return got


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workloads.udp_probe", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    r = sub.add_parser("recv")
    r.add_argument("bind")
    r.add_argument("--idle", type=nonnegative_float, default=1.0)
    s = sub.add_parser("send")
    s.add_argument("dst")
    s.add_argument("--seconds", type=positive_float, required=True)
    s.add_argument("--gap", type=nonnegative_float, default=0.002)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    out = receive(a.bind, a.idle) if a.role == "recv" else send(a.dst, a.seconds, a.gap)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
