"""The idle-timeout sweep at 65,536 entries: the flow cache of ``tests/p4programs/flow_cache.p4``
full of entries with a timeout, its time per sweep (in process, on the switch's own code),
and what the sweeps (one a second, as BMv2's) do to forwarding: one frame at a time through
a switch process over veth, with the table full and with it empty."""

from __future__ import annotations

import math
import statistics
import struct
import time

from p4.v1 import p4runtime_pb2

from bench.forwarding import _spin_receive
from controller.p4build import PROGRAM_DIRS, pipeline_files
from packettest.targets import InProcessTarget, ProcessTarget

__all__ = ["ENTRIES", "sweep_latency", "sweep_time"]

ENTRIES = 65_536
#: an hour: every sweep looks at every entry and reports none (a cache in its steady state)
TIMEOUT_NS = 3_600 * 10**9
PROBE_TYPE = 0x88B5


def _artifact():
    return pipeline_files("flow_cache", PROGRAM_DIRS[1])


def _canonical(value: int) -> bytes:
    """P4Runtime's bytes for a value: no leading zero bytes."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def _updates(schema, count: int) -> list[p4runtime_pb2.Update]:
    tid, fwd = schema.table("I.flows").id, schema.action("I.fwd").id
    out = []
    for i in range(count):
        u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT)
        e = u.entity.table_entry
        e.table_id, e.idle_timeout_ns = tid, TIMEOUT_NS
        e.match.add(field_id=1).exact.value = _canonical(i + 1)
        e.action.action.action_id = fwd
        e.action.action.params.add(param_id=1, value=_canonical(2))
        out.append(u)
    return out


def _fill(client, schema, count: int) -> None:
    ups = _updates(schema, count)
    for start in range(0, len(ups), 1_000):
        client.write(ups[start:start + 1_000])


def _probe_frame(key: int) -> bytes:
    """A probe (tests/target/conformance_cases.py's header) whose a32 hits entry ``key``."""
    eth = bytes.fromhex("000000000002" "000000000001") + PROBE_TYPE.to_bytes(2, "big")
    return eth + struct.pack("!BBBHHII4I", 0, 0, 0, 0, 0, key, 0, 0, 0, 0, 0) + bytes(20)


def sweep_time(engine: str, sweeps: int = 5) -> dict[str, float]:
    """Seconds per sweep of a full table, in process (the device's own ``idle_tick``, the
    native engine's pull of hit times included)."""
    with InProcessTarget(_artifact(), engine=engine) as target:
        _fill(target.client, target.schema, ENTRIES)
        device = target.server.device
        times = []
        for _ in range(sweeps):
            device._next_sweep_us = target.switch.now_us()  # due now
            t0 = time.perf_counter()
            device.idle_tick()
            times.append(time.perf_counter() - t0)
    return {"sweep_s_median": statistics.median(times), "sweep_s_worst": max(times), "entries": ENTRIES}


def sweep_latency(kind: str, engine: str | None, seconds: float = 4.0) -> dict[str, dict[str, float]]:
    """Forwarding latency (send to arrival, one frame at a time) for ``seconds`` (a sweep a
    second), with the flow cache empty and then full."""
    out = {}
    for label, count in (("empty", 0), ("full", ENTRIES)):
        target = ProcessTarget(kind, _artifact(), (1, 2), engine=engine)
        try:
            _fill(target.client, target.schema, max(count, 1))
            frame = _probe_frame(1)
            lat = []
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                t0 = time.perf_counter()
                target.veth.send(2, frame)  # flows hits; pinned misses and sends it to port 1
                if _spin_receive(target.veth, 1, 1.0) is not None:
                    lat.append((time.perf_counter() - t0) * 1e6)
                time.sleep(0.001)
        finally:
            target.close()
        q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [math.nan] * 99
        out[label] = {"p50_us": q[49], "p99_us": q[98], "max_us": max(lat, default=math.nan), "probes": len(lat)}
    return out


if __name__ == "__main__":
    for eng in ("python", "native"):
        print(eng, sweep_time(eng))
    print("native process", sweep_latency("python-process", "native"))
    print("python process", sweep_latency("python-process", "python"))
    print("bmv2", sweep_latency("bmv2", None))
