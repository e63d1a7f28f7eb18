"""A set of byte ranges kept as sorted, disjoint, non-adjacent ``[start, end)`` intervals (pure).

>>> s = IntervalSet()
>>> s.add(10, 20); s.add(30, 40); s.add(20, 25)
[(10, 20)]
[(30, 40)]
[(20, 25)]
>>> s.intervals(), s.total
([(10, 25), (30, 40)], 25)
>>> s.missing(0, 45)
[(0, 10), (25, 30), (40, 45)]
>>> s.bytes_above(22)
13
>>> s.trim_below(12); s.intervals()
[(12, 25), (30, 40)]
"""

from __future__ import annotations

import bisect

__all__ = ["IntervalSet"]


class IntervalSet:
    """Sorted disjoint intervals; :meth:`add` returns the parts that were new."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self.total = 0

    def __len__(self) -> int:
        return len(self._starts)

    def __bool__(self) -> bool:
        return bool(self._starts)

    def intervals(self) -> list[tuple[int, int]]:
        """The intervals in order."""
        return list(zip(self._starts, self._ends, strict=True))

    def containing(self, x: int) -> tuple[int, int] | None:
        """The interval that holds byte ``x``, if any."""
        i = bisect.bisect_right(self._starts, x) - 1
        if i >= 0 and x < self._ends[i]:
            return self._starts[i], self._ends[i]
        return None

    def missing(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of ``[start, end)`` not in the set, in order."""
        out: list[tuple[int, int]] = []
        pos = start
        i = max(0, bisect.bisect_right(self._starts, start) - 1)
        while pos < end and i < len(self._starts):
            s, e = self._starts[i], self._ends[i]
            if e <= pos:
                i += 1
                continue
            if s >= end:
                break
            if s > pos:
                out.append((pos, s))
            pos = max(pos, e)
            i += 1
        if pos < end:
            out.append((pos, end))
        return out

    def add(self, start: int, end: int) -> list[tuple[int, int]]:
        """Add ``[start, end)``; the parts of it that were not in the set before."""
        if start >= end:
            return []
        new = self.missing(start, end)
        if not new:
            return new
        lo = bisect.bisect_left(self._ends, start)  # first interval ending at or after start
        hi = bisect.bisect_right(self._starts, end)  # intervals starting at or before end
        if lo < hi:
            start = min(start, self._starts[lo])
            end = max(end, self._ends[hi - 1])
        self._starts[lo:hi] = [start]
        self._ends[lo:hi] = [end]
        self.total += sum(e - s for s, e in new)
        return new

    def trim_below(self, x: int) -> None:
        """Forget every byte below ``x``."""
        while self._starts and self._starts[0] < x:
            if self._ends[0] <= x:
                self.total -= self._ends[0] - self._starts[0]
                del self._starts[0], self._ends[0]
            else:
                self.total -= x - self._starts[0]
                self._starts[0] = x

    def bytes_above(self, x: int) -> int:
        """How many bytes of the set lie at or above ``x``."""
        n = 0
        for i in range(len(self._starts) - 1, -1, -1):
            s, e = self._starts[i], self._ends[i]
            if e <= x:
                break
            n += e - max(s, x)
        return n
