"""CPU use over an interval, from two samples: each switch's share of one core and how busy
the whole machine was. Pure: :mod:`mininet.cpu_sampler` reads the samples from ``/proc``.

An emulation's figures are the network's only while neither the switches nor the machine
run out of CPU; an experiment prints these shares beside every collective so a run shows
which it was.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.experiments.link_rate import LinkUse, merge_link_uses

__all__ = [
    "BREAKDOWN",
    "BUSY",
    "CpuSample",
    "CpuUse",
    "breakdown_row",
    "breakdown_summary",
    "breakdown_text",
    "cpu_row",
    "cpu_summary",
    "cpu_use",
    "cpu_use_from_dict",
    "cpu_verdict",
    "merge_machines",
]

#: a share of one core (a switch) or of all cores (the machine) above which an interval's
#: figures are bound by CPU rather than by the emulated links
BUSY = 0.85


@dataclass(frozen=True, slots=True)
class CpuSample:
    """CPU seconds used so far: per process sampled (user + system, all its threads; a
    switch or a worker), and by the whole machine (busy and total, summed over its cores);
    ``wall_s`` is a monotonic time. ``user_s`` is the user-space part of each process's
    time; ``softirq_s`` the machine's time in the kernel's softirq work (veths, packet and
    TCP receive, qdiscs), charged also to whichever process it interrupted."""

    wall_s: float
    switch_s: Mapping[str, float]
    machine_busy_s: float
    machine_total_s: float
    cores: int
    user_s: Mapping[str, float] = field(default_factory=dict)
    softirq_s: float = 0.0


@dataclass(frozen=True, slots=True)
class CpuUse:
    """Over an interval: each switch's share of one core, the machine's share of all cores
    and, where the fabric's links were monitored, how they carried their rates."""

    switches: Mapping[str, float]
    machine: float
    cores: int
    links: LinkUse | None = None
    #: each process's user-space share of one core (the rest of its share is the kernel's)
    user: Mapping[str, float] = field(default_factory=dict)
    #: the machine's softirq work, in cores
    softirq: float = 0.0

    @property
    def busiest(self) -> tuple[str, float] | None:
        """The switch that used the most CPU and its share of one core (None: no switch)."""
        if not self.switches:
            return None
        name = max(self.switches, key=lambda n: (self.switches[n], n))
        return name, self.switches[name]

    @property
    def total(self) -> float:
        """All the switches together, in cores."""
        return sum(self.switches.values())

    def text(self) -> str:
        """One line, e.g. ``switches 0.80 cores (busiest rail0 23% of one), machine 61% of 2 cores``."""
        top = self.busiest
        switch = (f"switches {self.total:.2f} cores (busiest {top[0]} {top[1]:.0%} of one)" if top
                  else "no switch measured")
        text = f"{switch}, machine {self.machine:.0%} of {self.cores} cores"
        return f"{text}; {self.links.text()}" if self.links is not None else text


def cpu_use(before: CpuSample, after: CpuSample) -> CpuUse:
    """The CPU use between two samples; a switch missing from either (stopped) is left out.

    >>> a = CpuSample(10.0, {"s0": 1.0, "s1": 2.0}, 5.0, 20.0, 2)
    >>> b = CpuSample(12.0, {"s0": 1.5, "s1": 2.2}, 7.0, 24.0, 2)
    >>> use = cpu_use(a, b)
    >>> {k: round(v, 2) for k, v in use.switches.items()}, use.machine, use.busiest[0]
    ({'s0': 0.25, 's1': 0.1}, 0.5, 's0')
    >>> use.text()
    'switches 0.35 cores (busiest s0 25% of one), machine 50% of 2 cores'
    """
    wall = after.wall_s - before.wall_s
    shares = ({name: max(0.0, (after.switch_s[name] - t0) / wall)
               for name, t0 in before.switch_s.items() if name in after.switch_s} if wall > 0 else {})
    user = ({name: max(0.0, (after.user_s[name] - t0) / wall)
             for name, t0 in before.user_s.items() if name in after.user_s} if wall > 0 else {})
    total = after.machine_total_s - before.machine_total_s
    machine = (after.machine_busy_s - before.machine_busy_s) / total if total > 0 else 0.0
    softirq = (after.softirq_s - before.softirq_s) / total * after.cores if total > 0 else 0.0
    return CpuUse(shares, min(1.0, max(0.0, machine)), after.cores, user=user, softirq=max(0.0, softirq))


