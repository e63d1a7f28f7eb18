"""The records the engine leaves for Python after a batch (or sends up from its I/O
thread): digests, and the faults that dropped packets.

A record is u64 words ``[learn id, n, (low, high) x n]``. A fault record (learn id
``FAULT_RECORD``, which no learn list has) carries the stack's next index, where the packet
was (bit 0: egress; bit 1: the index is unsigned) and the index: the Python engine's
:class:`~pybmv2.errors.PacketError` for a run-time stack index out of bounds, which it logs
as it drops the packet.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["FAULT_RECORD", "Fault", "decode_records"]

log = logging.getLogger(__name__)

#: NX_FAULT_RECORD (rt_pkt.h)
FAULT_RECORD = 1 << 32


@dataclass(frozen=True, slots=True)
class Fault:
    """A packet dropped because a run-time index was out of bounds of a stack."""

    stack: str
    size: int
    index: int
    egress: bool

    def message(self) -> str:
        """The Python engine's log line for the same drop.

        >>> Fault("mpls", 4, 7, False).message()
        "index 7 out of bounds of header stack 'mpls' (size 4): packet dropped in ingress (BMv2 aborts here)"
        """
        where = "egress" if self.egress else "ingress"
        return (f"index {self.index} out of bounds of header stack {self.stack!r} (size "
                f"{self.size}): packet dropped in {where} (BMv2 aborts here)")


def decode_records(raw: bytes, learn_signed: Mapping[int, Sequence[bool]],
                   stacks: Sequence[tuple[str, int]]
                   ) -> tuple[list[tuple[int, tuple[int, ...]]], list[Fault]]:
    """The digests (learn list id, values) and the faults in ``raw``.

    ``learn_signed`` gives each learn list's fields' signedness, ``stacks`` the (name,
    size) of every stack by its next index.
    """
    digests: list[tuple[int, tuple[int, ...]]] = []
    faults: list[Fault] = []
    words = memoryview(raw).cast("Q").tolist()
    at = 0
    while at < len(words):
        lid, n = words[at], words[at + 1]
        signed = learn_signed.get(lid, ())
        values = []
        for i in range(n):
            v = words[at + 2 + 2 * i] | (words[at + 3 + 2 * i] << 64)
            if (signed[i] if i < len(signed) else False) and v >> 127:
                v -= 1 << 128
            values.append(v)
        at += 2 + 2 * n
        if lid != FAULT_RECORD:
            digests.append((lid, tuple(values)))
            continue
        sid, flags, index = values
        if not flags & 2 and index >> 127:
            index -= 1 << 128
        name, size = stacks[sid] if sid < len(stacks) else (f"#{sid}", 0)
        faults.append(Fault(name, size, index, bool(flags & 1)))
    return digests, faults
