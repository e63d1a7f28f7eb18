"""Connecting to every lower mesh peer at once, in one poll loop (:mod:`workloads.handshake`).

One connection after the other, a worker waited for each peer to be scheduled, accept and
answer its hello before calling the next: with 1,024 workers on 2 cores each turn took
seconds, and 127 peers took longer than any start-up deadline. Here every attempt is a
non-blocking socket in one selector: connections are started together, each hello is sent
as its connection completes and each reply read as it comes. A peer not listening yet is
tried again after a pause doubling from :data:`RETRY_FIRST_S` to :data:`RETRY_MAX_S`; a
refusal, a malformed or missing reply ends the start-up with its reason, as before.
"""

from __future__ import annotations

import errno
import json
import os
import selectors
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from workloads.config import WorkloadConfig
from workloads.errors import PeerClosed, PeerTimeout, ProtocolError, TransportError
from workloads.framing import HEADER, HELLO_TAG, SMALL_BYTES, Connection
from workloads.plan import Rank

__all__ = ["HELLO_READ_BYTES", "RETRY_FIRST_S", "RETRY_MAX_S", "connect_all"]

#: the pause after a failed attempt, doubling up to the second: a peer slow to start is not
#: polled ten times a second (with 1,024 workers starting, a fixed 0.1 s cost a core)
RETRY_FIRST_S, RETRY_MAX_S = 0.05, 1.0
#: the longest wait in one poll, so that retries and deadlines are looked at
POLL_S = 1.0
#: a hello and its reply are a few hundred bytes: read them in small pieces (a 64 KiB read
#: allocates 64 KiB, and a worker's heap keeps what it freed: workloads.worker)
HELLO_READ_BYTES = 4096


@dataclass
class _Attempt:
    peer: Rank
    local: bool
    address: Any
    shown: str
    sock: socket.socket | None = None
    state: str = "idle"  # idle (until retry_at), connecting, hello (sent; reading the reply)
    retry_at: float = 0.0
    pause: float = RETRY_FIRST_S
    last: str = "no attempt"
    reply: bytearray = field(default_factory=bytearray)
    reply_wait: float = 0.0
    reply_by: float = 0.0


