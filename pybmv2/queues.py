"""Egress queues with a rate and a depth per port, as simple_switch's egress buffers.

``set_queue_depth`` bounds a queue in packets (arrivals to a full queue are dropped) and
``set_queue_rate`` paces departures in packets per second; an unset rate drains as fast as
the egress pipeline runs. One worker thread drains every queue, earliest departure first.

A paced queue keeps the line's timetable: a packet's departure is due one gap after the
previous packet's due time, or at its own arrival if the line was idle by then, never one gap
after the thread happened to wake. The thread wakes late (timer slack and the interpreter,
tens of µs), and counting from the wake-up would take that off the rate of every backlog.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from pybmv2.switch import EgressJob

__all__ = ["DEFAULT_QUEUE_DEPTH", "EgressQueues", "QueueStats"]

#: simple_switch's default egress queue depth, in packets
DEFAULT_QUEUE_DEPTH = 64


@dataclass(slots=True)
class QueueStats:
    enqueued: int = 0
    dropped: int = 0
    departed: int = 0


@dataclass(slots=True)
class _Queue:
    depth: int
    rate_pps: float | None = None
    #: the queued jobs, each with its arrival time (time.monotonic())
    jobs: deque[tuple[EgressJob, float]] = field(default_factory=deque)
    next_departure: float = 0.0
    stats: QueueStats = field(default_factory=QueueStats)


class EgressQueues:
    """Per-port FIFO queues and the thread that drains them into ``handler``."""

    def __init__(
        self,
        handler: Callable[[EgressJob, int], None],
        *,
        default_depth: int = DEFAULT_QUEUE_DEPTH,
        default_rate_pps: float | None = None,
    ) -> None:
        self._handler = handler
        self._default_depth = default_depth
        self._default_rate = default_rate_pps
        self._queues: dict[int, _Queue] = {}
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="egress", daemon=True)

    def _queue(self, port: int) -> _Queue:
        q = self._queues.get(port)
        if q is None:
            q = self._queues[port] = _Queue(self._default_depth, self._default_rate)
        return q

    def set_depth(self, port: int | None, depth: int) -> None:
        """Queue depth in packets for one port, or for every port when ``port`` is None."""
        if depth < 1:
            raise ValueError(f"queue depth must be >= 1 packet, got {depth}")
        with self._cond:
            if port is None:
                self._default_depth = depth
                for q in self._queues.values():
                    q.depth = depth
            else:
                self._queue(port).depth = depth

    def set_rate(self, port: int | None, rate_pps: float | None) -> None:
        """Departure rate in packets/s for one port (or all); None removes the limit."""
        if rate_pps is not None and rate_pps <= 0:
            raise ValueError(f"queue rate must be > 0 packets/s, got {rate_pps}")
        with self._cond:
            if port is None:
                self._default_rate = rate_pps
                for q in self._queues.values():
                    q.rate_pps = rate_pps
            else:
                self._queue(port).rate_pps = rate_pps
            self._cond.notify()

    def depth(self, port: int) -> int:
        q = self._queues.get(port)
        return len(q.jobs) if q else 0

    def stats(self, port: int) -> QueueStats:
        return self._queue(port).stats

    def push(self, job: EgressJob) -> bool:
        """Enqueue; False when the queue is full and the packet was dropped."""
        with self._cond:
            q = self._queue(job.port)
            if len(q.jobs) >= q.depth:
                q.stats.dropped += 1
                return False
            q.jobs.append((job, time.monotonic()))
            q.stats.enqueued += 1
            self._cond.notify()
            return True

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout=2)

    def _next_ready(self, now: float) -> tuple[EgressJob | None, int, float | None]:
        """The job that may depart now (and the queue's depth after it), or the next wake-up."""
        wake: float | None = None
        best: _Queue | None = None
        for q in self._queues.values():
            if not q.jobs:
                continue
            if q.next_departure <= now:
                if best is None or q.next_departure < best.next_departure:
                    best = q
            elif wake is None or q.next_departure < wake:
                wake = q.next_departure
        if best is None:
            return None, 0, wake
        job, arrived = best.jobs.popleft()
        best.stats.departed += 1
        if best.rate_pps:  # the line's timetable (module docstring), not the wake-up's
            best.next_departure = max(best.next_departure, arrived) + 1.0 / best.rate_pps
        else:
            best.next_departure = now  # round robin among unpaced queues
        return job, len(best.jobs), None

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stop:
                        return
                    job, depth_after, wake = self._next_ready(time.monotonic())
                    if job is not None:
                        break
                    self._cond.wait(None if wake is None else max(0.0, wake - time.monotonic()))
            self._handler(job, depth_after)