def cpu_use_from_dict(raw: Mapping[str, Any]) -> CpuUse:
    """A :class:`CpuUse` from its ``dataclasses.asdict`` form (as a machine sends it)."""
    links = raw.get("links")
    return CpuUse(dict(raw["switches"]), float(raw["machine"]), int(raw["cores"]),
                  LinkUse(**links) if links else None, dict(raw.get("user") or {}), float(raw.get("softirq", 0.0)))


def merge_machines(uses: Mapping[str, CpuUse]) -> tuple[CpuUse, str]:
    """Several machines' CPU use over one interval as one, and the busiest machine's name:
    every switch and process of every machine, the busiest machine's share and cores (an
    interval holds only if every machine held) with its softirq work, the links of all.

    >>> use, name = merge_machines({"m0": CpuUse({"s0": 0.3}, 0.5, 2), "m1": CpuUse({"s1": 0.2}, 0.9, 4)})
    >>> name, use.machine, use.cores, sorted(use.switches)
    ('m1', 0.9, 4, ['s0', 's1'])
    """
    if not uses:
        raise ValueError("no machine measured")
    name = max(uses, key=lambda m: (uses[m].machine, m))
    top = uses[name]
    switches: dict[str, float] = {}
    user: dict[str, float] = {}
    for u in uses.values():
        switches.update(u.switches)
        user.update(u.user)
    return CpuUse(switches, top.machine, top.cores, merge_link_uses([u.links for u in uses.values()]), user,
                  top.softirq), name


def cpu_row(use: CpuUse) -> dict[str, Any]:
    """The columns an experiment adds to a row measured over ``use``'s interval.

    >>> cpu_row(CpuUse({"a": 0.25, "b": 0.5}, 0.6, 2))
    {'switch_cpu': 0.5, 'busiest_switch': 'b', 'switches_cores': 0.75, 'machine_cpu': 0.6}
    >>> cpu_row(CpuUse({}, 0.6, 2, LinkUse("h0-eth0", 0.97, "h1-eth0", 0.99, 4, 32, 1.5)))["link_carried"]
    0.97
    """
    top = use.busiest
    row: dict[str, Any] = {"switch_cpu": round(top[1], 4) if top else None, "busiest_switch": top[0] if top else "",
                           "switches_cores": round(use.total, 4) if top else None,
                           "machine_cpu": round(use.machine, 4)}
    if use.links is not None:
        row.update(link_carried=use.links.carried, slowest_link=use.links.slowest or "",
                   link_overshoot=use.links.overshoot, fastest_link=use.links.fastest or "",
                   links_backlogged=use.links.backlogged, sched_delay_ms=use.links.sched_delay_ms)
    return row


