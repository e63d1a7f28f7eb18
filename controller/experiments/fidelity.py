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

__all__ = ["DECIDED", "LINK_CARRIED_LIMIT", "LINK_OVERSHOOT_LIMIT", "MACHINE_LIMIT", "OUTCOMES", "OUT_OF_ROOM",
           "SWITCH_LIMIT", "TOO_FEW_RUNS", "TOO_SPREAD", "UNDECIDED", "Breach", "FidelityLimits", "Runs", "Verdict",
           "all_decided", "breaches", "fidelity_lines", "judge", "runs_of", "undecided_note", "verdicts_json"]

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
        where = "" if self.where == "machine" else f" {self.where}"  # a fabric across machines names its busiest
        return f"{self.monitor}{where} {self.measured:.0%} > {self.limit:.0%}"


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
    >>> breaches({"machine_cpu": 0.77, "busiest_machine": "m1"})[0].text()  # a fabric across machines
    'machine CPU m1 77% > 60%'
    >>> [b.text() for b in breaches({"machine_cpu": 0.4, "link_carried": 0.8, "slowest_link": "h0-eth0",
    ...                              "link_overshoot": 1.2, "fastest_link": "rail0-eth1"})]
    ['link rate h0-eth0 carried 80% of its rate while busy < 90%', 'link overshoot rail0-eth1 sent 120% of its rate > 105%']
    """
    out = []
    machine = _number(row, "machine_cpu")
    if machine is not None and machine > limits.machine:
        out.append(Breach("machine CPU", str(row.get("busiest_machine") or "machine"), machine, limits.machine))
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


def _succeeded(row: Mapping[str, Any]) -> bool:
    """A row whose figures count: its run succeeded (rows without ``ok`` are intervals)."""
    return bool(row.get("ok", True))


#: a verdict's outcomes: decided, or why not (in the order a verdict names them)
DECIDED = "decided"
TOO_FEW_RUNS = "too few runs"
OUT_OF_ROOM = "the emulation ran out of room"
TOO_SPREAD = "spread too large to tell"
OUTCOMES = (DECIDED, TOO_FEW_RUNS, OUT_OF_ROOM, TOO_SPREAD)


@dataclass(frozen=True, slots=True)
class Runs:
    """One configuration behind a comparison: its runs that succeeded, of how many."""

    label: str
    ok: int
    total: int

    def text(self) -> str:
        return f"{self.label}: {self.ok} of {self.total} succeeded"


@dataclass(frozen=True, slots=True)
class Verdict:
    """One comparison's verdict: its ``finding`` stands only if it is decided, that is when
    every configuration behind it has at least ``needed`` successful runs, every monitor held
    in every interval its figures rest on, and its interval is narrow enough to call
    (``too_spread`` empty)."""

    comparison: str
    finding: str
    intervals: int  # measured intervals the comparison rests on
    failed: int  # of those, how many broke a monitor
    worst: tuple[Breach, ...] = field(default=())  # the worst breach of each monitor
    runs: tuple[Runs, ...] = field(default=())  # the configurations behind it
    needed: int = 1  # successful runs each configuration needs
    too_spread: str = ""  # why the interval supports no finding ("" when it does)

    @property
    def short(self) -> tuple[Runs, ...]:
        """The configurations with fewer successful runs than the statistics need."""
        return tuple(r for r in self.runs if r.ok < self.needed)

    @property
    def outcomes(self) -> tuple[str, ...]:
        """Every reason the comparison is undecided, in :data:`OUTCOMES` order; ``(DECIDED,)``
        when there is none."""
        out = []
        if self.short or not self.runs:
            out.append(TOO_FEW_RUNS)
        if self.failed or not self.intervals:
            out.append(OUT_OF_ROOM)
        if self.too_spread:
            out.append(TOO_SPREAD)
        return tuple(out) or (DECIDED,)

    @property
    def outcome(self) -> str:
        """:data:`DECIDED` or the first reason it is not."""
        return self.outcomes[0]

    @property
    def decided(self) -> bool:
        return self.outcome == DECIDED

    def reason(self) -> str:
        """Why the comparison is undecided ("" when it is decided)."""
        parts = []
        for outcome in self.outcomes:
            if outcome == TOO_FEW_RUNS:
                detail = "; ".join(r.text() for r in self.short) if self.runs else "no configuration named its runs"
                parts.append(f"too few runs ({detail}; {self.needed} needed)")
            elif outcome == OUT_OF_ROOM:
                if not self.intervals:
                    parts.append(f"{UNDECIDED} (no interval was measured)")
                else:
                    worst = "; ".join(b.text() for b in self.worst)
                    parts.append(f"{UNDECIDED} ({worst}, in {self.failed} of {self.intervals} intervals)")
            elif outcome == TOO_SPREAD:
                parts.append(f"{TOO_SPREAD} ({self.too_spread})")
        return "; ".join(parts)

    def text(self) -> str:
        """The finding, or ``undecided: ...`` with every reason.

        >>> ok = (Runs("a", 8, 8), Runs("b", 8, 8))
        >>> Verdict("allreduce", "rail-only is even", 10, 0, runs=ok, needed=2).text()
        'rail-only is even'
        >>> Verdict("alltoall", "rail-only is faster", 10, 10, (Breach("machine CPU", "machine", 0.98, 0.6),),
        ...         runs=ok, needed=2).text()
        'undecided: the emulation, not the network (machine CPU 98% > 60%, in 10 of 10 intervals)'
        >>> Verdict("x", "a is faster", 3, 0, runs=(Runs("a", 1, 4), Runs("b", 4, 4)), needed=2).text()
        'undecided: too few runs (a: 1 of 4 succeeded; 2 needed)'
        >>> Verdict("x", "", 3, 0, runs=ok, needed=2, too_spread="0.900 [0.700, 1.100] over 8").text()
        'undecided: spread too large to tell (0.900 [0.700, 1.100] over 8)'
        """
        if self.decided:
            return self.finding
        reason = self.reason()
        return reason if reason.startswith("undecided") else f"undecided: {reason}"

    def to_json(self) -> dict[str, Any]:
        return {"comparison": self.comparison, "decided": self.decided, "outcome": self.outcome,
                "outcomes": list(self.outcomes),
                "finding": self.finding if self.decided else None, "figures_say": self.finding or None,
                "verdict": self.text(), "intervals": self.intervals, "failed_intervals": self.failed,
                "runs": [{"configuration": r.label, "ok": r.ok, "total": r.total} for r in self.runs],
                "runs_needed": self.needed, "too_spread": self.too_spread or None,
                "breaches": [{"monitor": b.monitor, "where": b.where, "measured": round(b.measured, 4),
                              "limit": b.limit} for b in self.worst]}


def runs_of(label: str, rows: Iterable[Mapping[str, Any]]) -> Runs:
    """The :class:`Runs` of one configuration from its rows (``ok`` each).

    >>> runs_of("rail-only allreduce", [{"ok": True}, {"ok": False}, {"ok": True}])
    Runs(label='rail-only allreduce', ok=2, total=3)
    """
    rows = list(rows)
    return Runs(label, sum(_succeeded(r) for r in rows), len(rows))


def judge(comparison: str, finding: str, rows: Iterable[Mapping[str, Any]],
          limits: FidelityLimits = FidelityLimits(), *, runs: Sequence[Runs], needed: int = 2,
          too_spread: str = "") -> Verdict:
    """The verdict on ``comparison`` whose figures say ``finding``: ``rows`` are the measured
    intervals its figures come from (a row with ``ok`` false is a failed run, whose figures
    do not count: its monitors are not judged), ``runs`` the configurations behind it,
    each needing ``needed`` successful runs, and ``too_spread`` says why its interval
    supports no finding (empty when it does).

    >>> ok = {"machine_cpu": 0.4, "switch_cpu": 0.2, "busiest_switch": "rail0"}
    >>> both = [Runs("a", 2, 2), Runs("b", 2, 2)]
    >>> judge("allreduce", "even", [ok, ok], runs=both).decided
    True
    >>> v = judge("alltoall", "faster", [ok, {"machine_cpu": 0.9, "switch_cpu": 0.95, "busiest_switch": "leaf1"}],
    ...           runs=both)
    >>> v.decided, v.failed, [b.monitor for b in v.worst]
    (False, 1, ['machine CPU', 'switch CPU'])
    >>> link = {"machine_cpu": 0.4, "link_carried": 0.5, "slowest_link": "h0-eth0"}
    >>> [b.monitor for b in judge("x", "y", [link, {"machine_cpu": 0.9}], runs=both).worst]  # the machine first
    ['machine CPU', 'link rate']
    >>> judge("x", "y", [ok, {**ok, "machine_cpu": 0.99, "ok": False}], runs=both).decided  # a failed run's CPU
    True
    >>> judge("x", "y", [ok], runs=[Runs("a", 0, 5), Runs("b", 5, 5)]).outcome
    'too few runs'
    """
    measured = [r for r in rows if _measured(r) and _succeeded(r)]
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
    return Verdict(comparison, finding, len(measured), failed, tuple(ordered), tuple(runs), needed, too_spread)


def all_decided(verdicts: Sequence[Verdict]) -> bool:
    """Is there a comparison, and is every one decided? (A run that judged nothing decided
    nothing.)

    >>> all_decided([])
    False
    """
    return bool(verdicts) and all(v.decided for v in verdicts)


def verdicts_json(verdicts: Sequence[Verdict], limits: FidelityLimits = FidelityLimits()) -> dict[str, Any]:
    """``summary.json``'s ``fidelity`` section: the limits, each verdict and whether all held."""
    return {"limits": {"machine_cpu": limits.machine, "switch_cpu": limits.switch,
                       "link_carried": limits.link_carried, "link_overshoot": limits.link_overshoot},
            "all_decided": all_decided(verdicts),
            "verdicts": [v.to_json() for v in verdicts]}


