"""The rotor experiment's pure side: configuration, the plan of points, and what each point
should give (RotorNet's argument, made exact for the emulated schedule).

A round-robin (RotorNet / Etalon strobe) fabric of ``racks`` ToRs and one circuit switch:
day ``d`` connects rack ``j`` to rack ``(j + d + 1) mod racks``, each day of ``slice`` is
followed by a ``night`` in which nothing crosses, so a pair of racks is connected in one day
of the ``racks - 1`` of a cycle. Bulk traffic is a staircase of constant-rate UDP levels
(fractions of the link rate) per source; the experiment measures what is delivered along the
routing's own paths, per level, and the one-way delay of the lightest level.

Expectations assume ideal calendar queues (a slot's queue drains only during its slot, and
what a circuit can carry is what it gets):

- direct routing: a source spreading its load over ``fanout`` destinations delivers at most
  ``duty x fanout / (racks - 1)`` of its link: a hot pair or a permutation gets one day in
  ``racks - 1``; all-to-all keeps every day busy.
- two-hop VLB: the first hop leaves in the current day towards whichever rack it connects;
  a packet crosses ``(2 racks - 3) / (racks - 1)`` circuits on average, so when every source
  sends the fabric carries ``duty x (racks - 1) / (2 racks - 3)`` per source, whatever the
  pattern (RotorNet: "half", its limit for many racks); a lone hot pair uses the idle
  intermediates and gets the whole duty cycle.
- without calendar queues (stock BMv2, or ``calendar=drop``): a packet leaves only if its
  circuit is up when it arrives, so a fixed fraction of any load gets through, computed here
  by walking the ToRs' own time-flow entries.

Light-load delays come from the same walk: the wait until the send slot starts, hop by hop.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from controller.errors import ConfigError
from controller.schedule import round_robin, slots, timeflow
from controller.schedule.model import Schedule
from mlfabric_base.errors import refuse_nonfinite

__all__ = [
    "CALENDARS",
    "PATTERNS",
    "ROUTINGS",
    "LightLoad",
    "Point",
    "RotorConfig",
    "capacity",
    "expected_delivered",
    "light_load",
    "pattern_pairs",
    "plan",
    "schedule_of",
]

PATTERNS = ("hot-pair", "permutation", "all-to-all")
ROUTINGS = ("direct", "vlb")
#: hold: calendar queues (Python-target extension); drop: stock BMv2's behaviour
CALENDARS = ("hold", "drop")
#: Ethernet + IPv4 + UDP header bytes on the wire around a datagram's payload
WIRE_OVERHEAD = 42


@dataclass(frozen=True, slots=True, kw_only=True)
class RotorConfig:
    """What one run of ``mlfabric experiment run rotor`` emulates."""

    target: str = "python"
    #: the Python target's packet engine (mlfabric-switch --engine); None: its default
    engine: str | None = None
    racks: int = 4
    repetitions: int = 3
    rate_mbps: float = 10.0
    payload_bytes: int = 1200
    #: slice sweep (ms), each with a night of ``night_fraction`` of it; the reference
    #: slice (OpenOptics' Mininet default) is also the duty-cycle sweep's
    slices_ms: tuple[float, ...] = (16.0, 32.0, 64.0)
    reference_slice_ms: float = 32.0
    night_fraction: float = 0.1
    #: duty-cycle sweep: nights (ms) at the reference slice
    nights_ms: tuple[float, ...] = (8.0, 16.0, 32.0)
    patterns: tuple[str, ...] = PATTERNS
    #: offered load per source, fractions of the link rate; the first is the delay probe
    levels: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 1.0)
    probe_seconds: float = 1.5
    level_seconds: float = 1.0
    allreduce_bytes: int = 384 << 10
    allreduce_iterations: int = 3
    worker_timeout_s: float = 20.0

    @property
    def line_pps(self) -> float:
        """Datagrams a second that fill a link."""
        return self.rate_mbps * 1e6 / 8 / (self.payload_bytes + WIRE_OVERHEAD)

    @property
    def calendars(self) -> tuple[str, ...]:
        """Stock BMv2 has no calendar queue; the Python target runs both behaviours."""
        return ("hold", "drop") if self.target == "python" else ("drop",)

    def validate(self) -> RotorConfig:
        """Reject bad input before anything starts (names the value)."""
        def bad(key: str, value: object, problem: str) -> ConfigError:
            return ConfigError("<rotor>", key, value, problem)

        refuse_nonfinite("<rotor>", self)
        if self.target not in ("python", "bmv2"):
            raise bad("target", self.target, "python or bmv2")
        if not 4 <= self.racks <= 16:
            raise bad("racks", self.racks, "must be in 4..16")
        if self.repetitions < 1:
            raise bad("repetitions", self.repetitions, "need at least one repetition")
        if not 0.1 <= self.rate_mbps <= 50:
            raise bad("rate_mbps", self.rate_mbps, "must be in 0.1..50 (the switches forward in software)")
        if not 64 <= self.payload_bytes <= 1400:
            raise bad("payload_bytes", self.payload_bytes, "must be in 64..1400 (one frame)")
        for key in ("slices_ms", "nights_ms", "levels", "patterns"):
            if not getattr(self, key):
                raise bad(key, getattr(self, key), "must not be empty")
        if any(s < 1 for s in (*self.slices_ms, self.reference_slice_ms)):
            raise bad("slices_ms", self.slices_ms, "slices are >= 1 ms")
        if any(n < 0 for n in self.nights_ms) or not 0 <= self.night_fraction < 1:
            raise bad("nights_ms", self.nights_ms, "nights are >= 0 ms, night_fraction in [0, 1)")
        if any(not 0 < lv <= 1 for lv in self.levels) or list(self.levels) != sorted(self.levels):
            raise bad("levels", self.levels, "offered loads are increasing fractions of the link rate in (0, 1]")
        unknown = [p for p in self.patterns if p not in PATTERNS]
        if unknown:
            raise bad("patterns", unknown, f"patterns are {', '.join(PATTERNS)}")
        if self.probe_seconds <= 0 or self.level_seconds <= 0:
            raise bad("level_seconds", (self.probe_seconds, self.level_seconds), "must be > 0")
        if self.allreduce_bytes % (4 * self.racks) or self.allreduce_bytes <= 0:
            raise bad("allreduce_bytes", self.allreduce_bytes, f"must be a positive multiple of 4 x {self.racks} ranks")
        for point in plan(self):  # every schedule must have a slot grid the ToRs can hold
            schedule_of(point, self.racks)
        return self


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class Point:
    """One measured configuration: a schedule shape, a traffic pattern, a routing, a ToR."""

    sweep: str  # "patterns" (at the reference shape), "slice" or "duty"
    slice_us: int
    night_us: int
    pattern: str
    routing: str
    calendar: str
    label: str = field(default="", compare=False)

    @property
    def duty(self) -> float:
        return self.slice_us / (self.slice_us + self.night_us)

    @property
    def shape(self) -> tuple[int, int]:
        return self.slice_us, self.night_us

    def key(self) -> str:
        return (f"{self.sweep}/{self.slice_us / 1000:g}+{self.night_us / 1000:g}ms/{self.pattern}/"
                f"{self.routing}/{self.calendar}")


def _us(ms: float) -> int:
    return round(ms * 1000)


def plan(cfg: RotorConfig) -> list[Point]:
    """Every point of a run, grouped by schedule shape (one fabric per shape).

    At the reference shape: every pattern with both routings (calendar queues where the
    target has them) and direct routing without them; the slice and duty-cycle sweeps run
    the hot pair with both routings.

    >>> pts = plan(RotorConfig(slices_ms=(32.0,), nights_ms=(), patterns=("hot-pair",), target="bmv2"))
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: <rotor>: nights_ms: must not be empty (got ())
    >>> pts = plan(RotorConfig(slices_ms=(16.0, 32.0), nights_ms=(16.0,), patterns=("hot-pair",)))
    >>> [(p.sweep, p.slice_us, p.night_us, p.routing, p.calendar) for p in pts][:3]
    [('patterns', 32000, 3200, 'direct', 'hold'), ('patterns', 32000, 3200, 'vlb', 'hold'), ('patterns', 32000, 3200, 'direct', 'drop')]
    >>> sorted({(p.sweep, p.slice_us, p.night_us) for p in pts})
    [('duty', 32000, 16000), ('patterns', 32000, 3200), ('slice', 16000, 1600)]
    """
    if not cfg.nights_ms or not cfg.slices_ms:
        key = "nights_ms" if not cfg.nights_ms else "slices_ms"
        raise ConfigError("<rotor>", key, getattr(cfg, key), "must not be empty")
    calendar = cfg.calendars[0]
    ref = (_us(cfg.reference_slice_ms), _us(cfg.reference_slice_ms * cfg.night_fraction))
    points: list[Point] = []
    for pattern in cfg.patterns:
        for routing in ROUTINGS:
            points.append(Point(sweep="patterns", slice_us=ref[0], night_us=ref[1], pattern=pattern,
                                routing=routing, calendar=calendar))
        if "drop" in cfg.calendars and calendar != "drop":
            points.append(Point(sweep="patterns", slice_us=ref[0], night_us=ref[1], pattern=pattern,
                                routing="direct", calendar="drop"))
    shapes = [("slice", _us(s), _us(s * cfg.night_fraction)) for s in cfg.slices_ms]
    shapes += [("duty", ref[0], _us(n)) for n in cfg.nights_ms]
    seen = {ref}
    for sweep, slice_us, night_us in shapes:
        if (slice_us, night_us) in seen:
            continue
        seen.add((slice_us, night_us))
        for routing in ROUTINGS:
            points.append(Point(sweep=sweep, slice_us=slice_us, night_us=night_us, pattern="hot-pair",
                                routing=routing, calendar=calendar))
    return points


def schedule_of(point: Point, racks: int) -> Schedule:
    """The round-robin schedule of ``point`` (its slot grid is checked here)."""
    schedule = round_robin(racks, slice_us=point.slice_us, night_us=point.night_us,
                           name=f"rotor-{point.slice_us}-{point.night_us}")
    slots(schedule)  # a ConfigError if the grid is too fine to install
    return schedule


def pattern_pairs(pattern: str, racks: int) -> list[tuple[int, int]]:
    """``(source rack, destination rack)`` of every flow.

    >>> pattern_pairs("hot-pair", 4), pattern_pairs("permutation", 4)
    ([(0, 1)], [(0, 1), (1, 2), (2, 3), (3, 0)])
    >>> len(pattern_pairs("all-to-all", 4))
    12
    """
    if pattern == "hot-pair":
        return [(0, 1)]
    if pattern == "permutation":  # each rack to the next: all on the strobe's day 0
        return [(r, (r + 1) % racks) for r in range(racks)]
    if pattern == "all-to-all":
        return [(s, d) for s in range(racks) for d in range(racks) if s != d]
    raise ConfigError("<rotor>", "pattern", pattern, f"patterns are {', '.join(PATTERNS)}")


@dataclass(frozen=True, slots=True)
class LightLoad:
    """A lone packet's fate, over arrival times spread evenly across a cycle."""

    delivered: float  # fraction that gets through
    delays_us: tuple[float, ...]  # the schedule's wait, hop by hop, of those that do
    circuit_hops: float  # mean circuits crossed

    def percentile(self, q: float) -> float:
        return _percentile(sorted(self.delays_us), q)


