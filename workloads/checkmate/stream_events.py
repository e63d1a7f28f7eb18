"""What a :class:`~workloads.checkmate.reassembly.FrameStream` hands out: frames, gaps, and
its counters; and the frame header both sides of a mirrored connection use."""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["HEADER", "Frame", "Gap", "StreamStats"]

HEADER = struct.Struct("!QQ")
"""Frame header, (tag, payload length): the same layout as :data:`workloads.framing.HEADER`."""

_HDR = HEADER.size


@dataclass(frozen=True)
class Frame:
    """A complete frame.

    Attributes
    ----------
    offset : int
        Stream offset of its header.
    tag : int
        Its tag.
    payload : bytes
        Its payload.
    """

    offset: int
    tag: int
    payload: bytes

    @property
    def end(self) -> int:
        """Stream offset just past the frame."""
        return self.offset + _HDR + len(self.payload)


@dataclass(frozen=True)
class Gap:
    """Bytes that will never arrive: the frames they touched are lost.

    Attributes
    ----------
    start, end : int
        The missing stream bytes ``[start, end)`` that made the stream give up. Further holes
        inside the frames already lost, or met while re-anchoring after the gap, are not
        reported again.
    last_tag : int or None
        Tag of the last frame delivered before the gap (None if none was).
    next_tag : int or None
        Tag of the header the stream resynchronised on, when that header had already arrived
        when the gap was declared; None otherwise. Informational: that frame may still be
        lost to a later gap, the items that follow in :meth:`FrameStream.poll` tell.
    """

    start: int
    end: int
    last_tag: int | None
    next_tag: int | None

    @property
    def size(self) -> int:
        """Number of missing bytes."""
        return self.end - self.start


@dataclass(frozen=True)
class StreamStats:
    """Counters of one :class:`FrameStream` (cumulative over resets).

    Attributes
    ----------
    frames : int
        Frames delivered.
    gaps : int
        Gaps declared.
    gap_bytes : int
        Missing bytes the gaps reported.
    duplicate_bytes : int
        Received bytes not stored because they were already buffered or lay behind the read
        pointer (already delivered, declared lost, or skipped while anchoring).
    discarded_bytes : int
        Stored bytes dropped without being delivered (rest of lost frames, data scanned
        while anchoring, buffers dropped by a reset).
    garbage_segments : int
        Segments dropped because they lay 2**31 or more away from the read pointer.
    anchors : int
        Frame boundaries found by scanning.
    desyncs : int
        Implausible headers met at a supposed frame boundary (the stream then re-anchors).
    resets : int
        Times a new SYN restarted the stream.
    """

    frames: int
    gaps: int
    gap_bytes: int
    duplicate_bytes: int
    discarded_bytes: int
    garbage_segments: int
    anchors: int
    desyncs: int
    resets: int
