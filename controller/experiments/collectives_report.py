"""The collectives experiment's table, verdict lines, ``summary.json`` data and plot, from
its rows (:mod:`controller.experiments.collectives`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from controller.cli.output import format_table
from controller.experiments.collectives import COLLECTIVES, CollectivesConfig, summarize, verdicts
from controller.experiments.cpu_use import cpu_summary, cpu_verdict
from controller.experiments.fidelity import Verdict
from controller.experiments.results import FABRIC_COLOURS

__all__ = ["plot_sizes", "report", "size_text"]


def size_text(size: int) -> str:
    """``64 KiB``, ``4 MiB``.

    >>> size_text(65536), size_text(4 << 20)
    ('64 KiB', '4 MiB')
    """
    return f"{size >> 20} MiB" if size >= 1 << 20 and not size % (1 << 20) else f"{size >> 10} KiB"


def _seconds(value: float | None) -> str:
    return "-" if value is None or value != value else f"{value:.3f}"


def report(rows: Sequence[Mapping[str, Any]], cfg: CollectivesConfig) -> tuple[str, list[Verdict], dict[str, Any]]:
    """The text table with its verdict lines, the verdicts, and ``summary.json``'s data."""
    summary = summarize(rows, cfg)
    judged = verdicts(rows, cfg)
    table = []
    for s in sorted(summary, key=lambda s: (COLLECTIVES.index(s["collective"]), s["bytes"], s["fabric"],
                                            s["library"], s["algorithm"])):
        table.append({"collective": s["collective"], "size": size_text(s["bytes"]), "fabric": s["fabric"],
                      "library": s["library"], "algorithm": s["algorithm"], "median s": _seconds(s["median_s"]),
                      "min-max s": f"{_seconds(s['min_s'])}-{_seconds(s['max_s'])}",
                      "ok/failed": f"{s['ok']}/{s['failed']}", "model s": _seconds(s["model_s"]),
                      "vs model": f"{s['model_error']:+.0%}" if s["model_error"] is not None else "-"})
    ratio_lines = []
    for name, (v, spread) in judged.items():
        ratio = (f"{spread['mean']:.2f} [{spread['low']:.2f}, {spread['high']:.2f}] over {spread['n']}"
                 if spread["n"] > 1 else "-")
        ratio_lines.append(f"{name}: {ratio}: {v.text()}")
    cpu = cpu_summary(rows)
    lines = [f"Open MPI {'and mlfabric ' if cfg.project else ''}collectives: {cfg.servers} servers x {cfg.rails} "
             f"GPUs, {cfg.rate_mbps:g} Mbit/s NICs, MTU {cfg.mtu}, {cfg.target} target, {cfg.repetitions} "
             f"repetitions; Open MPI's waiting ranks sleep up to {cfg.idle_us} us between polls"
             + (f"; MCA {', '.join(f'{k}={v}' for k, v in cfg.mca)}" if cfg.mca else ""),
             "", format_table(table), "", "ratios (mean [95% CI] over repetitions):", *ratio_lines, "",
             f"CPU: {cpu_verdict(cpu)}"]  # the verdicts' lines follow (core.write_outcome)
    data = {"summary": summary, "cpu": cpu,
            "ratios": {name: {**spread, "verdict": v.text()} for name, (v, spread) in judged.items()}}
    return "\n".join(lines), [v for v, _ in judged.values()], data


_STYLES = {"open-mpi": "-", "mlfabric": "--"}


def _series(s: Mapping[str, Any]) -> tuple[str, str]:
    """A plotted line: Open MPI's default is one line whatever it picked at each size."""
    algorithm = str(s["algorithm"])
    return s["library"], "default" if algorithm.endswith("(default)") else algorithm
_MARKERS = ("o", "s", "^", "v", "D", "x")


def plot_sizes(rows: Sequence[Mapping[str, Any]], cfg: CollectivesConfig, path: Path, *, title: str) -> Path:
    """One panel per collective: median completion time (min-max bars) by size, per fabric
    (colour) and algorithm (marker; Open MPI solid, mlfabric dashed), the model in grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarize(rows, cfg)
    fig, axes = plt.subplots(1, len(COLLECTIVES), figsize=(6.5 * len(COLLECTIVES), 4.8), squeeze=False)
    for ax, collective in zip(axes[0], COLLECTIVES, strict=True):
        mine = [s for s in summary if s["collective"] == collective and s["ok"]]
        series = sorted({_series(s) for s in mine})
        markers = {key: _MARKERS[i % len(_MARKERS)] for i, key in enumerate(series)}
        for fabric in FABRIC_COLOURS:
            for key in series:
                pts = sorted((s["bytes"], s["median_s"], s["min_s"], s["max_s"], s["algorithm"]) for s in mine
                             if s["fabric"] == fabric and _series(s) == key)
                if not pts:
                    continue
                xs = [p[0] / 1024 for p in pts]
                ys = [p[1] for p in pts]
                err = [[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]]
                name = key[1] if key[1] != "default" else \
                    "default: " + ", ".join(dict.fromkeys(p[4].split(" (")[0] for p in pts))
                ax.errorbar(xs, ys, yerr=err, color=FABRIC_COLOURS[fabric], ls=_STYLES.get(key[0], "-"),
                            marker=markers[key], capsize=3, label=f"{fabric}: {key[0]} {name}")
        models = sorted({(s["bytes"], s["model_s"], s["library"], s["algorithm"]) for s in mine if s["model_s"]})
        for lib_alg in sorted({(m[2], m[3]) for m in models}):
            line = sorted((m[0] / 1024, m[1]) for m in models if (m[2], m[3]) == lib_alg)
            ax.plot([p[0] for p in line], [p[1] for p in line], color="0.6", lw=0.8, ls=":")
        ax.set_title(collective)
        if not mine:
            ax.text(0.5, 0.5, "no successful run", ha="center", transform=ax.transAxes)
            continue
        ax.plot([], [], color="0.6", lw=0.8, ls=":", label="model (each algorithm)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        sizes = sorted({s["bytes"] for s in mine})
        ax.set_xticks([b / 1024 for b in sizes], [size_text(b) for b in sizes])
        ax.tick_params(axis="x", which="minor", bottom=False, labelbottom=False)
        ax.set_xlabel("each rank's buffer")
        ax.set_ylabel("completion time (s)")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=6.5)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
