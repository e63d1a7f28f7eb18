"""circuit_switch's entries for one circuit switch of a schedule: pure, a schedule in, rules out.

Every entry and the clock carry the configuration ``version`` (0 or 1; a reconfiguration
installs the next configuration under the other one, see :mod:`controller.reconfigure`).

- ``clock``'s default action: ``pin(version, 0)`` for a one-shot schedule, else
  ``set_clock(version, offset, cycle)`` where the offset maps the switch's own clock (BMv2's
  ``ingress_global_timestamp`` counts from the switch's start) onto the fabric's epoch and
  the circuit's phase;
- ``slice_of_phase``: one range per day, ``[start, end)`` of the cycle -> the slice; the
  nights are the gaps between;
- ``circuit``: ``(slice, port of rack src) -> port of rack dst`` for every circuit of every day.
"""

from __future__ import annotations

from collections.abc import Sequence

from controller.errors import ConfigError
from controller.p4runtime.entities import Exact, Range, TableRule
from controller.schedule.model import Schedule

__all__ = ["CIRCUIT", "CLOCK", "SLICE_OF_PHASE", "circuit_switch_rules", "clock_rule"]

CLOCK = "OcsIngress.clock"
SLICE_OF_PHASE = "OcsIngress.slice_of_phase"
CIRCUIT = "OcsIngress.circuit"


def clock_rule(schedule: Schedule, circuit: int, *, started_at_us: int = 0, epoch_us: int = 0,
               version: int = 0) -> TableRule:
    """The ``clock`` default action of circuit switch ``circuit``.

    ``started_at_us`` is when (on the controller's clock) the switch's timestamps were 0 and
    ``epoch_us`` the fabric's epoch on the same clock: the switch's phase is then
    ``(ts + started_at - epoch - circuit offset) mod cycle``.

    >>> from controller.schedule.generators import round_robin
    >>> clock_rule(round_robin(4, slice_us=900, night_us=100), 0, started_at_us=5000, epoch_us=200).params
    {'version': 0, 'offset_us': 1800, 'cycle_us': 3000}
    """
    if schedule.kind == "one-shot":
        return TableRule(CLOCK, {}, "OcsIngress.pin", {"version": version, "slice": 0}, is_default=True)
    plan = schedule.circuits[circuit]
    cycle = schedule.cycle_of(plan)
    offset = (started_at_us - epoch_us - plan.offset_us) % cycle
    return TableRule(CLOCK, {}, "OcsIngress.set_clock", {"version": version, "offset_us": offset, "cycle_us": cycle},
                     is_default=True)


def circuit_switch_rules(schedule: Schedule, circuit: int, ports: Sequence[int] | None = None, *,
                         version: int = 0) -> list[TableRule]:
    """The ``slice_of_phase`` and ``circuit`` entries of circuit switch ``circuit``; rack
    ``r`` is on port ``ports[r]`` (default ``r + 1``)."""
    if not 0 <= circuit < len(schedule.circuits):
        raise ConfigError(schedule.source, "circuit", circuit, f"the schedule has {len(schedule.circuits)} circuit switches")
    port = list(ports) if ports is not None else [r + 1 for r in range(schedule.racks)]
    if len(port) != schedule.racks or len(set(port)) != len(port):
        raise ConfigError(schedule.source, "ports", port, f"one distinct port for each of the {schedule.racks} racks")
    rules: list[TableRule] = []
    if schedule.kind != "one-shot":
        rules += [TableRule(SLICE_OF_PHASE, {"meta.version": Exact(version), "meta.phase_us": Range(start, end - 1)},
                            "OcsIngress.set_slice",
                            {"slice": i}, priority=1)
                  for start, end, i in schedule.slice_windows(circuit)]
    for i, matching in enumerate(schedule.circuits[circuit].slices):
        rules += [TableRule(CIRCUIT, {"meta.version": Exact(version), "meta.slice": Exact(i),
                                      "standard_metadata.ingress_port": Exact(port[src])},
                            "OcsIngress.forward", {"port": port[dst]})
                  for src, dst in enumerate(matching) if dst is not None]
    return rules