def _percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of sorted ``values`` (nan when empty)."""
    if not values:
        return math.nan
    pos = (len(values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def light_load(schedule: Schedule, routing: str, calendar: str, src: int, dst: int,
               samples_per_slot: int = 8) -> LightLoad:
    """Walk the ToRs' time-flow entries for packets from rack ``src`` to rack ``dst``
    arriving at evenly spread times: with ``hold`` a packet waits for its send slot, with
    ``drop`` it is lost unless that slot is the current one. Transmission and switch
    latency are not counted.

    >>> s = round_robin(4, slice_us=900, night_us=100)
    >>> ll = light_load(s, "direct", "drop", 0, 1)
    >>> round(ll.delivered, 3), ll.circuit_hops
    (0.3, 1.0)
    >>> ll = light_load(s, "direct", "hold", 0, 1)
    >>> ll.delivered, round(ll.percentile(50)), round(max(ll.delays_us))
    (1.0, 600, 2094)
    """
    grid = slots(schedule)
    entries = {(e.tor, e.dst, e.arrival, e.transit): e for e in timeflow(schedule, routing)}
    delays: list[float] = []
    hops: list[int] = []
    total = grid.count * samples_per_slot
    for k in range(total):
        t0 = (k + 0.5) * grid.slot_us / samples_per_slot
        t, tor, transit, n = t0, src, False, 0
        while n < 4:
            absolute = math.floor(t / grid.slot_us)
            e = entries[(tor, dst, absolute % grid.count, transit)]
            if e.wait_slots:
                if calendar == "drop":
                    break
                t = (absolute + e.wait_slots) * grid.slot_us
            n += 1
            if e.via == dst:
                delays.append(t - t0)
                hops.append(n)
                break
            tor, transit = e.via, True
    return LightLoad(len(delays) / total, tuple(delays), statistics.fmean(hops) if hops else math.nan)


def capacity(pattern: str, routing: str, calendar: str, schedule: Schedule) -> float:
    """The most a source delivers, as a fraction of its link rate, at any offered load
    (see the module docstring).

    >>> s = round_robin(4, slice_us=900, night_us=100)
    >>> [round(capacity(p, r, "hold", s), 3) for p in PATTERNS for r in ROUTINGS]
    [0.3, 0.9, 0.3, 0.54, 0.9, 0.54]
    >>> round(capacity("all-to-all", "direct", "drop", s), 3)
    0.3
    """
    racks, duty = schedule.racks, schedule.duty_cycle
    pairs = pattern_pairs(pattern, racks)
    if calendar == "drop":  # a fixed fraction of whatever is offered: the most at full load
        return statistics.fmean(light_load(schedule, routing, "drop", s, d).delivered for s, d in pairs)
    sources = {s for s, _ in pairs}
    fanout = len(pairs) / len(sources)
    if routing == "direct":
        return duty * fanout / (racks - 1)
    if len(sources) == 1:
        return duty
    return duty * (racks - 1) / (2 * racks - 3)


def expected_delivered(level: float, cap: float, calendar: str) -> float:
    """What a source offering ``level`` of its link rate should get delivered: up to the
    capacity with calendar queues, the fixed fraction ``cap`` of it without.

    >>> expected_delivered(0.25, 0.3, "hold"), expected_delivered(0.5, 0.3, "hold"), expected_delivered(0.5, 0.3, "drop")
    (0.25, 0.3, 0.15)
    """
    return level * cap if calendar == "drop" else min(level, cap)
