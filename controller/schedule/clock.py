"""Measuring a switch's clock against the controller's, for schedules on a common epoch.

BMv2's ``ingress_global_timestamp`` counts microseconds from that switch's start, so each
switch of a schedule needs its own offset. The controller sends clock probes (packet-outs
that circuit_switch returns at once as packet-ins carrying its ingress timestamp) and, like
NTP, takes the probe with the shortest round trip: the switch's timestamp ``ts`` was read
between sending and receiving, so the switch's clock read 0 at ``midpoint - ts`` on the
controller's clock, give or take half that round trip (the uncertainty, reported as the
switch's skew bound). :func:`estimate` is pure; :func:`probe_clock` does the I/O.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from controller.errors import MlfabricError
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.schema import P4Schema
from controller.p4runtime.values import decode_int, encode_int

__all__ = ["ClockEstimate", "ClockSample", "controller_now_us", "estimate", "probe_clock"]


def controller_now_us() -> float:
    """The controller's clock (µs, monotonic): the clock schedules' epochs are given on."""
    return time.monotonic_ns() / 1000


@dataclass(frozen=True)
class ClockSample:
    sent_us: float
    received_us: float
    switch_us: int

    @property
    def rtt_us(self) -> float:
        return self.received_us - self.sent_us


@dataclass(frozen=True)
class ClockEstimate:
    """When the switch's clock read 0, on the controller's clock, and how sure we are."""

    started_at_us: float
    uncertainty_us: float
    samples: int

    def switch_time(self, controller_us: float) -> float:
        """The switch's timestamp at a controller time."""
        return controller_us - self.started_at_us


def estimate(samples: Sequence[ClockSample]) -> ClockEstimate:
    """The estimate from the probe with the shortest round trip.

    >>> estimate([ClockSample(100.0, 180.0, 40), ClockSample(200.0, 220.0, 155)])
    ClockEstimate(started_at_us=55.0, uncertainty_us=10.0, samples=2)
    """
    if not samples:
        raise MlfabricError("no clock probe came back")
    best = min(samples, key=lambda s: s.rtt_us)
    mid = (best.sent_us + best.received_us) / 2
    return ClockEstimate(mid - best.switch_us, best.rtt_us / 2, len(samples))


def probe_clock(client: P4RuntimeClient, schema: P4Schema, *, probes: int = 16,
                timeout_s: float = 1.0) -> ClockEstimate:
    """Probe a circuit switch's clock ``probes`` times (one probe in flight at a time)."""
    out_meta = {m.name: m for m in schema.packet_metadata.get("packet_out", ())}
    in_meta = {m.name: m for m in schema.packet_metadata.get("packet_in", ())}
    if "probe" not in out_meta or "timestamp_us" not in in_meta:
        raise MlfabricError("the switch's program has no clock probe (packet_out.probe, packet_in.timestamp_us)")
    probe_md, ts_md, echo_md = out_meta["probe"], in_meta["timestamp_us"], in_meta["probe"]
    samples = []
    while client.packet_in(timeout=0) is not None:  # stale packet-ins
        pass
    for k in range(probes):
        tag = k % 251 + 1
        sent = controller_now_us()
        client.packet_out(b"\x00" * 14, [(probe_md.id, encode_int(tag, probe_md.bitwidth))])
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            msg = client.packet_in(timeout=left)
            if msg is None:
                break
            received = controller_now_us()
            fields = {m.metadata_id: decode_int(m.value) for m in msg.metadata}
            if fields.get(echo_md.id) == tag:
                samples.append(ClockSample(sent, received, fields[ts_md.id]))
                break
    return estimate(samples)
