"""The Checkmate experiment's plots: iteration time, loss, checkpoint frequency, replication."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_checkmate", "plot_frequency"]


def plot_checkmate(rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any], path: Path, *,
                   title: str) -> Path:
    """Four panels: iteration time per configuration (box over every iteration of every
    repetition), training loss per iteration, checkpoints per 100 iterations against the
    iteration-time ratio, and the shadow's replica check per iteration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    over = summary["overhead"]
    names = [o["config"] for o in over]
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    ax = axes[0][0]
    data = [[r["seconds"] * 1000 for r in rows if r["config"] == n and r["ok"] and r["iteration"] > 0]
            for n in names]
    ax.boxplot(data, showfliers=False)
    ax.set_xticks(range(1, len(names) + 1), names, rotation=15, fontsize=8)
    ax.set_ylabel("iteration time (ms)")
    ax.set_title("iteration time (every iteration of every repetition)")
    ax.grid(alpha=0.3, axis="y")

    ax = axes[0][1]
    for i, n in enumerate(names):
        pts = sorted((r["iteration"], r["loss"]) for r in rows if r["config"] == n and r["rep"] == 0 and r["ok"])
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="." if i else None, label=n,
                    linestyle="-" if i == 0 else ":")
    ax.set_xlabel("iteration")
    ax.set_ylabel("training loss (cross-entropy)")
    ax.set_title("training loss, repetition 0 (identical in every configuration)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)

    ax = axes[1][0]
    for o in over:
        if o["ratio"] is None:
            continue
        err = [[o["ratio"] - o["ratio_min"]], [o["ratio_max"] - o["ratio"]]]
        ax.errorbar(o["checkpoints_per_100"], o["ratio"], yerr=err, fmt="o", capsize=5)
        ax.annotate(o["config"], (o["checkpoints_per_100"], o["ratio"]), textcoords="offset points",
                    xytext=(6, 6), fontsize=8)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xlabel("checkpoints per 100 iterations")
    ax.set_ylabel("iteration time / no checkpoint (median, min..max)")
    ax.set_title("checkpoint frequency vs overhead")
    ax.grid(alpha=0.3)

    ax = axes[1][1]
    rep = summary.get("replication_rows") or []
    colours = {"mirrored": "C2", "resynced": "C1", "hole": "C3", "missing": "C3"}
    for how, colour in colours.items():
        pts = [r["iteration"] for r in rep if r["how"] == how]
        if pts:
            ax.scatter(pts, [1 if r["match"] else 0 for r in rep if r["how"] == how], color=colour,
                       label=how, s=18)
    ax.set_yticks([0, 1], ["differs / absent", "bit-identical"])
    ax.set_xlabel("iteration")
    ax.set_title("shadow replica vs workers (sha256 of the parameters)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_frequency(summary: Mapping[str, Any], path: Path, *, title: str) -> Path:
    """Checkpoint frequency against overhead for every system: each measured configuration
    (mean, 95% CI), the tuners' rounds (open marks) and the budget. Left: everything; right:
    around the budget, where each system's sustainable frequency is read (points above it
    are drawn at its top edge, as triangles)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter

    from controller.experiments.checkmate import MIRROR, OFF, SYSTEMS

    budget = 100 * float(summary["budget"])
    colours = {MIRROR: "C2", "sync": "C3", "checkfreq": "C0", "gemini": "C1"}
    points = []
    for o in summary["overhead"]:
        name = o["config"]
        if name == OFF or o.get("ratio") is None:
            continue
        system = MIRROR if name == MIRROR else name.split(" k=")[0]
        ci = o.get("ratio_ci95")
        y = 100 * ((ci[0] if ci else o["ratio"]) - 1)
        lo, hi = (100 * (ci[1] - 1), 100 * (ci[2] - 1)) if ci else (y, y)
        points.append((name, system, o["checkpoints_per_100"], y, lo, hi))
    top = max(3 * budget, 15.0)
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    for ax, zoom in zip(axes, (False, True), strict=True):
        seen: set[str] = set()
        above = 0
        for name, system, x, y, lo, hi in points:
            label = "Checkmate" if system == MIRROR else SYSTEMS.get(system, system)
            colour = colours.get(system, "k")
            if zoom and y > top:
                ax.scatter([x], [top * 0.97], marker="^", color=colour)
                above += 1
                ax.annotate(f"{name}: {y:+.0f}%", (x, top * 0.97), textcoords="offset points",
                            xytext=(-90, -12 * above), fontsize=7)
                continue
            ax.errorbar(x, y, yerr=[[y - lo], [hi - y]], fmt="o", capsize=4, color=colour,
                        label=None if label in seen else label)
            seen.add(label)
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(5, 5 if zoom else 3), fontsize=7)
        for mode, t in (summary.get("tuning") or {}).items():
            rounds = [(100 / r["k"], 100 * r["overhead"]) for r in t["rounds"] if not zoom or 100 * r["overhead"] <= top]
            ax.scatter([r[0] for r in rounds], [r[1] for r in rounds], facecolors="none",
                       edgecolors=colours.get(mode, "k"), s=70, label=f"{SYSTEMS.get(mode, mode)}'s tuning rounds")
        ax.axhline(budget, color="grey", linestyle="--", linewidth=1, label=f"{budget:g}% budget")
        ax.axhline(0, color="grey", linewidth=0.6)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator([1, 2, 5, 10, 20, 50, 100]))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("checkpoints per 100 iterations (log)")
        ax.set_ylabel("iteration time over no checkpoint (%)")
        ax.set_title("around the budget" if zoom else "every configuration")
        if zoom:
            ax.set_ylim(-max(10.0, budget * 2), top)
        ax.legend(fontsize=7, loc="upper left")
        ax.grid(alpha=0.3, which="both")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
