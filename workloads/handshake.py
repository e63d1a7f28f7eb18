"""Connecting the mesh at start-up: connect to the lower peers, accept the higher ones.

Rank ``k`` listens on ``(ip_k, port + k)``. Every rank connects to its lower mesh peers
(:func:`workloads.plan.mesh_peers`) with the socket's source bound to its own address (the
fat-tree's policy routing sends traffic out of the NIC that owns the source address), and
accepts its higher peers; one connection per pair carries both directions. Workers start in
rank order, so the peers called are listening already, or nearly: none is polled for long
(with 1,024 workers, calling the higher ones meant tens of thousands of refused attempts a
second). They are called all at once, in one poll loop (:mod:`workloads.connector`). A hello frame
checks who is calling, from which address and with which configuration.

With ``local: unix`` (the default) the GPUs of one server talk over Unix sockets instead
(rank ``k`` also listens on :func:`workloads.nvlink.abstract_address`), paced by the
process's :class:`~workloads.nvlink.NvlinkClock`: the intra-server "NVLink" never touches
the host's TCP/IP stack.
"""

from __future__ import annotations

import hashlib
import json
import logging
import selectors
import socket
import threading
import time
from pathlib import Path
from typing import Any

from workloads.config import WorkloadConfig
from workloads.connector import HELLO_READ_BYTES, connect_all
from workloads.errors import TransportError
from workloads.framing import HEADER, HELLO_TAG, SMALL_BYTES, Connection
from workloads.nvlink import NvlinkClock, PacedConnection, abstract_address
from workloads.plan import Rank, mesh_peers

__all__ = ["connect_mesh"]

log = logging.getLogger(__name__)

#: the least either side waits for the other's hello; it may wait up to the start-up deadline:
#: a worker starved of CPU among 1,024 on 2 cores can take a minute to answer
HELLO_WAIT_S = 5.0
#: the longest wait in one poll of the acceptor: a stop is noticed within it
ACCEPT_POLL_S = 1.0


def _hello_wait(deadline: float) -> float:
    """Up to the start-up deadline (at least :data:`HELLO_WAIT_S`): a hello is late only when
    the whole start-up is."""
    return max(HELLO_WAIT_S, deadline - time.monotonic())


def _config_digest(config: WorkloadConfig) -> str:
    """What the hellos compare: computed once per start-up (1,024 ranks make it a 100 KB
    JSON; once per hello it was most of a 1,024-GPU start-up's CPU)."""
    data = config.to_dict()
    key = {k: data[k] for k in ("ranks", "servers", "rails", "port", "mesh", "local", "nvlink_bytes_per_s")}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _configure(sock: socket.socket, config: WorkloadConfig) -> None:
    if config.sock_buf_bytes:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, config.sock_buf_bytes)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, config.sock_buf_bytes)


def _available_congestion() -> str:
    try:
        return Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().strip()
    except OSError:
        return "unknown"


def _setup(sock: socket.socket, config: WorkloadConfig) -> None:
    if sock.family == socket.AF_UNIX:
        sock.settimeout(config.timeout_s)
        return
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if config.tcp_congestion:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, config.tcp_congestion.encode())
        except OSError as exc:
            raise TransportError(f"TCP congestion control {config.tcp_congestion!r}: {exc.strerror} (available: "
                                 f"{_available_congestion()}; \"\" keeps the machine's default)") from exc
    sock.settimeout(config.timeout_s)


def _local(config: WorkloadConfig, me: Rank, peer: Rank) -> bool:
    """Does ``peer`` talk to ``me`` over the server's NVLink (a Unix socket)?"""
    return config.local == "unix" and peer.server == me.server


def _connect_lower(config: WorkloadConfig, me: Rank, peers: list[Rank], deadline: float,
                   clock: NvlinkClock, digest: str) -> dict[int, Connection]:
    """Connections to every one of ``peers``, started together (:mod:`workloads.connector`):
    each from ``me.ip`` (or over the server's NVLink), greeted with a hello that names both
    ranks and the configuration's digest."""
    def address_of(peer: Rank) -> tuple[bool, Any, str]:
        if _local(config, me, peer):
            address = abstract_address(config.port, peer.rank)
            return True, address, f"NVLink {address[1:]}"
        return False, (peer.ip, config.listen_port(peer.rank)), f"{peer.ip}:{config.listen_port(peer.rank)}"

    def hello(peer: Rank) -> bytes:
        return json.dumps({"from": me.rank, "to": peer.rank, "digest": digest}).encode()

    def connection(sock: socket.socket, peer: Rank, local: bool) -> Connection:
        return (PacedConnection(sock, me, peer, config.timeout_s, clock) if local
                else Connection(sock, me, peer, config.timeout_s))

    return connect_all(config, me, peers, deadline, address_of=address_of, setup=lambda s: _setup(s, config),
                       hello=hello, hello_wait=lambda: max(config.timeout_s, _hello_wait(deadline)),
                       connection=connection)


