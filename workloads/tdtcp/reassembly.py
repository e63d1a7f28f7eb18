"""The receiver's side of one connection: in-order reassembly, SACK blocks, window (pure).

>>> r = Reassembly(window=1 << 20)
>>> r.on_data(0, b"ab")
([b'ab'], 'in_order')
>>> r.on_data(4, b"ef", fin=True)
([], 'out_of_order')
>>> r.sack_blocks(), r.rcv_nxt, r.complete
(((4, 6),), 2, False)
>>> r.on_data(2, b"cd")
([b'cd', b'ef'], 'in_order')
>>> r.sack_blocks(), r.rcv_nxt, r.complete
((), 6, True)
"""

from __future__ import annotations

from typing import Literal

from workloads.tdtcp.intervals import IntervalSet
from workloads.tdtcp.wire import MAX_SACK_BLOCKS

__all__ = ["Arrival", "Reassembly"]

Arrival = Literal["in_order", "out_of_order", "duplicate", "beyond_window"]
_RECENT = 8


class Reassembly:
    """Bytes delivered in order from ``rcv_nxt`` on, and what waits above it.

    ``window`` is the advertised window: the sender may send up to ``rcv_nxt + window``, so
    it also bounds the bytes held out of order. The first SACK block holds the most recent out-of-order arrival (RFC 2018); the
    others are the next most recent, then the lowest ones, at most four in all.
    """

    def __init__(self, window: int) -> None:
        self.window = window
        self.rcv_nxt = 0
        self.fin_seq: int | None = None
        self._held: dict[int, bytes] = {}
        self._ranges = IntervalSet()
        self._recent: list[int] = []

    @property
    def complete(self) -> bool:
        """The last segment arrived and every byte before it was delivered."""
        return self.fin_seq is not None and self.rcv_nxt >= self.fin_seq

    @property
    def held(self) -> int:
        """Bytes held out of order."""
        return self._ranges.total

    @property
    def rwnd(self) -> int:
        """The receive window to advertise, in bytes above ``rcv_nxt``."""
        return self.window

    def on_data(self, seq: int, payload: bytes | memoryview, *, fin: bool = False) -> tuple[list[bytes], Arrival]:
        """One segment arrived: the chunks now deliverable in order, and what the arrival was."""
        end = seq + len(payload)
        if fin:
            self.fin_seq = end if self.fin_seq is None else self.fin_seq
        if self.fin_seq is not None and end > self.fin_seq:
            end = self.fin_seq  # nothing exists after the last segment
        if end <= self.rcv_nxt:
            return [], "duplicate"
        lo = max(seq, self.rcv_nxt)
        if lo == self.rcv_nxt and not self._held:  # the common case: the next bytes, nothing held
            self.rcv_nxt = end
            return [bytes(payload[lo - seq:end - seq])], "in_order"
        if lo > self.rcv_nxt and end - self.rcv_nxt > self.window + len(payload):
            return [], "beyond_window"
        new = self._ranges.add(lo, end)
        for a, b in new:
            self._held[a] = bytes(payload[a - seq:b - seq])
        if lo > self.rcv_nxt:
            if seq in self._recent:
                self._recent.remove(seq)
            self._recent.insert(0, seq)
            del self._recent[_RECENT:]
            return [], ("out_of_order" if new else "duplicate")
        out = []
        while (chunk := self._held.pop(self.rcv_nxt, None)) is not None:
            out.append(chunk)
            self.rcv_nxt += len(chunk)
        self._ranges.trim_below(self.rcv_nxt)
        self._recent = [s for s in self._recent if s >= self.rcv_nxt]
        return out, "in_order"

    def sack_blocks(self) -> tuple[tuple[int, int], ...]:
        """Up to four SACK blocks above ``rcv_nxt``: the most recent first."""
        out: list[tuple[int, int]] = []
        for s in self._recent:
            blk = self._ranges.containing(s)
            if blk is not None and blk not in out:
                out.append(blk)
            if len(out) == MAX_SACK_BLOCKS:
                return tuple(out)
        for blk in self._ranges.intervals():
            if len(out) == MAX_SACK_BLOCKS:
                break
            if blk not in out:
                out.append(blk)
        return tuple(out)
