"""What a consistent reconfiguration writes to each switch: pure, configurations in, rules out.

The fabric runs configuration version ``v`` (0 or 1; every scheduled entry and clock action
carries it). To move to a new schedule without sending a packet into a circuit switch that
holds the other configuration's matching, the controller (Reitblatt et al.'s two-phase
update, with the version a function of time as in TimeFlip, Mizrahi et al., 2015):

1. *prepare*: writes the new configuration under version ``1 - v`` on every switch (slice
   windows and circuits on the circuit switches; slot windows, time-flow entries and the
   ``timeflow_flip`` entries on the ToRs). Nothing matches them yet.
2. *commit*: picks three instants on the common epoch, the cut ``T``, the circuit switches'
   flip ``M`` and the new epoch ``E`` (``T < M < E``, ``E - T`` the guard), and writes to
   every switch, on its own clock: ToRs send nothing by the old entries at or after ``T``
   (a packet that would leave later, and every packet arriving in ``[T, E)``, is sent by
   ``timeflow_flip``, the new configuration's entries for arrival at ``E``); circuit
   switches change matchings at ``M``, when every packet sent before ``T`` has crossed
   them and before any packet sent from ``E`` on reaches them; ToRs use the new version
   from ``E``.
3. *finish* (after ``E``): the new clock becomes the default action, the old version's
   entries, the flip entries and the range entries are deleted.

Because the commit is inert until ``T``, 1 and 2 can travel in one write per switch: if a
switch rejects its part, every switch's version ``1 - v`` state is scrubbed before ``T``
and the old configuration runs on untouched (:mod:`controller.reconfigure.apply`).
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.errors import ConfigError
from controller.p4runtime.entities import Range, TableRule
from controller.schedule.model import Schedule
from controller.schedule.ocs_rules import CLOCK as OCS_CLOCK
from controller.schedule.ocs_rules import circuit_switch_rules, clock_rule
from controller.schedule.tor_rules import CLOCK as TOR_CLOCK
from controller.schedule.tor_rules import FLIP, tor_clock_rule, tor_flip_rules, tor_timeflow_rules
from controller.topology.model import Switch, Topology

__all__ = ["END_OF_TIME", "FlipTimes", "commit_rules", "flip_times", "prepare_rules"]

#: the largest 48-bit timestamp: a range entry [t, END_OF_TIME] holds from t on
END_OF_TIME = (1 << 48) - 1


@dataclass(frozen=True)
class FlipTimes:
    """The commit's instants on the controller's clock (µs): cut, circuit flip, new epoch."""

    cut_us: int
    ocs_flip_us: int
    epoch_us: int

    @property
    def guard_us(self) -> int:
        return self.epoch_us - self.cut_us


def flip_times(now_us: float, *, lead_us: int, guard_us: int) -> FlipTimes:
    """The cut ``lead_us`` from now (time for every switch to take its commit), the circuit
    switches' flip in the middle of the guard and the new epoch at its end.

    >>> flip_times(1_000_000.4, lead_us=30_000, guard_us=4_000)
    FlipTimes(cut_us=1030000, ocs_flip_us=1032000, epoch_us=1034000)
    """
    if lead_us < 0:
        raise ConfigError("<reconfigure>", "lead_us", lead_us, "must be >= 0")
    if guard_us < 2:
        raise ConfigError("<reconfigure>", "guard_us", guard_us, "must be >= 2 us")
    cut = round(now_us) + lead_us
    return FlipTimes(cut, cut + guard_us // 2, cut + guard_us)


def _local(t_us: int, started_at_us: float) -> int:
    """Controller time ``t_us`` on a switch whose clock read 0 at ``started_at_us``."""
    local = round(t_us - started_at_us)
    if not 0 < local < END_OF_TIME:
        raise ConfigError("<reconfigure>", "flip time", t_us, f"is {local} us on a switch's clock: not ahead of it")
    return local


def _check_role(topo: Topology, sw: Switch) -> None:
    if sw.role not in ("ocs", "tor"):
        raise ConfigError(topo.name, f"switches.{sw.name}.role", sw.role, "a scheduled fabric has tor and ocs switches")


def prepare_rules(topo: Topology, sw: Switch, schedule: Schedule, *, circuit: int, version: int,
                  routing: str = "direct", margin_us: int = 0) -> list[TableRule]:
    """What switch ``sw`` (circuit switch number ``circuit``, or a ToR) needs of ``schedule``
    under ``version`` before the commit; inert until the commit selects that version."""
    _check_role(topo, sw)
    if sw.role == "ocs":
        return circuit_switch_rules(schedule, circuit, version=version)
    return [*tor_timeflow_rules(topo, schedule, sw.name, routing=routing, version=version, margin_us=margin_us),
            *tor_flip_rules(topo, schedule, sw.name, routing=routing, margin_us=margin_us)]


def commit_rules(topo: Topology, sw: Switch, schedule: Schedule, *, circuit: int, version: int,
                 started_at_us: float, times: FlipTimes, hold: bool = False) -> list[TableRule]:
    """The commit of switch ``sw``, on its own clock (it read 0 at ``started_at_us`` on the
    controller's): range entries on the timestamp, the new clock's first of all.

    >>> from controller.schedule.generators import one_shot
    >>> from controller.topology.optical import optical
    >>> topo = optical(3, 1)
    >>> rules = commit_rules(topo, topo.switch("tor0"), one_shot([(1, 2, 0)]), circuit=-1, version=1,
    ...                      started_at_us=500, times=FlipTimes(10_500, 11_500, 12_500))
    >>> [(r.action.split(".")[1], r.match["standard_metadata.ingress_global_timestamp"].low) for r in rules]
    [('unclocked', 12000), ('cut_at', 0), ('before_epoch', 10000)]
    """
    _check_role(topo, sw)
    start = round(started_at_us)
    ts = "standard_metadata.ingress_global_timestamp"
    if sw.role == "ocs":
        clock = clock_rule(schedule, circuit, started_at_us=start, epoch_us=times.epoch_us, version=version)
        flip = _local(times.ocs_flip_us, started_at_us)
        return [TableRule(OCS_CLOCK, {ts: Range(flip, END_OF_TIME)}, clock.action, clock.params, priority=1)]
    clock = tor_clock_rule(schedule, started_at_us=start, epoch_us=times.epoch_us, hold=hold, version=version)
    cut, epoch = _local(times.cut_us, started_at_us), _local(times.epoch_us, started_at_us)
    return [TableRule(TOR_CLOCK, {ts: Range(epoch, END_OF_TIME)}, clock.action, clock.params, priority=1),
            TableRule(FLIP, {ts: Range(0, cut - 1)}, "TorIngress.cut_at", {"cut_us": cut, "next_epoch_us": epoch},
                      priority=1),
            TableRule(FLIP, {ts: Range(cut, epoch - 1)}, "TorIngress.before_epoch", {"next_epoch_us": epoch},
                      priority=1)]
