"""Time-flow tables for the ToRs of a scheduled fabric: pure, a schedule in, entries out.

Time is cut into *slots*: the coarsest grid on which no circuit switch changes state inside
a slot (the gcd of the slice, the night and every circuit's offset), repeating every
``cycle`` (the lcm of the circuits' cycles). In each slot a circuit switch either holds one
matching for the whole slot or is dark (its night). A send *margin* makes the first and the
last ``margin_us`` of every day unusable for sending too (it joins the grid), so that a
packet sent in a day crosses the circuit switch in that day despite latency and the skew
between the ToR's clock and the circuit switch's, whichever is ahead.

A time-flow entry says, for a packet for rack ``dst`` that reaches ToR ``tor`` in slot
``arrival``: send it in slot ``send`` on uplink ``uplink`` (the circuit switch), possibly
to an intermediate rack ``via`` (OpenOptics' time-flow table; the packet waits in the
calendar queue of slot ``send`` until that slot comes).

- ``direct``: the first slot, from ``arrival`` on, in which a circuit connects ``tor`` to
  ``dst``.
- ``vlb`` (RotorNet's two-hop Valiant load balancing): a packet from a host leaves in the
  first slot that connects ``tor`` to any rack; the intermediate forwards it directly.
  Packets that arrive from an uplink (transit) always use the direct entries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from controller.errors import ConfigError
from controller.schedule.model import Schedule

__all__ = ["ROUTINGS", "Slots", "TimeFlowEntry", "slots", "timeflow"]

ROUTINGS = ("direct", "vlb")


@dataclass(frozen=True)
class TimeFlowEntry:
    """``(tor, dst, arrival slot, transit)`` -> ``(send slot, uplink, via)``."""

    tor: int
    dst: int
    arrival: int
    transit: bool
    send: int
    uplink: int
    via: int  # the rack the circuit reaches: ``dst``, or the intermediate (VLB)

    @property
    def wait_slots(self) -> int:
        """Slots the packet waits in the calendar queue (0: it leaves in its arrival slot)."""
        return self.send - self.arrival


@dataclass(frozen=True)
class Slots:
    """The slot grid of a schedule: ``active[slot][circuit]`` is the matching held for the
    whole slot, or None when that circuit switch is dark (night) in it."""

    slot_us: int
    count: int
    active: tuple[tuple[tuple[int | None, ...] | None, ...], ...]

    @property
    def cycle_us(self) -> int:
        return self.slot_us * self.count


def slots(schedule: Schedule, margin_us: int = 0) -> Slots:
    """The slot grid of ``schedule`` (one slot for a one-shot schedule), with the first and
    the last ``margin_us`` of each day counted as dark.

    >>> from controller.schedule.generators import round_robin
    >>> g = slots(round_robin(4, slice_us=900, night_us=100))
    >>> g.slot_us, g.count, g.active[9][0], g.active[8][0]
    (100, 30, None, (1, 2, 3, 0))
    >>> g = slots(round_robin(4, slice_us=900, night_us=100), margin_us=200)
    >>> g.slot_us, [g.active[k][0] is not None for k in range(10)]
    (100, [False, False, True, True, True, True, True, False, False, False])
    """
    if schedule.kind == "one-shot":
        return Slots(0, 1, (tuple(plan.slices[0] for plan in schedule.circuits),))
    if not 0 <= 2 * margin_us < schedule.slice_us:
        raise ConfigError(schedule.source, "margin_us", margin_us,
                          f"must leave part of a {schedule.slice_us} us day at both ends")
    grid = math.gcd(schedule.slice_us, schedule.night_us, margin_us, *(p.offset_us for p in schedule.circuits))
    cycle = math.lcm(*(schedule.cycle_of(p) for p in schedule.circuits))
    count = cycle // grid
    if count > 100_000:
        raise ConfigError(schedule.source, "slice_us/night_us/offset_us", grid,
                          f"a {grid} us slot grid gives {count} slots per cycle: use rounder durations")
    active = []
    for k in range(count):
        row: list[tuple[int | None, ...] | None] = []
        for c, plan in enumerate(schedule.circuits):
            at = schedule.at(c, k * grid)
            into = schedule.slice_us - at.left_us
            usable = at.index is not None and into >= margin_us and at.left_us >= grid + margin_us
            row.append(plan.slices[at.index] if usable and at.index is not None else None)
        active.append(tuple(row))
    return Slots(grid, count, tuple(active))


def _next_hops(grid: Slots, tor: int, want: int | None) -> list[tuple[int, int, int] | None]:
    """For every arrival slot, the first ``(slot, uplink, rack)`` from it on (cyclically, as
    an absolute slot number >= arrival) in which ``tor`` has a circuit to ``want`` (None: to
    any rack), the lowest uplink first; None where no circuit ever does. One backward sweep
    over two cycles, so a grid of 100,000 slots costs two passes, not one scan per slot.

    >>> from controller.schedule.generators import round_robin
    >>> g = slots(round_robin(4, slice_us=900, night_us=100))
    >>> hops = _next_hops(g, 0, 2)  # rack 0 reaches rack 2 on day 1, slots 10-18
    >>> hops[0], hops[9], hops[18], hops[29]
    ((10, 0, 2), (10, 0, 2), (18, 0, 2), (40, 0, 2))
    """
    here: list[tuple[int, int] | None] = []
    for row in grid.active:
        hit = None
        for uplink, matching in enumerate(row):
            dst = matching[tor] if matching is not None else None
            if dst is not None and (want is None or dst == want):
                hit = (uplink, dst)
                break
        here.append(hit)
    out: list[tuple[int, int, int] | None] = [None] * grid.count
    upcoming: tuple[int, int, int] | None = None
    for slot in range(2 * grid.count - 1, -1, -1):
        hit = here[slot % grid.count]
        if hit is not None:
            upcoming = (slot, hit[0], hit[1])
        if slot < grid.count:
            out[slot] = upcoming
    return out


def timeflow(schedule: Schedule, routing: str = "direct", margin_us: int = 0) -> list[TimeFlowEntry]:
    """Every ToR's time-flow entries for ``routing`` (see the module docstring), sending
    nothing in the first and the last ``margin_us`` of a day.

    ``send`` may exceed the slot count: the packet waits into the next cycle. A destination
    that no circuit ever reaches is a ConfigError naming both racks, except in a one-shot
    schedule (a pinned topology), where such a pair simply has no entry.
    """
    if routing not in ROUTINGS:
        raise ConfigError(schedule.source, "routing", routing, f"must be one of {', '.join(ROUTINGS)}")
    grid = slots(schedule, margin_us)
    out: list[TimeFlowEntry] = []
    for tor in range(schedule.racks):
        vlb = routing == "vlb" and schedule.kind != "one-shot"
        any_rack = _next_hops(grid, tor, None) if vlb else []
        for dst in range(schedule.racks):
            if dst == tor:
                continue
            direct = _next_hops(grid, tor, dst)
            for arrival in range(grid.count):
                hop = direct[arrival]
                if hop is None and schedule.kind == "one-shot":
                    continue  # a pinned topology: reached over several circuits (TopoOpt), if at all
                if hop is None:
                    raise ConfigError(schedule.source, "circuits", schedule.name,
                                      f"no circuit ever connects rack {tor} to rack {dst}")
                out.append(TimeFlowEntry(tor, dst, arrival, True, hop[0], hop[1], dst))
                if vlb:
                    first = any_rack[arrival]
                    assert first is not None
                    out.append(TimeFlowEntry(tor, dst, arrival, False, first[0], first[1], first[2]))
                else:
                    out.append(TimeFlowEntry(tor, dst, arrival, False, hop[0], hop[1], dst))
    return out
