"""A reconfiguration's clean-up against forwarding: the ToR of a 4-rack Opera fabric holds
both configurations' time-flow entries (66,000 each) and deletes the old one's in batches
of a size with a pause between them, while a probe process sends one frame at a time
through the same switch (in on an uplink, out to the rack's host) and times each.

The figures choose :data:`controller.reconfigure.session.GC_BATCH` and ``GC_PAUSE_S``: the
largest batches whose forwarding latency during the clean-up stays near idle, and no pause
where none is needed."""

from __future__ import annotations

import math
import multiprocessing
import statistics
import time
from collections.abc import Sequence

from controller.p4build import pipeline_files
from controller.reconfigure import prepare_rules
from controller.reconfigure import session as session_module
from controller.reconfigure.session import LiveSwitch
from controller.routing.rail_routes import compile_fabric
from controller.schedule import opera
from controller.topology import optical
from packettest.targets import ProcessTarget

__all__ = ["SETTINGS", "cleanup_sweep"]

OPERA = opera(4, uplinks=3, slice_us=10_000, night_us=1_000)
TOPOLOGY = optical(4, 1, uplinks=3, rate_mbps=None)
TOR = TOPOLOGY.switch("tor0")
#: (entries per delete batch, pause between batches in s): the chosen setting first. The old
#: one, (32, 0.02), takes a minute: `python -m bench.cleanup_bench --old` measures it too
SETTINGS: tuple[tuple[int, float], ...] = ((256, 0.0), (1_000, 0.0))


def _timeflow(version: int) -> list:
    return [r for r in prepare_rules(TOPOLOGY, TOR, OPERA, circuit=-1, version=version, routing="direct",
                                     margin_us=1_000) if r.table == "TorIngress.timeflow"]


def _probe_frame() -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    host = TOPOLOGY.host("h0_0").nics[0]
    return bytes(Ether(dst="02:5f:00:00:01:00", src="02:c8:00:00:09:01")
                 / IP(src="10.200.9.1", dst=host.address, ttl=64) / UDP(sport=5, dport=9000) / (b"p" * 40))


def _probe(veth, frame: bytes, stop, out) -> None:  # in a process of its own: no GIL shared
    lat = []
    while not stop.is_set():
        t0 = time.perf_counter()
        veth.send(2, frame)
        deadline = t0 + 1.0
        while time.perf_counter() < deadline:
            if veth.receive(1, 0.0) is not None:
                lat.append((time.perf_counter() - t0) * 1e6)
                break
        time.sleep(0.0005)
    out.send(lat)


def _latency(values: Sequence[float]) -> dict[str, float]:
    if len(values) < 2:
        return {"p50_us": math.nan, "p99_us": math.nan, "max_us": math.nan, "probes": len(values)}
    q = statistics.quantiles(values, n=100)
    return {"p50_us": q[49], "p99_us": q[98], "max_us": max(values), "probes": len(values)}


def _probed(veth, frame: bytes, work) -> tuple[float, dict[str, float]]:
    ctx = multiprocessing.get_context("fork")
    stop, (recv, send) = ctx.Event(), ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_probe, args=(veth, frame, stop, send), daemon=True)
    proc.start()
    try:
        time.sleep(0.2)  # the probe under way before the work starts
        t0 = time.monotonic()
        work()
        seconds = time.monotonic() - t0
        time.sleep(0.05)
    finally:
        stop.set()
        lat = recv.recv() if recv.poll(10) else []
        proc.join(5)
    return seconds, _latency(lat)


def cleanup_sweep(kind: str, engine: str | None, settings: Sequence[tuple[int, float]] = SETTINGS
                  ) -> list[dict[str, float]]:
    """Per setting (batch, pause): the clean-up's seconds for one version's 66,000 entries
    and the forwarding latency during it; and the idle latency first (``batch`` 0)."""
    target = ProcessTarget(kind, pipeline_files("tor_switch"), (1, 2), engine=engine)
    out = []
    try:
        client, schema = target.client, target.schema
        client.write_rules(schema, "insert", compile_fabric(TOPOLOGY)["tor0"].rules)
        frame = _probe_frame()
        target.veth.send(2, frame)
        if target.veth.receive(1, 2.0) is None:
            raise RuntimeError(f"{kind}: the ToR forwards no probe")
        old = _timeflow(0)
        client.write_rules(schema, "insert", [*old, *_timeflow(1)])
        _, idle = _probed(target.veth, frame, lambda: time.sleep(1.0))
        out.append({"batch": 0, "pause_s": 0.0, "seconds": 0.0, "entries": 0, **idle})
        live = LiveSwitch(TOR, client, schema, circuit=-1)
        for batch, pause in settings:
            saved = session_module.GC_BATCH, session_module.GC_PAUSE_S
            session_module.GC_BATCH, session_module.GC_PAUSE_S = batch, pause
            try:
                count: list[int] = []
                seconds, lat = _probed(target.veth, frame, lambda into=count: into.append(live.collect(1)))
            finally:
                session_module.GC_BATCH, session_module.GC_PAUSE_S = saved
            out.append({"batch": batch, "pause_s": pause, "seconds": seconds, "entries": count[0] if count else 0,
                        **lat})
            client.write_rules(schema, "insert", old)  # the old version back for the next setting
    finally:
        target.close()
    return out


if __name__ == "__main__":
    import sys

    wanted = ((32, 0.02), *SETTINGS, (4_000, 0.0)) if "--old" in sys.argv else SETTINGS
    for r in cleanup_sweep("python-process", "native", wanted):
        print(r)
