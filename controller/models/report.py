"""Tables and plots of the rail-only models: cost and power against cluster size, iteration times.

The row builders and text formatters are pure; :func:`plot_cost_power`,
:func:`plot_iteration` and :func:`write_report` write files (PNG with matplotlib's Agg
canvas, JSON, text) into a given folder and return their paths.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from controller.models.cost import compare
from controller.models.iteration import (
    DEFAULT_HARDWARE,
    FABRICS,
    Hardware,
    LLMConfig,
    Parallelism,
    iteration_time,
)
from controller.models.params import DEFAULT_COST_FILE, CostParams, load_cost_params
from controller.models.presets import PRESETS

__all__ = [
    "DEFAULT_GPU_COUNTS",
    "cost_rows",
    "format_cost_table",
    "format_iteration_table",
    "iteration_rows",
    "plot_cost_power",
    "plot_iteration",
    "write_report",
]

#: 128 .. 32768 GPUs, powers of two.
DEFAULT_GPU_COUNTS: tuple[int, ...] = tuple(2**k for k in range(7, 16))


def cost_rows(params: CostParams, gpu_counts: Iterable[int] = DEFAULT_GPU_COUNTS,
              hb_domains: Iterable[int] = (8,), oversubscription: float = 1.0) -> list[dict[str, Any]]:
    """One row per (HB domain size, GPU count): both designs' bills and rail-only's savings.

    Counts that are not a multiple of the HB domain size are skipped.
    """
    rows = []
    for k in hb_domains:
        for n in gpu_counts:
            if n % k:
                continue
            c = compare(params.spec(n, k, oversubscription), params.costs)
            ro, ft = c.rail_only, c.fat_tree
            rows.append({
                "gpus": n, "hb_domain": k, "radix": params.radix, "oversubscription": oversubscription,
                "ro_tiers": len(ro.tiers), "ft_tiers": len(ft.tiers),
                "ro_switches": ro.switches, "ft_switches": ft.switches,
                "ro_switch_links": ro.switch_links, "ft_switch_links": ft.switch_links,
                "ro_transceivers": ro.transceivers, "ft_transceivers": ft.transceivers,
                "ro_cost_usd": ro.cost_usd, "ft_cost_usd": ft.cost_usd,
                "ro_power_w": ro.power_w, "ft_power_w": ft.power_w,
                "cost_savings": c.cost_savings, "power_savings": c.power_savings,
            })
    return rows


def format_cost_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A fixed-width text table of :func:`cost_rows`.

    >>> format_cost_table([]).splitlines()[0].split()[:3]
    ['GPUs', 'K', 'tiers']
    """
    head = (f"{'GPUs':>6} {'K':>4} {'tiers':>6} {'switches RO/FT':>15} {'xcvrs RO/FT':>15} "
            f"{'cost RO/FT (M$)':>17} {'power RO/FT (kW)':>18} {'cost sav':>8} {'pow sav':>8}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['gpus']:>6} {r['hb_domain']:>4} {r['ro_tiers']:>3}/{r['ft_tiers']:<2} "
            f"{r['ro_switches']:>7}/{r['ft_switches']:<7} {r['ro_transceivers']:>7}/{r['ft_transceivers']:<7} "
            f"{r['ro_cost_usd'] / 1e6:>8.2f}/{r['ft_cost_usd'] / 1e6:<8.2f} "
            f"{r['ro_power_w'] / 1e3:>8.1f}/{r['ft_power_w'] / 1e3:<9.1f} "
            f"{100 * r['cost_savings']:>7.1f}% {100 * r['power_savings']:>7.1f}%")
    return "\n".join(lines)


def iteration_rows(presets: Mapping[str, tuple[LLMConfig, Parallelism]] = PRESETS,
                   hw: Hardware = DEFAULT_HARDWARE) -> list[dict[str, Any]]:
    """One row per (model preset, fabric) with the iteration time by component."""
    rows = []
    for name, (model, par) in presets.items():
        ft_total = iteration_time(model, par, hw, "fat-tree").total_s
        for fabric in FABRICS:
            t = iteration_time(model, par, hw, fabric)
            rows.append({
                "model": name, "fabric": fabric, "gpus": par.gpus, "params_b": model.params / 1e9,
                "tp": par.tp, "pp": par.pp, "dp": par.dp, "ep": par.ep,
                "compute_s": t.compute_s, "bubble_s": t.bubble_s, "tp_s": t.tp_s, "pp_s": t.pp_s,
                "moe_s": t.moe_s, "dp_s": t.dp_s, "total_s": t.total_s,
                "vs_fat_tree": t.total_s / ft_total - 1.0,
            })
    return rows


