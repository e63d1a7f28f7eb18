"""The rotor experiment's plots (matplotlib, Agg): measured mean ± sd as markers with error
bars, expectations as lines or open markers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_load", "plot_rotor"]

_STYLE = {("direct", "hold"): ("C0", "o", "direct, calendar queues"),
          ("vlb", "hold"): ("C1", "s", "VLB, calendar queues"),
          ("direct", "drop"): ("C2", "^", "direct, drop (stock BMv2)"),
          ("vlb", "drop"): ("C3", "v", "VLB, drop (stock BMv2)")}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _legend(ax, **kw: Any) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kw)


def _sweep(ax, rows: Sequence[Mapping[str, Any]], x_key: str, xlabel: str) -> None:
    """Hot-pair throughput against ``x_key`` for each routing/ToR, expectation dashed."""
    for (routing, calendar), (colour, marker, label) in _STYLE.items():
        pts = sorted((r[x_key], r["throughput"], r["throughput_sd"], r["expected"]["throughput"]) for r in rows
                     if r["pattern"] == "hot-pair" and r["routing"] == routing and r["calendar"] == calendar)
        if len(pts) < 2:
            continue
        xs = [p[0] for p in pts]
        ax.errorbar(xs, [p[1] for p in pts], yerr=[p[2] for p in pts], color=colour, marker=marker, capsize=4,
                    label=f"{label}")
        ax.plot(xs, [p[3] for p in pts], "--", color=colour, alpha=0.6)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("hot-pair throughput\n(fraction of the link)")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)


def plot_rotor(rows: Sequence[Mapping[str, Any]], path: Path, *, title: str) -> Path:
    """Four panels: throughput per pattern at the reference shape; hot-pair throughput
    against the duty cycle and against the slice; light-load delay against the cycle."""
    plt = _pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    ax = axes[0][0]
    ref = [r for r in rows if r["sweep"] == "patterns"]
    patterns = list(dict.fromkeys(r["pattern"] for r in ref))
    variants = [k for k in _STYLE if any((r["routing"], r["calendar"]) == k for r in ref)]
    width = 0.8 / max(1, len(variants))
    for j, key in enumerate(variants):
        colour, _, label = _STYLE[key]
        for i, pattern in enumerate(patterns):
            r = next((r for r in ref if r["pattern"] == pattern and (r["routing"], r["calendar"]) == key), None)
            if r is None:
                continue
            x = i + (j - (len(variants) - 1) / 2) * width
            ax.bar(x, r["throughput"], width, yerr=r["throughput_sd"], color=colour, capsize=4,
                   label=label if i == 0 else None)
            ax.plot([x - width / 2, x + width / 2], [r["expected"]["throughput"]] * 2, "k-", lw=2)
    ax.set_xticks(range(len(patterns)), patterns)
    ax.set_ylabel("throughput on the routing's paths\n(fraction of the link)")
    ax.set_ylim(0, 1.05)
    if ref:
        ax.set_title(f"patterns at {ref[0]['slice_ms']:g} ms slices + {ref[0]['night_ms']:g} ms nights "
                     "(black: expected)", fontsize=10)
    _legend(ax, fontsize=8)
    ax.grid(alpha=0.3, axis="y")

    duty = [r for r in rows if r["sweep"] in ("duty", "patterns")
            and r["slice_ms"] == (ref[0]["slice_ms"] if ref else r["slice_ms"])]
    _sweep(axes[0][1], duty, "duty", "duty cycle (slice / (slice + night))")
    axes[0][1].set_title("duty-cycle sweep (dashed: expected)", fontsize=10)
    _legend(axes[0][1], fontsize=8)
    slices = [r for r in rows if r["sweep"] in ("slice", "patterns")
              and abs(r["night_ms"] / r["slice_ms"] - (ref[0]["night_ms"] / ref[0]["slice_ms"] if ref else 0)) < 1e-6]
    _sweep(axes[1][0], slices, "slice_ms", "slice duration (ms), nights a fixed fraction")
    axes[1][0].set_xscale("log", base=2)
    axes[1][0].set_title("slice sweep (dashed: expected)", fontsize=10)

    ax = axes[1][1]
    for (routing, calendar), (colour, marker, label) in _STYLE.items():
        if calendar != "hold":
            continue
        pts = sorted(((r["slice_ms"] + r["night_ms"]) * 3, r) for r in rows
                     if r["pattern"] == "hot-pair" and r["routing"] == routing and r["calendar"] == calendar)
        if not pts:
            continue
        xs = [p[0] for p in pts]
        for q, style in (("p50", "-"), ("p99", ":")):
            ax.errorbar(xs, [p[1][f"delay_{q}_ms"] for p in pts], yerr=[p[1][f"delay_{q}_ms_sd"] for p in pts],
                        color=colour, marker=marker, ls=style, capsize=3, label=f"{label} {q}")
            ax.plot(xs, [p[1]["expected"][f"delay_{q}_ms"] for p in pts], ls=style, color="grey", alpha=0.6)
    ax.set_xlabel("cycle (ms) = (racks - 1) x (slice + night), 4 racks")
    ax.set_ylabel("one-way delay at light load (ms)")
    ax.set_title("calendar-queue delay, hot pair (grey: the schedule's wait)", fontsize=10)
    _legend(ax, fontsize=7)
    ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_load(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Delivered (on path, and on detours) against offered load at the reference shape,
    one panel per pattern."""
    plt = _pyplot()
    ref = [r for r in rows if r["sweep"] == "patterns"]
    patterns = list(dict.fromkeys(r["pattern"] for r in ref)) or ["-"]
    fig, axes = plt.subplots(1, len(patterns), figsize=(5 * len(patterns), 4.2), squeeze=False)
    for ax, pattern in zip(axes[0], patterns, strict=True):
        for r in (r for r in ref if r["pattern"] == pattern):
            colour, marker, label = _STYLE[(r["routing"], r["calendar"])]
            ax.plot(r["levels"], r["on_path"], color=colour, marker=marker, label=label)
            ax.plot(r["levels"], [a + b for a, b in zip(r["on_path"], r["detour"], strict=True)], color=colour,
                    ls=":", alpha=0.7)
            ax.plot(r["levels"], r["expected"]["per_level"], color=colour, ls="--", alpha=0.5)
        ax.plot([0, 1], [0, 1], color="grey", lw=0.8)
        ax.set_title(f"{pattern} (dashed: expected, dotted: with detours)", fontsize=9)
        ax.set_xlabel("offered per source (fraction of the link)")
        ax.set_ylabel("delivered per source")
        ax.set_xlim(0, 1.05)
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
        _legend(ax, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
