"""The sender's scoreboard: outstanding segments, SACKs, loss detection and per-TDN credit (pure).

Every outstanding segment remembers the TDN and the time of its latest transmission. An ACK
credits each newly delivered segment (cumulatively ACKed or SACKed) to that TDN, and so does
a segment leaving flight because it was declared lost (:class:`~workloads.tdtcp.congestion.Credits`).

Loss detection, in the manner of RFC 6675 and RACK (RFC 8985):

- an original transmission is lost once ``dupthresh`` MSS of data *above* it were SACKed
  (or, without SACK blocks, after ``dupthresh`` duplicate ACKs), or once data above it was
  SACKed and it has been out longer than its TDN's RTT plus a reordering window (RACK's
  rule, with the RTT of the TDN it was sent in);
- a retransmission is lost once a transmission sent more than ``reo_wnd`` after it was
  delivered (the ACK's echoed timestamp says which one).

With ``per_tdn_loss`` (TDTCP) the count of SACKed bytes only takes evidence from the *same*
TDN: data sent later on a faster TDN overtakes data still crossing a slower one, and that
reordering is not loss; such a segment is lost only when overdue for its own TDN.

>>> sb = Scoreboard(total=5000, mss=1000)
>>> for k in range(5):
...     _ = sb.on_transmit(k * 1000, 1000, tdn=0, now_ns=0)
>>> res = sb.on_ack(cum_ack=1000, sacks=[(2000, 5000)], echo_ts_ns=0, data_tdn=0, now_ns=10)
>>> res.credits.delivered, res.credits.lost, sb.next_retransmission().seq
({0: 4000}, ((0, 1000),), 1000)
"""

from __future__ import annotations

import collections
import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from workloads.tdtcp.congestion import Credits
from workloads.tdtcp.intervals import IntervalSet

__all__ = ["AckResult", "Scoreboard", "Segment"]


@dataclass(slots=True)
class Segment:
    """Bytes ``[seq, end)`` as last transmitted: in TDN ``tdn`` at ``sent_ns``."""

    seq: int
    end: int
    tdn: int
    sent_ns: int
    tx: int = 1
    sacked: bool = False
    lost: bool = False
    in_flight: bool = True


@dataclass(frozen=True)
class AckResult:
    """What one ACK did: its per-TDN credits, whether it moved the cumulative ACK, whether it
    was a duplicate (nothing new delivered with data outstanding)."""

    credits: Credits
    advanced: bool
    duplicate: bool


