"""Calendar queues, a named extension of the Python target (``--calendar-queue FIELD``).

OpenOptics' ToRs hold a packet in the queue of its send slot until that slot comes. Here
the P4 program writes the packet's release time (µs on the switch's clock, like
``ingress_global_timestamp``) into a metadata field; a packet whose release time is in the
future is held after ingress and handed to its egress queue when that time comes. Stock
BMv2 has nothing like it: the same program drops such packets there (it is told so by the
controller), and the difference is reported.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from pybmv2.program import Program

__all__ = ["HOLD_LINES", "CalendarQueue", "HoldCounts", "release_slot"]

T = TypeVar("T")

log = logging.getLogger(__name__)

#: the extensions that hold packets, as :meth:`pybmv2.daemon.SwitchDaemon.hold_counts` names them
HOLD_LINES = ("calendar", "port-delay", "port-ingress-delay")


@dataclass(frozen=True, slots=True)
class HoldCounts:
    """What one holding extension did: items held, released, and waiting now (and, on the
    native engine, refused for want of memory)."""

    held: int = 0
    released: int = 0
    waiting: int = 0
    dropped: int = 0


def release_slot(program: Program | None, field: str) -> int | None:
    """The PHV slot of the metadata field named ``field`` (a full ``header.field`` name, or
    a unique field-name suffix such as ``release_us``); None if the program has none."""
    if program is None:
        return None
    found = []
    for h in program.layout.headers:
        if not h.metadata:
            continue
        for f in h.fields:
            full = f"{h.name}.{f.name}"
            if full == field or f.name == field or f.name.endswith("." + field):
                found.append(f.index)
    if len(found) > 1:
        log.warning("calendar field %r is ambiguous in this program: not used", field)
        return None
    return found[0] if found else None


class CalendarQueue(Generic[T]):
    """Holds items (egress jobs; frames, for the port-delay extension) until their release
    time, then hands them to ``release``, in release order."""

    def __init__(self, release: Callable[[T], None], now_us: Callable[[], int]) -> None:
        self._release, self._now_us = release, now_us
        self._heap: list[tuple[int, int, T]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stop = False
        self.held = 0
        self.released = 0
        self._thread = threading.Thread(target=self._run, name="calendar", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def hold(self, job: T, release_us: int) -> None:
        with self._cond:
            heapq.heappush(self._heap, (release_us, next(self._seq), job))
            self.held += 1
            self._cond.notify()

    def counts(self) -> HoldCounts:
        with self._cond:
            return HoldCounts(self.held, self.released, len(self._heap))

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout=2)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stop:
                        return
                    now = self._now_us()
                    if self._heap and self._heap[0][0] <= now:
                        _, _, job = heapq.heappop(self._heap)
                        self.released += 1
                        break
                    wait = None if not self._heap else (self._heap[0][0] - now) / 1e6
                    self._cond.wait(wait)
            self._release(job)

