"""Schedule generators: one-shot, round-robin (RotorNet / Etalon strobe) and Opera-style."""

from __future__ import annotations

from collections.abc import Sequence

from controller.schedule.model import CircuitPlan, Schedule

__all__ = ["GENERATORS", "one_shot", "opera", "round_robin", "strobe_matching"]


def strobe_matching(racks: int, day: int) -> tuple[int | None, ...]:
    """Day ``day`` of the strobe: rack ``j`` sends to rack ``(day + 1 + j) mod racks``.

    >>> strobe_matching(4, 0), strobe_matching(4, 2)
    ((1, 2, 3, 0), (3, 0, 1, 2))
    """
    return tuple((day + 1 + j) % racks for j in range(racks))


def round_robin(racks: int, *, slice_us: int, night_us: int, name: str = "") -> Schedule:
    """One circuit switch cycling through the ``racks - 1`` strobe days, each followed by a
    night: every rack reaches every other rack once per cycle (RotorNet, Etalon)."""
    days = tuple(strobe_matching(racks, d) for d in range(racks - 1))
    return Schedule(name=name or f"round-robin-{racks}", kind="round-robin", racks=racks, slice_us=slice_us,
                    night_us=night_us, circuits=(CircuitPlan(days),))


def opera(racks: int, *, uplinks: int, slice_us: int, night_us: int, name: str = "") -> Schedule:
    """``uplinks`` circuit switches share the strobe days (switch ``k`` takes days
    ``k, k + uplinks, ...``) and reconfigure in turn, staggered by a period / uplinks, so at
    any instant all but one carry traffic (Opera, NSDI'20).

    >>> s = opera(5, uplinks=2, slice_us=900, night_us=100)
    >>> [len(c.slices) for c in s.circuits], [c.offset_us for c in s.circuits]
    ([2, 2], [0, 500])
    """
    if not 1 <= uplinks < racks:
        from controller.errors import ConfigError

        raise ConfigError("<opera>", "uplinks", uplinks, f"must be in 1..{racks - 1} for {racks} racks")
    period = slice_us + night_us
    circuits = tuple(CircuitPlan(tuple(strobe_matching(racks, d) for d in range(k, racks - 1, uplinks)),
                                 offset_us=k * period // uplinks) for k in range(uplinks))
    return Schedule(name=name or f"opera-{racks}x{uplinks}", kind="opera", racks=racks, slice_us=slice_us,
                    night_us=night_us, circuits=circuits)


def one_shot(matchings: Sequence[Sequence[int | None]], *, name: str = "one-shot") -> Schedule:
    """A pinned configuration: circuit switch ``k`` holds ``matchings[k]`` for good."""
    racks = len(matchings[0]) if matchings else 0
    return Schedule(name=name, kind="one-shot", racks=racks, slice_us=0, night_us=0,
                    circuits=tuple(CircuitPlan((tuple(m),)) for m in matchings))


GENERATORS = ("one-shot", "round-robin", "opera")
