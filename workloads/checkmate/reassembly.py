"""Rebuild the frames of one mirrored TCP direction from the segments a shadow captures.

A P4 switch mirrors copies of the TCP segments of a few connections to a passive shadow host.
A mirrored copy is never retransmitted to the shadow: when one is lost, the shadow has a
permanent hole while the original connection carries on. Retransmissions of the original
are mirrored too, so segments arrive duplicated, overlapping and out of order. Each
connection carries only frames: a 16-byte header :data:`HEADER` = (tag, payload length),
then the payload (:mod:`workloads.framing`).

:class:`FrameStream` takes the segments of one direction of one connection and returns, in
stream order, the complete :class:`Frame` s and the :class:`Gap` s (bytes that will never
arrive, and so frames that are lost). It is pure logic: the caller captures the packets and
passes the time in.

Offsets. With the SYN, stream offset 0 is the byte after the SYN (``ISN + 1``). Without it
(the shadow joined mid-connection), offset 0 is the first data byte the stream received and
offsets are only meaningful within the stream (:attr:`FrameStream.joined_mid_stream`).
Sequence numbers are mapped to offsets modulo 2**32, to the offset nearest the read pointer
(serial-number arithmetic, RFC 1982): streams longer than 4 GiB keep growing offsets.

Synchronisation. The stream knows where a frame starts after the SYN, and after a gap whose
lost frame's header had arrived (the next frame starts right after that frame). Otherwise
(mid-stream join, a gap that swallowed a header) it *anchors*: it scans the data for a
header that ``plausible(tag, length)`` accepts and whose following header, if already
received, is plausible too. With ``lengths`` (the payload lengths the job produces), the scan
looks for the 8-byte encodings of those lengths anywhere in the data; without, it only tries
the offsets where a segment started (frames usually start a segment).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterator

from workloads.checkmate.segment_store import SegmentStore
from workloads.checkmate.stream_events import HEADER, Frame, Gap, StreamStats

__all__ = ["HEADER", "Frame", "FrameStream", "Gap", "StreamStats"]

_HDR = HEADER.size
_MOD = 1 << 32
_MASK = _MOD - 1
_HALF = 1 << 31


def _signed(value: int) -> int:
    """``value`` modulo 2**32, as the nearest integer to 0 (in ``[-2**31, 2**31)``)."""
    value &= _MASK
    return value - _MOD if value >= _HALF else value


class FrameStream:
    """One direction of one TCP connection: segments in, frames and gaps out.

    Segments may come in any order, duplicated, overlapping, and with sequence numbers
    wrapping past 2**32. :meth:`add` stores them and delivers what it can; :meth:`poll` also
    declares the holes that timed out and returns everything completed since the last poll,
    in stream order.

    Parameters
    ----------
    plausible : callable
        ``plausible(tag, length)``: whether a header with these fields may occur in this
        stream. Used to find frame boundaries (anchoring) and to check every header.
    hole_timeout_s : float
        A missing range becomes a :class:`Gap` once the earliest buffered segment after it
        arrived at least this long before ``now`` (it had its chance to be retransmitted).
    max_buffered : int
        Bound on the buffered bytes. More forces the oldest hole to be declared a gap. A
        header announcing a frame longer than this (header included) is implausible.
    lengths : collection of int, optional
        The payload lengths the job produces. When given, a header is plausible only if its
        length is one of them, and anchoring scans all the data for them; when not, anchoring
        only tries the offsets where a segment started.

    Notes
    -----
    - A SYN sets offset 0 to ``ISN + 1`` (a payload on a SYN is ignored); the same SYN again
      is ignored. A SYN with another ISN means the connection was re-established: the
      buffers are dropped (no gap is reported), offsets restart at 0 and
      :attr:`StreamStats.resets` counts it.
    - A SYN after data received without one is that data's own SYN, reordered, if the first
      byte received lies at most ``max_buffered`` after it; otherwise it re-establishes the
      connection as above. Before the first anchor, the own SYN re-bases the offsets (and
      the stream then knows offset 0 is a frame boundary, unless its scan already went past
      some data: then it goes on anchoring); after it, the SYN is ignored and the offsets
      stay provisional.
    - Without a SYN, offset 0 is the first data segment received. Data that arrives before
      the read pointer (here: below that first segment, or below the scan position) is
      dropped: the stream anchors only within the data from there on. Nothing is delivered
      before the anchor, and the unknown region before it is not a gap.
    - Holes met while anchoring (before the first anchor, or after a gap) are waited for as
      any hole, then skipped silently.
    - A candidate anchor whose following header has not arrived yet (in part: the part that
      did must fit a plausible header) waits for it. It is accepted if the stream then goes
      quiet for ``hole_timeout_s`` (the last frame of a burst). If a hole after it times
      out (or memory runs short), it is accepted when the hole lies inside its own frame
      (that frame is lost to a gap, but its header gives the next boundary, where a wrong
      anchor would show as an implausible header), rejected when its frame is complete: a
      wrong frame is worse than a lost one.
    - An implausible header where a frame should start (a false anchor, or a caller whose
      ``plausible`` is too strict) makes the stream re-anchor after it, without a gap;
      :attr:`StreamStats.desyncs` counts it.
    - Timeouts are only evaluated in :meth:`poll`; :meth:`add` only enforces ``max_buffered``.

    Examples
    --------
    >>> s = FrameStream(plausible=lambda tag, length: length < 100)
    >>> s.add(999, b"", syn=True, now=0.0)
    >>> s.add(1000 + 19, b"lo", now=0.0)  # out of order
    >>> s.add(1000, HEADER.pack(7, 5) + b"hel", now=0.0)
    >>> s.poll(now=0.0)
    [Frame(offset=0, tag=7, payload=b'hello')]
    """

    def __init__(self, *, plausible: Callable[[int, int], bool], hole_timeout_s: float = 1.0,
                 max_buffered: int = 64 << 20, lengths: Collection[int] | None = None) -> None:
        if hole_timeout_s < 0:
            raise ValueError(f"hole_timeout_s must be >= 0, not {hole_timeout_s}")
        if max_buffered < 2 * _HDR:
            raise ValueError(f"max_buffered must be at least {2 * _HDR}, not {max_buffered}")
        self._plausible = plausible
        self._timeout = float(hole_timeout_s)
        self._max = max_buffered
        self._lengths: frozenset[int] | None = None
        self._encodings: tuple[bytes, ...] = ()
        if lengths is not None:
            chosen = frozenset(int(n) for n in lengths)
            bad = sorted(n for n in chosen if not 0 <= n < 1 << 64)
            if bad:
                raise ValueError(f"payload lengths must be in 0..2**64-1: {bad}")
            self._lengths = chosen
            self._encodings = tuple(n.to_bytes(8, "big") for n in sorted(chosen)
                                    if _HDR + n <= max_buffered)
        self._out: list[Frame | Gap] = []
        self._frames = 0
        self._gaps = 0
        self._gap_bytes = 0
        self._dup = 0
        self._discarded = 0
        self._garbage = 0
        self._anchors = 0
        self._desyncs = 0
        self._resets = 0
        self._reset_state()

    def _reset_state(self) -> None:
        self._isn: int | None = None
        self._origin: int | None = None
        self._joined = False
        self._anchored = False
        self._skipped = False
        self._synced = False
        self._read = 0
        self._head = bytearray()
        self._pieces = SegmentStore()
        self._starts: list[int] = []
        self._last_tag: int | None = None
        self._delivered: int | None = None
        self._last_data = -math.inf

    # ---------------------------------------------------------------- introspection

    @property
    def base_known(self) -> bool:
        """Whether offsets count from the SYN (else from the first data received)."""
        return self._isn is not None

    @property
    def joined_mid_stream(self) -> bool:
        """Whether the stream started without a SYN (offsets are then provisional)."""
        return self._joined

    @property
    def synced(self) -> bool:
        """Whether the read pointer is at a known frame boundary."""
        return self._synced

    @property
    def read_offset(self) -> int:
        """The read pointer: every byte before it was delivered, declared lost or skipped."""
        return self._read

    @property
    def delivered_offset(self) -> int | None:
        """Offset just past the last frame delivered (None before the first)."""
        return self._delivered

    @property
    def buffered_bytes(self) -> int:
        """Bytes held: after the read pointer, in order and out of order."""
        return len(self._head) + self._pieces.total

    @property
    def duplicate_bytes(self) -> int:
        """See :attr:`StreamStats.duplicate_bytes`."""
        return self._dup

    @property
    def stats(self) -> StreamStats:
        """All the counters."""
        return StreamStats(frames=self._frames, gaps=self._gaps, gap_bytes=self._gap_bytes,
                           duplicate_bytes=self._dup, discarded_bytes=self._discarded,
                           garbage_segments=self._garbage, anchors=self._anchors,
                           desyncs=self._desyncs, resets=self._resets)

    # ---------------------------------------------------------------- input and output

    def add(self, seq: int, payload: bytes, *, syn: bool = False, now: float) -> None:
        """Take one captured segment.

        Parameters
        ----------
        seq : int
            Its TCP sequence number.
        payload : bytes
            Its TCP payload (ignored on a SYN).
        syn : bool
            Whether it is a SYN (or SYN-ACK) of this direction.
        now : float
            Capture time, in seconds (any monotonic clock, the same as :meth:`poll`'s).
        """
        seq &= _MASK
        if syn:
            self._on_syn(seq)
        elif payload:
            if self._origin is None:
                self._origin = seq
                self._joined = True
            start = self._read + _signed(seq - self._origin - self._read)
            if start - self._read == -_HALF or start + len(payload) - self._read >= _HALF:
                self._garbage += 1
                return
            self._place(start, payload, now)
        self._advance(now, timeouts=False)

    def poll(self, now: float) -> list[Frame | Gap]:
        """Declare the holes that timed out; return what completed since the last poll.

        Parameters
        ----------
        now : float
            Current time, on the clock of :meth:`add`'s ``now``.

        Returns
        -------
        list of Frame or Gap
            In stream order.
        """
        self._advance(now, timeouts=True)
        out, self._out = self._out, []
        return out

    # ---------------------------------------------------------------- SYN handling

    def _on_syn(self, isn: int) -> None:
        if self._isn is not None:
            if isn != self._isn:
                self._restart(isn)
            return
        if self._origin is None:
            self._start(isn)
            return
        # Data came first. If it lies just after the SYN, the SYN was reordered behind its
        # own connection's data; otherwise a new connection began.
        delta = _signed(self._origin - ((isn + 1) & _MASK))
        if not 0 <= delta <= self._max:
            self._restart(isn)
        elif not self._anchored:
            self._rebase(isn, delta)
        # else: frames were delivered with provisional offsets already: keep them

    def _start(self, isn: int) -> None:
        self._isn = isn
        self._origin = (isn + 1) & _MASK
        self._joined = False
        self._read = 0
        self._synced = True

    def _restart(self, isn: int) -> None:
        self._resets += 1
        self._discarded += self.buffered_bytes
        self._reset_state()
        self._start(isn)

    def _rebase(self, isn: int, delta: int) -> None:
        """Count offsets from this late SYN, ``delta`` bytes before the provisional origin."""
        self._pieces.shift(delta)
        self._starts = [s + delta for s in self._starts]
        read = self._read + delta
        self._isn, self._origin, self._joined = isn, (isn + 1) & _MASK, False
        if self._skipped:
            # the scan already went past some data: go on anchoring from there, as a join
            self._read = read
            return
        if self._head:
            self._pieces.insert(read, bytes(self._head), self._last_data)
            self._head = bytearray()
        self._read = 0
        self._synced = True
        self._pull()

    # ---------------------------------------------------------------- storage

    def _place(self, start: int, payload: bytes, now: float) -> None:
        """Store a data segment at ``start``, keeping the first copy of every byte."""
        read = self._read
        if self._lengths is None and start >= read:
            k = bisect_left(self._starts, start)
            if k == len(self._starts) or self._starts[k] != start:
                self._starts.insert(k, start)
        first, end = start, start + len(payload)
        if end <= read:
            self._dup += len(payload)
            return
        if start < read:
            self._dup += read - start
            start = read
        head_end = read + len(self._head)
        if start < head_end:
            self._dup += min(end, head_end) - start
            if end <= head_end:
                return
            start = head_end
        data: bytes | memoryview = memoryview(payload)[start - first:] if start > first else payload
        if start == head_end and not self._pieces:
            self._head += data
            self._last_data = now
            return
        dup = self._pieces.insert(start, data, now)
        self._dup += dup
        if dup < len(data):
            self._last_data = now
        self._pull()

    def _pull(self) -> None:
        """Move the out-of-order ranges that became contiguous to the head."""
        pieces, head = self._pieces, self._head
        while pieces and pieces.first() == self._read + len(head):
            head += pieces.pop_first()[1]

    def _jump(self, offset: int) -> None:
        """Move the read pointer forward to ``offset``, dropping the bytes before it."""
        skip = offset - self._read
        if skip <= 0:
            return
        head = self._head
        if skip >= len(head):
            self._discarded += len(head)
            head.clear()
        else:
            self._discarded += skip
            del head[:skip]
        self._read = offset
        self._skipped = self._skipped or not self._synced
        self._discarded += self._pieces.drop_below(offset)
        self._prune_starts()
        self._pull()

    def _prune_starts(self) -> None:
        if self._starts and self._starts[0] < self._read:
            del self._starts[:bisect_left(self._starts, self._read)]

    def _peek(self, offset: int) -> bytes:
        """The bytes at ``offset`` that have arrived without a break, at most a header's."""
        rel = offset - self._read
        out = bytes(self._head[rel:rel + _HDR]) if rel >= 0 else b""
        offset += len(out)
        while len(out) < _HDR:
            hit = self._pieces.find(offset)
            if hit is None:
                break
            start, data = hit
            take = data[offset - start:offset - start + _HDR - len(out)]
            out += take
            offset += len(take)
        return out

    # ---------------------------------------------------------------- frames

    def _acceptable(self, tag: int, length: int) -> bool:
        if _HDR + length > self._max:
            return False
        if self._lengths is not None and length not in self._lengths:
            return False
        return bool(self._plausible(tag, length))

    def _hole_expired(self, now: float) -> bool:
        return now - self._pieces.oldest() >= self._timeout

    def _advance(self, now: float, *, timeouts: bool) -> None:
        """Deliver, declare gaps and anchor as far as the data and the clock allow."""
        while self._origin is not None:
            over = self.buffered_bytes > self._max
            if self._synced:
                self._parse()
                if not self._synced:
                    continue
                if self._pieces and (over or (timeouts and self._hole_expired(now))):
                    self._declare_gap(now, timeouts=timeouts)
                    continue
                return
            if self._scan(now, timeouts=timeouts, over=over):
                continue
            if self._pieces and (over or (timeouts and self._hole_expired(now))):
                self._jump(self._pieces.first())
                continue
            return

    def _parse(self) -> None:
        """Deliver the complete frames at the head (the read pointer is at a boundary)."""
        head = self._head
        pos, size = 0, len(head)
        while size - pos >= _HDR:
            tag, length = HEADER.unpack_from(head, pos)
            if not self._acceptable(tag, length):
                self._desyncs += 1
                self._synced = False
                break
            end = pos + _HDR + length
            if end > size:
                break
            self._out.append(Frame(self._read + pos, tag, bytes(head[pos + _HDR:end])))
            self._frames += 1
            self._last_tag = tag
            pos = end
        if pos:
            del head[:pos]
            self._read += pos
            self._delivered = self._read
            self._prune_starts()
        if not self._synced:
            self._jump(self._read + 1)

    def _declare_gap(self, now: float, *, timeouts: bool) -> None:
        """Give up the hole after the head: report it and resynchronise after it."""
        head, read = self._head, self._read
        start, end = read + len(head), self._pieces.first()
        boundary = None
        if len(head) >= _HDR:
            _, length = HEADER.unpack_from(head, 0)
            if read + _HDR + length >= end:
                boundary = read + _HDR + length
        self._gaps += 1
        self._gap_bytes += end - start
        last = self._last_tag
        if boundary is not None:
            self._jump(boundary)
        else:
            self._jump(end)
            self._synced = False
            self._scan(now, timeouts=timeouts, over=self.buffered_bytes > self._max)
        next_tag = None
        if self._synced:
            header = self._peek(self._read)
            if len(header) == _HDR:
                tag, length = HEADER.unpack(header)
                if self._acceptable(tag, length):
                    next_tag = tag
        self._out.append(Gap(start, end, last, next_tag))

    # ---------------------------------------------------------------- anchoring

    def _candidates(self) -> Iterator[int]:
        """Head positions where a header may start, in order, with the whole header present."""
        head = self._head
        size = len(head)
        if self._lengths is None:
            starts, read = self._starts, self._read
            for k in range(bisect_left(starts, read), len(starts)):
                pos = starts[k] - read
                if pos + _HDR > size:
                    return
                yield pos
            return
        pos = 0
        while True:
            best = -1
            for enc in self._encodings:
                found = head.find(enc, pos + 8, size if best < 0 else best + 7)
                if found >= 0:
                    best = found
            if best < 0:
                return
            yield best - 8
            pos = best - 7

    def _may_start_header(self, prefix: bytes) -> bool:
        """Whether the first bytes of a header, as far as they arrived, may be plausible."""
        if self._lengths is None or len(prefix) < 8:
            return True
        tag, rest = int.from_bytes(prefix[:8], "big"), prefix[8:]
        return any(enc.startswith(rest) and self._acceptable(tag, int.from_bytes(enc, "big"))
                   for enc in self._encodings)

    def _undecided(self, now: float, *, timeouts: bool, over: bool) -> str:
        """Why a candidate whose following header has not arrived need not wait any more.

        ``"gave-up"``: a hole after the head timed out (or memory is short), so that header
        may never arrive; ``"quiet"``: no data came for the hole timeout, the candidate may
        be the last frame of a burst; ``"wait"`` otherwise.
        """
        if over or (timeouts and self._pieces and self._hole_expired(now)):
            return "gave-up"
        if timeouts and not self._pieces and now - self._last_data >= self._timeout:
            return "quiet"
        return "wait"

    def _scan(self, now: float, *, timeouts: bool, over: bool) -> bool:
        """Look for a frame boundary in the head; True when the stream synchronised on one."""
        head, read = self._head, self._read
        why = ""
        for pos in self._candidates():
            tag, length = HEADER.unpack_from(head, pos)
            if not self._acceptable(tag, length):
                continue
            following = self._peek(read + pos + _HDR + length)
            if len(following) == _HDR:
                if not self._acceptable(*HEADER.unpack(following)):
                    continue
            elif not self._may_start_header(following):
                continue
            else:
                why = why or self._undecided(now, timeouts=timeouts, over=over)
                if why == "wait":
                    self._jump(read + pos)
                    return False
                if why == "gave-up" and pos + _HDR + length <= len(head):
                    # a complete frame that nothing confirms: better lost than wrong
                    continue
                # else the hole is inside the candidate frame: it is lost anyway, but its
                # header tells where the next frame starts (and a wrong one is caught there)
            self._jump(read + pos)
            self._synced = True
            self._anchors += 1
            if self._isn is None:
                self._anchored = True
            return True
        if len(head) >= _HDR:
            self._jump(read + len(head) - _HDR + 1)
        return False
