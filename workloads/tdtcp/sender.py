"""The TDTCP sender: a reliable byte stream over UDP driven by per-TDN congestion control.

One thread runs :meth:`Sender.run`: it sends while the active TDN's cwnd and the receiver's
window allow (lost segments first, then new data), waits for ACKs or the retransmission
timer, and hands each ACK to the scoreboard and the congestion states. :meth:`Sender.set_tdn`
may be called from any thread (the ICMP listener's): the change is queued, the loop is woken
and applies it before it sends again.

The stream is ``total`` bytes of ``payload`` (by default a seeded pseudo-random pattern);
:meth:`Sender.run` returns the statistics as one JSON-ready dict (see the CLI's docstring).
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import logging
import random
import select
import socket
import time
from collections.abc import Callable
from typing import Any

from workloads.tdtcp.config import SenderConfig
from workloads.tdtcp.congestion import CongestionControl
from workloads.tdtcp.errors import ConfigError, PeerTimeout, WireFormatError
from workloads.tdtcp.scoreboard import Scoreboard
from workloads.tdtcp.sockets import set_buffers
from workloads.tdtcp.stats import SwitchLog, Timeline
from workloads.tdtcp.wire import decode_ack, encode_data_header

__all__ = ["Sender", "pattern"]

log = logging.getLogger(__name__)


def pattern(total: int, *, seed: int = 0, block: int = 1 << 20) -> bytes:
    """The default stream: ``total`` bytes repeating a seeded pseudo-random block."""
    rng = random.Random(seed)
    chunk = rng.randbytes(min(block, total))
    reps = -(-total // max(1, len(chunk)))
    return (chunk * reps)[:total]


class Sender:
    """Send ``total`` bytes to ``dst`` (port ``config.port``) and return the statistics."""

    def __init__(self, dst: str, total: int, config: SenderConfig, *, payload: bytes | None = None,
                 observer: Callable[[Sender], None] | None = None) -> None:
        if isinstance(total, bool) or not isinstance(total, int) or total < 1:
            raise ConfigError("Sender", "total", total, "must be an integer >= 1")
        if payload is not None and len(payload) != total:
            raise ConfigError("Sender", "payload", len(payload), f"must hold exactly total={total} bytes")
        self.dst, self.total, self.config = dst, total, config
        self.payload = memoryview(payload if payload is not None else pattern(total))
        self.observer = observer
        self.conn = config.conn if config.conn is not None else random.getrandbits(32)
        self.cc = CongestionControl(config.mode, config.congestion, initial_tdn=config.initial_tdn)
        self.sb = Scoreboard(total, config.congestion.mss, dupthresh=config.dupthresh,
                             per_tdn_loss=config.mode == "tdtcp")
        self.timeline = Timeline()
        self.switch_log = SwitchLog()
        self._pending: collections.deque[tuple[float, int, str]] = collections.deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_w.setblocking(False)
        self._rwnd = 1 << 32
        self._deadline: float | None = None
        self._blocked = False
        self.counts = collections.Counter[str]()
        self.sent_by_tdn = collections.Counter[int]()
        self.start: float | None = None
        self.end: float | None = None
        self.stopped_at_limit = False  # max_seconds ran out before every byte was acknowledged

    # -- called from other threads ---------------------------------------------------------
    def set_tdn(self, tdn: int, *, source: str = "api", received: float | None = None) -> None:
        """The network is now TDN ``tdn`` (announced at ``received``, monotonic seconds).
        Thread-safe: the loop applies it before its next transmission."""
        if not 0 <= tdn <= 0xFF:
            raise ValueError(f"TDN id {tdn} outside 0..255")
        self._pending.append((time.monotonic() if received is None else received, tdn, source))
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    @property
    def acked(self) -> int:
        """Bytes cumulatively acknowledged so far."""
        return self.sb.snd_una

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Transfer the stream; the statistics. :class:`PeerTimeout` if no byte is
        acknowledged for ``config.timeout`` seconds (:meth:`stats` still tells how far it got)."""
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock, select.epoll() as ep:
                set_buffers(sock, self.config.sock_buf)
                sock.connect((self.dst, self.config.port))
                sock.setblocking(False)
                ep.register(sock.fileno(), select.EPOLLIN)
                ep.register(self._wake_r.fileno(), select.EPOLLIN)
                self._loop(sock, ep)
        finally:
            self.end = time.monotonic()
            self._apply_tdn_changes(self.end)
            self.timeline.record(self.end, self.cc, acked=self.sb.snd_una)
            self._wake_r.close()
            self._wake_w.close()
        return self.stats()

    def _loop(self, sock: socket.socket, ep: select.epoll) -> None:
        cfg = self.config
        start = self.start = time.monotonic()
        progress = next_sample = start
        limit = None if cfg.max_seconds is None else start + cfg.max_seconds
        while not self.sb.done:
            now = time.monotonic()
            if limit is not None and now >= limit:
                self.stopped_at_limit = True
                break
            self._apply_tdn_changes(now)
            if self._deadline is not None and now >= self._deadline:
                self._on_timeout(now)
            self._send(sock)
            now = time.monotonic()
            if now >= next_sample:
                self.timeline.record(now, self.cc, acked=self.sb.snd_una)
                next_sample = now + cfg.stats_interval
            wait = next_sample - now
            if self._deadline is not None:
                wait = min(wait, self._deadline - now)
            ep.modify(sock.fileno(), select.EPOLLIN | (select.EPOLLOUT if self._blocked else 0))
            for fd, _ in ep.poll(max(wait, 0.0)):
                if fd == self._wake_r.fileno():
                    with contextlib.suppress(BlockingIOError):
                        self._wake_r.recv(4096)
            if self._receive(sock):
                progress = time.monotonic()
            elif time.monotonic() - progress > cfg.timeout:
                raise PeerTimeout(f"tdtcp sender to {self.dst}:{cfg.port}: no byte acknowledged for "
                                  f"{cfg.timeout} s ({self.sb.snd_una} of {self.total} bytes acked)")

    def _apply_tdn_changes(self, now: float) -> None:
        while self._pending:
            received, tdn, source = self._pending.popleft()
            previous, before = self.cc.active_tdn, self.cc.active.cwnd
            changed = self.cc.set_active(tdn)
            self.switch_log.record(received=received, applied=now, tdn=tdn, source=source, previous=previous,
                                   cwnd_before=before, cwnd_after=self.cc.active.cwnd, changed=changed)

    def _send(self, sock: socket.socket) -> None:
        sb, cc, mss, loss = self.sb, self.cc, self.config.congestion.mss, self.config.loss
        self._blocked = False
        while True:
            if self._pending:  # a TDN change takes effect mid-burst, not after it
                self._apply_tdn_changes(time.monotonic())
            seg = sb.next_retransmission()
            if seg is not None:
                seq, length, attempt = seg.seq, seg.end - seg.seq, seg.tx
            else:
                nxt = sb.next_new()
                if nxt is None:
                    return
                seq, length = nxt
                attempt = 0
                if sb.snd_nxt > sb.snd_una and seq + length - sb.snd_una > self._rwnd:
                    return
            if not cc.active.can_send(length):
                return
            tdn = cc.active_tdn
            ts = time.monotonic_ns()
            if not (loss.active and loss.drops(seq // mss, attempt)):
                header = encode_data_header(self.conn, seq, tdn, ts, length, fin=seq + length == self.total,
                                            retx=attempt > 0)
                try:
                    sock.sendmsg([header, self.payload[seq:seq + length]])
                except BlockingIOError:
                    self._blocked = True
                    return
                except ConnectionRefusedError:  # an ICMP error from an earlier datagram: lost
                    self.counts["refused"] += 1
            else:
                self.counts["dropped_injected"] += 1
            sb.on_transmit(seq, length, tdn=tdn, now_ns=ts)
            cc.on_send(tdn, length, snd_una=sb.snd_una, snd_nxt=sb.snd_nxt, retransmission=attempt > 0)
            self.counts["segments_sent"] += 1
            self.counts["retransmissions"] += attempt > 0
            self.sent_by_tdn[tdn] += length
            if self._deadline is None:
                self._arm(time.monotonic())

    def _arm(self, now: float) -> None:
        oldest = self.sb.oldest()
        self._deadline = None if oldest is None else now + self.cc.state(oldest.tdn).rtt.rto

    def _reo_wnd_ns(self) -> int:
        srtt = self.cc.active.rtt.srtt
        return int(max(self.config.min_reo_wnd, (srtt or 0.0) / 4) * 1e9)

    def _rack_wait(self, tdn: int) -> int:
        """How long (ns) a segment sent in ``tdn`` may be outstanding while later data is
        SACKed: that TDN's SRTT plus a quarter of it (at least ``min_reo_wnd``)."""
        srtt = self.cc.state(tdn).rtt.srtt
        if srtt is None:
            return 1 << 62
        return int((srtt + max(self.config.min_reo_wnd, srtt / 4)) * 1e9)

    def _receive(self, sock: socket.socket) -> bool:
        """Process every ACK waiting; whether any moved the cumulative ACK."""
        advanced = False
        use_ts = self.config.use_timestamps
        while True:
            try:
                data = sock.recv(2048)
            except BlockingIOError:
                return advanced
            except ConnectionRefusedError:
                self.counts["refused"] += 1
                continue
            try:
                ack = decode_ack(data)
            except WireFormatError as exc:
                self.counts["malformed"] += 1
                log.debug("tdtcp sender: ignored a datagram: %s", exc)
                continue
            if ack.conn != self.conn:
                self.counts["foreign"] += 1
                continue
            self.counts["acks"] += 1
            self._rwnd = ack.rwnd
            res = self.sb.on_ack(cum_ack=ack.cum_ack, sacks=ack.sacks, echo_ts_ns=ack.echo_ts_ns if use_ts else 0,
                                 data_tdn=ack.data_tdn, now_ns=time.monotonic_ns(), reo_wnd_ns=self._reo_wnd_ns(),
                                 rack_wait=self._rack_wait)
            self.cc.on_ack(res.credits, snd_una=self.sb.snd_una, snd_nxt=self.sb.snd_nxt)
            self.counts["dupacks"] += res.duplicate
            if res.advanced:
                advanced = True
                self._arm(time.monotonic())
            if self.observer is not None:
                self.observer(self)

    def _on_timeout(self, now: float) -> None:
        oldest = self.sb.oldest()
        if oldest is None:
            self._deadline = None
            return
        tdn = oldest.tdn
        left = self.sb.on_timeout()
        self.cc.on_timeout(tdn, left, snd_nxt=self.sb.snd_nxt)
        self.counts["timeouts"] += 1
        self._deadline = now + self.cc.state(tdn).rtt.rto
        log.debug("tdtcp sender: RTO in TDN %d at %d of %d bytes", tdn, self.sb.snd_una, self.total)

    def stats(self) -> dict[str, Any]:
        """The statistics so far (complete once :meth:`run` returned): see the CLI's docstring."""
        start = self.start if self.start is not None else time.monotonic()
        end = self.end if self.end is not None else time.monotonic()
        per_tdn = {}
        for key, st in self.cc.states():
            per_tdn[key] = {**st.snapshot(), "bytes_sent": st.bytes_sent, "bytes_retransmitted": st.bytes_retransmitted,
                            "bytes_delivered": st.bytes_delivered, "recoveries": st.recoveries,
                            "timeouts": st.timeouts, "rtt_samples": st.rtt.samples}
        duration = max(end - start, 1e-9)
        c = self.counts
        return {
            "role": "send", "mode": self.config.mode, "dst": self.dst, "port": self.config.port,
            "conn": self.conn, "bytes": self.total, "mss": self.config.congestion.mss,
            "complete": self.sb.done, "acked": self.sb.snd_una, "time_limited": self.stopped_at_limit,
            "start": start, "end": end, "duration_s": duration, "goodput_bps": self.sb.snd_una * 8 / duration,
            "sha256": hashlib.sha256(self.payload).hexdigest(),
            "segments_sent": c["segments_sent"], "retransmissions": c["retransmissions"],
            "timeouts": c["timeouts"], "dropped_injected": c["dropped_injected"], "acks": c["acks"],
            "dupacks": c["dupacks"], "malformed": c["malformed"], "refused": c["refused"],
            **self.sb.summary(),
            "active_tdn": self.cc.active_tdn, "tdn_switches": self.cc.switches,
            "sent_by_tdn": {str(k): v for k, v in sorted(self.sent_by_tdn.items())},
            "per_tdn": per_tdn, **self.switch_log.to_json(), "timeline": self.timeline.to_json(),
        }
