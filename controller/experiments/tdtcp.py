"""The TDTCP experiment's pure side: the fabric, its two alternating TDNs, and the analysis.

Two racks, one host each, and two circuit switches that take turns connecting them (the
time-division networks, TDNs, of TDTCP): ``ocs0`` is the *fast* TDN (high rate, short
delay: Etalon's circuit network), ``ocs1`` the *slow* one (low rate, long delay: its packet
network). Each holds its circuit for a day of ``day_ms``; a ``gap_ms`` of darkness follows
each day. The ToRs notify their hosts of every change (ICMP type 7); a bulk transfer from
rack 0 to rack 1 runs with each transport:

- ``tdtcp``: the userspace transport with one congestion state per TDN, switched on the
  notification;
- ``single``: the same transport with one shared state (the first baseline);
- ``cubic``: kernel TCP CUBIC (iperf3), the second baseline.

Rates come from the links' shaping (tc htb); delays from the Python target's
``--port-delay`` extension on the circuit switches' ports, since this kernel has no netem.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.errors import ConfigError
from controller.schedule.model import CircuitPlan, Schedule
from controller.topology import optical
from controller.topology.model import ETHERNET_MTU, Topology
from mlfabric_base.errors import refuse_nonfinite

__all__ = ["TRANSPORTS", "Tdn", "TdtcpConfig", "capacity_mbps", "fabric", "goodput_mbps", "percentile",
           "schedule", "summarize", "switch_args", "tdn_at"]

TRANSPORTS = ("tdtcp", "single", "cubic")


@dataclass(frozen=True, slots=True)
class Tdn:
    """One time-division network: its circuit's rate and one-way delay."""

    rate_mbps: float
    delay_us: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TdtcpConfig:
    """What one run of ``mlfabric experiment run tdtcp`` emulates (Etalon's circuit vs
    packet network: 8x the rate, a fifth of the delay, scaled down to milliseconds)."""

    target: str = "python"
    #: the Python target's packet engine (mlfabric-switch --engine); None: its default
    engine: str | None = None
    repetitions: int = 3
    seconds: float = 8.0
    day_ms: float = 20.0
    gap_ms: float = 1.0
    fast: Tdn = Tdn(40.0, 500)
    slow: Tdn = Tdn(5.0, 2500)
    #: the hosts' links; None: the faster TDN's rate, so that a host can fill either circuit
    #: (a fixed 40 Mb/s halved an 80 Mb/s fast TDN: at 80/10 TDTCP got 22 of 43 Mb/s)
    host_rate_mbps: float | None = None
    transports: tuple[str, ...] = TRANSPORTS

    def __post_init__(self) -> None:
        def bad(key: str, value: object, problem: str) -> ConfigError:
            return ConfigError("<tdtcp>", key, value, problem)

        refuse_nonfinite("<tdtcp>", self)
        if self.target not in ("python", "bmv2"):
            raise bad("target", self.target, "is python or bmv2")
        if self.repetitions < 1:
            raise bad("repetitions", self.repetitions, "must be >= 1")
        if self.seconds < 1:
            raise bad("seconds", self.seconds, "must be >= 1 s")
        if self.day_ms <= 0 or self.gap_ms <= 0:
            raise bad("day_ms/gap_ms", (self.day_ms, self.gap_ms), "must be > 0")
        if round(self.day_ms * 1000) % round(self.gap_ms * 1000):
            raise bad("day_ms", self.day_ms, f"must be a multiple of the gap ({self.gap_ms} ms): one slot grid")
        for name, t in (("fast", self.fast), ("slow", self.slow)):
            if t.rate_mbps <= 0 or t.delay_us < 0:
                raise bad(name, t, "a rate > 0 and a delay >= 0")
        if self.host_rate_mbps is not None and self.host_rate_mbps <= 0:
            raise bad("host_rate_mbps", self.host_rate_mbps, "must be > 0")
        unknown = [t for t in self.transports if t not in TRANSPORTS]
        if unknown or not self.transports:
            raise bad("transports", self.transports, f"are among {', '.join(TRANSPORTS)}")

    @property
    def host_mbps(self) -> float:
        """The hosts' link rate: ``host_rate_mbps``, or the faster TDN's rate."""
        return self.host_rate_mbps if self.host_rate_mbps is not None else max(self.fast.rate_mbps, self.slow.rate_mbps)

    @property
    def period_us(self) -> int:
        """One TDN's day and the gap after it: half the cycle."""
        return round((self.day_ms + self.gap_ms) * 1000)