class _Acceptor(threading.Thread):
    """Accepts the higher peers until all are in or the deadline passes."""

    def __init__(self, listener: socket.socket, config: WorkloadConfig, me: Rank,
                 expected: set[int], deadline: float, clock: NvlinkClock, digest: str) -> None:
        super().__init__(name=f"accept{me.rank}", daemon=True)
        self.listener, self.config, self.me, self.clock = listener, config, me, clock
        self.digest = digest
        #: the server's GPUs call on the Unix listener: no address to check, the server is
        self.local = listener.family == socket.AF_UNIX
        self.expected, self.deadline = expected, deadline
        self.conns: dict[int, Connection] = {}
        self.rejected: list[str] = []
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        """Accept and read hellos together, in one poll loop: a caller slow to send its hello
        (starved of CPU among 1,024 workers) holds up no other."""
        sel = selectors.DefaultSelector()
        waiting: dict[socket.socket, tuple[str, bytearray, float]] = {}  # src, bytes so far, by when
        try:
            self.listener.setblocking(False)
            sel.register(self.listener, selectors.EVENT_READ)
            while (set(self.conns) != self.expected and not self.stop.is_set()
                   and (left := self.deadline - time.monotonic()) > 0):
                for key, _ in sel.select(min(left, ACCEPT_POLL_S)):
                    if key.fileobj is self.listener:
                        self._accept_all(sel, waiting)
                    else:
                        sock = key.fileobj
                        assert isinstance(sock, socket.socket)
                        self._read_hello(sel, waiting, sock)
                now = time.monotonic()
                for sock, (src, _, by) in list(waiting.items()):
                    if now > by:
                        self._drop(sel, waiting, sock, f"{src}: no hello before the start-up deadline")
        except BaseException as exc:  # handed to the main thread, raised there
            self.error = exc
        finally:
            for sock in list(waiting):
                sel.unregister(sock)
                sock.close()
            sel.close()

    def _accept_all(self, sel: selectors.BaseSelector,
                    waiting: dict[socket.socket, tuple[str, bytearray, float]]) -> None:
        while True:
            try:
                sock, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            sock.setblocking(False)
            waiting[sock] = ("NVLink" if self.local else addr[0], bytearray(),
                             time.monotonic() + _hello_wait(self.deadline))
            sel.register(sock, selectors.EVENT_READ)

    def _drop(self, sel: selectors.BaseSelector, waiting: dict[socket.socket, tuple[str, bytearray, float]],
              sock: socket.socket, why: str) -> None:
        sel.unregister(sock)
        del waiting[sock]
        sock.close()
        self.rejected.append(why)
        log.warning("rank %d: rejected a connection from %s", self.me.rank, why)

    def _read_hello(self, sel: selectors.BaseSelector, waiting: dict[socket.socket, tuple[str, bytearray, float]],
                    sock: socket.socket) -> None:
        src, got, _ = waiting[sock]
        try:
            chunk = sock.recv(HELLO_READ_BYTES)
        except BlockingIOError:
            return
        except OSError as exc:
            self._drop(sel, waiting, sock, f"{src}: bad hello: {exc.strerror or exc}")
            return
        if not chunk:
            self._drop(sel, waiting, sock, f"{src}: bad hello: closed before it")
            return
        got += chunk
        if len(got) < HEADER.size:
            return
        tag, length = HEADER.unpack(got[:HEADER.size])
        if tag != HELLO_TAG or length > SMALL_BYTES:
            self._drop(sel, waiting, sock, f"{src}: bad hello: frame {tag:#x} of {length} bytes")
            return
        if len(got) < HEADER.size + length:
            return
        sel.unregister(sock)
        del waiting[sock]
        sock.setblocking(True)
        self._hello(sock, src, bytes(got[HEADER.size:HEADER.size + length]))

    def _hello(self, sock: socket.socket, src_ip: str, payload: bytes) -> None:
        _setup(sock, self.config)
        layout = self.config.layout
        try:
            hello = json.loads(payload)
            peer = int(hello["from"])
            problem = None
            if hello.get("digest") != self.digest:
                problem = "different configuration file"
            elif hello.get("to") != self.me.rank or peer not in self.expected or peer in self.conns:
                problem = f"unexpected hello {hello}"
            elif self.local and layout[peer].server != self.me.server:
                problem = f"rank {peer} is on server {layout[peer].server}: it cannot call over NVLink"
            elif not self.local and layout[peer].ip != src_ip:
                problem = f"rank {peer} should connect from {layout[peer].ip}, came from {src_ip}"
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            sock.close()
            self.rejected.append(f"{src_ip}: bad hello: {exc}")
            log.warning("rank %d: rejected a connection from %s: %s", self.me.rank, src_ip, exc)
            return
        conn = (PacedConnection(sock, self.me, layout[peer], self.config.timeout_s, self.clock) if self.local
                else Connection(sock, self.me, layout[peer], self.config.timeout_s))
        try:
            conn.send_frame(HELLO_TAG, json.dumps({"ok": problem is None, "error": problem}).encode())
        except TransportError as exc:
            problem = problem or f"cannot reply to the hello: {exc}"
        if problem is not None:
            sock.close()
            self.rejected.append(f"{src_ip}: {problem}")
            log.warning("rank %d: rejected a connection from %s: %s", self.me.rank, src_ip, problem)
            return
        self.conns[peer] = conn