def undecided_note(verdicts: Sequence[Verdict]) -> str:
    """A plot title's suffix: empty when every comparison is decided, else the undecided
    comparisons by their first reason.

    >>> both = (Runs("a", 3, 3), Runs("b", 3, 3))
    >>> undecided_note([Verdict("a", "even", 3, 0, runs=both)])
    ''
    >>> undecided_note([Verdict("a", "even", 3, 0, runs=both), Verdict("b", "faster", 3, 2, runs=both)])
    '\\nundecided (b): the emulation ran out of room'
    >>> undecided_note([Verdict("b", "", 3, 2, runs=both), Verdict("c", "", 3, 0, runs=(Runs("x", 0, 3),))])
    '\\nundecided (b): the emulation ran out of room; (c): too few runs'
    """
    groups: dict[str, list[str]] = {}
    for v in verdicts:
        if not v.decided:
            groups.setdefault(v.outcome, []).append(v.comparison)
    if not groups:
        return ""
    return "\nundecided " + "; ".join(f"({', '.join(names)}): {outcome}" for outcome, names in groups.items())


#: what to do about each reason a comparison is undecided
_ADVICE = {
    OUT_OF_ROOM: (f"lower the link rate or the sizes until the machine stays under {MACHINE_LIMIT:.0%} of its cores, "
                  f"every switch under {SWITCH_LIMIT:.0%} of a core and every busy link at {LINK_CARRIED_LIMIT:.0%} "
                  "of its rate"),
    TOO_FEW_RUNS: "see the log for why runs failed, and run more repetitions",
    TOO_SPREAD: "run more repetitions, or on a quieter machine",
}


