"""Fidelity monitors and the verdicts that follow them: pure, measured rows in, verdicts out.

An emulation's figure is the network's only while the emulation held (Handigol et al.,
"Reproducible Network Experiments Using Container-Based Emulation", CoNEXT 2012): a run
whose monitors failed is not reported as a finding. Every experiment measures, per interval
(a collective, a block of iterations, a transfer), the machine's share of its cores and
each switch's share of one core (:func:`controller.experiments.cpu_use.cpu_row` columns).
A comparison is *decided* only when every interval it rests on stayed within the limits;
otherwise it is reported as **undecided: the emulation, not the network**, naming the
monitor that failed, in the table, the headline lines, ``summary.json``, the plot titles
and, with ``--require-decided``, the exit status.

Why these limits, on the 2-core machines this project targets: the rail-only all-to-all
ratio moved with the machine's CPU, not with the network (0.47 at 97% busy, 0.58 at 91%,
0.77 at 72%, 1.00 ± 0.29 at 50%), so a machine busier than 60% already bends the figures;
a switch process forwards on one thread, and above 85% of a core its queues, not the
emulated links, set the pace.

Where the fabric's links are monitored (:mod:`controller.experiments.link_rate`), two more
monitors apply: a link kept busy by its queue must have sent at least 90% of its configured
rate meanwhile (the shaper ran on time), and no link may have sent more than 105% of its rate
over the interval (the network was the configured one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LINK_CARRIED_LIMIT", "LINK_OVERSHOOT_LIMIT", "MACHINE_LIMIT", "SWITCH_LIMIT", "UNDECIDED", "Breach", "FidelityLimits", "Verdict", "breaches",
           "fidelity_lines", "judge", "undecided_note", "verdicts_json"]

#: the machine's share of all its cores above which an interval's figures are the machine's
MACHINE_LIMIT = 0.60
#: a switch's share of one core above which its forwarding, not the link, sets the rate
SWITCH_LIMIT = 0.85
#: the share of its rate a link must carry while busy
LINK_CARRIED_LIMIT = 0.90
#: the share of its rate no link may exceed over an interval
LINK_OVERSHOOT_LIMIT = 1.05
UNDECIDED = "undecided: the emulation, not the network"


@dataclass(frozen=True, slots=True, kw_only=True)
class FidelityLimits:
    """The limits an interval must stay within for its figures to count."""

    machine: float = MACHINE_LIMIT
    switch: float = SWITCH_LIMIT
    link_carried: float = LINK_CARRIED_LIMIT
    link_overshoot: float = LINK_OVERSHOOT_LIMIT


@dataclass(frozen=True, slots=True)
class Breach:
    """One monitor that failed in one interval: what it measured against its limit."""

    monitor: str  # "machine CPU", "switch CPU", "link rate" or "link overshoot"
    where: str  # "machine", the switch's name or the link's sending interface
    measured: float
    limit: float

    @property
    def severity(self) -> float:
        """How far past its limit, as a ratio above 1 (the worst breach has the largest)."""
        if self.monitor == "link rate":
            return self.limit / self.measured if self.measured > 0 else float("inf")
        return self.measured / self.limit if self.limit > 0 else float("inf")

    def text(self) -> str:
        """e.g. ``machine CPU 98% > 60%``, ``switch CPU rail0 91% of a core > 85%`` or
        ``link rate h0-eth0 carried 80% of its rate while busy < 90%``."""
        if self.monitor == "switch CPU":
            return f"switch CPU {self.where} {self.measured:.0%} of a core > {self.limit:.0%}"
        if self.monitor == "link rate":
            return f"link rate {self.where} carried {self.measured:.0%} of its rate while busy < {self.limit:.0%}"
        if self.monitor == "link overshoot":
            return f"link overshoot {self.where} sent {self.measured:.0%} of its rate > {self.limit:.0%}"
        return f"{self.monitor} {self.measured:.0%} > {self.limit:.0%}"


def _number(row: Mapping[str, Any], key: str) -> float | None:
    value = row.get(key)
    if value in (None, ""):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else number


#: every monitor, in the order verdicts name them
MONITORS = ("machine CPU", "switch CPU", "link rate", "link overshoot")


def breaches(row: Mapping[str, Any], limits: FidelityLimits = FidelityLimits()) -> list[Breach]:
    """The monitors one measured interval (a row with ``cpu_row`` columns) failed.

    >>> breaches({"machine_cpu": 0.98, "switch_cpu": 0.3, "busiest_switch": "rail0"})
    [Breach(monitor='machine CPU', where='machine', measured=0.98, limit=0.6)]
    >>> breaches({"machine_cpu": 0.4, "switch_cpu": 0.9, "busiest_switch": "leaf0"})[0].text()
    'switch CPU leaf0 90% of a core > 85%'
    >>> breaches({"machine_cpu": 0.4, "switch_cpu": None})
    []
    >>> [b.text() for b in breaches({"machine_cpu": 0.4, "link_carried": 0.8, "slowest_link": "h0-eth0",
    ...                              "link_overshoot": 1.2, "fastest_link": "rail0-eth1"})]
    ['link rate h0-eth0 carried 80% of its rate while busy < 90%', 'link overshoot rail0-eth1 sent 120% of its rate > 105%']
    """
    out = []
    machine = _number(row, "machine_cpu")
    if machine is not None and machine > limits.machine:
        out.append(Breach("machine CPU", "machine", machine, limits.machine))
    switch = _number(row, "switch_cpu")
    if switch is not None and switch > limits.switch:
        out.append(Breach("switch CPU", str(row.get("busiest_switch") or "?"), switch, limits.switch))
    carried = _number(row, "link_carried")
    if carried is not None and carried < limits.link_carried:
        out.append(Breach("link rate", str(row.get("slowest_link") or "?"), carried, limits.link_carried))
    overshoot = _number(row, "link_overshoot")
    if overshoot is not None and overshoot > limits.link_overshoot:
        out.append(Breach("link overshoot", str(row.get("fastest_link") or "?"), overshoot, limits.link_overshoot))
    return out


def _measured(row: Mapping[str, Any]) -> bool:
    return _number(row, "machine_cpu") is not None


@dataclass(frozen=True, slots=True)
class Verdict:
    """One comparison's verdict: its ``finding`` stands only if it is decided."""

    comparison: str
    finding: str
    intervals: int  # measured intervals the comparison rests on
    failed: int  # of those, how many broke a monitor
    worst: tuple[Breach, ...] = field(default=())  # the worst breach of each monitor

    @property
    def decided(self) -> bool:
        return self.intervals > 0 and self.failed == 0

    def reason(self) -> str:
        """Why the comparison is undecided ("" when it is decided)."""
        if self.decided:
            return ""
        if not self.intervals:
            return "no interval was measured"
        worst = "; ".join(b.text() for b in self.worst)
        return f"{worst}, in {self.failed} of {self.intervals} intervals"

    def text(self) -> str:
        """The finding, or ``undecided: the emulation, not the network (REASON)``.

        >>> Verdict("allreduce", "rail-only is even", 10, 0).text()
        'rail-only is even'
        >>> Verdict("alltoall", "rail-only is faster", 10, 10, (Breach("machine CPU", "machine", 0.98, 0.6),)).text()
        'undecided: the emulation, not the network (machine CPU 98% > 60%, in 10 of 10 intervals)'
        """
        return self.finding if self.decided else f"{UNDECIDED} ({self.reason()})"

    def to_json(self) -> dict[str, Any]:
        return {"comparison": self.comparison, "decided": self.decided,
                "finding": self.finding if self.decided else None, "figures_say": self.finding,
                "verdict": self.text(), "intervals": self.intervals, "failed_intervals": self.failed,
                "breaches": [{"monitor": b.monitor, "where": b.where, "measured": round(b.measured, 4),
                              "limit": b.limit} for b in self.worst]}


