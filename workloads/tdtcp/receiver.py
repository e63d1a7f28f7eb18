"""The TDTCP receiver: reassembles each connection in order and acknowledges with SACK blocks.

Every ACK echoes the send time and the TDN of the segment that triggered it, so that the
sender's RTT sample is unambiguous and credited to the TDN the data crossed. The receiver
serves any number of connections (keyed by peer address and connection id) and stops
``idle`` seconds after the last datagram, or after ``wait`` seconds without any; complete
connections are still acknowledged until then, in case the last ACK was lost.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import logging
import select
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workloads.tdtcp.config import ReceiverConfig
from workloads.tdtcp.errors import WireFormatError
from workloads.tdtcp.reassembly import Reassembly
from workloads.tdtcp.sockets import set_buffers
from workloads.tdtcp.stats import DeliveryLog
from workloads.tdtcp.wire import Ack, DataSegment, decode_data, encode_ack

__all__ = ["Connection", "Receiver"]

log = logging.getLogger(__name__)

#: ``sink(conn, chunk)`` gets each chunk of a connection's stream in order
Sink = Callable[[int, bytes], None]


@dataclass
class Connection:
    """One incoming stream: its reassembly, digest and counters."""

    conn: int
    peer: tuple[str, int]
    reasm: Reassembly
    log: DeliveryLog
    first: float
    last: float = 0.0
    completed: float | None = None
    delivered: int = 0
    unacked: int = 0
    ack_due: float | None = None
    pending: DataSegment | None = None
    sha: Any = field(default_factory=hashlib.sha256)
    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    tdn_segments: collections.Counter[int] = field(default_factory=collections.Counter)

    def to_json(self) -> dict[str, Any]:
        """This connection's statistics."""
        end = self.completed if self.completed is not None else self.last
        span = max(end - self.first, 1e-9)
        return {"conn": self.conn, "peer": f"{self.peer[0]}:{self.peer[1]}", "bytes": self.delivered,
                "complete": self.reasm.complete, "sha256": self.sha.hexdigest(), "start": self.first,
                "end": end, "duration_s": span, "goodput_bps": self.delivered * 8 / span,
                **{k: self.counts[k] for k in ("segments", "in_order", "out_of_order", "duplicate",
                                                "beyond_window", "acks")},
                "tdn_segments": {str(k): v for k, v in sorted(self.tdn_segments.items())},
                "delivered": self.log.to_json()}


class Receiver:
    """Bind ``bind`` (port ``config.port``; 0 picks one, see :attr:`port`) and serve."""

    def __init__(self, bind: str, config: ReceiverConfig, *, sink: Sink | None = None) -> None:
        self.config, self.sink = config, sink
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            rcvbuf = set_buffers(self.sock, config.sock_buf)
            self.sock.bind((bind, config.port))
        except OSError:
            self.sock.close()
            raise
        self.port: int = self.sock.getsockname()[1]
        # Flow control: never more outstanding than a quarter of the socket buffer (as the
        # kernel reports it): a 1472-byte datagram costs 2304 bytes of it, and UDP releases
        # up to a quarter of the buffer lazily. So a slow reader drops nothing.
        self.window = max(1, min(config.window, rcvbuf // 4))
        self.conns: dict[tuple[tuple[str, int], int], Connection] = {}
        self.malformed = 0

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the socket."""
        self.sock.close()

    def run(self) -> dict[str, Any]:
        """Serve until idle; the statistics of every connection."""
        cfg = self.config
        buf = bytearray(0x10000)
        view = memoryview(buf)
        start = last = time.monotonic()
        self.sock.setblocking(False)
        with select.epoll() as ep:
            ep.register(self.sock.fileno(), select.EPOLLIN)
            while True:
                now = time.monotonic()
                limit = (last + cfg.idle) if self.conns else (start + cfg.wait)
                due = min((c.ack_due for c in self.conns.values() if c.ack_due is not None), default=None)
                if due is not None and now >= due:
                    self._flush_due(now)
                    continue
                if now >= limit:
                    break
                ep.poll(max((limit if due is None else min(limit, due)) - now, 0.0))
                while True:
                    try:
                        n, peer = self.sock.recvfrom_into(buf)
                    except BlockingIOError:
                        break
                    last = time.monotonic()
                    try:
                        seg = decode_data(view[:n])
                    except WireFormatError as exc:
                        self.malformed += 1
                        log.debug("tdtcp receiver: ignored a datagram from %s: %s", peer, exc)
                        continue
                    self._on_segment(seg, peer, last)
        end = time.monotonic()
        for c in self.conns.values():
            c.log.close(c.completed or c.last, c.delivered)
        return {"role": "recv", "port": self.port, "window": self.window, "start": start, "end": end, "malformed": self.malformed,
                "connections": [c.to_json() for c in self.conns.values()]}

    def _on_segment(self, seg: DataSegment, peer: tuple[str, int], now: float) -> None:
        key = (peer, seg.conn)
        c = self.conns.get(key)
        if c is None:
            c = self.conns[key] = Connection(seg.conn, peer, Reassembly(self.window),
                                             DeliveryLog(self.config.stats_interval), first=now)
        c.last = now
        c.counts["segments"] += 1
        c.tdn_segments[seg.tdn] += 1
        chunks, kind = c.reasm.on_data(seg.seq, seg.payload, fin=seg.fin)
        c.counts[kind] += 1
        for chunk in chunks:
            c.sha.update(chunk)
            c.delivered += len(chunk)
            if self.sink is not None:
                self.sink(seg.conn, chunk)
        c.log.tick(now, c.delivered)
        if c.reasm.complete and c.completed is None:
            c.completed = now
        c.pending = seg
        c.unacked += 1
        if kind != "in_order" or c.unacked >= self.config.ack_every or c.reasm.held or c.reasm.complete:
            self._ack(c)
        elif c.ack_due is None:
            c.ack_due = now + self.config.delayed_ack

    def _flush_due(self, now: float) -> None:
        for c in self.conns.values():
            if c.ack_due is not None and now >= c.ack_due:
                self._ack(c)

    def _ack(self, c: Connection) -> None:
        seg = c.pending
        if seg is None:
            return
        r = c.reasm
        ack = Ack(conn=c.conn, cum_ack=r.rcv_nxt, echo_ts_ns=seg.ts_ns, data_tdn=seg.tdn, rwnd=min(r.rwnd, 2**32 - 1),
                  sacks=r.sack_blocks(), fin=r.complete)
        with contextlib.suppress(BlockingIOError, ConnectionRefusedError):
            self.sock.sendto(encode_ack(ack), c.peer)
            c.counts["acks"] += 1
        c.unacked, c.ack_due, c.pending = 0, None, None
