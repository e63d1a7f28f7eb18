"""Gemini's checkpoint to a peer's CPU memory (Wang et al., SOSP'23), interleaved with training.

Gemini keeps checkpoints in the CPU memory of peer machines, sent over the same network as
the training traffic. So that the checkpoint does not slow the training traffic, it cuts the
checkpoint into chunks and sends them in the network's idle spans, which it profiles over
the first iterations (its section 5, "traffic interleaving"); persistent storage is only a
fallback. Here:

- ``checkpoint()`` snapshots the state in memory (Gemini's GPU-to-CPU copy), after the
  previous checkpoint has reached the peer: one in flight, the rest sent while training
  waits if it has not;
- ``interleave(deadline)`` sends whole chunks to the peer's store
  (:func:`workloads.checkmate.storage.put_chunk`) while the next one is expected to finish
  before ``deadline``, the end of the iteration's compute phase, when the training traffic
  is idle; a chunk's expected time is the last chunk's measured time;
- the peer's store keeps the checkpoint in memory (a tmpfs directory) and commits it when
  its last chunk arrives; ``persisted`` is the iteration of the last one committed.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from workloads.checkmate import storage
from workloads.checkmate.persister import Snapshot

__all__ = ["CHUNK_BYTES", "PeerCheckpointer"]

#: bytes per chunk: small enough that several fit in a compute phase's idle span at the
#: emulated NIC rates (64 KiB take 5 ms at 100 Mb/s)
CHUNK_BYTES = 64 << 10


class PeerCheckpointer:
    """Snapshots in memory, sends the snapshot to ``url`` a chunk at a time.

    ``serialize`` turns a snapshot into the bytes the peer keeps; ``send`` stores one chunk
    (``(url, data, offset, total, whole_sha256)``; by default over HTTP to the peer's store).
    """

    def __init__(self, url: str, serialize: Callable[[Snapshot], bytes], *, chunk_bytes: int = CHUNK_BYTES,
                 send: Callable[..., Any] | None = None) -> None:
        self.url, self._serialize, self.chunk_bytes = url, serialize, chunk_bytes
        self._send = send or (lambda url, data, offset, total, digest: storage.put_chunk(
            url, data, offset, total, whole_sha256=digest))
        self._snapshot: Snapshot | None = None
        self._data = b""
        self._digest = ""
        self._offset = 0
        self._chunk_s: float | None = None
        #: the iteration of the last checkpoint the peer committed (-1: none)
        self.persisted = -1
        #: chunks sent inside idle spans, and chunks training waited for
        self.interleaved_chunks = 0
        self.blocking_chunks = 0

    @property
    def in_flight(self) -> bool:
        return self._snapshot is not None

    def checkpoint(self, iteration: int, params: np.ndarray, optimizer_state: Mapping[str, Any]) -> tuple[float, float]:
        """Finish the checkpoint in flight (training waits), snapshot this one; the seconds
        spent waiting and copying.

        >>> sent = []
        >>> p = PeerCheckpointer("http://peer/x", lambda s: bytes(10), chunk_bytes=4,
        ...                      send=lambda *a: sent.append(a[2:4]))
        >>> _ = p.checkpoint(5, np.zeros(2, np.float32), {})
        >>> p.interleave(time.perf_counter() + 10.0), p.persisted, sent
        (10, 5, [(0, 10), (4, 10), (8, 10)])
        """
        t0 = time.perf_counter()
        self.blocking_chunks += self._drain(None)
        t1 = time.perf_counter()
        self._snapshot = (iteration, params.copy(), {k: np.array(v, copy=True) for k, v in optimizer_state.items()})
        self._data, self._offset = b"", 0
        return t1 - t0, time.perf_counter() - t1

    def interleave(self, deadline: float) -> int:
        """Send chunks while the next one should end before ``deadline``; the bytes sent."""
        before = self._offset
        self.interleaved_chunks += self._drain(deadline)
        return self._offset - before

    def finish(self) -> None:
        """Send whatever is left of the checkpoint in flight."""
        self.blocking_chunks += self._drain(None)

    def _drain(self, deadline: float | None) -> int:
        sent = 0
        while self._snapshot is not None:
            if deadline is not None and time.perf_counter() + (self._chunk_s or 0.0) > deadline:
                break
            if not self._data:
                self._data = self._serialize(self._snapshot)
                self._digest = hashlib.sha256(self._data).hexdigest()
            t0 = time.perf_counter()
            chunk = self._data[self._offset:self._offset + self.chunk_bytes]
            self._send(self.url, chunk, self._offset, len(self._data), self._digest)
            self._chunk_s = time.perf_counter() - t0
            self._offset += len(chunk)
            sent += 1
            if self._offset >= len(self._data):
                self.persisted = self._snapshot[0]
                self._snapshot, self._data = None, b""
        return sent

    def close(self) -> None:
        self.finish()