def schedule(cfg: TdtcpConfig) -> Schedule:
    """Two circuit switches connecting rack 0 and rack 1 in turn, each dark while the other
    holds its day (a custom schedule: a day, then a night of a day and two gaps).

    >>> s = schedule(TdtcpConfig(day_ms=20, gap_ms=1))
    >>> s.cycle_us, [c.offset_us for c in s.circuits], s.at(0, 5_000).index, s.at(1, 5_000).index
    (42000, [0, 21000], 0, None)
    """
    day, gap = round(cfg.day_ms * 1000), round(cfg.gap_ms * 1000)
    circuits = (CircuitPlan(((1, 0),), offset_us=0), CircuitPlan(((1, 0),), offset_us=day + gap))
    return Schedule(name=f"tdtcp-{cfg.day_ms:g}ms", kind="custom", racks=2, slice_us=day, night_us=day + 2 * gap,
                    circuits=circuits)


def tdn_at(cfg: TdtcpConfig, t_us: float) -> int | None:
    """The TDN whose circuit is up ``t_us`` after the epoch (0 fast, 1 slow; None: a gap)."""
    phase = t_us % (2 * cfg.period_us)
    day = round(cfg.day_ms * 1000)
    if phase < day:
        return 0
    if cfg.period_us <= phase < cfg.period_us + day:
        return 1
    return None


def fabric(cfg: TdtcpConfig) -> Topology:
    """Two racks of one host, two circuit switches: ``ocs0``'s links at the fast TDN's rate,
    ``ocs1``'s at the slow one's, the hosts' links at ``host_mbps``."""
    # Ethernet's MTU, not jumbo: a 9,000-byte frame takes 14 ms at the slow TDN's 5 Mb/s, most
    # of a 20 ms day, where a real TDN (10-80 Gb/s) serializes one in microseconds
    topo = optical(2, 1, uplinks=2, rate_mbps=cfg.host_mbps, name="tdtcp-2x1x2", mtu=ETHERNET_MTU)
    rate = {"ocs0": cfg.fast.rate_mbps, "ocs1": cfg.slow.rate_mbps}
    links = tuple(dataclasses.replace(lk, rate_mbps=rate.get(lk.b.node, lk.rate_mbps)) for lk in topo.links)
    return dataclasses.replace(topo, links=links)


def switch_args(cfg: TdtcpConfig) -> dict[str, tuple[str, ...]]:
    """``--port-delay`` for both ports of each circuit switch (Python target): a frame
    crossing a circuit is delayed by its TDN's one-way delay."""
    out: dict[str, tuple[str, ...]] = {}
    for name, tdn in (("ocs0", cfg.fast), ("ocs1", cfg.slow)):
        if tdn.delay_us:
            out[name] = ("--port-delay", f"1:{tdn.delay_us}", "--port-delay", f"2:{tdn.delay_us}")
    return out


def capacity_mbps(cfg: TdtcpConfig) -> float:
    """What the fabric can carry from rack 0 to rack 1, averaged over a cycle (a TDN carries
    no more than the hosts' links feed it).

    >>> capacity_mbps(TdtcpConfig(day_ms=20, gap_ms=1, fast=Tdn(16, 0), slow=Tdn(2, 0)))
    8.571428571428571
    >>> capacity_mbps(TdtcpConfig(day_ms=20, gap_ms=1, fast=Tdn(16, 0), slow=Tdn(2, 0), host_rate_mbps=8))
    4.761904761904762
    """
    day = cfg.day_ms / (2 * (cfg.day_ms + cfg.gap_ms))
    return day * (min(cfg.fast.rate_mbps, cfg.host_mbps) + min(cfg.slow.rate_mbps, cfg.host_mbps))


def goodput_mbps(samples: Sequence[tuple[float, int]], *, skip_s: float = 1.0) -> float:
    """Mean goodput of a transfer from ``(seconds since start, bytes delivered so far)``
    samples, leaving out the first ``skip_s`` (slow start).

    >>> goodput_mbps([(0.0, 0), (1.0, 100_000), (3.0, 600_000)])
    2.0
    """
    kept = [(t, b) for t, b in samples if t >= skip_s]
    if len(kept) < 2 or kept[-1][0] <= kept[0][0]:
        return 0.0
    (t0, b0), (t1, b1) = kept[0], kept[-1]
    return (b1 - b0) * 8 / (t1 - t0) / 1e6


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summarize(goodputs: Mapping[str, Sequence[float]]) -> dict[str, dict[str, float]]:
    """Per transport: mean and sample sd of the repetitions' goodputs, and the mean's ratio
    to each other transport's mean."""
    means = {t: statistics.fmean(v) for t, v in goodputs.items() if v}
    out: dict[str, dict[str, float]] = {}
    for t, v in goodputs.items():
        if not v:
            continue
        row = {"mean_mbps": means[t], "sd_mbps": statistics.stdev(v) if len(v) > 1 else 0.0, "n": float(len(v))}
        for other, m in means.items():
            if other != t and m > 0:
                row[f"vs_{other}"] = means[t] / m
        out[t] = row
    return out
