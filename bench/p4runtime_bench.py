"""P4Runtime figures of a switch process: start-up to arbitration, write rates, memory."""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.netstate import NetRecord
from controller.p4build import PROGRAM_DIRS, pipeline_files
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.entities import Exact, Lpm, TableRule, Ternary
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


#: the write benchmark's tables (tests/p4programs/write_bench.p4), one per match kind
WRITE_TABLES = {"exact": "I.exact_t", "lpm": "I.lpm_t", "ternary": "I.ternary_t"}


def write_rules(kind: str, n: int) -> list[TableRule]:
    """``n`` distinct entries of write_bench's ``kind`` table, each forwarding to a port."""
    table = WRITE_TABLES[kind]
    out = []
    for i in range(n):
        if kind == "exact":
            match: dict[str, Any] = {"hdr.eth.dst": Exact(0x020000000000 | i), "hdr.probe.a8": Exact(i & 0xFF)}
            priority = 0
        elif kind == "lpm":
            match = {"hdr.probe.a32": Lpm(0x0A000000 | i << 8, 24)}
            priority = 0
        else:
            match = {"hdr.probe.b32": Ternary(i << 8, 0xFFFFFF00), "hdr.probe.b8": Exact(i & 0xFF)}
            priority = 1 + i % 1000
        out.append(TableRule(table, match, "I.fwd", {"port": 1 + i % 8, "mac": 0x020000000100 | i % 8},
                             priority=priority))
    return out


@dataclass(frozen=True)
class WriteRates:
    """Entries/s of one switch, per table kind: ``batched`` (1,000 a Write), ``single``
    (one a Write); the best of the repetitions (a machine's noise only slows a run)."""

    batched: dict[str, float]
    single: dict[str, float]
    rss_mb_with_entries: float


def write_rates(targets: dict[str, tuple[str, str | None]], entries: int = 10_000,
                singles: int = 1_000, repeats: int = 3) -> dict[str, WriteRates]:
    """:class:`WriteRates` of each of ``targets`` (name -> (target, engine)), all started
    together and measured in turns, so that a slow spell of the machine meets them all.

    Each turn inserts ``entries`` entries of a table in Writes of 1,000 (timed), deletes
    them, inserts ``singles`` one per Write (timed) and deletes those: the controller's
    install path (rules encoded straight to wire bytes), its own time included."""
    art = pipeline_files("write_bench", PROGRAM_DIRS[1])
    p4info = load_p4info(art.p4info)
    schema = P4Schema(p4info)
    rules = {kind: write_rules(kind, entries) for kind in WRITE_TABLES}
    batched: dict[str, dict[str, float]] = {name: {} for name in targets}
    single: dict[str, dict[str, float]] = {name: {} for name in targets}
    rss: dict[str, float] = {}
    with NetRecord("bench-writes") as record, contextlib.ExitStack() as stack:
        clients: dict[str, tuple[SwitchProcess, P4RuntimeClient]] = {}
        for name, (target, engine) in targets.items():
            proc, _ = _start(target, record, engine)
            stack.callback(proc.stop)
            client = stack.enter_context(P4RuntimeClient(proc.grpc_address, device_id=1, timeout=120))
            client.set_pipeline(p4info, art.json.read_bytes())
            clients[name] = (proc, client)
        for _ in range(repeats):
            for kind, kind_rules in rules.items():
                for name, (proc, client) in clients.items():
                    t0 = time.perf_counter()
                    client.write_rules(schema, "insert", kind_rules, batch_size=1000)
                    rate = entries / (time.perf_counter() - t0)
                    batched[name][kind] = max(rate, batched[name].get(kind, 0.0))
                    if kind == "lpm":
                        assert proc.proc is not None
                        rss[name] = max(rss.get(name, 0.0), _rss_mb(proc.proc.pid))
                    client.write_rules(schema, "delete", kind_rules, batch_size=1000)
                    t0 = time.perf_counter()
                    client.write_rules(schema, "insert", kind_rules[:singles], batch_size=1)
                    rate = singles / (time.perf_counter() - t0)
                    single[name][kind] = max(rate, single[name].get(kind, 0.0))
                    client.write_rules(schema, "delete", kind_rules[:singles], batch_size=1000)
    return {name: WriteRates(batched[name], single[name], rss[name]) for name in targets}
