"""The mirrored legs' own TCP connections, tagged with Checkmate's ToS byte.

A mirrored leg (:mod:`workloads.checkmate.capture_plan`) gets a connection of its own, so
that every segment of it, retransmissions included, carries the mirror tag and session id
in its ToS byte and nothing else does: the ToS is set before ``connect``, so the SYN is
tagged too and the shadow learns the stream's initial sequence number. The receiver of a
leg listens on ``mirror_port + its rank``; it knows the sender by its source address. No
hello is sent: the stream carries only the all-gather's frames.
"""

from __future__ import annotations

import socket
import time

from workloads.checkmate.capture_plan import CapturePlan
from workloads.checkmate.tagging import mirror_tos
from workloads.errors import TransportError
from workloads.framing import Connection
from workloads.transport import Mesh

__all__ = ["connect_mirror_legs"]


def _setup(sock: socket.socket, timeout_s: float) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(timeout_s)


def _connect(src_ip: str, address: tuple[str, int], tos: int, deadline: float) -> socket.socket:
    last = "no attempt"
    while (left := deadline - time.monotonic()) > 0:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
            sock.bind((src_ip, 0))
            sock.settimeout(min(left, 5.0))
            sock.connect(address)
            return sock
        except OSError as exc:
            sock.close()
            last = exc.strerror or str(exc)
            time.sleep(0.05)
    raise TransportError(f"cannot open the mirrored leg {src_ip} -> {address[0]}:{address[1]}: {last}")


def connect_mirror_legs(mesh: Mesh, plan: CapturePlan, *, port: int, session: int,
                        timeout_s: float = 30.0) -> None:
    """Open this rank's mirrored legs into ``mesh.mirror_out`` / ``mesh.mirror_in``.

    Every rank of the job calls it at the same point; it returns once this rank's legs are
    connected, or raises TransportError naming the leg.
    """
    me, layout = mesh.me, mesh.layout
    outgoing = [leg for leg in plan.legs if leg.sender == me.rank and leg.receiver not in mesh.mirror_out]
    incoming = [leg for leg in plan.legs if leg.receiver == me.rank and leg.sender not in mesh.mirror_in]
    deadline = time.monotonic() + timeout_s
    listener = None
    if incoming:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((me.ip, port + me.rank))
        listener.listen(len(incoming))
    try:
        tos = mirror_tos(session)
        for leg in outgoing:
            peer = layout[leg.receiver]
            sock = _connect(me.ip, (peer.ip, port + peer.rank), tos, deadline)
            _setup(sock, mesh.config.timeout_s)
            mesh.mirror_out[leg.receiver] = Connection(sock, me, peer, mesh.config.timeout_s)
        by_ip = {layout[leg.sender].ip: leg.sender for leg in incoming}
        while listener is not None and any(leg.sender not in mesh.mirror_in for leg in incoming):
            left = deadline - time.monotonic()
            if left <= 0:
                waiting = [leg.sender for leg in incoming if leg.sender not in mesh.mirror_in]
                raise TransportError(f"rank {me.rank}: mirrored legs from ranks {waiting} did not "
                                     f"connect within {timeout_s:g} s")
            listener.settimeout(min(left, 0.5))
            try:
                sock, (src_ip, _) = listener.accept()
            except TimeoutError:
                continue
            sender = by_ip.get(src_ip)
            if sender is None or sender in mesh.mirror_in:
                sock.close()
                continue
            _setup(sock, mesh.config.timeout_s)
            mesh.mirror_in[sender] = Connection(sock, me, layout[sender], mesh.config.timeout_s)
    finally:
        if listener is not None:
            listener.close()
