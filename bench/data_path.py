"""What an emulated byte costs ``make run``'s workload: CPU-seconds per emulated gigabyte, the
data path before this project's cheap-bytes work against the one now, in the same run and at
the same rate, and where the CPU went.

*Before*: every frame on its own (the hosts' offloads off, TCP cut into MTU frames before the
switches) and the intra-server NVLink as TCP over the hosts' loopback shaped by htb
(``--nvlink loopback --super-frames 0``). *Now*: ``make run``'s defaults (super-packets
through the switches, the NVLink over Unix sockets paced per GPU). Both run ``make run``'s
experiment itself (:mod:`bench.collective_cost`), fewer iterations.

*Emulated bytes* of a collective are what it delivers between GPUs: (n - 1) S for an
all-to-all of S bytes per GPU, 2 (n - 1) S for a ring all-reduce. The cost is the machine's
busy CPU over the collective (every core), split into the workers' user and system time, the
switches, the machine's softirq work (inside the others) and the rest.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.collective_cost import run_main_job

__all__ = ["BEFORE", "NOW", "compare", "op_cost", "section_rows"]

#: the data path before: frames only, TCP over a shaped loopback for the NVLink
BEFORE = ("--nvlink", "loopback", "--super-frames", "0")
#: the data path now: make run's defaults
NOW: tuple[str, ...] = ()
#: each fabric's all-to-all and its all-reduce in the main job
OPS = {("rail-only", "hier_alltoall"): "all-to-all", ("fat-tree", "alltoall"): "all-to-all",
       ("rail-only", "allreduce"): "all-reduce", ("fat-tree", "allreduce"): "all-reduce"}
PARTS = ("workers_user", "workers_sys", "switches", "softirq", "rest")


def emulated_bytes(op: str, gpus: int, size: int) -> float:
    """What one collective delivers between GPUs.

    >>> emulated_bytes("alltoall", 16, 1 << 20), emulated_bytes("allreduce", 16, 1 << 20)
    (15728640, 31457280)
    """
    return (gpus - 1) * size * (2 if "allreduce" in op else 1)


def op_cost(summary: Mapping[str, Any], rows: Sequence[Mapping[str, str]]) -> dict[str, dict[str, float]]:
    """Per ``fabric op``: the machine's CPU-seconds per emulated GB (median over the op's
    iterations), split into :data:`PARTS`, and the op's median seconds."""
    cfg = summary["config"]
    cores = os.cpu_count() or 1
    out: dict[str, dict[str, float]] = {}
    for (fabric, op) in OPS:
        mine = [r for r in rows if r["fabric"] == fabric and r["op"] == op and r["ok"] == "True"]
        if not mine:
            continue
        size = cfg["alltoall_bytes"] if "alltoall" in op else cfg["allreduce_bytes"]
        gb = emulated_bytes(op, cfg["gpus"], size) / 1e9

        def per_gb(r: Mapping[str, str], key: str, gb: float = gb) -> float:
            return float(r.get(key) or 0.0) * float(r["seconds"]) / gb

        out[f"{fabric} {op}"] = {
            "machine": statistics.median(float(r["machine_cpu"]) * cores * float(r["seconds"]) / gb for r in mine),
            **{part: statistics.median(per_gb(r, f"{part}_cores") for r in mine) for part in PARTS},
            "seconds": statistics.median(float(r["seconds"]) for r in mine),
            "machine_share_max": max(float(r["machine_cpu"]) for r in mine),
        }
    return out


def compare(*, quick: bool = False, rate_mbps: float | None = None, extra: Sequence[str] = ()) -> dict[str, Any]:
    """``make run``'s experiment with the data path :data:`BEFORE` and :data:`NOW`, at
    ``make run``'s default rate (or ``rate_mbps``): each one's :func:`op_cost`."""
    from controller.experiments.rail_only import ExperimentConfig

    default = ExperimentConfig()
    rate = rate_mbps or default.rate_mbps
    iterations = 2 if quick else 3
    out: dict[str, Any] = {"rate_mbps": rate, "iterations": iterations, "config": {}}
    for name, args in (("before", BEFORE), ("now", NOW)):
        print(f"[bench] make run's workload at {rate:g} Mbit/s, data path {name} {' '.join(args)} ...", flush=True)
        summary, rows = run_main_job(rate, iterations=iterations, extra=(*args, *extra))
        out[name] = op_cost(summary, rows)
        out["config"][name] = {k: summary["config"][k] for k in ("nvlink", "super_frames", "allreduce_bytes",
                                                                  "alltoall_bytes", "gpus")}
    return out


def section_rows(result: Mapping[str, Any], row: Callable[..., dict]) -> list[dict]:
    """``make bench``'s rows: per fabric and collective, the cost now, the ratio to before,
    and where the CPU went now."""
    rows: list[dict] = []
    rate = result["rate_mbps"]
    for key, now in result["now"].items():
        before = result["before"].get(key)
        rows.append(row(f"{key}, {rate:g} Mbit/s: machine CPU per emulated GB", "CPU-s/GB", now["machine"], None,
                        "report (lower is better)"))
        if before:
            rows.append(row("... the same with frames only and a loopback NVLink (before)", "CPU-s/GB",
                            before["machine"], None, "report"))
            rows.append(row("... before / now", "x", before["machine"] / now["machine"], None, ">= 4x"))
        for part in PARTS:
            rows.append(row(f"... now, of which {part.replace('_', ' ')}", "CPU-s/GB", now[part], None,
                            "report" + (" (inside the others)" if part == "softirq" else "")))
    return rows


def main(argv: Sequence[str]) -> int:
    """``python -m bench.data_path [RATE]``: this section alone, as JSON."""
    print(json.dumps(compare(rate_mbps=float(argv[0]) if argv else None), indent=2))
    return 0


if __name__ == "__main__":
    from controller.experiments.results import interrupt_on_signals

    with interrupt_on_signals():
        sys.exit(main(sys.argv[1:]))
