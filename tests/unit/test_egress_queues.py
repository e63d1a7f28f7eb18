"""Egress queues: depth drops and packet-rate pacing, with the real worker thread."""

from __future__ import annotations

import itertools
import threading
import time

from pybmv2.queues import EgressQueues
from pybmv2.state import PacketState
from pybmv2.switch import EgressJob


def job(port: int) -> EgressJob:
    return EgressJob(port, PacketState([], [], 0, b""))


def test_a_full_queue_drops_arrivals() -> None:
    seen: list[int] = []
    q = EgressQueues(lambda j, d: seen.append(j.port), default_depth=3)
    q.set_rate(1, 1.0)  # one packet per second: nothing drains during the test
    accepted = [q.push(job(1)) for _ in range(5)]
    assert accepted == [True, True, True, False, False]
    assert q.stats(1).dropped == 2


def test_rate_paces_departures() -> None:
    times: list[float] = []
    done = threading.Event()

    def handler(j: EgressJob, depth: int) -> None:
        times.append(time.monotonic())
        if len(times) == 6:
            done.set()

    q = EgressQueues(handler, default_depth=64)
    q.set_rate(2, 50.0)  # 20 ms apart
    q.start()
    try:
        for _ in range(6):
            q.push(job(2))
        assert done.wait(5)
    finally:
        q.stop()
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) > 0.015, gaps


def test_unpaced_queues_are_served_round_robin() -> None:
    order: list[int] = []
    q = EgressQueues(lambda j, d: order.append(j.port))
    for _ in range(3):
        q.push(job(1))
    for _ in range(3):
        q.push(job(2))
    q.start()
    deadline = time.monotonic() + 2
    while len(order) < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    q.stop()
    assert order == [1, 2, 1, 2, 1, 2]