def format_iteration_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """A fixed-width text table of :func:`iteration_rows` (seconds)."""
    head = (f"{'model':<16} {'fabric':<9} {'GPUs':>5} {'TPxPPxDP(EP)':>14} {'compute':>8} {'TP':>7} "
            f"{'PP':>7} {'MoE a2a':>8} {'DP':>7} {'total':>8} {'vs FT':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        plan = f"{r['tp']}x{r['pp']}x{r['dp']}" + (f"({r['ep']})" if r["ep"] > 1 else "")
        lines.append(
            f"{r['model']:<16} {r['fabric']:<9} {r['gpus']:>5} {plan:>14} {r['compute_s']:>8.3f} "
            f"{r['tp_s']:>7.3f} {r['pp_s']:>7.3f} {r['moe_s']:>8.3f} {r['dp_s']:>7.3f} "
            f"{r['total_s']:>8.3f} {100 * r['vs_fat_tree']:>6.2f}%")
    return "\n".join(lines)


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return path


def plot_cost_power(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """PNG: rail-only cost and power relative to the fat-tree, against GPU count (one line per K)."""
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot()
    for k in sorted({r["hb_domain"] for r in rows}):
        sel = [r for r in rows if r["hb_domain"] == k]
        xs = [r["gpus"] for r in sel]
        ax.plot(xs, [r["ro_cost_usd"] / r["ft_cost_usd"] for r in sel], "o-", label=f"cost, K={k}")
        ax.plot(xs, [r["ro_power_w"] / r["ft_power_w"] for r in sel], "s--", label=f"power, K={k}")
    ax.axhspan(1 - 0.77, 1 - 0.38, color="grey", alpha=0.15, label="paper: 38-77% cost savings")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("rail-only / rail-optimized fat-tree")
    radix = rows[0]["radix"] if rows else "?"
    ax.set_title(f"Rail-only network cost and power relative to a fat-tree (radix {radix})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3)
    return _save(fig, Path(path))


def plot_iteration(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """PNG: stacked iteration-time components per model, rail-only and fat-tree side by side."""
    models = list(dict.fromkeys(r["model"] for r in rows))
    parts = [("compute_s", "compute (incl. bubble)"), ("tp_s", "TP all-reduce"), ("pp_s", "PP send"),
             ("moe_s", "MoE all-to-all"), ("dp_s", "DP all-reduce")]
    fig = Figure(figsize=(8, 4.5))
    ax = fig.add_subplot()
    width = 0.38
    colours = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"]
    for j, fabric in enumerate(FABRICS):
        by_model = {r["model"]: r for r in rows if r["fabric"] == fabric}
        xs = [i + (j - 0.5) * width for i in range(len(models))]
        bottom = [0.0] * len(models)
        for (key, label), colour in zip(parts, colours, strict=True):
            vals = [by_model[m][key] if m in by_model else 0.0 for m in models]
            ax.bar(xs, vals, width, bottom=bottom, color=colour, edgecolor="black", linewidth=0.3,
                   hatch="//" if fabric == "rail-only" else None, label=label if j == 0 else None)
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_xticks(range(len(models)), models, rotation=15)
    ax.set_ylabel("seconds per iteration")
    ax.set_title("Iteration time: rail-only (hatched, left) vs fat-tree (right)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return _save(fig, Path(path))


def write_report(out_dir: str | Path, params_path: str | Path = DEFAULT_COST_FILE,
                 gpu_counts: Iterable[int] = DEFAULT_GPU_COUNTS, hb_domains: Iterable[int] = (8, 256),
                 hw: Hardware = DEFAULT_HARDWARE, oversubscription: float = 1.0) -> dict[str, Path]:
    """Write the tables (text, JSON) and both plots into ``out_dir``; return their paths by name."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    params = load_cost_params(params_path)
    costs = cost_rows(params, gpu_counts, hb_domains, oversubscription)
    iters = iteration_rows(PRESETS, hw)
    paths = {
        "cost_table": out / "rail_only_cost.txt",
        "cost_json": out / "rail_only_cost.json",
        "iteration_table": out / "iteration_time.txt",
        "iteration_json": out / "iteration_time.json",
    }
    paths["cost_table"].write_text(format_cost_table(costs) + "\n", encoding="utf-8")
    paths["iteration_table"].write_text(format_iteration_table(iters) + "\n", encoding="utf-8")
    meta = {"cost_params": params.file, "sources": dict(params.sources)}
    paths["cost_json"].write_text(json.dumps({**meta, "units": {"cost": "USD", "power": "W"},
                                              "rows": costs}, indent=2), encoding="utf-8")
    paths["iteration_json"].write_text(json.dumps({"hardware": hw.__dict__, "units": "seconds",
                                                   "rows": iters}, indent=2), encoding="utf-8")
    paths["cost_plot"] = plot_cost_power(costs, out / "rail_only_cost_power.png")
    paths["iteration_plot"] = plot_iteration(iters, out / "iteration_time.png")
    return paths