def fidelity_lines(verdicts: Sequence[Verdict]) -> list[str]:
    """A table's closing lines: each comparison's verdict, then what to do if one is undecided.

    >>> busy = (Breach("machine CPU", "machine", 0.9, 0.6),)
    >>> both = (Runs("a", 4, 4), Runs("b", 4, 4))
    >>> print("\\n".join(fidelity_lines([Verdict("allreduce", "even", 4, 0, runs=both),
    ...                                  Verdict("b", "faster", 4, 4, busy, runs=both)])))
    fidelity, allreduce: even
    fidelity, b: undecided: the emulation, not the network (machine CPU 90% > 60%, in 4 of 4 intervals)
    fidelity: 1 of 2 comparisons undecided; lower the link rate or the sizes until the machine stays under 60% of its cores, every switch under 85% of a core and every busy link at 90% of its rate
    """
    lines = [f"fidelity, {v.comparison}: {v.text()}" for v in verdicts]
    undecided = [v for v in verdicts if not v.decided]
    if undecided:
        reasons = dict.fromkeys(o for v in undecided for o in v.outcomes)
        lines.append(f"fidelity: {len(undecided)} of {len(verdicts)} comparisons undecided; "
                     + "; ".join(_ADVICE[o] for o in reasons if o in _ADVICE))
    return lines
