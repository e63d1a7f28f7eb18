"""Out-of-order byte ranges of one stream, by stream offset, with their arrival times.

:class:`SegmentStore` keeps the bytes a :class:`~workloads.checkmate.reassembly.FrameStream`
has received but not parsed yet: disjoint ranges sorted by start (a new segment stores
only its bytes not already held), the first one popped in O(1).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

__all__ = ["SegmentStore"]

_COMPACT_MIN = 64


class SegmentStore:
    """Disjoint out-of-order byte ranges, sorted by start; the first one pops in O(1)."""

    __slots__ = ("_data", "_lo", "_starts", "_when", "total")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._data: list[bytes] = []
        self._when: list[float] = []
        self._lo = 0
        self.total = 0

    def __bool__(self) -> bool:
        return self._lo < len(self._starts)

    def first(self) -> int:
        """Start of the first range (the store must not be empty)."""
        return self._starts[self._lo]

    def pop_first(self) -> tuple[int, bytes]:
        """Remove and return the first range."""
        i = self._lo
        start, data = self._starts[i], self._data[i]
        self._data[i] = b""
        self._lo += 1
        self.total -= len(data)
        if self._lo >= _COMPACT_MIN and 2 * self._lo >= len(self._starts):
            self._compact()
        return start, data

    def _compact(self) -> None:
        del self._starts[:self._lo], self._data[:self._lo], self._when[:self._lo]
        self._lo = 0

    def insert(self, start: int, payload: bytes | memoryview, when: float) -> int:
        """Store the new bytes of ``payload`` (at ``start``); return how many were already stored."""
        starts, data = self._starts, self._data
        end = start + len(payload)
        cur, dup = start, 0
        i = bisect_right(starts, start, self._lo) - 1
        if i >= self._lo:
            prev_end = starts[i] + len(data[i])
            if prev_end > cur:
                dup += min(prev_end, end) - cur
                cur = prev_end
        fresh: list[tuple[int, int]] = []
        j = i + 1
        while cur < end:
            if j < len(starts) and starts[j] < end:
                piece_start = starts[j]
                piece_end = piece_start + len(data[j])
                if piece_start > cur:
                    fresh.append((cur, piece_start))
                dup += min(piece_end, end) - piece_start
                cur = max(cur, piece_end)
                j += 1
            else:
                fresh.append((cur, end))
                cur = end
        for a, b in fresh:
            k = bisect_left(starts, a, self._lo)
            starts.insert(k, a)
            data.insert(k, bytes(payload[a - start:b - start]))
            self._when.insert(k, when)
            self.total += b - a
        return dup

    def drop_below(self, offset: int) -> int:
        """Forget the bytes before ``offset``; return how many were stored."""
        dropped = 0
        while self and self._starts[self._lo] < offset:
            start, data = self._starts[self._lo], self._data[self._lo]
            if start + len(data) <= offset:
                self.pop_first()
                dropped += len(data)
            else:
                cut = offset - start
                self._starts[self._lo] = offset
                self._data[self._lo] = data[cut:]
                self.total -= cut
                dropped += cut
                break
        return dropped

    def find(self, offset: int) -> tuple[int, bytes] | None:
        """The range holding ``offset``, if any."""
        i = bisect_right(self._starts, offset, self._lo) - 1
        if i >= self._lo and offset < self._starts[i] + len(self._data[i]):
            return self._starts[i], self._data[i]
        return None

    def oldest(self) -> float:
        """Earliest arrival time among the stored ranges (the store must not be empty)."""
        return min(self._when[self._lo:])

    def shift(self, delta: int) -> None:
        """Add ``delta`` to every offset."""
        self._compact()
        self._starts = [s + delta for s in self._starts]
