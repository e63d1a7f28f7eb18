"""Connecting the mesh at start-up: connect to the higher peers, accept the lower ones.

Rank ``k`` listens on ``(ip_k, port + k)``. Every rank connects to its higher mesh peers
(:func:`workloads.plan.mesh_peers`) with the socket's source bound to its own address (the
fat-tree's policy routing sends traffic out of the NIC that owns the source address), and
accepts its lower peers; one connection per pair carries both directions. A hello frame
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
import socket
import threading
import time
from pathlib import Path
from typing import Any

from workloads.config import WorkloadConfig
from workloads.errors import TransportError
from workloads.framing import HELLO_TAG, Connection
from workloads.nvlink import NvlinkClock, PacedConnection, abstract_address
from workloads.plan import Rank, mesh_peers

__all__ = ["connect_mesh"]

log = logging.getLogger(__name__)


def _config_digest(config: WorkloadConfig) -> str:
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


def _connect(config: WorkloadConfig, me: Rank, peer: Rank, deadline: float, clock: NvlinkClock) -> Connection:
    """Connect to ``peer`` from ``me.ip`` (or over the server's NVLink), retrying until
    ``deadline``; then say hello."""
    local = _local(config, me, peer)
    address: Any = abstract_address(config.port, peer.rank) if local else (peer.ip, config.listen_port(peer.rank))
    shown = f"NVLink {address[1:]}" if local else f"{address[0]}:{address[1]}"
    last: str = "no attempt"
    while (remaining := deadline - time.monotonic()) > 0:
        sock = socket.socket(socket.AF_UNIX if local else socket.AF_INET, socket.SOCK_STREAM)
        try:
            _configure(sock, config)
            if not local:
                sock.bind((me.ip, 0))
            sock.settimeout(min(remaining, 5.0))
            sock.connect(address)
            if not local and sock.getsockname() == sock.getpeername():
                raise ConnectionRefusedError("self-connection")
        except OSError as exc:
            sock.close()
            last = exc.strerror or str(exc)
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
            continue
        _setup(sock, config)
        conn = (PacedConnection(sock, me, peer, config.timeout_s, clock) if local
                else Connection(sock, me, peer, config.timeout_s))
        hello = {"from": me.rank, "to": peer.rank, "digest": _config_digest(config)}
        try:
            conn.send_frame(HELLO_TAG, json.dumps(hello).encode())
            reply = json.loads(conn.recv_frame(HELLO_TAG))
        except (TransportError, ValueError):
            sock.close()
            raise
        if not reply.get("ok"):
            sock.close()
            raise TransportError(f"rank {me.rank}: rank {peer.rank} at {shown} "
                                 f"refused the connection: {reply.get('error')}")
        return conn
    raise TransportError(f"rank {me.rank} ({me.ip}): cannot connect to rank {peer.rank} at "
                         f"{shown} within {config.start_timeout_s:g} s: {last}")


class _Acceptor(threading.Thread):
    """Accepts the lower peers until all are in or the deadline passes."""

    def __init__(self, listener: socket.socket, config: WorkloadConfig, me: Rank,
                 expected: set[int], deadline: float, clock: NvlinkClock) -> None:
        super().__init__(name=f"accept{me.rank}", daemon=True)
        self.listener, self.config, self.me, self.clock = listener, config, me, clock
        #: the server's GPUs call on the Unix listener: no address to check, the server is
        self.local = listener.family == socket.AF_UNIX
        self.expected, self.deadline = expected, deadline
        self.conns: dict[int, Connection] = {}
        self.rejected: list[str] = []
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            while (set(self.conns) != self.expected and not self.stop.is_set()
                   and (left := self.deadline - time.monotonic()) > 0):
                self.listener.settimeout(min(left, 0.25))
                try:
                    sock, addr = self.listener.accept()
                except TimeoutError:
                    continue
                self._hello(sock, "NVLink" if self.local else addr[0])
        except BaseException as exc:  # handed to the main thread, raised there
            self.error = exc

    def _hello(self, sock: socket.socket, src_ip: str) -> None:
        _setup(sock, self.config)
        sock.settimeout(min(self.config.timeout_s, 5.0))
        layout = self.config.layout
        try:
            hello = json.loads(Connection(sock, self.me, Rank(-1, -1, -1, src_ip), 5.0).recv_frame(HELLO_TAG))
            peer = int(hello["from"])
            problem = None
            if hello.get("digest") != _config_digest(self.config):
                problem = "different configuration file"
            elif hello.get("to") != self.me.rank or peer not in self.expected or peer in self.conns:
                problem = f"unexpected hello {hello}"
            elif self.local and layout[peer].server != self.me.server:
                problem = f"rank {peer} is on server {layout[peer].server}: it cannot call over NVLink"
            elif not self.local and layout[peer].ip != src_ip:
                problem = f"rank {peer} should connect from {layout[peer].ip}, came from {src_ip}"
        except (TransportError, ValueError, KeyError, TypeError, IndexError) as exc:
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
        sock.settimeout(self.config.timeout_s)
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
    listeners = [_listen(config, me, len(peers) + 8, local=False)]
    acceptors: list[_Acceptor] = []
    conns: dict[int, Connection] = {}
    missing: list[int] = []
    try:
        if config.local == "unix":
            listeners.append(_listen(config, me, len(local) + 8, local=True))
        for listener in listeners:
            unix = listener.family == socket.AF_UNIX
            expected = {p for p in peers if p < rank and (p in local) == unix}
            acceptor = _Acceptor(listener, config, me, expected, deadline, clock)
            acceptor.start()
            acceptors.append(acceptor)
        try:
            for p in peers:
                if p > rank:
                    conns[p] = _connect(config, me, config.layout[p], deadline, clock)
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
