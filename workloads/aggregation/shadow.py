"""Checkmate's shadow on aggregated traffic: a host that receives, on each rail, one copy of
every sum the rail's switch multicasts to the workers (``shadows`` in the aggregation job),
and rebuilds from them the reduced gradient every worker ends the all-reduce with.

``python -m workloads.aggregation.shadow --listen IP [IP ...] --out PREFIX`` records, until
SIGTERM, SIGINT or SIGHUP, every payload that arrives at ``IP:port`` (one IP per rail, in rail
order) into ``PREFIX.rail<r>``, whole payloads back to back. :func:`rebuild` turns those
streams into the buffers of the in-network all-reduces that ran, in order.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import select
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from workloads.aggregation.quantize import dequantize, scale_for
from workloads.aggregation.wire import LANES, PAYLOAD_BYTES, WORKER_PORT, decode
from workloads.collectives import chunk_bounds
from workloads.errors import VerificationError

__all__ = ["digest", "rebuild"]


def digest(buf: np.ndarray) -> str:
    """What the workers and the shadow compare: the buffer's bytes, hashed."""
    return hashlib.sha256(np.ascontiguousarray(buf).tobytes()).hexdigest()[:16]


def rebuild(streams: Mapping[int, bytes], sizes: Sequence[int], rails: int) -> list[np.ndarray]:
    """The float32 buffers of the in-network all-reduces of ``sizes`` elements, in the order
    they ran, from each rail's recorded sums: per call and rail, the exponent's round, then
    one sum per chunk of the rail's shard (in completion order; placed by offset)."""
    cursor = dict.fromkeys(range(rails), 0)
    out = []
    for call, n in enumerate(sizes):
        buf = np.empty(n, dtype=np.float32)
        for rail, (a, b) in enumerate(chunk_bounds(n, rails)):
            chunks = max(1, math.ceil((b - a) / LANES))
            payloads = _take(streams.get(rail, b""), cursor, rail, 1 + chunks, f"all-reduce {call} ({n} elements)")
            exponent_round = decode(payloads[0])
            sums = np.zeros(chunks * LANES, dtype=np.int32)
            for payload in payloads[1:]:
                chunk = decode(payload)
                k = chunk.offset // LANES
                sums[k * LANES:(k + 1) * LANES] = chunk.values
            scale = scale_for(exponent_round.exponent, exponent_round.workers)
            buf[a:b] = dequantize(sums[:b - a], scale, np.dtype(np.float32))
        out.append(buf)
    return out


def _take(data: bytes, cursor: dict[int, int], rail: int, count: int, what: str) -> list[bytes]:
    at = cursor[rail]
    if at + count * PAYLOAD_BYTES > len(data):
        raise VerificationError(f"shadow: rail {rail} recorded {len(data) // PAYLOAD_BYTES} sums, too few for {what}")
    cursor[rail] = at + count * PAYLOAD_BYTES
    return [data[i:i + PAYLOAD_BYTES] for i in range(at, at + count * PAYLOAD_BYTES, PAYLOAD_BYTES)]


def record(ips: Sequence[str], port: int, prefix: Path) -> int:
    socks = []
    for ip in ips:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.bind((ip, port))
        socks.append(s)
    files = [open(f"{prefix}.rail{r}", "wb") for r in range(len(ips))]  # noqa: SIM115 - closed below
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    print("shadow ready", flush=True)
    try:
        while not stopping:
            try:
                ready, _, _ = select.select(socks, [], [], 0.2)
            except InterruptedError:
                continue
            for s in ready:
                payload = s.recv(PAYLOAD_BYTES + 64)
                if len(payload) == PAYLOAD_BYTES:
                    files[socks.index(s)].write(payload)
    finally:
        for f in files:
            f.close()
        for s in socks:
            s.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m workloads.aggregation.shadow", description=__doc__.split("\n")[0])
    p.add_argument("--listen", nargs="+", required=True, help="the shadow's address on each rail, in rail order")
    p.add_argument("--port", type=int, default=WORKER_PORT, help="the job's worker port")
    p.add_argument("--out", type=Path, required=True, help="record into OUT.rail<r>")
    a = p.parse_args(argv)
    return record(a.listen, a.port, a.out)


if __name__ == "__main__":
    sys.exit(main())
