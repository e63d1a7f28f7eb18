"""What a running circuit switch holds, read back as a schedule: the running version's clock,
slice windows and circuits (:func:`circuit_view`, pure) and where its cycle is now
(:func:`read_circuit_switch`, which reads and probes the switch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.entities import Exact, Range, TableRule, decode_rule
from controller.p4runtime.schema import P4Schema
from controller.schedule.ocs_rules import CIRCUIT, CLOCK, SLICE_OF_PHASE

__all__ = ["CircuitView", "circuit_view", "read_circuit_switch"]


@dataclass(frozen=True)
class CircuitView:
    """One circuit switch as it runs: ``cycle_us`` 0 when pinned; ``windows`` the days
    ``(start, end, slice)`` of the cycle; ``matchings[slice]`` as ``(src rack, dst rack)``
    pairs (rack r on port r + 1); ``now`` the slice it is in (None: night), ``left_us`` of it."""

    switch: str
    version: int
    cycle_us: int
    windows: tuple[tuple[int, int, int], ...]
    matchings: dict[int, tuple[tuple[int, int], ...]]
    pending_flip: bool  # a reconfiguration's range entry is installed
    now: int | None = None
    left_us: int | None = None

    def at_phase(self, phase_us: int) -> tuple[int | None, int]:
        """The slice at ``phase_us`` of the cycle and the µs left of it (or of the night)."""
        if not self.cycle_us:
            return (self.windows[0][2] if self.windows else 0), 0
        for start, end, index in self.windows:
            if start <= phase_us < end:
                return index, end - phase_us
        later = [start for start, _, _ in self.windows if start > phase_us]
        return None, (min(later) if later else self.cycle_us + min((s for s, _, _ in self.windows), default=0)) - phase_us


def circuit_view(switch: str, clock: TableRule, entries: Sequence[TableRule]) -> CircuitView:
    """The running configuration of a circuit switch from its clock's default action and its
    entries (only those of the running version count).

    >>> from controller.schedule.generators import round_robin
    >>> from controller.schedule.ocs_rules import circuit_switch_rules, clock_rule
    >>> s = round_robin(3, slice_us=900, night_us=100)
    >>> v = circuit_view("ocs0", clock_rule(s, 0), circuit_switch_rules(s, 0))
    >>> v.cycle_us, v.windows, v.matchings[1], v.at_phase(950)
    (2000, ((0, 900, 0), (1000, 1900, 1)), ((0, 2), (1, 0), (2, 1)), (None, 50))
    """
    version = int(clock.params.get("version", 0))
    pinned = clock.action.endswith(".pin")
    cycle = 0 if pinned else int(clock.params.get("cycle_us", 0))
    mine = [e for e in entries if e.match.get("meta.version") == Exact(version)]
    windows = []
    for e in mine:
        if e.table == SLICE_OF_PHASE:
            r = e.match["meta.phase_us"]
            assert isinstance(r, Range)
            windows.append((r.low, r.high + 1, int(e.params["slice"])))
    if pinned:
        windows = [(0, 0, int(clock.params.get("slice", 0)))]
    matchings: dict[int, list[tuple[int, int]]] = {}
    for e in mine:
        if e.table == CIRCUIT and e.action.endswith(".forward"):
            index = e.match["meta.slice"]
            port = e.match["standard_metadata.ingress_port"]
            assert isinstance(index, Exact) and isinstance(port, Exact)
            matchings.setdefault(index.value, []).append((port.value - 1, int(e.params["port"]) - 1))
    pending = any(e.table == CLOCK and not e.is_default for e in entries)
    return CircuitView(switch, version, cycle, tuple(sorted(windows)),
                       {k: tuple(sorted(v)) for k, v in sorted(matchings.items())}, pending)


def read_circuit_switch(name: str, client: P4RuntimeClient, schema: P4Schema, *, probes: int = 8) -> CircuitView:
    """Read a circuit switch's running configuration and where its cycle is now."""
    from controller.schedule.clock import controller_now_us, probe_clock

    clock = decode_rule(schema, client.read_default_entry(schema.table(CLOCK).id))
    entries = [r for t in (CLOCK, SLICE_OF_PHASE, CIRCUIT) for r in client.read_rules(schema, schema.table(t).id)]
    view = circuit_view(name, clock, entries)
    if not view.cycle_us:
        return view
    est = probe_clock(client, schema, probes=probes)
    phase = (round(est.switch_time(controller_now_us())) + int(clock.params.get("offset_us", 0))) % view.cycle_us
    now, left = view.at_phase(phase)
    return CircuitView(view.switch, view.version, view.cycle_us, view.windows, view.matchings, view.pending_flip,
                       now, left)
