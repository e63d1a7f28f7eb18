"""The regime an experiment runs in: which real fabric it stands for, by what factor time is
stretched, and what is scaled with it and what is not (pure).

An emulation whose links run at 1/k of a real fabric's rate is a faithful stand-in only if
everything else that sets the dynamics is stretched by the same k (DieCast, NSDI'08; "To
infinity and beyond: time-warped network emulation", NSDI'06): link and switch latency,
host processing, TCP's timers, compute phases, buffers in bandwidth-delay products, frames
per window. A process-based emulation cannot slow the kernel's clock, so it scales what it
can and says what it cannot: every experiment's table and ``summary.json`` carry
:func:`regime_rows`, each quantity with its real value, its emulated value brought back to
real time (divided by k) and how far the two are apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["SCALED_WITHIN", "Emulated", "Quantity", "RealFabric", "dilation", "from_probe", "regime_json",
           "regime_lines", "regime_rows"]

#: within this factor either way a quantity counts as scaled
SCALED_WITHIN = 2.0


@dataclass(frozen=True, kw_only=True)
class RealFabric:
    """The fabric an experiment stands for (defaults: an AI training fabric of 400 Gbit/s
    NICs and jumbo frames; TCP's timer as tuned in data centres)."""

    nic_gbps: float = 400.0
    #: one switch hop: the switch's latency and the cable's propagation
    hop_latency_us: float = 1.0
    #: a switch port's buffer (a 64 MB shared buffer over 64 ports)
    port_buffer_kb: float = 1000.0
    #: TCP's minimum retransmission timeout in a tuned data centre
    min_rto_ms: float = 1.0
    #: what a host's segmentation offload hands the NIC at once
    tso_kb: float = 64.0
    mtu: int = 9000
    #: a reconfigurable fabric's time slot (RotorNet's and Opera's order; OpenOptics' Tofino 2
    #: runs 2 us)
    slot_us: float = 10.0


@dataclass(frozen=True, kw_only=True)
class Emulated:
    """What the emulation runs with (measured where it can be: ``hop_latency_us`` from the
    fabric's own round trips)."""

    nic_mbps: float
    mtu: int
    #: one switch hop's latency as measured (half a round trip over the hops it crossed)
    hop_latency_us: float | None
    #: hops of the longest path between two GPUs
    hops: int
    #: the bytes a link's queue holds before it drops (the shaper's queue and the switch's)
    port_buffer_bytes: float
    min_rto_ms: float
    #: frames per TCP super-packet (0: every frame on its own, as TCP's own GSO sizes them)
    super_frames: int = 0
    #: compute per training iteration, if the experiment models one
    compute_ms: float | None = None
    #: a reconfigurable fabric's slot (slice or TDN day), if the fabric has one
    slot_ms: float | None = None


@dataclass(frozen=True, slots=True)
class Quantity:
    """One quantity: its real value and the emulation's brought back to real time, in
    ``unit``; ``scaled`` when within :data:`SCALED_WITHIN` of each other; ``note`` says what
    follows when it is not."""

    name: str
    unit: str
    real: float
    emulated: float
    note: str = ""
    #: a count (more/fewer) rather than a time or a size (longer/shorter)
    count: bool = False

    @property
    def factor(self) -> float:
        """The emulated over the real value (1: scaled exactly)."""
        return self.emulated / self.real if self.real else math.inf

    @property
    def scaled(self) -> bool:
        return 1 / SCALED_WITHIN <= self.factor <= SCALED_WITHIN

    def text(self) -> str:
        """e.g. ``per-hop latency: 1 us real, 0.0125 us emulated (80x shorter): not scaled; ...``."""
        def fmt(v: float) -> str:
            return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"

        if self.scaled:
            verdict = "scaled"
        else:
            more, less = ("more", "fewer") if self.count else ("longer", "shorter")
            how = f"{self.factor:.3g}x {more}" if self.factor > 1 else f"{1 / self.factor:.3g}x {less}"
            verdict = f"not scaled ({how})" + (f": {self.note}" if self.note else "")
        return f"{self.name}: {fmt(self.real)} {self.unit} real, {fmt(self.emulated)} {self.unit} emulated; {verdict}"


def dilation(real: RealFabric, emu: Emulated) -> float:
    """How many times slower the emulation runs: the real NIC rate over the emulated one.

    >>> dilation(RealFabric(nic_gbps=400), Emulated(nic_mbps=100, mtu=9000, hop_latency_us=None, hops=2,
    ...                                            port_buffer_bytes=1e6, min_rto_ms=1000))
    4000.0
    """
    return real.nic_gbps * 1000 / emu.nic_mbps


def regime_rows(real: RealFabric, emu: Emulated) -> list[Quantity]:
    """Every quantity the dynamics depend on, real against emulated-in-real-time.

    >>> rows = regime_rows(RealFabric(), Emulated(nic_mbps=100, mtu=9000, hop_latency_us=50, hops=2,
    ...                                          port_buffer_bytes=9e6, min_rto_ms=1000, super_frames=7))
    >>> [(q.name, q.scaled) for q in rows]  # doctest: +NORMALIZE_WHITESPACE
    [('frame', True), ('burst a host sends at once', True), ('per-hop latency', False),
     ('frames in flight per round trip', False), ('port buffer', False), ('TCP minimum RTO', False)]
    """
    k = dilation(real, emu)
    real_frame_us = real.mtu * 8 / (real.nic_gbps * 1000)
    emu_frame_us = emu.mtu * 8 / emu.nic_mbps
    rows = [Quantity("frame", "us", real_frame_us, emu_frame_us / k)]
    burst = (emu.super_frames or 2) * emu.mtu  # TCP's own GSO sends at least 2 segments
    rows.append(Quantity("burst a host sends at once", "KB", real.tso_kb, min(burst, 65536) / 1000,
                         "TCP's segments cross the shapers as wholes"))
    if emu.hop_latency_us is not None:
        rows.append(Quantity("per-hop latency", "us", real.hop_latency_us, emu.hop_latency_us / k,
                             "round trips hold fewer frames than the real fabric's, and queues, not "
                             "propagation, set TCP's round trip"))
        real_rtt = 2 * emu.hops * real.hop_latency_us
        emu_rtt = 2 * emu.hops * emu.hop_latency_us
        rows.append(Quantity("frames in flight per round trip", "frames",
                             real.nic_gbps * 1000 * real_rtt / 8 / real.mtu,
                             emu.nic_mbps * emu_rtt / 8 / emu.mtu,
                             "a window of this many frames keeps a link busy: TCP's dynamics differ", count=True))
    rows.append(Quantity("port buffer", "us of the link", real.port_buffer_kb * 1000 * 8 / (real.nic_gbps * 1000),
                         emu.port_buffer_bytes * 8 / emu.nic_mbps / k,
                         "queues can hold far more time than a real port's: round trips grow instead of loss"))
    rows.append(Quantity("TCP minimum RTO", "ms", real.min_rto_ms, emu.min_rto_ms / k,
                         "a loss waits less (or more) than on the real fabric, relative to a frame"))
    if emu.slot_ms is not None:
        rows.append(Quantity("circuit slot", "us", real.slot_us, emu.slot_ms * 1000 / k,
                             "each slot carries more (or fewer) frames than a real one"))
    return rows


def regime_lines(real: RealFabric, emu: Emulated) -> list[str]:
    """A table's regime section: the fabric, the factor, then each quantity."""
    k = dilation(real, emu)
    head = (f"regime: stands for {real.nic_gbps:g} Gbit/s NICs, {real.hop_latency_us:g} us per hop and "
            f"{real.mtu:,}-byte frames; time stretched {k:,.0f}x ({emu.nic_mbps:g} Mbit/s NICs). "
            "What is not scaled below, the emulation cannot stretch (the kernel's clock runs at its own rate) "
            "or chose not to")
    lines = [head, *(f"  {q.text()}" for q in regime_rows(real, emu))]
    if emu.compute_ms is not None:
        lines.append(f"  compute per iteration: {emu.compute_ms:g} ms emulated stands for {emu.compute_ms * 1000 / k:.3g} us "
                     "of a real GPU's (the experiment's choice)")
    return lines


def regime_json(real: RealFabric, emu: Emulated) -> dict[str, object]:
    """``summary.json``'s ``regime`` section."""
    return {"real": {"nic_gbps": real.nic_gbps, "hop_latency_us": real.hop_latency_us,
                     "port_buffer_kb": real.port_buffer_kb, "min_rto_ms": real.min_rto_ms, "mtu": real.mtu},
            "dilation": dilation(real, emu),
            "quantities": [{"name": q.name, "unit": q.unit, "real": q.real, "emulated": q.emulated,
                            "scaled": q.scaled} for q in regime_rows(real, emu)]}


def from_probe(probe: Mapping[str, float] | None, *, nic_mbps: float, mtu: int, super_frames: int = 0,
               min_rto_ms: float = 200.0, compute_ms: float | None = None,
               slot_ms: float | None = None) -> Emulated:
    """The emulation's side of the regime from a fabric's probe of its longest path
    (``rtt_ms``, the ``links`` it crosses one way, the shapers' ``queue_packets``); no probe
    leaves the per-hop latency unknown (a fabric whose circuits come and go).

    >>> e = from_probe({"rtt_ms": 0.4, "links": 4, "queue_packets": 1000}, nic_mbps=100, mtu=9000, super_frames=7)
    >>> e.hop_latency_us, e.port_buffer_bytes
    (50.0, 63000000)
    """
    packet = mtu * max(1, super_frames)  # what one queued packet can be
    return Emulated(nic_mbps=nic_mbps, mtu=mtu,
                    hop_latency_us=1000 * probe["rtt_ms"] / (2 * probe["links"]) if probe else None,
                    hops=int(probe["links"]) if probe else 2,
                    port_buffer_bytes=(probe["queue_packets"] if probe else 1000) * packet,
                    min_rto_ms=min_rto_ms, super_frames=super_frames, compute_ms=compute_ms, slot_ms=slot_ms)
