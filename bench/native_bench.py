"""The native engine in process: the batch API's forwarding rate, and its build times."""

from __future__ import annotations

import os
import tempfile
import time

from bench.traffic import frames, route_updates
from controller.p4build import pipeline_files
from packettest.targets import InProcessTarget

ROUTES = 1000
BATCH = 1024


def batch_rate(seconds: float = 3.0) -> dict[str, float]:
    """Packets/s of ``NativeEngine.process`` on batches of 1,024 frames (rail_switch, 1,000
    /24 routes installed over P4Runtime), frames in and out as Python bytes."""
    target = InProcessTarget(pipeline_files("rail_switch"), engine="native")
    try:
        target.client.write(route_updates(target.schema, ROUTES))
        switch = target.switch
        switch.sync()  # type: ignore[attr-defined]
        engine = switch.native  # type: ignore[attr-defined]
        batch = [(1, f) for f in frames(ROUTES, BATCH)]
        forwarded = len(engine.process(batch))
        n = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            engine.process(batch)
            n += len(batch)
        elapsed = time.perf_counter() - start
    finally:
        target.close()
    return {"packets_per_s": n / elapsed, "forwarded_check": forwarded}


def build_times() -> dict[str, float]:
    """Seconds from a loaded Program to a running engine: cold (the C compiler runs) and
    warm (the shared object comes from the cache)."""
    from pybmv2.native.engine import NativeEngine
    from pybmv2.program import Program

    program = Program.from_file(pipeline_files("rail_switch").json)
    old = os.environ.get("MLFABRIC_NATIVE_CACHE")
    with tempfile.TemporaryDirectory(prefix="bench-native-") as cache:
        os.environ["MLFABRIC_NATIVE_CACHE"] = cache
        try:
            times = []
            for _ in range(2):
                start = time.perf_counter()
                NativeEngine(program).close()
                times.append(time.perf_counter() - start)
        finally:
            if old is None:
                del os.environ["MLFABRIC_NATIVE_CACHE"]
            else:
                os.environ["MLFABRIC_NATIVE_CACHE"] = old
    return {"cold_s": times[0], "warm_s": times[1]}
