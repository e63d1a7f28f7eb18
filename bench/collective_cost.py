"""What the main job costs the machine: CPU-seconds per emulated gigabyte of the all-to-all on
both fabrics, where that CPU went, and the highest NIC rate at which ``make run``'s fabric
stays within the fidelity limits.

Both run ``make run``'s experiment itself (:mod:`mininet.rail_experiment`: 16 GPUs, 4 rails,
its default collectives and warm-up) with fewer iterations, and read its rows: each
collective's machine share, the workers' and switches' cores, and the link monitors.

*Emulated bytes* of an all-to-all are what it delivers between GPUs: with n GPUs and S bytes
per GPU, (n - 1) * S (each GPU keeps its own 1/n). The cost is the machine's busy CPU over
the collective (every core: workers, their TCP stacks, veths, shaping, switches).
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from controller.emulation import load_emulation_module
from controller.experiments.fidelity import breaches

__all__ = ["alltoall_cost", "highest_decided_rate", "run_main_job"]

#: each fabric's all-to-all in the main job
ALLTOALL_OPS = {"rail-only": "hier_alltoall", "fat-tree": "alltoall"}


def run_main_job(rate_mbps: float, *, iterations: int = 2, target: str = "python", engine: str | None = None,
                 mtu: int | None = None, extra: Sequence[str] = ()) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """``make run``'s experiment at ``rate_mbps``: its summary.json and its rows."""
    experiment = load_emulation_module("rail_experiment")
    with tempfile.TemporaryDirectory(prefix="mlfabric-bench-") as tmp:
        out = Path(tmp) / "run"
        argv = ["--rate-mbps", str(rate_mbps), "--iterations", str(iterations), "--target", target,
                "--out", str(out), *extra]
        if engine:
            argv += ["--engine", engine]
        if mtu:
            argv += ["--mtu", str(mtu)]
        code = experiment.main(argv)
        if code not in (0, 3):  # 3: ran, but a comparison was undecided
            raise RuntimeError(f"the rail-only experiment failed at {rate_mbps} Mbit/s (exit {code})")
        summary = json.loads((out / "summary.json").read_text())
        rows = list(csv.DictReader((out / "iterations.csv").open()))
    return summary, rows


def alltoall_cost(summary: dict[str, Any], rows: list[dict[str, str]]) -> dict[str, dict[str, float]]:
    """Per fabric: the all-to-all's machine CPU-seconds per emulated GB (median over its
    iterations), and the same split into workers, switches and the rest (kernel: TCP, veths,
    shaping), and the goodput it reached."""
    cfg = summary["config"]
    gigabytes = (cfg["gpus"] - 1) * cfg["alltoall_bytes"] / 1e9
    out = {}
    for fabric, op in ALLTOALL_OPS.items():
        mine = [r for r in rows if r["fabric"] == fabric and r["op"] == op and r["ok"] == "True"]
        if not mine:
            continue
        cores = os.cpu_count() or 1

        def per_gb(r: dict[str, str], key: str) -> float:
            return float(r[key]) * float(r["seconds"]) / gigabytes

        out[fabric] = {
            "machine_cpu_s_per_gb": statistics.median(float(r["machine_cpu"]) * cores * float(r["seconds"]) / gigabytes
                                                      for r in mine),
            **{f"{part}_cpu_s_per_gb": statistics.median(per_gb(r, f"{part}_cores") for r in mine)
               for part in ("workers", "switches", "rest")},
            "seconds": statistics.median(float(r["seconds"]) for r in mine),
        }
    return out


def _held(rows: list[dict[str, str]]) -> tuple[bool, str]:
    """Whether every collective stayed within the fidelity limits, and the worst breach."""
    found = [b for r in rows for b in breaches(r)]
    if not found:
        return True, ""
    worst = max(found, key=lambda b: b.severity)
    return False, worst.text()


def highest_decided_rate(rates: Sequence[float], *, iterations: int = 2, target: str = "python",
                         engine: str | None = None) -> dict[str, Any]:
    """Runs the main job at each rate in increasing order until one breaks a fidelity limit:
    the highest rate that held, per rate the machine's busiest collective and the worst
    breach, and the all-to-all's cost (:func:`alltoall_cost`) at each rate."""
    tried = []
    best = None
    for rate in sorted(rates):
        print(f"[bench] the main job at {rate:g} Mbit/s ({iterations} iterations) ...", flush=True)
        summary, rows = run_main_job(rate, iterations=iterations, target=target, engine=engine)
        held, why = _held(rows)
        machine = max(float(r["machine_cpu"]) for r in rows if r.get("machine_cpu"))
        tried.append({"rate_mbps": rate, "held": held, "machine_max": machine, "breach": why,
                      "alltoall_cost": alltoall_cost(summary, rows)})
        if not held:
            break
        best = rate
    return {"highest_rate_mbps": best, "tried": tried}


def main(argv: Sequence[str]) -> int:
    """``python -m bench.collective_cost [RATE ...]``: this part of ``make bench`` alone, as JSON."""
    rates = [float(a) for a in argv] or [100, 200, 400]
    print(json.dumps(highest_decided_rate(rates, engine="native"), indent=2))
    return 0


if __name__ == "__main__":
    import sys

    from controller.experiments.results import interrupt_on_signals

    with interrupt_on_signals():  # SIGTERM/SIGHUP unwind the fabric too
        sys.exit(main(sys.argv[1:]))
