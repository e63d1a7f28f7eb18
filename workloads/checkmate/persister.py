"""CheckFreq's two-phase checkpoint (Mohan et al., FAST'21, section 4): ``snapshot()`` copies
the model and optimizer state in memory while training waits, then ``persist()`` writes the
copy to storage in the background while training goes on. At most one checkpoint is in
flight: the next snapshot first waits for the previous persist to finish (the stall CheckFreq
accounts for when it tunes the frequency).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from workloads.errors import WorkloadError

__all__ = ["BackgroundPersister", "Snapshot"]

#: what :meth:`BackgroundPersister.checkpoint` copies: iteration, params, optimizer state
Snapshot = tuple[int, np.ndarray, dict[str, np.ndarray]]


class BackgroundPersister:
    """Snapshots in the caller's thread, persists in a thread of its own, one at a time.

    >>> done = []
    >>> p = BackgroundPersister(lambda snap: done.append(snap[0]))
    >>> waited, copied = p.checkpoint(3, np.zeros(4, np.float32), {"m": np.ones(4)})
    >>> p.close(); done, p.persisted, p.max_in_flight
    ([3], 3, 1)
    """

    def __init__(self, persist: Callable[[Snapshot], None]) -> None:
        self._persist = persist
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._in_flight = 0
        #: the iteration of the last checkpoint that reached storage (-1: none)
        self.persisted = -1
        #: the most checkpoints ever in flight at once (1, by construction)
        self.max_in_flight = 0

    def checkpoint(self, iteration: int, params: np.ndarray, optimizer_state: Mapping[str, Any]) -> tuple[float, float]:
        """Wait for the checkpoint in flight, snapshot this one, start persisting it; the
        seconds spent waiting and copying (what training lost)."""
        t0 = time.perf_counter()
        self.wait()
        t1 = time.perf_counter()
        snap: Snapshot = (iteration, params.copy(), {k: np.array(v, copy=True) for k, v in optimizer_state.items()})
        t2 = time.perf_counter()
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        self._thread = threading.Thread(target=self._run, args=(snap,), name=f"persist-{iteration}", daemon=True)
        self._thread.start()
        return t1 - t0, t2 - t1

    def _run(self, snap: Snapshot) -> None:
        try:
            self._persist(snap)
            self.persisted = snap[0]
        except BaseException as exc:  # raised to the trainer at its next checkpoint or close
            self._error = exc
        finally:
            with self._lock:
                self._in_flight -= 1

    def wait(self) -> None:
        """Return once no checkpoint is in flight; raise what the last persist raised."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            if isinstance(error, WorkloadError):
                raise error
            raise WorkloadError(f"persisting a checkpoint failed: {error!r}") from error

    def close(self) -> None:
        self.wait()
