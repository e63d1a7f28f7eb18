"""Forwarding rate and per-hop latency of the targets on rail_switch with 1,000 routes."""

from __future__ import annotations

import statistics
import time

from bench.traffic import frames, route_updates
from controller.netstate import NetRecord
from controller.p4build import pipeline_files
from packettest.targets import InProcessTarget, ProcessTarget
from packettest.veth import VethPorts

ROUTES = 1000


def inprocess_rate(seconds: float = 3.0) -> dict[str, float]:
    """Packets/s of ``V1Switch.process`` on one core (entries installed over P4Runtime)."""
    target = InProcessTarget(pipeline_files("rail_switch"))
    try:
        target.client.write(route_updates(target.schema, ROUTES))
        batch = frames(ROUTES, 1024)
        process = target.switch.process
        n = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            for f in batch:
                process(1, f)
            n += len(batch)
        elapsed = time.perf_counter() - start
        forwarded = len(process(1, batch[0]))
    finally:
        target.close()
    return {"packets_per_s": n / elapsed, "forwarded_check": forwarded}


def _throughput(veth: VethPorts, batch: list[bytes], seconds: float, window: int = 16) -> float:
    """Packets/s from port 1 to port 2 with at most ``window`` frames in flight."""
    sent = received = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        while sent - received < window:
            veth.send(1, batch[sent % len(batch)])
            sent += 1
        if veth.receive(2, timeout=0.5) is None:
            received = sent  # a loss: resynchronise the window
            continue
        received += 1
    elapsed = time.perf_counter() - start
    return received / elapsed


def _latencies(veth: VethPorts, batch: list[bytes], samples: int, out_port: int) -> list[float]:
    """One frame at a time, send to arrival, in us. The receiving end is polled without
    sleeping, as :func:`veth_baseline` polls it: a harness that slept in ``select`` would
    add its own wake-up (about 40 us on this machine, whose idle vCPUs halt at once) to
    every switch's figure and to none of the baseline's."""
    lat = []
    for i in range(samples):
        f = batch[i % len(batch)]
        t0 = time.perf_counter()
        veth.send(1, f)
        if _spin_receive(veth, out_port, 1.0) is not None:
            lat.append((time.perf_counter() - t0) * 1e6)
    return lat


def _spin_receive(veth: VethPorts, port: int, timeout: float) -> bytes | None:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        frame = veth.receive(port, 0.0)
        if frame is not None:
            return frame
    return None


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def veth_baseline(samples: int = 2000) -> dict[str, float]:
    """Latency of a bare veth pair (the harness cost that every switch measurement includes)."""
    from pybmv2.ports import Port, PortSpec

    with NetRecord("bench-veth") as record:
        veth = VethPorts([1], record, prefix="bvb")
        try:
            # What is sent on the test end arrives on the switch end.
            far = Port(PortSpec(1, veth.switch_ifaces[1]))
            batch = frames(ROUTES, 64)
            lat = []
            for i in range(samples):
                t0 = time.perf_counter()
                veth.send(1, batch[i % len(batch)])
                while far.receive() is None:
                    pass
                lat.append((time.perf_counter() - t0) * 1e6)
            far.close()
        finally:
            veth.close()
    return {"p50_us": _pct(lat, 50), "p99_us": _pct(lat, 99), "max_us": max(lat, default=float("nan"))}


def process_mode(kind: str, seconds: float = 4.0, samples: int = 2000) -> dict[str, float]:
    """Forwarding rate and latency of a switch process of ``kind`` between two veths."""
    target = ProcessTarget(kind, pipeline_files("rail_switch"), (1, 2))
    try:
        target.client.write(route_updates(target.schema, ROUTES, ports=(2,)))
        batch = frames(ROUTES, 256)
        veth = target.veth
        assert veth.receive(2, 0.01) is None
        veth.send(1, batch[0])
        if veth.receive(2, timeout=2.0) is None:
            raise RuntimeError(f"{kind}: the switch forwards nothing")
        lat = _latencies(veth, batch, samples, 2)
        pps = _throughput(veth, batch, seconds)
    finally:
        target.close()
    return {"packets_per_s": pps, "p50_us": _pct(lat, 50), "p99_us": _pct(lat, 99), "max_us": max(lat, default=float("nan"))}
