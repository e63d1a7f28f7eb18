"""Table, plot and data of the TopoOpt model (:mod:`controller.models.topoopt`) at the paper's
scale: ``mlfabric experiment model topoopt``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from controller.models.topoopt import (
    COST_RATIO,
    PAPER_JOBS,
    PAPER_SPEEDUP,
    PAPER_TAX,
    WORKLOADS,
    coopt_rows,
    iteration,
)

__all__ = ["model_rows", "write_topoopt_report"]


def model_rows(n: int = 128, degrees: tuple[int, ...] = (4, 5, 6, 7, 8), nic_gbps: float = 100.0) -> list[dict[str, Any]]:
    """One row per (workload, degree), and each workload's communication-bound limit (no compute)."""
    rows = []
    for w in WORKLOADS:
        for d in degrees:
            rows.append({"workload": w.name, "d": d, **iteration(w, n=n, d=d, nic_gbps=nic_gbps)})
        bound = dataclasses.replace(w, compute_ms=0.0)
        for d in (degrees[0], degrees[-1]):
            rows.append({"workload": f"{w.name}, no compute", "d": d, **iteration(bound, n=n, d=d, nic_gbps=nic_gbps)})
    return rows


def _table(rows: list[dict[str, Any]], n: int, nic_gbps: float) -> str:
    lines = [f"TopoOpt model: {n} servers, d NICs of {nic_gbps:g} Gb/s; fat-tree of similar cost: d x {nic_gbps:g} / "
             f"{COST_RATIO} Gb/s per server; ideal switch: d x {nic_gbps:g} Gb/s",
             "workloads (per server per iteration): "
             + "; ".join(f"{w.name}: {w.compute_ms:g} ms compute, all-reduce {w.allreduce_mb:g} MB, all-to-all "
                         f"{w.alltoall_mb:g} MB" for w in WORKLOADS), "",
             f"{'workload':<30}{'d':<4}{'TopoOpt ms':<12}{'fat-tree ms':<13}{'ideal ms':<10}{'speed-up':<10}"
             f"{'tax':<7}{'route length':<12}"]
    for r in rows:
        lines.append(f"{r['workload']:<30}{r['d']:<4}{r['topoopt_ms']:<12.1f}{r['fat_tree_ms']:<13.1f}"
                     f"{r['ideal_ms']:<10.1f}{r['speedup_vs_fat_tree']:<10.2f}{r['tax']:<7.2f}{r['route_length']:<12.2f}")
    lines += ["", f"paper: {PAPER_SPEEDUP}; tax {PAPER_TAX[4]} at d=4, {PAPER_TAX[8]} at d=8",
              "speed-up: fat-tree of similar cost over TopoOpt; it cannot exceed the cost ratio "
              f"({COST_RATIO}) in this model: the paper's 3.4x needs more than bandwidth per dollar"]
    return "\n".join(lines)


def _coopt_table(rows: list[dict[str, Any]], n: int, nic_gbps: float) -> str:
    lines = [f"Co-optimized (TopologyFinder alternating with the strategy search, the emulation's code): {n} servers, "
             f"d NICs of {nic_gbps:g} Gb/s; each fabric with the strategy searched for it",
             "jobs (per iteration): " + "; ".join(
                 f"{j['name']}: " + ", ".join(f"{k} {v}" for k, v in j.items() if k not in ("name", "strategy"))
                 for j in PAPER_JOBS), "",
             f"{'workload':<18}{'d':<4}{'co-opt ms':<11}{'Totient ms':<12}{'fat-tree ms':<13}{'vs fat-tree':<13}"
             f"{'vs Totient':<12}{'tax':<7}circuits; strategy"]
    for r in rows:
        lines.append(f"{r['workload']:<18}{r['d']:<4}{r['topoopt_ms']:<11.1f}{r['totient_ms']:<12.1f}"
                     f"{r['fat_tree_ms']:<13.1f}{r['speedup_vs_fat_tree']:<13.2f}{r['speedup_vs_totient']:<12.2f}"
                     f"{r['tax']:<7.2f}{r['circuits']}; {r['strategy']}")
    return "\n".join(lines)


def _plot(rows: list[dict[str, Any]], path: Path, coopt: list[dict[str, Any]] | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for name in dict.fromkeys(r["workload"] for r in rows if "no compute" not in r["workload"]):
        mine = [r for r in rows if r["workload"] == name]
        left.plot([r["d"] for r in mine], [r["speedup_vs_fat_tree"] for r in mine], marker="o", label=f"{name}, closed form")
        right.plot([r["d"] for r in mine], [r["tax"] for r in mine], marker="o", label=f"{name}, closed form")
    for name in dict.fromkeys(r["workload"] for r in coopt or []):
        mine = [r for r in coopt or [] if r["workload"] == name]
        left.plot([r["d"] for r in mine], [r["speedup_vs_fat_tree"] for r in mine], marker="s", ls="--",
                  label=f"{name}, co-optimized")
        right.plot([r["d"] for r in mine], [r["tax"] for r in mine], marker="s", ls="--", label=f"{name}, co-optimized")
    left.axhline(COST_RATIO, color="gray", ls="--", lw=1, label=f"cost ratio {COST_RATIO} (the model's bound)")
    left.axhline(3.4, color="black", ls=":", lw=1, label="paper: up to 3.4x")
    left.set_xlabel("degree d")
    left.set_ylabel("speed-up over a fat-tree of similar cost")
    left.legend(fontsize=8)
    right.scatter(list(PAPER_TAX), list(PAPER_TAX.values()), color="black", marker="*", s=80, label="paper")
    right.set_xlabel("degree d")
    right.set_ylabel("bandwidth tax")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_topoopt_report(out: Path, n: int = 128, nic_gbps: float = 100.0,
                         degrees: tuple[int, ...] = (4, 5, 6, 7, 8),
                         coopt_degrees: tuple[int, ...] = (4, 6, 8)) -> dict[str, Path]:
    """Write ``topoopt_model.txt``, ``topoopt_model.json`` and ``topoopt_model.png`` into ``out``."""
    rows = model_rows(n, degrees, nic_gbps=nic_gbps)
    coopt = coopt_rows(n, coopt_degrees, nic_gbps=nic_gbps, progress=lambda m: print(f"[topoopt model] {m}", flush=True))
    text = _coopt_table(coopt, n, nic_gbps) + "\n\nClosed form (all-reduce over every ring, all-to-all over the routes):\n" \
        + _table(rows, n, nic_gbps)
    table = out / "topoopt_model.txt"
    table.write_text(text + "\n")
    data = out / "topoopt_model.json"
    data.write_text(json.dumps({"servers": n, "nic_gbps": nic_gbps, "cost_ratio": COST_RATIO,
                                "workloads": [dataclasses.asdict(w) for w in WORKLOADS], "rows": rows,
                                "jobs": list(PAPER_JOBS), "coopt_rows": coopt,
                                "paper": {"speedup": PAPER_SPEEDUP, "tax": PAPER_TAX}}, indent=2, default=str) + "\n")
    return {"table": table, "data": data, "plot": _plot(rows, out / "topoopt_model.png", coopt)}

