"""Time-division networks (TDNs) of a schedule: pure, a schedule in, a TDN per slot out.

TDTCP sees a reconfigurable fabric as a cycle of distinct networks. Here a TDN is a distinct
state of the whole fabric: which matching each circuit switch holds. A slot in which every
circuit switch is dark (a night) is no new network, so it keeps the TDN before it and no
notification is due. TDN ids are given in order of first appearance in the cycle, from 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.errors import ConfigError
from controller.schedule.model import Schedule
from controller.schedule.timeflow import slots

__all__ = ["MAX_TDNS", "TdnChange", "tdn_changes", "tdn_of_slots"]

#: the notification carries the id in one byte, and the ToR stores id + 1 in one byte
MAX_TDNS = 255


@dataclass(frozen=True)
class TdnChange:
    """From ``at_us`` into the cycle on, the fabric is TDN ``tdn``."""

    at_us: int
    tdn: int


def _state(schedule: Schedule, t_us: int) -> tuple[int | None, ...]:
    return tuple(schedule.at(c, t_us).index for c in range(len(schedule.circuits)))


def tdn_of_slots(schedule: Schedule, margin_us: int = 0) -> list[int]:
    """The TDN of every slot of the ToRs' grid (``slots(schedule, margin_us)``).

    >>> from controller.schedule.generators import round_robin
    >>> tdn_of_slots(round_robin(3, slice_us=900, night_us=100))
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    """
    grid = slots(schedule, margin_us)
    if schedule.kind == "one-shot":
        return [0]
    states = [_state(schedule, k * grid.slot_us) for k in range(grid.count)]
    ids: dict[tuple[int | None, ...], int] = {}
    for st in states:
        if any(i is not None for i in st) and st not in ids:
            ids[st] = len(ids)
    if not ids:
        raise ConfigError(schedule.source, "circuits", schedule.name, "every slot is dark: no TDN")
    if len(ids) > MAX_TDNS:
        raise ConfigError(schedule.source, "circuits", len(ids), f"more than {MAX_TDNS} distinct TDNs")
    out: list[int | None] = [ids.get(st) for st in states]
    last = next(t for t in reversed(out) if t is not None)  # a night at the start keeps the cycle's last TDN
    for k, t in enumerate(out):
        if t is None:
            out[k] = last
        else:
            last = t
    return [int(t) for t in out if t is not None]


def tdn_changes(schedule: Schedule) -> list[TdnChange]:
    """Where in the cycle the TDN changes (one entry when it never does).

    >>> from controller.schedule.generators import round_robin
    >>> tdn_changes(round_robin(3, slice_us=900, night_us=100))
    [TdnChange(at_us=0, tdn=0), TdnChange(at_us=1000, tdn=1)]
    """
    tdns = tdn_of_slots(schedule)
    grid = slots(schedule)
    changes = [TdnChange(k * grid.slot_us, t) for k, t in enumerate(tdns) if t != tdns[k - 1]]  # cyclic
    return changes or [TdnChange(0, tdns[0])]
