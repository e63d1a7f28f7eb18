"""P4Runtime figures of a switch process: start-up to arbitration, write rates, memory."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.traffic import route_rules
from controller.netstate import NetRecord
from controller.p4build import pipeline_files
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.schema import P4Schema, load_p4info
from controller.readiness import free_tcp_port
from controller.switch_process import SwitchProcess, SwitchSpec
from pybmv2.startup import StartupPhases


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _start(target: str, record: NetRecord, engine: str | None = None) -> tuple[SwitchProcess, float]:
    """Start a switch with no ports; return it and the seconds to a successful arbitration."""
    spec = SwitchSpec(name=f"bench-{target}", target=target, ports={},
                      grpc_address=f"127.0.0.1:{free_tcp_port()}", engine=engine)
    t0 = time.monotonic()
    proc = SwitchProcess(spec, record)
    proc.start(timeout=20)
    client = P4RuntimeClient(spec.grpc_address, device_id=spec.device_id)
    client.connect(wait=20)
    elapsed = time.monotonic() - t0
    client.close()
    return proc, elapsed


def startup(target: str, runs: int = 5, engine: str | None = None) -> dict[str, float]:
    times = []
    with NetRecord("bench-startup") as record:
        for _ in range(runs):
            proc, seconds = _start(target, record, engine)
            proc.stop()
            times.append(seconds)
    return {"arbitration_s_median": statistics.median(times), "runs": runs}


def native_load(runs: int = 3) -> dict[str, Any]:
    """Seconds from launching ``mlfabric-switch --engine native`` to rail_switch committed,
    as a controller does it: wait for the server, connect and win arbitration in one
    session, SetForwardingPipelineConfig answered. With the engine in the cache (warm, the
    median of ``runs``), and the first time, when the C compiler runs (cold: an empty cache
    of its own). ``phases`` are where the warm starts' time went, in ms (medians), as the
    switch logs them (:mod:`pybmv2.startup`)."""
    art = pipeline_files("rail_switch")
    p4info = load_p4info(art.p4info)
    config = art.json.read_bytes()

    def once(record: NetRecord, logs: Path) -> tuple[float, dict[str, float]]:
        spec = SwitchSpec(name=f"bench-native-{len(list(logs.iterdir()))}", target="python", ports={},
                          grpc_address=f"127.0.0.1:{free_tcp_port()}", engine="native", log_dir=logs)
        t0 = time.monotonic()
        proc = SwitchProcess(spec, record)
        try:
            proc.start(timeout=20)
            with P4RuntimeClient(spec.grpc_address, device_id=spec.device_id, timeout=120) as client:
                client.set_pipeline(p4info, config)
                elapsed = time.monotonic() - t0
        finally:
            proc.stop()
        # a switch that logs no phases (an older pybmv2 on PYTHONPATH) still gives its time
        return elapsed, StartupPhases.parse((logs / f"{spec.name}.log").read_text(errors="replace")) or {}

    old = os.environ.get("MLFABRIC_NATIVE_CACHE")
    with NetRecord("bench-native-load") as record, \
            tempfile.TemporaryDirectory(prefix="bench-native-cache-") as cache, \
            tempfile.TemporaryDirectory(prefix="bench-native-logs-") as logs:
        os.environ["MLFABRIC_NATIVE_CACHE"] = cache  # the switch processes inherit it
        try:
            cold, cold_phases = once(record, Path(logs))
            warm = [once(record, Path(logs)) for _ in range(runs)]
        finally:
            if old is None:
                del os.environ["MLFABRIC_NATIVE_CACHE"]
            else:
                os.environ["MLFABRIC_NATIVE_CACHE"] = old
    names = list(max((p for _, p in warm), key=len))
    phases = {n: statistics.median(p.get(n, 0.0) for _, p in warm) for n in names}
    return {"cold_s": cold, "warm_s": statistics.median(t for t, _ in warm), "phases": phases,
            "cold_phases": cold_phases}


def writes(target: str, entries: int = 10_000, per_rpc: int = 2_000,
           engine: str | None = None) -> dict[str, float]:
    """Entries/s written in batches of 1,000 and one per Write RPC (the controller's install
    path: rules encoded straight to wire bytes); RSS with the table full."""
    art = pipeline_files("rail_switch")
    p4info = load_p4info(art.p4info)
    schema = P4Schema(p4info)
    rules = route_rules(schema, entries)
    with NetRecord("bench-writes") as record:
        proc, _ = _start(target, record, engine)
        try:
            with P4RuntimeClient(proc.grpc_address, device_id=1, timeout=120) as client:
                client.set_pipeline(p4info, art.json.read_bytes())
                t0 = time.perf_counter()
                client.write_rules(schema, "insert", rules, batch_size=1000)
                batched = entries / (time.perf_counter() - t0)
                assert proc.proc is not None
                rss_full = _rss_mb(proc.proc.pid)
                client.write_rules(schema, "delete", rules, batch_size=1000)
                t0 = time.perf_counter()
                client.write_rules(schema, "insert", rules[:per_rpc], batch_size=1)
                single = per_rpc / (time.perf_counter() - t0)
        finally:
            proc.stop()
    return {"batched_entries_per_s": batched, "single_entries_per_s": single,
            "batch_speedup": batched / single, "rss_mb_with_10k_entries": rss_full}
