"""BMv2's pool of packet header vectors, so that stale header fields match BMv2's.

simple_switch gives each packet a PHV from a LIFO pool and puts it back when the packet is
dropped or transmitted. Between packets it only marks the headers invalid (and resets
varbit lengths and stack indices); receiving a packet zeroes the metadata. So a program that
reads a field of a header the current packet does not have sees what the last packet to
use that PHV left there: P4_16 leaves the value unspecified, and this target promises
BMv2's. The pool hands out the ``values`` lists of :class:`pybmv2.state.PacketState`.
"""

from __future__ import annotations

from pybmv2.layout import PhvLayout

__all__ = ["PhvPool"]


class PhvPool:
    """Field storage for packets, reused most-recently-released first.

    Examples
    --------
    >>> from pybmv2.layout import PhvLayout
    >>> pool = PhvPool(PhvLayout(num_fields=2))
    >>> a = pool.take(); a[:] = [7, 8]; pool.give(a)
    >>> pool.take()
    [7, 8]
    >>> pool.give([1, 2, 3]); len(pool)  # not this program's storage
    0
    """

    def __init__(self, layout: PhvLayout) -> None:
        self._size = layout.num_fields
        self._free: list[list[int]] = []
        #: the metadata slots as contiguous runs, zeroed with one slice assignment each
        self._metadata_runs: list[tuple[int, int]] = []
        for i in layout.metadata_slots():
            if self._metadata_runs and self._metadata_runs[-1][1] == i:
                self._metadata_runs[-1] = (self._metadata_runs[-1][0], i + 1)
            else:
                self._metadata_runs.append((i, i + 1))
        self._zeros = [0] * self._size
        #: (varbit value slot, length slot) of every varbit header: reset on release
        self._varbits = [(hl.fields[i].index, hl.length_index) for hl in layout.headers
                         if hl.length_index is not None
                         for i, f in enumerate(hl.fields) if f.varbit]
        #: per header id: its slots (fields, varbit length) and whether it is metadata
        self._spans = [(hl.first_index, hl.first_index + hl.nslots, hl.metadata)
                       for hl in layout.headers]

    def take(self) -> list[int]:
        """Storage for a new packet: stale header fields, zeroed metadata."""
        values = self._free.pop() if self._free else [0] * self._size
        zeros = self._zeros
        for start, end in self._metadata_runs:
            values[start:end] = zeros[start:end]
        return values

    def take_copy(self, values: list[int], valid: list[bool]) -> list[int]:
        """Storage for a copy of a packet (BMv2's ``clone_with_phv``): the fields of its valid
        headers and its metadata are copied, the other headers' fields stay stale."""
        out = self._free.pop() if self._free else [0] * self._size
        for hid, (start, end, metadata) in enumerate(self._spans):
            if metadata or valid[hid]:
                out[start:end] = values[start:end]
        return out

    def give(self, values: list[int]) -> None:
        """A packet is done with ``values`` (dropped, transmitted or copied away). Storage
        of another layout (a packet that outlived a pipeline swap) is not kept."""
        if len(values) != self._size:
            return
        for value, length in self._varbits:
            values[value] = values[length] = 0
        self._free.append(values)

    def __len__(self) -> int:
        return len(self._free)
