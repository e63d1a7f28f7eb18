"""Egress queues: depth drops and packet-rate pacing, with the real worker thread."""

from __future__ import annotations

import threading
import time

import pytest

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
    pushed = time.monotonic()
    try:
        for _ in range(6):
            q.push(job(2))
        assert done.wait(5)
    finally:
        q.stop()
    # the k-th departure is never before its slot on the line's timetable (k x 20 ms after the
    # first arrival); a late wake-up may make the next gap shorter, as a line catching up does
    early = [(k, t - pushed) for k, t in enumerate(times) if t - pushed < k * 0.020 - 0.001]
    assert not early, early
    assert times[-1] - pushed >= 5 * 0.020 - 0.001


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


def test_a_late_wake_up_does_not_slow_the_line() -> None:
    """A backlog leaves on the line's timetable: a departure taken late (the worker thread
    wakes tens of µs after the due time) does not push every later departure back by as
    much. Counting each gap from the wake-up lost 18% of the rate at 3,000 packets/s."""
    q = EgressQueues(lambda j, d: None, default_depth=64)
    q.set_rate(1, 1000.0)  # 1 ms apart
    for _ in range(4):
        q.push(job(1))
    t0 = time.monotonic()
    late = 0.0003  # each wake-up 0.3 ms after the due time
    due = t0
    for _ in range(4):
        taken, _, _ = q._next_ready(due + late)
        assert taken is not None
        due += 0.001
    # the fourth departure was due 3 ms after the first, whatever the wake-ups' lateness
    assert q._queues[1].next_departure == pytest.approx(t0 + 0.004, abs=1e-4)


def test_an_idle_line_does_not_save_up_departures() -> None:
    """A packet that reaches an idle paced queue is due when it arrives, and the next one a
    gap later: the time the line stood idle is not sent as a burst."""
    q = EgressQueues(lambda j, d: None, default_depth=64)
    q.set_rate(1, 1000.0)
    q.push(job(1))
    assert q._next_ready(time.monotonic())[0] is not None
    time.sleep(0.02)  # the line idles for 20 gaps
    q.push(job(1))
    q.push(job(1))
    now = time.monotonic()
    assert q._next_ready(now)[0] is not None
    taken, _, wake = q._next_ready(now)
    assert taken is None and wake == pytest.approx(now + 0.001, abs=3e-4)


def test_a_late_wake_up_does_not_slow_the_line_timetable() -> None:
    """A backlog departs on the line's timetable, not the wake-ups': however late the worker
    comes, 300 packets at 3,000 a second are due exactly 0.1 s after the first, and a worker
    that came late sends what is due at once (deterministic: the clock is the test's)."""
    q = EgressQueues(lambda j, depth: None, default_depth=512)
    q.set_rate(3, 3000.0)
    for _ in range(300):
        q.push(job(3))
    (start,) = [arrived for _, arrived in q._queues[3].jobs][:1]
    late = start + 0.05  # the worker wakes 50 ms late: the first 150 are due
    sent = 0
    while q._next_ready(late)[0] is not None:
        sent += 1
    assert 149 <= sent <= 151  # only what the timetable allows by then, however many are queued
    taken, _, wake = q._next_ready(late)
    assert taken is None and wake is not None and wake <= start + 0.0511
    while q._next_ready(start + 1.0)[0] is not None:
        sent += 1
    assert sent == 300
    assert q._queues[3].next_departure == pytest.approx(start + 300 / 3000, abs=1e-3)


def test_a_backlog_drains_at_the_line_rate() -> None:
    """With the real worker thread: 300 packets at 3,000 a second never leave faster than the
    line, and finish in well under twice its time (the exact timetable is the test above;
    here the machine's scheduling may add a few ms)."""
    times: list[float] = []
    done = threading.Event()

    def handler(j: EgressJob, depth: int) -> None:
        times.append(time.monotonic())
        if len(times) == 300:
            done.set()

    q = EgressQueues(handler, default_depth=512)
    q.set_rate(3, 3000.0)
    pushed = time.monotonic()
    for _ in range(300):
        q.push(job(3))
    q.start()
    try:
        assert done.wait(5)
    finally:
        q.stop()
    # never faster than the line since the backlog began, and not much slower
    assert times[-1] - pushed >= 299 / 3000
    assert times[-1] - times[0] <= 299 / 3000 * 2, times[-1] - times[0]