def cpu_summary(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Over rows with :func:`cpu_row`'s columns: the median and the highest busiest-switch
    share, and the same for the machine (no measured row gives an empty dict).

    >>> cpu_summary([cpu_row(CpuUse({"a": 0.2}, 0.5, 2)), cpu_row(CpuUse({"a": 0.4, "b": 0.1}, 0.7, 2))])
    {'switch_median': 0.3, 'switch_max': 0.4, 'switches_cores_max': 0.5, 'machine_median': 0.6, 'machine_max': 0.7}
    """
    rows = list(rows)
    tops = [float(r["switch_cpu"]) for r in rows if r.get("switch_cpu") not in (None, "")]
    machine = [float(r["machine_cpu"]) for r in rows if r.get("machine_cpu") not in (None, "")]
    together = [float(r["switches_cores"]) for r in rows if r.get("switches_cores") not in (None, "")]
    out: dict[str, float] = {}
    if tops:
        out.update(switch_median=round(statistics.median(tops), 4), switch_max=round(max(tops), 4))
    if together:
        out.update(switches_cores_max=round(max(together), 4))
    if machine:
        out.update(machine_median=round(statistics.median(machine), 4), machine_max=round(max(machine), 4))
    return out


def cpu_verdict(summary: Mapping[str, float], *, busy: float = BUSY) -> str:
    """What the shares say about a run's figures, in one sentence.

    >>> cpu_verdict({"switch_median": 0.2, "switch_max": 0.3, "machine_median": 0.5, "machine_max": 0.6})
    'not switch-bound: the busiest switch used at most 30% of a core (median 20%); the machine at most 60% of its cores'
    >>> cpu_verdict({"switch_median": 0.2, "switch_max": 0.3, "switches_cores_max": 1.2, "machine_median": 0.5, "machine_max": 0.9})
    'not switch-bound: the busiest switch used at most 30% of a core (median 20%), all switches together at most 1.20 cores; the machine at most 90% of its cores (at times CPU-bound: host TCP stacks, veths and switches share these cores)'
    >>> cpu_verdict({"switch_median": 0.9, "switch_max": 0.95, "machine_median": 0.5, "machine_max": 0.6})[:13]
    'SWITCH-BOUND:'
    """
    if not summary:
        return "CPU use was not measured"
    machine = (f"the machine at most {summary['machine_max']:.0%} of its cores"
               + (" (at times CPU-bound: host TCP stacks, veths and switches share these cores)"
                  if summary["machine_max"] >= busy else ""))
    if "switch_max" not in summary:
        return f"no switch measured; {machine}"
    switches = (f"the busiest switch used at most {summary['switch_max']:.0%} of a core "
                f"(median {summary['switch_median']:.0%})")
    if "switches_cores_max" in summary:
        switches += f", all switches together at most {summary['switches_cores_max']:.2f} cores"
    if summary["switch_max"] >= busy:
        return f"SWITCH-BOUND: {switches}; {machine}"
    return f"not switch-bound: {switches}; {machine}"


def breakdown_row(machine: CpuUse, workers: CpuUse) -> dict[str, float]:
    """Where the machine's CPU went over one interval, in cores: the switch processes, the
    workers (their Python and numpy in user space, and the system calls they make: sending
    and receiving, with the softirq work that ran in them), the machine's softirq work
    (veths, packet and TCP receive, qdiscs: overlapping the processes it interrupted), and
    the rest (the busy time no sampled process had: kernel threads, the runner, anything
    else running).

    >>> breakdown_row(CpuUse({"s0": 0.3}, 0.9, 2, softirq=0.2),
    ...               CpuUse({"rank0": 0.5, "rank1": 0.4}, 0.9, 2, user={"rank0": 0.2, "rank1": 0.1}))
    {'switches_cores': 0.3, 'workers_cores': 0.9, 'workers_user_cores': 0.3, 'workers_sys_cores': 0.6, 'softirq_cores': 0.2, 'rest_cores': 0.6}
    """
    used = machine.machine * machine.cores
    user = sum(workers.user.values())
    return {"switches_cores": round(machine.total, 4), "workers_cores": round(workers.total, 4),
            "workers_user_cores": round(user, 4), "workers_sys_cores": round(max(0.0, workers.total - user), 4),
            "softirq_cores": round(machine.softirq, 4),
            "rest_cores": round(max(0.0, used - machine.total - workers.total), 4)}


def breakdown_text(b: Mapping[str, float]) -> str:
    """A :func:`breakdown_summary` in words.

    >>> breakdown_text({"switches_cores": 0.3, "workers_cores": 0.9, "workers_user_cores": 0.3,
    ...                 "workers_sys_cores": 0.6, "softirq_cores": 0.2, "rest_cores": 0.1})
    'workers 0.90 (0.30 user, 0.60 system), switches 0.30, the rest 0.10; softirq work 0.20, inside the others'
    """
    workers = f"workers {b['workers_cores']:.2f}"
    if "workers_user_cores" in b:
        workers += f" ({b['workers_user_cores']:.2f} user, {b['workers_sys_cores']:.2f} system)"
    text = f"{workers}, switches {b['switches_cores']:.2f}, the rest {b['rest_cores']:.2f}"
    if "softirq_cores" in b:
        text += f"; softirq work {b['softirq_cores']:.2f}, inside the others"
    return text


#: the columns of :func:`breakdown_row`
BREAKDOWN = ("switches_cores", "workers_cores", "workers_user_cores", "workers_sys_cores", "softirq_cores", "rest_cores")


def breakdown_summary(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The median of each :func:`breakdown_row` column over measured rows (the columns a
    row has: older runs have no user/system split).

    >>> breakdown_summary([{"switches_cores": 0.2, "workers_cores": 1.0, "rest_cores": 0.4},
    ...                    {"switches_cores": 0.4, "workers_cores": 0.8, "rest_cores": 0.6}])
    {'switches_cores': 0.3, 'workers_cores': 0.9, 'rest_cores': 0.5}
    """
    rows = [r for r in rows if r.get("workers_cores") not in (None, "")]
    keys = [k for k in BREAKDOWN if rows and all(r.get(k) not in (None, "") for r in rows)]
    return {key: round(statistics.median(float(r[key]) for r in rows), 4) for key in keys} if rows else {}