def judge(comparison: str, finding: str, rows: Iterable[Mapping[str, Any]],
          limits: FidelityLimits = FidelityLimits()) -> Verdict:
    """The verdict on ``comparison`` whose figures say ``finding``, from the measured
    intervals (``rows``) its figures come from.

    >>> ok = {"machine_cpu": 0.4, "switch_cpu": 0.2, "busiest_switch": "rail0"}
    >>> judge("allreduce", "even", [ok, ok]).decided
    True
    >>> v = judge("alltoall", "faster", [ok, {"machine_cpu": 0.9, "switch_cpu": 0.95, "busiest_switch": "leaf1"}])
    >>> v.decided, v.failed, [b.monitor for b in v.worst]
    (False, 1, ['machine CPU', 'switch CPU'])
    >>> link = {"machine_cpu": 0.4, "link_carried": 0.5, "slowest_link": "h0-eth0"}
    >>> [b.monitor for b in judge("x", "y", [link, {"machine_cpu": 0.9}]).worst]  # the machine first, always
    ['machine CPU', 'link rate']
    """
    measured = [r for r in rows if _measured(r)]
    worst: dict[str, Breach] = {}
    failed = 0
    for row in measured:
        found = breaches(row, limits)
        failed += bool(found)
        for b in found:
            if b.monitor not in worst or b.severity > worst[b.monitor].severity:
                worst[b.monitor] = b
    # in the monitors' own order (the machine first), not in the order the rows met them
    ordered = sorted(worst.values(), key=lambda b: MONITORS.index(b.monitor) if b.monitor in MONITORS else len(MONITORS))
    return Verdict(comparison, finding, len(measured), failed, tuple(ordered))


