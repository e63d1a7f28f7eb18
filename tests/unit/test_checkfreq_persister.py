"""CheckFreq's two phases (workloads/checkmate/persister.py): a snapshot is a copy, the persist
runs in the background, and never two at once; a failed persist is raised, not lost."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from workloads.checkmate.persister import BackgroundPersister, Snapshot
from workloads.errors import WorkloadError


def test_one_persist_in_flight_and_the_next_snapshot_waits_for_it() -> None:
    release = threading.Event()
    stored: list[Snapshot] = []

    def slow(snap: Snapshot) -> None:
        release.wait(5)
        stored.append(snap)

    p = BackgroundPersister(slow)
    params = np.arange(4, dtype=np.float32)
    waited, _ = p.checkpoint(1, params, {"m": params * 2})
    assert waited < 0.15 and p.persisted == -1  # nothing in flight yet: no wait (the next one waits >= 0.15)
    params += 100  # training goes on: the snapshot is a copy
    threading.Timer(0.2, release.set).start()
    t0 = time.perf_counter()
    waited, _ = p.checkpoint(2, params, {"m": params * 2})
    assert waited >= 0.15 and time.perf_counter() - t0 >= 0.15  # waited for checkpoint 1 to reach storage
    p.close()
    assert [s[0] for s in stored] == [1, 2] and p.persisted == 2 and p.max_in_flight == 1
    assert stored[0][1].tolist() == [0, 1, 2, 3] and stored[1][1].tolist() == [100, 101, 102, 103]


def test_a_failed_persist_is_raised_at_the_next_checkpoint() -> None:
    def broken(snap: Snapshot) -> None:
        raise OSError("disk full")

    p = BackgroundPersister(broken)
    p.checkpoint(1, np.zeros(2, np.float32), {})
    with pytest.raises(WorkloadError, match="disk full"):
        p.checkpoint(2, np.zeros(2, np.float32), {})
    p.close()  # the error was reported once
