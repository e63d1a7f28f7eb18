"""One step's sends, receives and relays at once, in the calling thread: a ``poll`` loop over
the step's sockets, every call non-blocking, no thread per transfer.

The mesh used to hand each transfer of a step to a thread pool and wait for the futures: at a
ring step's chunk sizes (tens to hundreds of KB) the hand-offs, wake-ups and GIL switches
cost more than the bytes (about 300 us of CPU per rank and step on loopback, 4.8 CPU-s per
GB at 64 KiB). Here a step is one loop:

- a **send** writes the frame's header and payload with ``sendmsg`` (scatter-gather, no copy
  of the payload), as much as the socket takes;
- a **receive** reads the header (checking the tag and the length: ranks out of step fail
  loudly), then the payload straight into the caller's buffer; the socket wakes the loop only
  once :data:`~workloads.framing.WAKE_BYTES` have arrived (``SO_RCVLOWAT``);
- a **relay** (PXN) moves a frame from one connection to another through a buffer, header
  first, piece by piece as each side allows.

A connection to a GPU of the same server (:class:`~workloads.nvlink.PacedConnection`) is
paced without sleeping the loop: after each piece its NVLink clock says when the next may go
(egress) or when what came may count as arrived (ingress), and the loop waits for the
earliest such time or a socket, whichever comes first.

Errors are those of :mod:`workloads.framing`, with the same messages: a peer that closed or
reset (``PeerClosed``), one making no progress for ``timeout_s`` (``PeerTimeout``), a frame
with the wrong tag or length (``ProtocolError``), a connection the mesh aborted.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Sequence
from typing import Any

from workloads.errors import PeerClosed, PeerTimeout, ProtocolError, TransportError
from workloads.framing import HEADER, PIECE_BYTES, Connection, _bytes
from workloads.nvlink import PacedConnection

__all__ = ["run_exchange"]

_FLAGS = socket.MSG_DONTWAIT
_IN, _OUT = select.POLLIN, select.POLLOUT
_BAD = select.POLLERR | select.POLLHUP | select.POLLNVAL


class _Op:
    """One transfer of the step; subclasses say what they wait for and do one move."""

    conn: Connection
    done = False
    #: CLOCK_MONOTONIC time before which the op may not move (an NVLink clock's)
    not_before = 0.0

    def wants(self, now: float) -> list[tuple[Connection, int]]:
        """The sockets it waits on now (none while its NVLink clock holds it)."""
        raise NotImplementedError

    def ready_at(self) -> float:
        """When a clock lets it move again (0: no clock holds it)."""
        return self.not_before

    def move(self, conn: Connection, events: int) -> bool:
        """Move what the socket allows; whether anything moved."""
        raise NotImplementedError

    def waiting(self) -> tuple[Connection, str]:
        """The connection it waits on and what for (for a timeout's message)."""
        raise NotImplementedError


def _fail(conn: Connection, exc: OSError, doing: str) -> TransportError:
    return conn._fail(exc, doing)


def _paced(conn: Connection) -> PacedConnection | None:
    return conn if isinstance(conn, PacedConnection) else None


class _Send(_Op):
    def __init__(self, conn: Connection, tag: int, payload: Any) -> None:
        self.conn = conn
        self.data = _bytes(payload)
        self.head = memoryview(HEADER.pack(tag, len(self.data)))
        self.sent = 0  # of header + payload
        self.total = len(self.head) + len(self.data)

    def wants(self, now: float) -> list[tuple[Connection, int]]:
        return [(self.conn, _OUT)] if now >= self.not_before else []

    def move(self, conn: Connection, events: int) -> bool:
        h = len(self.head)
        parts = ([self.head[self.sent:]] if self.sent < h else []) + \
            [self.data[max(0, self.sent - h):max(0, self.sent - h) + PIECE_BYTES]]
        paced = _paced(conn)
        if paced is not None:  # no more than a piece ahead of the NVLink's clock
            parts = _limit(parts, _NVLINK_PIECE)
        try:
            n = conn.sock.sendmsg(parts, [], _FLAGS)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            raise _fail(conn, exc, f"sending {len(self.data)} bytes to") from exc
        self.sent += n
        if paced is not None:
            self.not_before = paced.clock.reserve("egress", n)
        self.done = self.sent == self.total
        return n > 0

    def waiting(self) -> tuple[Connection, str]:
        return self.conn, f"sending {len(self.data)} bytes to"


class _Recv(_Op):
    def __init__(self, conn: Connection, tag: int, out: Any) -> None:
        self.conn, self.tag = conn, tag
        self.view = _bytes(out)
        self.head = bytearray(HEADER.size)
        self.got = 0  # of header + payload
        self.total = HEADER.size + len(self.view)
        self.arrived = 0.0  # when the last byte counts as arrived (the NVLink's ingress)

    def wants(self, now: float) -> list[tuple[Connection, int]]:
        if now < self.not_before:
            return []
        # wake once the rest of the header, or of the payload (up to WAKE_BYTES), is there
        h = HEADER.size
        self.conn.wake_at(h - self.got if self.got < h else self.total - self.got)
        return [(self.conn, _IN)]

    def move(self, conn: Connection, events: int) -> bool:
        h = HEADER.size
        what = f"frame {self.tag:#x}"
        if self.got < h:
            target = memoryview(self.head)[self.got:]
        else:
            at = self.got - h
            target = self.view[at:at + PIECE_BYTES]
        paced = _paced(conn)
        if paced is not None:
            target = target[:_NVLINK_PIECE]
        try:
            n = conn.sock.recv_into(target, len(target), _FLAGS)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            raise _fail(conn, exc, f"receiving {what} from") from exc
        if n == 0 and len(target):
            if conn.aborted is not None:
                raise TransportError(f"receiving {what} from {conn._who()}: aborted after: {conn.aborted}")
            raise PeerClosed(f"receiving {what} from {conn._who()}: it closed the connection "
                             "(it died, or failed and aborted)")
        before = self.got
        self.got += n
        if before < h <= self.got:
            got_tag, length = HEADER.unpack(self.head)
            if got_tag != self.tag:
                raise ProtocolError(f"from {conn._who()}: expected frame {self.tag:#x}, got {got_tag:#x} "
                                    "(ranks out of step)")
            if length != len(self.view):
                raise ProtocolError(f"from {conn._who()}: frame {self.tag:#x} has {length} bytes, "
                                    f"expected {len(self.view)}")
        if paced is not None:
            self.not_before = self.arrived = paced.clock.reserve("ingress", n)
        self.done = self.got == self.total
        return n > 0

    def waiting(self) -> tuple[Connection, str]:
        return self.conn, f"receiving frame {self.tag:#x} from"


class _Relay(_Op):
    """A frame from ``src`` to ``dst`` as it arrives (PXN)."""

    def __init__(self, src: Connection, dst: Connection, tag: int) -> None:
        self.conn, self.dst, self.tag = src, dst, tag
        self.head = bytearray(HEADER.size)
        self.head_got = 0
        self.left = -1  # payload bytes still to read from src (-1: header not read yet)
        self.buf = bytearray(PIECE_BYTES)
        self.lo = self.hi = 0  # what the buffer holds for dst
        self.out_head = 0  # header bytes already sent to dst
        self.src_ready_at = 0.0  # the NVLink clocks of a paced side
        self.dst_ready_at = 0.0

    def _reads(self) -> bool:
        return self.left != 0 and (self.left < 0 or self.hi < len(self.buf))

    def _writes(self) -> bool:
        return (self.left >= 0 and self.out_head < HEADER.size) or self.hi > self.lo

    def wants(self, now: float) -> list[tuple[Connection, int]]:
        out = []
        if self._reads() and now >= self.src_ready_at:
            self.conn.wake_at(HEADER.size - self.head_got if self.left < 0 else min(self.left, len(self.buf) - self.hi))
            out.append((self.conn, _IN))
        if self._writes() and now >= self.dst_ready_at:
            out.append((self.dst, _OUT))
        return out

    def ready_at(self) -> float:
        times = [t for t, on in ((self.src_ready_at, self._reads()), (self.dst_ready_at, self._writes())) if on]
        return min(times, default=0.0)

    def move(self, conn: Connection, events: int) -> bool:
        moved = False
        if conn is self.conn and events & (_IN | _BAD) and self._reads():
            moved |= self._read()
        if conn is self.dst and events & (_OUT | _BAD) and self._writes():
            moved |= self._write()
        self.done = self.left == 0 and self.lo == self.hi and self.out_head == HEADER.size
        return moved

    def _read(self) -> bool:
        src, what = self.conn, f"relayed frame {self.tag:#x}"
        if self.left < 0:
            target = memoryview(self.head)[self.head_got:]
        else:
            target = memoryview(self.buf)[self.hi:self.hi + self.left]
        if _paced(src) is not None:
            target = target[:_NVLINK_PIECE]
        try:
            n = src.sock.recv_into(target, len(target), _FLAGS)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            raise _fail(src, exc, f"receiving {what} from") from exc
        if n == 0 and len(target):
            raise PeerClosed(f"receiving {what} from {src._who()}: it closed the connection "
                             "(it died, or failed and aborted)")
        paced = _paced(src)
        if paced is not None:
            self.src_ready_at = paced.clock.reserve("ingress", n)
        if self.left < 0:
            self.head_got += n
            if self.head_got == HEADER.size:
                got_tag, length = HEADER.unpack(self.head)
                if got_tag != self.tag:
                    raise ProtocolError(f"from {src._who()}: expected frame {self.tag:#x}, got {got_tag:#x} "
                                        "(ranks out of step)")
                self.left = length
        else:
            self.hi += n
            self.left -= n
        return n > 0

    def _write(self) -> bool:
        dst = self.dst
        if self.out_head < HEADER.size:
            data = memoryview(self.head)[self.out_head:]
        else:
            data = memoryview(self.buf)[self.lo:self.hi]
        if _paced(dst) is not None:
            data = data[:_NVLINK_PIECE]
        try:
            n = dst.sock.send(data, _FLAGS)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            raise _fail(dst, exc, f"sending {len(data)} bytes to") from exc
        paced = _paced(dst)
        if paced is not None:
            self.dst_ready_at = paced.clock.reserve("egress", n)
        if self.out_head < HEADER.size:
            self.out_head += n
        else:
            self.lo += n
            if self.lo == self.hi:  # drained: the buffer fills from its start again
                self.lo = self.hi = 0
        return n > 0

    def waiting(self) -> tuple[Connection, str]:
        return (self.conn, f"receiving relayed frame {self.tag:#x} from") if self.left != 0 else \
            (self.dst, f"relaying frame {self.tag:#x} to")


#: a paced connection moves at most this much between two looks at its clock (1 MiB is 10 ms
#: of an NVLink of 8 x 100 Mbit/s: fine against a collective's steps, and few wake-ups)
_NVLINK_PIECE = 1 << 20


def _limit(parts: list[memoryview], n: int) -> list[memoryview]:
    out, left = [], n
    for p in parts:
        if left <= 0:
            break
        out.append(p[:left])
        left -= len(out[-1])
    return out


def run_exchange(sends: Sequence[tuple[Connection, int, Any]], recvs: Sequence[tuple[Connection, int, Any]],
                 relays: Sequence[tuple[Connection, Connection, int]], timeout_s: float) -> None:
    """Run a step's transfers to completion in this thread; raise the first error (the
    caller aborts the mesh). Each connection is given as the one to use (mirrored legs
    resolved by the caller)."""
    ops: list[_Op] = [_Send(c, t, b) for c, t, b in sends] + [_Recv(c, t, o) for c, t, o in recvs] + \
        [_Relay(a, b, t) for a, b, t in relays]
    conns = list({id(c): c for op in ops for c in (op.conn, getattr(op, "dst", op.conn))}.values())
    # non-blocking for the loop: a socket with a timeout makes Python wait for writability
    # (poll) before each send, whatever the flags say, and a Unix socket reports it only once
    # three quarters of its buffer are free: two ranks sending to each other would both wait
    for c in conns:
        if c.sock.fileno() >= 0:
            c.sock.setblocking(False)
    try:
        _loop(ops, timeout_s)
    finally:
        for c in conns:
            if c.sock.fileno() >= 0:
                c.sock.settimeout(c.timeout_s)


def _loop(ops: list[_Op], timeout_s: float) -> None:
    poller = select.poll()
    registered: dict[int, int] = {}
    last_progress = time.monotonic()
    while True:
        pending = [op for op in ops if not op.done]
        now = time.monotonic()
        if not pending:
            late = max((op.arrived for op in ops if isinstance(op, _Recv)), default=0.0)
            if late > now:  # the last bytes count as arrived when the NVLink delivers them
                time.sleep(late - now)
            return
        wanted: dict[int, int] = {}
        owners: dict[int, list[tuple[_Op, Connection]]] = {}
        paused = []
        for op in pending:
            for conn, ev in op.wants(now):
                fd = conn.sock.fileno()
                if fd < 0:
                    raise TransportError(f"the connection to {conn._who()} is closed"
                                         + (f": aborted after: {conn.aborted}" if conn.aborted else ""))
                wanted[fd] = wanted.get(fd, 0) | ev
                owners.setdefault(fd, []).append((op, conn))
            if op.ready_at() > now:
                paused.append(op.ready_at())
        for fd in list(registered):
            if fd not in wanted:
                poller.unregister(fd)
                del registered[fd]
        for fd, ev in wanted.items():
            if registered.get(fd) != ev:
                poller.register(fd, ev)
                registered[fd] = ev
        deadline = last_progress + timeout_s
        wait = deadline - now
        if paused:
            wait = min(wait, min(paused) - now)
        if wait <= 0 and not paused:
            conn, doing = next(op for op in pending).waiting()
            raise PeerTimeout(f"{doing} {conn._who()}: no progress for {timeout_s:g} s")
        if wanted:
            events = poller.poll(max(0.0, wait) * 1000)
        else:  # only clocks to wait for
            time.sleep(max(0.0, wait))
            events = []
        moved = False
        for fd, ev in events:
            for op, conn in owners.get(fd, ()):
                if not op.done:
                    moved |= op.move(conn, ev)
        if moved or (paused and time.monotonic() >= min(paused)):
            last_progress = time.monotonic()
