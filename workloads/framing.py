"""Framed messages over one TCP connection, with a progress timeout on every call.

Frames are a 16-byte header, ``!QQ`` = (tag, payload length), then the payload. The tag
names the collective call and its step (:func:`make_tag`), so that ranks out of step fail
loudly instead of reducing the wrong data. Payloads go straight between the socket and numpy
buffers (``send`` / ``recv_into`` on memoryviews, no copies).

Every socket has ``timeout_s``: the longest a single ``send`` or ``recv_into`` may wait for
progress. A dead peer (reset or closed connection) fails at once, a hung one after
``timeout_s``. ``socket.sendall`` is not used for payloads because since Python 3.5 its
timeout bounds the whole call, which would fail long transfers over slow emulated links.
"""

from __future__ import annotations

import logging
import socket
import struct
from typing import Any

import numpy as np

from workloads.errors import PeerClosed, PeerTimeout, ProtocolError, TransportError
from workloads.plan import Rank

__all__ = ["HEADER", "HELLO_TAG", "PIECE_BYTES", "SMALL_BYTES", "Connection", "make_tag"]

log = logging.getLogger(__name__)

HEADER = struct.Struct("!QQ")
HELLO_TAG = (1 << 64) - 1
PIECE_BYTES = 1 << 20
"""Largest slice handed to one ``send``; also the relay's (PXN) forwarding granularity."""
SMALL_BYTES = 64 << 10
WAKE_BYTES = 256 << 10
"""A receiver blocked on a frame wakes when this much of it has arrived (``SO_RCVLOWAT``),
not at every segment: per-segment wake-ups of 16 workers cost more of the machine than the
bytes themselves (at 100 Mbit/s, 64 KiB wake-ups were most of the workers' Python). 256 KiB
keeps a slow link's progress visible well inside any progress timeout (one wake-up per
256 KiB is 2 s at 1 Mbit/s)."""


def make_tag(cid: int, step: int) -> int:
    """The tag of step ``step`` of collective call number ``cid``.

    >>> hex(make_tag(3, 5))
    '0x300005'
    """
    return (cid << 20) | step


def _bytes(buf: Any) -> memoryview:
    """A flat byte view of a contiguous numpy array or bytes-like object."""
    if isinstance(buf, np.ndarray):
        if not buf.flags.c_contiguous:
            raise ValueError("buffers must be C-contiguous")
        return memoryview(buf.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
    return memoryview(buf).cast("B")


class Connection:
    """One TCP connection to ``peer``; framed, with a progress timeout on every call."""

    def __init__(self, sock: socket.socket, me: Rank, peer: Rank, timeout_s: float) -> None:
        self.sock, self.me, self.peer, self.timeout_s = sock, me, peer, timeout_s
        self.aborted: str | None = None
        self._lowat = 1

    def wake_at(self, nbytes: int) -> None:
        """Wake the next receive once ``nbytes`` have arrived (at most :data:`WAKE_BYTES`)."""
        want = max(1, min(nbytes, WAKE_BYTES))
        if want != self._lowat:
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, want)
            except OSError as exc:  # closed or aborted: the receive itself says why
                log.debug("SO_RCVLOWAT on %s: %s", self._who(), exc)
                return
            self._lowat = want

    def _who(self) -> str:
        return f"rank {self.peer.rank} ({self.peer.ip})"

    def _fail(self, exc: OSError, doing: str) -> TransportError:
        if self.aborted is not None:
            return TransportError(f"{doing} {self._who()}: aborted after: {self.aborted}")
        if isinstance(exc, TimeoutError):
            return PeerTimeout(f"{doing} {self._who()}: no progress for {self.timeout_s:g} s")
        return PeerClosed(f"{doing} {self._who()}: {exc.strerror or exc}")

    def send_all(self, data: memoryview) -> None:
        off, size = 0, len(data)
        while off < size:
            try:
                off += self.sock.send(data[off:off + PIECE_BYTES])
            except OSError as exc:
                raise self._fail(exc, f"sending {size} bytes to") from exc

    def recv_some(self, view: memoryview, what: str) -> int:
        """Receive into ``view``: wakes once ``len(view)`` bytes (at most :data:`WAKE_BYTES`)
        have arrived, or the peer closed."""
        self.wake_at(len(view))
        try:
            n = self.sock.recv_into(view)
        except OSError as exc:
            raise self._fail(exc, f"receiving {what} from") from exc
        if n == 0 and len(view):
            if self.aborted is not None:
                raise TransportError(f"receiving {what} from {self._who()}: aborted after: {self.aborted}")
            raise PeerClosed(f"receiving {what} from {self._who()}: it closed the connection "
                             "(it died, or failed and aborted)")
        return n

    def recv_exact(self, view: memoryview, what: str) -> None:
        got = 0
        while got < len(view):
            got += self.recv_some(view[got:], what)

    def send_frame(self, tag: int, payload: Any = b"") -> None:
        data = _bytes(payload)
        head = HEADER.pack(tag, len(data))
        if len(data) <= SMALL_BYTES:
            self.send_all(memoryview(head + data.tobytes()))
        else:
            self.send_all(memoryview(head))
            self.send_all(data)

    def recv_header(self, tag: int) -> int:
        head = bytearray(HEADER.size)
        self.recv_exact(memoryview(head), f"frame {tag:#x}")
        got_tag, length = HEADER.unpack(head)
        if got_tag != tag:
            raise ProtocolError(f"from {self._who()}: expected frame {tag:#x}, got {got_tag:#x} "
                                "(ranks out of step)")
        return int(length)

    def recv_frame_into(self, tag: int, out: Any) -> None:
        view = _bytes(out)
        length = self.recv_header(tag)
        if length != len(view):
            raise ProtocolError(f"from {self._who()}: frame {tag:#x} has {length} bytes, "
                                f"expected {len(view)}")
        self.recv_exact(view, f"frame {tag:#x}")

    def recv_frame(self, tag: int, limit: int = SMALL_BYTES) -> bytes:
        """A whole (small) frame as bytes; longer than ``limit`` is a ProtocolError."""
        length = self.recv_header(tag)
        if length > limit:
            raise ProtocolError(f"from {self._who()}: frame {tag:#x} of {length} bytes, "
                                f"more than the {limit} expected")
        out = bytearray(length)
        self.recv_exact(memoryview(out), f"frame {tag:#x}")
        return bytes(out)

    def shutdown(self, reason: str) -> None:
        self.aborted = reason
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError as exc:  # already closed by the peer: nothing left to unblock
            log.debug("shutdown of %s: %s", self._who(), exc)

    def close(self) -> None:
        self.sock.close()