class Scoreboard:
    """Outstanding segments of a ``total``-byte stream cut into ``mss``-byte segments."""

    def __init__(self, total: int, mss: int, *, dupthresh: int = 3, per_tdn_loss: bool = False) -> None:
        self.total, self.mss, self.dupthresh, self.per_tdn_loss = total, mss, dupthresh, per_tdn_loss
        self.snd_una = 0
        self.snd_nxt = 0
        self.segs: dict[int, Segment] = {}  # by seq
        self._order: collections.deque[Segment] = collections.deque()  # in sequence order
        self.sacked = IntervalSet()
        self._sacked_tdn: dict[int, IntervalSet] = {}
        self._rack_ns: dict[int | None, int] = {}
        self._retx: set[int] = set()  # retransmitted segments in flight
        self._lost: list[int] = []  # heap of lost segments' seq (lazily cleaned)
        self._floor = 0  # below it, no original transmission is in flight
        self.dupacks = 0
        self.ignored_acks = 0
        self.lost_by_ack = 0
        self.lost_by_timeout = 0

    @property
    def done(self) -> bool:
        """Every byte was cumulatively acknowledged."""
        return self.snd_una >= self.total

    def next_new(self) -> tuple[int, int] | None:
        """``(seq, length)`` of the next never-sent segment, if any."""
        if self.snd_nxt >= self.total:
            return None
        return self.snd_nxt, min(self.mss, self.total - self.snd_nxt)

    def next_retransmission(self) -> Segment | None:
        """The lowest segment declared lost and not retransmitted since, if any."""
        while self._lost:
            seg = self.segs.get(self._lost[0])
            if seg is not None and seg.lost:
                return seg
            heapq.heappop(self._lost)
        return None

    def oldest(self) -> Segment | None:
        """The lowest outstanding segment (the one the retransmission timer guards)."""
        return self._order[0] if self._order else None

    def on_transmit(self, seq: int, length: int, *, tdn: int, now_ns: int) -> Segment:
        """Segment ``seq`` left in ``tdn`` at ``now_ns``: new (at ``snd_nxt``) or a retransmission."""
        seg = self.segs.get(seq)
        if seg is None:
            if seq != self.snd_nxt or length <= 0:
                raise ValueError(f"new segment [{seq}, {seq + length}) does not start at snd_nxt {self.snd_nxt}")
            seg = self.segs[seq] = Segment(seq, seq + length, tdn, now_ns)
            self._order.append(seg)
            self.snd_nxt += length
            return seg
        if seg.in_flight or seg.sacked:
            raise ValueError(f"segment {seq} retransmitted while in flight or SACKed")
        seg.tdn, seg.sent_ns, seg.tx = tdn, now_ns, seg.tx + 1
        seg.lost, seg.in_flight = False, True
        self._retx.add(seq)
        return seg

    def _deliver(self, seg: Segment, delivered: dict[int, int], left: dict[int, int]) -> None:
        delivered[seg.tdn] = delivered.get(seg.tdn, 0) + seg.end - seg.seq
        if seg.in_flight:
            left[seg.tdn] = left.get(seg.tdn, 0) + seg.end - seg.seq
            seg.in_flight = False
        seg.lost = False
        self._retx.discard(seg.seq)

    def on_ack(self, *, cum_ack: int, sacks: Iterable[tuple[int, int]], echo_ts_ns: int, data_tdn: int,
               now_ns: int, reo_wnd_ns: int = 0, rack_wait: Callable[[int], int] | None = None) -> AckResult:
        """Apply one ACK. ``echo_ts_ns`` (0: absent) is the send time of the transmission that
        triggered it, sent in ``data_tdn``: an RTT sample for that TDN when the ACK delivered
        anything (every transmission has its own stamp, so retransmissions are unambiguous).
        Without a stamp, Karn's rule: no sample from an ACK that covers a retransmission.
        ``rack_wait(tdn)`` is how long, in ns, a segment sent in ``tdn`` may stay unacknowledged
        while later data was SACKed (its TDN's RTT plus a reordering window)."""
        if cum_ack > self.snd_nxt:
            self.ignored_acks += 1
            return AckResult(Credits(), False, False)
        delivered: dict[int, int] = {}
        left: dict[int, int] = {}
        karn: tuple[int, float] | None = None
        ambiguous = False
        advanced = cum_ack > self.snd_una
        if advanced:
            order = self._order
            while order and order[0].end <= cum_ack:
                seg = order.popleft()
                del self.segs[seg.seq]
                ambiguous |= seg.tx > 1
                if karn is None and not seg.sacked:
                    karn = (seg.tdn, (now_ns - seg.sent_ns) / 1e9)
                if not seg.sacked:
                    self._deliver(seg, delivered, left)
            self.snd_una = cum_ack
            self.sacked.trim_below(cum_ack)
            for s in self._sacked_tdn.values():
                s.trim_below(cum_ack)
            self.dupacks = 0
        for start, end in sacks:
            start, end = max(start, self.snd_una), min(end, self.snd_nxt)
            for lo, hi in self.sacked.add(start, end):
                pos = lo
                while pos < hi and (hit := self.segs.get(pos)) is not None:
                    hit.sacked = True
                    self._sacked_tdn.setdefault(hit.tdn, IntervalSet()).add(hit.seq, hit.end)
                    self._deliver(hit, delivered, left)
                    pos = hit.end
        samples: tuple[tuple[int, float], ...] = ()
        if delivered:
            if echo_ts_ns:
                key = data_tdn if self.per_tdn_loss else None
                self._rack_ns[key] = max(self._rack_ns.get(key, 0), echo_ts_ns)
                samples = ((data_tdn, max(0, now_ns - echo_ts_ns) / 1e9),)
            elif karn is not None and not ambiguous:
                samples = (karn,)
        duplicate = not delivered and not advanced and bool(self.segs)
        if duplicate:
            self.dupacks += 1
        lost = self._detect(now_ns, reo_wnd_ns, rack_wait, left)
        return AckResult(Credits(delivered, left, lost, samples), advanced, duplicate)

    def _mark_lost(self, seg: Segment, left: dict[int, int], lost: list[tuple[int, int]]) -> None:
        seg.lost, seg.in_flight = True, False
        left[seg.tdn] = left.get(seg.tdn, 0) + seg.end - seg.seq
        lost.append((seg.tdn, seg.seq))
        heapq.heappush(self._lost, seg.seq)
        self._retx.discard(seg.seq)
        self.lost_by_ack += 1

    def _detect(self, now_ns: int, reo_wnd_ns: int, rack_wait: Callable[[int], int] | None,
                left: dict[int, int]) -> tuple[tuple[int, int], ...]:
        lost: list[tuple[int, int]] = []
        need = self.dupthresh * self.mss
        pos = max(self._floor, self.snd_una)
        while (seg := self.segs.get(pos)) is not None:
            if seg.sacked:
                span = self.sacked.containing(pos)
                pos = span[1] if span else seg.end
                self._floor = pos
                continue
            if seg.tx > 1 or not seg.in_flight:
                pos = seg.end
                self._floor = pos
                continue
            ev = self._sacked_tdn.get(seg.tdn) if self.per_tdn_loss else self.sacked
            above = ev.bytes_above(seg.end) if ev is not None else 0
            by_dupacks = not self.sacked and self.dupacks >= self.dupthresh and seg.seq == self.snd_una
            overdue = (rack_wait is not None and now_ns - seg.sent_ns > rack_wait(seg.tdn)
                       and self.sacked.bytes_above(seg.end) > 0)
            if above < need and not by_dupacks and not overdue:
                break
            self._mark_lost(seg, left, lost)
            pos = seg.end
            self._floor = pos
        for seq in sorted(self._retx):
            seg = self.segs[seq]
            rack = self._rack_ns.get(seg.tdn if self.per_tdn_loss else None, 0)
            if rack - seg.sent_ns > reo_wnd_ns:
                self._mark_lost(seg, left, lost)
        return tuple(lost)

    def on_timeout(self) -> dict[int, int]:
        """The retransmission timer expired: every outstanding segment not SACKed is declared
        lost (RFC 6675 5.1); the bytes that left flight, per TDN."""
        left: dict[int, int] = {}
        for seg in self._order:
            if seg.sacked or seg.lost:
                continue
            if seg.in_flight:
                left[seg.tdn] = left.get(seg.tdn, 0) + seg.end - seg.seq
            seg.lost, seg.in_flight = True, False
            heapq.heappush(self._lost, seg.seq)
            self.lost_by_timeout += 1
        self._retx.clear()
        self.dupacks = 0
        return left

    def summary(self) -> dict[str, Any]:
        """Counters for the stats."""
        return {"lost_by_ack": self.lost_by_ack, "lost_by_timeout": self.lost_by_timeout,
                "ignored_acks": self.ignored_acks}