def verdicts_json(verdicts: Sequence[Verdict], limits: FidelityLimits = FidelityLimits()) -> dict[str, Any]:
    """``summary.json``'s ``fidelity`` section: the limits, each verdict and whether all held."""
    return {"limits": {"machine_cpu": limits.machine, "switch_cpu": limits.switch,
                       "link_carried": limits.link_carried, "link_overshoot": limits.link_overshoot},
            "all_decided": all(v.decided for v in verdicts),
            "verdicts": [v.to_json() for v in verdicts]}


def undecided_note(verdicts: Sequence[Verdict]) -> str:
    """A plot title's suffix: empty when every comparison is decided.

    >>> undecided_note([Verdict("a", "even", 3, 0)])
    ''
    >>> undecided_note([Verdict("a", "even", 3, 0), Verdict("b", "faster", 3, 2)])
    '\\nundecided (b): the emulation ran out of room'
    """
    names = [v.comparison for v in verdicts if not v.decided]
    return f"\nundecided ({', '.join(names)}): the emulation ran out of room" if names else ""


def fidelity_lines(verdicts: Sequence[Verdict]) -> list[str]:
    """A table's closing lines: each comparison's verdict, then what to do if one is undecided.

    >>> busy = (Breach("machine CPU", "machine", 0.9, 0.6),)
    >>> print("\\n".join(fidelity_lines([Verdict("allreduce", "even", 4, 0), Verdict("b", "faster", 4, 4, busy)])))
    fidelity, allreduce: even
    fidelity, b: undecided: the emulation, not the network (machine CPU 90% > 60%, in 4 of 4 intervals)
    fidelity: 1 of 2 comparisons undecided; lower the link rate or the sizes until the machine stays under 60% of its cores, every switch under 85% of a core and every busy link at 90% of its rate
    """
    lines = [f"fidelity, {v.comparison}: {v.text()}" for v in verdicts]
    undecided = sum(not v.decided for v in verdicts)
    if undecided:
        lines.append(f"fidelity: {undecided} of {len(verdicts)} comparisons undecided; lower the link rate or the "
                     f"sizes until the machine stays under {MACHINE_LIMIT:.0%} of its cores, every switch under "
                     f"{SWITCH_LIMIT:.0%} of a core and every busy link at {LINK_CARRIED_LIMIT:.0%} of its rate")
    return lines