def _listen(config: WorkloadConfig, me: Rank, backlog: int, *, local: bool) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX if local else socket.AF_INET, socket.SOCK_STREAM)
    address: Any = abstract_address(config.port, me.rank) if local else (me.ip, config.listen_port(me.rank))
    try:
        if not local:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        _configure(listener, config)
        listener.bind(address)
        listener.listen(backlog)
    except OSError as exc:
        listener.close()
        where = f"NVLink {address[1:]}" if local else f"{me.ip}:{config.listen_port(me.rank)}"
        raise TransportError(f"rank {me.rank}: cannot listen on {where}: {exc.strerror or exc}") from exc
    return listener


def connect_mesh(config: WorkloadConfig, rank: int, clock: NvlinkClock | None = None) -> dict[int, Connection]:
    """Listen, connect to every mesh peer of ``rank``; its connections by peer rank (those
    of its server's GPUs over NVLink, paced by ``clock``, with ``local: unix``).

    Raises TransportError naming the peers that could not be reached within
    ``config.start_timeout_s``.
    """
    clock = clock or NvlinkClock(config.nvlink_bytes_per_s)
    me = config.layout[rank]
    peers = mesh_peers(config.layout, rank, config.mesh)
    local = {p for p in peers if _local(config, me, config.layout[p])}
    deadline = time.monotonic() + config.start_timeout_s
    digest = _config_digest(config)
    listeners = [_listen(config, me, len(peers) + 8, local=False)]
    acceptors: list[_Acceptor] = []
    conns: dict[int, Connection] = {}
    missing: list[int] = []
    try:
        if config.local == "unix":
            listeners.append(_listen(config, me, len(local) + 8, local=True))
        for listener in listeners:
            unix = listener.family == socket.AF_UNIX
            expected = {p for p in peers if p > rank and (p in local) == unix}
            acceptor = _Acceptor(listener, config, me, expected, deadline, clock, digest)
            acceptor.start()
            acceptors.append(acceptor)
        try:  # every lower peer at once (workloads.connector), the higher ones call here
            conns.update(_connect_lower(config, me, [config.layout[p] for p in peers if p < rank],
                                        deadline, clock, digest))
        except BaseException:
            for acceptor in acceptors:
                acceptor.stop.set()
            raise
        finally:
            for acceptor in acceptors:
                acceptor.join()
                conns.update({c.peer.rank: c for c in acceptor.conns.values()})
            missing = sorted(set(peers) - set(conns))
            errors = [a.error for a in acceptors if a.error is not None]
            if missing or errors:
                for c in conns.values():
                    c.close()
        if errors:
            raise errors[0]
    finally:
        for listener in listeners:
            listener.close()
    if missing:
        notes = "; ".join(r for a in acceptors for r in a.rejected)
        raise TransportError(f"rank {rank} ({me.ip}): ranks {missing} did not connect within "
                             f"{config.start_timeout_s:g} s" + (f" (rejected: {notes})" if notes else ""))
    log.info("rank %d: connected to %d peers (%d over NVLink)", rank, len(conns), len(local))
    return conns
