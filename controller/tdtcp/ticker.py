"""Ticks: the controller makes each ToR look at its clock just after every TDN change, so that
a rack with no traffic for another rack is told too (I/O; the instants are pure).

A tick is a packet-out with ``probe == 0xFE``; the ToR computes the TDN of the moment and,
if it has not announced it yet, notifies (``p4src/tor_switch.p4``). Ticks are sent twice per
change, ``delays_us`` after it on the controller's clock, so that a ToR whose clock lags the
controller's by up to the first delay still sees the new TDN on the second; the ToR's
register keeps it to one notification per change either way.

Only the primary controller of a switch may send packet-outs, so a running ticker holds
every ToR's primary connection (a high election id): write to the ToRs before starting it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from controller.install import pipeline_schema
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.values import encode_int
from controller.schedule.clock import controller_now_us
from controller.schedule.model import Schedule
from controller.schedule.tdn import TdnChange, tdn_changes
from controller.topology.model import Switch

__all__ = ["PROBE_TICK", "Ticker", "change_instants"]

PROBE_TICK = 0xFE


def change_instants(schedule: Schedule, epoch_us: float, after_us: float) -> Iterator[tuple[float, TdnChange]]:
    """Every TDN change from ``after_us`` on (controller clock), in order, forever.

    >>> from controller.schedule.generators import round_robin
    >>> it = change_instants(round_robin(3, slice_us=900, night_us=100), 500.0, 1700.0)
    >>> [(t, c.tdn) for t, c in (next(it), next(it), next(it))]
    [(2500.0, 0), (3500.0, 1), (4500.0, 0)]
    """
    changes = tdn_changes(schedule)
    cycle = schedule.cycle_us
    if not cycle:
        return
    n = max(0, int((after_us - epoch_us) // cycle))
    while True:
        for c in changes:
            t = epoch_us + n * cycle + c.at_us
            if t >= after_us:
                yield t, c
        n += 1


class Ticker:
    """Sends ticks to ``tors`` after every TDN change of ``schedule`` (epoch on the
    controller's clock) until stopped; use as a context manager. ``sent`` records
    ``(instant, tdn)`` of every change it ticked."""

    def __init__(self, tors: Sequence[Switch], schedule: Schedule, epoch_us: float, *,
                 delays_us: tuple[int, int] = (300, 2000), election_id: int = 1 << 20) -> None:
        self.tors, self.schedule, self.epoch_us, self.delays_us = list(tors), schedule, epoch_us, delays_us
        self.election_id = election_id
        self.sent: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tdn-ticker", daemon=True)
        self._clients: list[tuple[P4RuntimeClient, list[tuple[int, bytes]]]] = []

    def __enter__(self) -> Ticker:
        for sw in self.tors:
            schema, _ = pipeline_schema(sw.program)
            meta = {m.name: m for m in schema.packet_metadata.get("packet_out", ())}
            fields = [(m.id, encode_int(PROBE_TICK if name == "probe" else 0, m.bitwidth)) for name, m in meta.items()]
            client = P4RuntimeClient(sw.grpc or "", device_id=sw.device_id, election_id=self.election_id).connect()
            self._clients.append((client, fields))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for client, _ in self._clients:
            client.close()

    def _run(self) -> None:
        for instant, change in change_instants(self.schedule, self.epoch_us, controller_now_us()):
            for k, delay in enumerate(self.delays_us):
                wait = (instant + delay - controller_now_us()) / 1e6
                if wait > 0 and self._stop.wait(wait):
                    return
                if self._stop.is_set():
                    return
                for client, fields in self._clients:
                    client.packet_out(bytes(14), fields)
                if k == 0:
                    self.sent.append((instant, change.tdn))