def connect_all(config: WorkloadConfig, me: Rank, peers: Sequence[Rank], deadline: float, *,
                address_of: Callable[[Rank], tuple[bool, Any, str]],
                setup: Callable[[socket.socket], None], hello: Callable[[Rank], bytes],
                hello_wait: Callable[[], float],
                connection: Callable[[socket.socket, Rank, bool], Connection]) -> dict[int, Connection]:
    """Connections to every one of ``peers`` by rank, made together (see the module).

    ``address_of(peer)`` is (over NVLink?, address, how to show it); ``setup(sock)``
    configures a connected socket; ``hello(peer)`` is the hello frame's payload;
    ``hello_wait()`` how long a reply may take; ``connection(sock, peer, local)`` wraps
    a connected, greeted socket. Raises TransportError: a peer refused, answered wrong or
    not within the wait, or could not be reached by ``deadline`` (the first such peer).
    """
    todo: dict[int, _Attempt] = {}
    for p in peers:
        local, address, shown = address_of(p)
        todo[p.rank] = _Attempt(p, local, address, shown)
    done: dict[int, Connection] = {}
    sel = selectors.DefaultSelector()

    def drop(a: _Attempt) -> None:
        if a.sock is not None:
            if a.state != "idle":
                sel.unregister(a.sock)
            a.sock.close()
            a.sock = None
        a.state = "idle"

    def retry(a: _Attempt, reason: str, now: float) -> None:
        drop(a)
        a.last, a.retry_at = reason, now + a.pause
        a.pause = min(2 * a.pause, RETRY_MAX_S)

    def start(a: _Attempt, now: float) -> None:
        sock = socket.socket(socket.AF_UNIX if a.local else socket.AF_INET, socket.SOCK_STREAM)
        a.sock = sock
        try:
            if config.sock_buf_bytes:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, config.sock_buf_bytes)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, config.sock_buf_bytes)
            if not a.local:
                sock.bind((me.ip, 0))
            sock.setblocking(False)
            err = sock.connect_ex(a.address)
        except OSError as exc:
            retry(a, exc.strerror or str(exc), now)
            return
        if err not in (0, errno.EINPROGRESS):  # refused, or a Unix listener's backlog full (EAGAIN)
            retry(a, os.strerror(err), now)
            return
        a.state = "connecting"
        sel.register(sock, selectors.EVENT_WRITE, a)

    def connected(a: _Attempt, now: float) -> None:
        sock = a.sock
        assert sock is not None
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            retry(a, os.strerror(err), now)
            return
        if not a.local and sock.getsockname() == sock.getpeername():
            retry(a, "self-connection", now)
            return
        setup(sock)  # TCP_NODELAY, congestion control (a TransportError ends the start-up)
        sock.setblocking(False)
        payload = hello(a.peer)
        frame = HEADER.pack(HELLO_TAG, len(payload)) + payload
        try:
            sent = sock.send(frame)
        except OSError as exc:
            raise PeerClosed(f"sending {len(frame)} bytes to {_who(a)}: {exc.strerror or exc}") from exc
        if sent != len(frame):  # a fresh socket's buffer takes far more than a hello
            raise PeerClosed(f"sending {len(frame)} bytes to {_who(a)}: only {sent} went")
        a.reply_wait = hello_wait()
        a.state, a.reply_by = "hello", now + a.reply_wait
        sel.modify(sock, selectors.EVENT_READ, a)

    def replied(a: _Attempt) -> None:
        sock = a.sock
        assert sock is not None
        try:
            chunk = sock.recv(HELLO_READ_BYTES)
        except BlockingIOError:
            return
        except OSError as exc:
            raise PeerClosed(f"receiving frame {HELLO_TAG:#x} from {_who(a)}: {exc.strerror or exc}") from exc
        if not chunk:
            raise PeerClosed(f"receiving frame {HELLO_TAG:#x} from {_who(a)}: the peer closed the connection")
        a.reply += chunk
        if len(a.reply) < HEADER.size:
            return
        tag, length = HEADER.unpack(a.reply[:HEADER.size])
        if tag != HELLO_TAG or length > SMALL_BYTES:
            raise ProtocolError(f"from {_who(a)}: expected a hello reply, got frame {tag:#x} of {length} bytes")
        if len(a.reply) < HEADER.size + length:
            return
        try:
            reply = json.loads(bytes(a.reply[HEADER.size:HEADER.size + length]))
        except ValueError as exc:
            raise ProtocolError(f"from {_who(a)}: a hello reply that is not JSON: {exc}") from exc
        if not reply.get("ok"):
            raise TransportError(f"rank {me.rank}: rank {a.peer.rank} at {a.shown} "
                                 f"refused the connection: {reply.get('error')}")
        sel.unregister(sock)
        sock.settimeout(config.timeout_s)
        done[a.peer.rank] = connection(sock, a.peer, a.local)
        a.sock = None
        del todo[a.peer.rank]

    try:
        while todo and (now := time.monotonic()) < deadline:
            for a in list(todo.values()):
                if a.state == "idle" and a.retry_at <= now:
                    start(a, now)
                elif a.state == "hello" and now > a.reply_by:
                    raise PeerTimeout(f"receiving frame {HELLO_TAG:#x} from {_who(a)}: no hello reply "
                                      f"within {a.reply_wait:g} s")
            wake = min([deadline, now + POLL_S] + [a.retry_at for a in todo.values() if a.state == "idle"])
            for key, _ in sel.select(max(0.0, wake - time.monotonic())):
                a = key.data
                if a.state == "connecting":
                    connected(a, time.monotonic())
                elif a.state == "hello":
                    replied(a)
        if todo:
            a = todo[min(todo)]
            raise TransportError(f"rank {me.rank} ({me.ip}): cannot connect to rank {a.peer.rank} at "
                                 f"{a.shown} within {config.start_timeout_s:g} s: {a.last}")
    except BaseException:
        for c in done.values():
            c.close()
        raise
    finally:
        for a in todo.values():
            drop(a)
        sel.close()
    return done


def _who(a: _Attempt) -> str:
    return f"rank {a.peer.rank} ({a.peer.ip})" + (" over NVLink" if a.local else "")
