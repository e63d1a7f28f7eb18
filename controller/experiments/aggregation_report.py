"""The aggregation experiment's table, verdicts and plot (from its rows; no I/O but the plot)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from controller.cli.output import format_table
from controller.experiments.aggregation import (
    LABELS,
    OPS,
    AggregationSettings,
    innet_wire_bytes,
    summarize,
    verdicts,
)
from controller.experiments.fidelity import Verdict, undecided_note
from controller.experiments.rail_only import ExperimentConfig

__all__ = ["nic_bytes_model", "plot_aggregation", "report"]

FABRIC_COLOURS = {"rail-only": "tab:blue", "fat-tree": "tab:orange"}
_FABRIC_STYLES = {"rail-only": "-", "fat-tree": "--"}  # the fabrics often coincide: dashed shows both
_MARKERS = {"allreduce": "o", "hier_allreduce": "s", "innet_allreduce": "^", "innet_allreduce_lossy": "v"}
_FABRIC_LABELS = {"rail-only": "rail-only", "fat-tree": "fat-tree"}


def nic_bytes_model(op: str, size: int, servers: int, rails: int) -> float:
    """The payload bytes the busiest GPU NIC sends for an all-reduce of ``size`` bytes: the
    flat ring's 2(W-1)/W of it on each NIC it crosses servers through (rail-aligned rings
    cross on D of their W hops); the hierarchical one the rail ring's 2(D-1)/D of its 1/R
    shard; the in-network one its shard once, in whole aggregation frames (headers included).

    >>> nic_bytes_model("allreduce", 1 << 20, 4, 4) / (1 << 20)
    1.875
    >>> nic_bytes_model("hier_allreduce", 1 << 20, 4, 4) / (1 << 20)
    0.375
    >>> round(nic_bytes_model("innet_allreduce", 1 << 20, 4, 4) / (1 << 20), 3)
    0.307
    """
    world = servers * rails
    if op == "allreduce":
        return 2 * (world - 1) / world * size
    if op == "hier_allreduce":
        return 2 * (servers - 1) / servers * size / rails if servers > 1 else 0.0
    return float(innet_wire_bytes(math.ceil(size / rails)))  # lossy: the same, before what it resends


def report(cfg: ExperimentConfig, settings: AggregationSettings, rows: Sequence[Mapping[str, Any]],
           infos: Mapping[str, Any]) -> tuple[str, list[Verdict], dict[str, Any]]:
    summary = summarize(rows)
    spreads, judged = verdicts(rows)
    table = []
    for s in summary:
        model = nic_bytes_model(s["op"], s["kb"] * 1024, cfg.servers, cfg.rails)
        table.append({"fabric": s["fabric"], "KiB": s["kb"], "all-reduce": LABELS[s["op"]],
                      "median s": f"{s['median_s']:.3f}", "min-max s": f"{s['min_s']:.3f}-{s['max_s']:.3f}",
                      "ok/failed": f"{s['ok']}/{s['failed']}",
                      "busiest NIC KiB": f"{s['busiest_nic_bytes'] / 1024:.0f}"
                      if s["busiest_nic_bytes"] is not None else "-",
                      "model": f"{model / 1024:.0f}",
                      "mean NIC KiB": f"{s['nic_bytes'] / 1024:.0f}" if s["nic_bytes"] is not None else "-",
                      "resent": s["retransmitted"] if s["op"].startswith("innet") else "-"})
    lines = [f"In-network aggregation vs the ring and the hierarchical all-reduce: {cfg.servers} servers x "
             f"{cfg.rails} GPUs, {cfg.rate_mbps:g} Mbit/s NICs, {settings.slots} slots per switch, {cfg.target} "
             f"target, {cfg.iterations} repetitions", "", format_table(table), "",
             "NIC KiB: what GPU NICs sent into their switches (TCP/IP headers and ACKs included), from the "
             "switches' port counters: the busiest NIC (which sets the time) and the mean over NICs; the model "
             "is the busiest NIC's payload (whole frames for in-network)."]
    for v, (label, sp) in zip(judged, spreads.items(), strict=True):
        if sp["n"]:
            lines.append(f"{label}: {sp['mean']:.2f} [{sp['low']:.2f}, {sp['high']:.2f}] over {sp['n']}: {v.text()}")
        else:
            lines.append(f"{label}: no paired runs: {v.text()}")
    for fabric, info in infos.items():
        sh = info.get("shadow") if isinstance(info, Mapping) else None
        if sh:
            lines.append(f"Checkmate shadow, {fabric}: rebuilt {sh['identical']} of {sh['calls']} in-network all-reduces "
                         "bit for bit from one copy of each sum" + (f" ({sh['error']})" if sh.get("error") else ""))
    data = {"allreduces": summary, "spreads": spreads, "runs": dict(infos)}  # core.write_outcome adds the verdicts
    return "\n".join(lines), judged, data


def plot_aggregation(rows: Sequence[Mapping[str, Any]], path: Path, *, title: str,
                     judged: Sequence[Verdict] = ()) -> Path:
    """Completion time (median, min-max bars) and bytes per NIC by size: one colour per fabric,
    one marker per all-reduce."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = [s for s in summarize(rows) if s["ok"]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    for fabric, colour in FABRIC_COLOURS.items():
        for op in OPS:
            pts = sorted((s["kb"], s["median_s"], s["min_s"], s["max_s"], s["busiest_nic_bytes"]) for s in summary
                         if s["fabric"] == fabric and s["op"] == op)
            if not pts:
                continue
            xs = [p[0] for p in pts]
            left.errorbar(xs, [p[1] for p in pts], yerr=[[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]],
                          color=colour, ls=_FABRIC_STYLES[fabric], marker=_MARKERS[op], capsize=3,
                          label=f"{_FABRIC_LABELS[fabric]}: {LABELS[op]}")
            right.plot(xs, [(p[4] or 0) / 1024 for p in pts], color=colour, ls=_FABRIC_STYLES[fabric],
                       marker=_MARKERS[op], label=f"{_FABRIC_LABELS[fabric]}: {LABELS[op]}")
    for ax, what in ((left, "completion time, s"), (right, "sent by the busiest GPU NIC, KiB")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("all-reduce size per GPU, KiB")
        sizes = sorted({s["kb"] for s in summary})
        ax.set_xticks(sizes, [str(k) for k in sizes])
        ax.tick_params(axis="x", which="minor", bottom=False, labelbottom=False)
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)
    fig.suptitle(title + undecided_note(list(judged)))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
