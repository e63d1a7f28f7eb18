"""The shadow's side channel: rank 0 serves its latest state, the shadow pulls it to resync.

Rank 0 publishes a snapshot (iteration, parameters, optimizer state) after every optimizer
step. A client sends one JSON line ``{"min_iteration": I}``; the server answers, as soon as
it has a snapshot of iteration ``I`` or later (at most ``wait_s`` later), with an 8-byte
big-endian length and an ``.npz`` of the snapshot (length 0: none in time).
"""

from __future__ import annotations

import io
import json
import logging
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from workloads.errors import TransportError

__all__ = ["Snapshot", "StateServer", "fetch_state"]

log = logging.getLogger(__name__)
_LEN = struct.Struct("!Q")


@dataclass(frozen=True)
class Snapshot:
    iteration: int
    params: np.ndarray
    optimizer_state: dict[str, np.ndarray]


def _encode(snap: Snapshot) -> bytes:
    buf = io.BytesIO()
    arrays: dict[str, Any] = {"__iteration": np.int64(snap.iteration), "__params": snap.params,
                              **{f"opt_{k}": v for k, v in snap.optimizer_state.items()}}
    np.savez(buf, **arrays)
    return buf.getvalue()


def _decode(data: bytes) -> Snapshot:
    with np.load(io.BytesIO(data)) as z:
        return Snapshot(int(z["__iteration"]), z["__params"].copy(),
                        {k[4:]: z[k].copy() for k in z.files if k.startswith("opt_")})


class StateServer:
    """Serves the latest snapshot on ``(host, port)`` from a daemon thread."""

    def __init__(self, host: str, port: int, *, wait_s: float = 5.0) -> None:
        self.wait_s = wait_s
        self._latest: Snapshot | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._sock = socket.create_server((host, port), reuse_port=False)
        self._sock.settimeout(0.5)
        self._thread = threading.Thread(target=self._serve, name="state-server", daemon=True)
        self._thread.start()

    def publish(self, iteration: int, params: np.ndarray, optimizer_state: dict[str, np.ndarray]) -> None:
        snap = Snapshot(iteration, params.copy(), {k: v.copy() for k, v in optimizer_state.items()})
        with self._cond:
            self._latest = snap
            self._cond.notify_all()

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, peer = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn, peer), daemon=True).start()

    def _answer(self, conn: socket.socket, peer: object) -> None:
        with conn:
            try:
                conn.settimeout(self.wait_s + 5)
                line = conn.makefile("rb").readline(4096)
                want = int(json.loads(line)["min_iteration"])
                with self._cond:
                    self._cond.wait_for(lambda: self._closed or (self._latest is not None
                                                                  and self._latest.iteration >= want),
                                        timeout=self.wait_s)
                    snap = self._latest if self._latest and self._latest.iteration >= want else None
                data = _encode(snap) if snap is not None else b""
                conn.sendall(_LEN.pack(len(data)) + data)
                log.info("state sent to %s: iteration %s (asked >= %d)", peer,
                         snap.iteration if snap else None, want)
            except (OSError, ValueError, KeyError) as exc:
                log.warning("state request from %s failed: %s", peer, exc)

    def close(self) -> None:
        self._closed = True
        with self._cond:
            self._cond.notify_all()
        self._sock.close()


def fetch_state(address: tuple[str, int], min_iteration: int, *, timeout_s: float = 15.0,
                source: str | None = None) -> Snapshot:
    """Pull the first snapshot of ``min_iteration`` or later from a :class:`StateServer`."""
    try:
        with socket.create_connection(address, timeout=timeout_s,
                                      source_address=(source, 0) if source else None) as sock:
            sock.sendall(json.dumps({"min_iteration": min_iteration}).encode() + b"\n")
            f = sock.makefile("rb")
            head = f.read(_LEN.size)
            if len(head) != _LEN.size:
                raise TransportError(f"state server {address[0]}:{address[1]} closed without an answer")
            (length,) = _LEN.unpack(head)
            if length == 0:
                raise TransportError(f"state server {address[0]}:{address[1]} has no state of "
                                     f"iteration >= {min_iteration}")
            data = f.read(length)
    except OSError as exc:
        raise TransportError(f"state server {address[0]}:{address[1]}: {exc}") from exc
    if len(data) != length:
        raise TransportError(f"state server {address[0]}:{address[1]}: short answer")
    return _decode(data)
