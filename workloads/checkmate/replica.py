"""The shadow's pure side: mirrored frames in, whole reduced gradients out, holes found.

A mirrored frame's tag is ``make_tag(cid, step)``; the trainer numbers its collectives so
that ``cid // CIDS_PER_ITERATION`` is the iteration and the all-gather is collective
``ALLGATHER_CID`` of it. The leg and the step give the chunk
(:class:`~workloads.checkmate.capture_plan.CaptureLeg`), the chunk bounds give where it
goes. An iteration is complete when every chunk has arrived.

Streams deliver frames in order, so when iteration ``x`` is incomplete while ``x + 1`` is
complete, the data of ``x`` will never come: ``x`` has a hole (:meth:`GradientAssembler.stalled`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workloads.checkmate.capture_plan import CaptureLeg, CapturePlan
from workloads.checkmate.training import CIDS_PER_ITERATION
from workloads.collectives import chunk_bounds
from workloads.errors import ProtocolError

__all__ = ["ALLGATHER_CID", "FrameInfo", "GradientAssembler", "decode_tag"]

#: the all-gather is the third collective of an iteration: barrier, reduce-scatter, all-gather
ALLGATHER_CID = 3
_STEP_BITS = 20


@dataclass(frozen=True)
class FrameInfo:
    iteration: int
    step: int
    chunk: int


def decode_tag(leg: CaptureLeg, tag: int) -> FrameInfo | None:
    """Where a mirrored frame of ``leg`` belongs; None when the tag is not an all-gather send
    that this leg mirrors.

    >>> leg = CaptureLeg(3, 0, 3, (0, 1, 2), (3, 2, 1), False)
    >>> decode_tag(leg, ((5 * 8 + 3) << 20) | 1)
    FrameInfo(iteration=5, step=1, chunk=2)
    >>> decode_tag(leg, ((5 * 8 + 2) << 20) | 1) is None   # a reduce-scatter tag
    True
    """
    cid, step = tag >> _STEP_BITS, tag & ((1 << _STEP_BITS) - 1)
    if cid % CIDS_PER_ITERATION != ALLGATHER_CID or step not in leg.steps:
        return None
    return FrameInfo(cid // CIDS_PER_ITERATION, step, leg.chunk_at(step))


class GradientAssembler:
    """Chunks of the iterations not applied yet, by iteration; bounded by :meth:`drop_through`."""

    def __init__(self, plan: CapturePlan, size: int) -> None:
        self.plan, self.size = plan, size
        self.bounds = chunk_bounds(size, plan.chunks)
        self._chunks: dict[int, dict[int, bytes]] = {}
        self.frame_bytes: dict[int, int] = {}

    def chunk_bytes(self, chunk: int) -> int:
        a, b = self.bounds[chunk]
        return 4 * (b - a)

    def lengths(self, leg: CaptureLeg) -> set[int]:
        """The payload lengths ``leg``'s frames can have."""
        return {self.chunk_bytes(c) for c in leg.chunks}

    def plausible(self, leg: CaptureLeg, tag: int, length: int) -> bool:
        info = decode_tag(leg, tag)
        return info is not None and length == self.chunk_bytes(info.chunk)

    def add(self, leg: CaptureLeg, tag: int, payload: bytes) -> int | None:
        """Store one frame; its iteration (None for a frame that is not mirrored data, which
        is ignored). A frame of the wrong size is a ProtocolError."""
        info = decode_tag(leg, tag)
        if info is None:
            return None
        if len(payload) != self.chunk_bytes(info.chunk):
            raise ProtocolError(f"iteration {info.iteration} chunk {info.chunk}: {len(payload)} bytes, "
                                f"expected {self.chunk_bytes(info.chunk)}")
        self._chunks.setdefault(info.iteration, {})[info.chunk] = payload
        self.frame_bytes[info.iteration] = self.frame_bytes.get(info.iteration, 0) + 16 + len(payload)
        return info.iteration

    def complete(self, iteration: int) -> bool:
        return len(self._chunks.get(iteration, ())) == self.plan.chunks

    def seen(self) -> list[int]:
        """Iterations with at least one chunk, in order."""
        return sorted(self._chunks)

    def take(self, iteration: int) -> np.ndarray:
        """The reduced gradient of a complete iteration (float32), removed from the buffers."""
        chunks = self._chunks.pop(iteration)
        out = np.empty(self.size, dtype=np.float32)
        for c, (a, b) in enumerate(self.bounds):
            out[a:b] = np.frombuffer(chunks[c], dtype=np.float32)
        return out

    def stalled(self, next_iteration: int) -> bool:
        """True when ``next_iteration`` can never complete: a later one already has."""
        return not self.complete(next_iteration) and any(
            i > next_iteration and self.complete(i) for i in self._chunks)

    def drop_through(self, iteration: int) -> list[int]:
        """Forget every iteration up to ``iteration``; the incomplete ones dropped."""
        gone = [i for i in self._chunks if i <= iteration]
        lost = [i for i in gone if not self.complete(i)]
        for i in gone:
            del self._chunks[i]
        return sorted(lost)

    def buffered_bytes(self) -> int:
        return sum(len(p) for chunks in self._chunks.values() for p in chunks.values())
