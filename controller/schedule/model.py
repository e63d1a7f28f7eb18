"""Reconfiguration schedules of an optical fabric: which racks each circuit switch connects,
in which time slice. Pure and immutable; :mod:`controller.schedule.loader` reads the files.

A fabric has ``racks`` ToRs and one or more circuit switches; ToR ``r`` is cabled to port
``r`` of every circuit switch (its uplink ``u`` goes to circuit switch ``u``). Each circuit
switch cycles through its *slices*: a slice is a directed matching, ``matching[src] = dst``
(``None``: that port is dark), held for ``slice_us`` and followed by a *night* of
``night_us`` during which the switch reconfigures and forwards nothing. A circuit switch's
cycle starts ``offset_us`` after the fabric's epoch (Opera staggers its switches so that
only one reconfigures at a time). A one-shot schedule has one slice and no night: the
configuration is pinned, as on TopoOpt's patch panels.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.errors import ConfigError

__all__ = ["KINDS", "CircuitPlan", "Schedule", "SliceAt"]

KINDS = ("one-shot", "round-robin", "opera", "custom")


@dataclass(frozen=True)
class SliceAt:
    """Where a circuit switch's cycle is at some time: slice ``index`` (None: night) and the
    microseconds left before it ends."""

    index: int | None
    left_us: int


@dataclass(frozen=True)
class CircuitPlan:
    """The slices of one circuit switch and its phase against the fabric's epoch."""

    slices: tuple[tuple[int | None, ...], ...]
    offset_us: int = 0

    def matching(self, index: int) -> tuple[int | None, ...]:
        return self.slices[index]


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """A whole fabric's schedule (see the module docstring).

    >>> from controller.schedule.generators import round_robin
    >>> s = round_robin(4, slice_us=1000, night_us=100)
    >>> s.cycle_us, s.at(0, 1050), s.at(0, 1150)
    (3300, SliceAt(index=None, left_us=50), SliceAt(index=1, left_us=950))
    >>> s.circuits[0].slices[0]
    (1, 2, 3, 0)
    """

    name: str
    kind: str
    racks: int
    slice_us: int
    night_us: int
    circuits: tuple[CircuitPlan, ...]
    source: str = "<schedule>"

    def __post_init__(self) -> None:
        def bad(key: str, value: object, problem: str) -> ConfigError:
            return ConfigError(self.source, key, value, problem)

        if self.kind not in KINDS:
            raise bad("kind", self.kind, f"must be one of {', '.join(KINDS)}")
        if self.racks < 2:
            raise bad("racks", self.racks, "a fabric needs at least 2 racks")
        if self.slice_us < 1 and self.kind != "one-shot":
            raise bad("slice_us", self.slice_us, "must be >= 1 us")
        if self.night_us < 0:
            raise bad("night_us", self.night_us, "must be >= 0")
        if not self.circuits:
            raise bad("circuits", [], "needs at least one circuit switch")
        for c, plan in enumerate(self.circuits):
            if not plan.slices:
                raise bad(f"circuits[{c}].slices", [], "needs at least one slice")
            if self.kind == "one-shot" and len(plan.slices) != 1:
                raise bad(f"circuits[{c}].slices", len(plan.slices), "a one-shot schedule has exactly one slice")
            if not 0 <= plan.offset_us < max(1, self.cycle_of(plan)):
                raise bad(f"circuits[{c}].offset_us", plan.offset_us, "must be within the cycle")
            for i, m in enumerate(plan.slices):
                where = f"circuits[{c}].slices[{i}]"
                if len(m) != self.racks:
                    raise bad(where, list(m), f"a matching names a destination for each of the {self.racks} racks")
                used = [d for d in m if d is not None]
                if any(not 0 <= d < self.racks for d in used):
                    raise bad(where, list(m), f"destinations are racks 0..{self.racks - 1}")
                if len(set(used)) != len(used):
                    raise bad(where, list(m), "two racks send to the same rack: not a matching")
                if any(d == s for s, d in enumerate(m)):
                    raise bad(where, list(m), "a rack connected to itself")

    @property
    def period_us(self) -> int:
        """One slice and its night."""
        return self.slice_us + self.night_us

    def cycle_of(self, plan: CircuitPlan) -> int:
        return len(plan.slices) * self.period_us

    @property
    def cycle_us(self) -> int:
        """The longest circuit switch's cycle (0 for a one-shot schedule)."""
        return 0 if self.kind == "one-shot" else max(self.cycle_of(p) for p in self.circuits)

    @property
    def duty_cycle(self) -> float:
        """The fraction of time a circuit carries traffic."""
        return 1.0 if self.kind == "one-shot" else self.slice_us / self.period_us

    def at(self, circuit: int, t_us: int) -> SliceAt:
        """The slice of circuit switch ``circuit`` at ``t_us`` after the epoch."""
        plan = self.circuits[circuit]
        if self.kind == "one-shot":
            return SliceAt(0, 0)
        phase = (t_us - plan.offset_us) % self.cycle_of(plan)
        index, into = divmod(phase, self.period_us)
        if into >= self.slice_us:
            return SliceAt(None, self.period_us - into)
        return SliceAt(index, self.slice_us - into)

    def slice_windows(self, circuit: int) -> list[tuple[int, int, int]]:
        """``(start, end, slice)`` of every day of one cycle, in µs of the cycle's phase."""
        plan = self.circuits[circuit]
        return [(i * self.period_us, i * self.period_us + self.slice_us, i) for i in range(len(plan.slices))]

    def connected(self, src: int, dst: int) -> list[tuple[int, int]]:
        """Every ``(circuit, slice)`` in which rack ``src`` has a circuit to rack ``dst``."""
        return [(c, i) for c, plan in enumerate(self.circuits) for i, m in enumerate(plan.slices)
                if m[src] == dst]
