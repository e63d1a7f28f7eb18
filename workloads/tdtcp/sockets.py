"""Socket buffer sizing shared by the sender and the receiver (I/O)."""

from __future__ import annotations

import contextlib
import socket

__all__ = ["set_buffers"]

_FORCE = {socket.SO_RCVBUF: 33, socket.SO_SNDBUF: 32}  # SO_RCVBUFFORCE, SO_SNDBUFFORCE (Linux)


def set_buffers(sock: socket.socket, size: int) -> int:
    """Ask for ``size``-byte send and receive buffers, beyond ``net.core.[rw]mem_max`` where
    the process may (root); the receive buffer obtained (as the kernel reports it, doubled)."""
    if size:
        for opt, force in _FORCE.items():
            try:
                sock.setsockopt(socket.SOL_SOCKET, force, size)
            except OSError:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, opt, size)
    return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
