"""One results folder per run: raw rows (CSV), summary (JSON), a text table and plots."""

from __future__ import annotations

import contextlib
import csv
import json
import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["interrupt_on_signals", "new_results_dir", "plot_collectives", "write_csv", "write_json"]

REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into KeyboardInterrupt (as SIGINT is) in the main thread, so
    that ``kill`` or a closed terminal unwinds every ``with`` block, tearing the emulation
    down, exactly as Ctrl-C does. The message names the signal."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


def new_results_dir(experiment: str, base: Path | None = None) -> Path:
    """``results/<experiment>-<YYYYmmdd-HHMMSS>/`` (created)."""
    root = base or REPO / "results"
    path = root / f"{experiment}-{time.strftime('%Y%m%d-%H%M%S')}"
    path.mkdir(parents=True, exist_ok=False)
    return path


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({k: (json.dumps(v) if isinstance(v, dict | list) else v) for k, v in r.items()})
    return path


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path


def plot_collectives(rows: Sequence[Mapping[str, Any]], path: Path, *, title: str) -> Path:
    """Left: per-iteration completion time of each collective on each fabric (lines).
    Right: the training step's iteration time per fabric (bars with min/max)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [2, 1]})
    styles = {"rail-only": "-", "fat-tree": "--"}
    colours: dict[str, str] = {}
    for r in rows:
        if r["op"] != "train_step":
            colours.setdefault(r["op"], f"C{len(colours)}")
    for op, colour in colours.items():
        for fabric, style in styles.items():
            pts = sorted((r["iter"], r["seconds"]) for r in rows if r["op"] == op and r["fabric"] == fabric and r["ok"])
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", color=colour,
                        label=f"{op} ({fabric})")
    ax.set_xlabel("iteration")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("completion time (s)")
    ax.set_title("collectives")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fabrics = [f for f in styles if any(r["fabric"] == f and r["op"] == "train_step" and r["ok"] for r in rows)]
    for i, fabric in enumerate(fabrics):
        ts = [r["seconds"] for r in rows if r["fabric"] == fabric and r["op"] == "train_step" and r["ok"]]
        mid = sorted(ts)[len(ts) // 2]
        bx.bar(i, mid, color=f"C{i}", yerr=[[mid - min(ts)], [max(ts) - mid]], capsize=6)
        bx.annotate(f"{mid:.2f} s", (i, mid), ha="center", va="bottom", fontsize=8)
    bx.set_xticks(range(len(fabrics)), fabrics)
    bx.set_ylabel("iteration time (s)")
    bx.set_title("training step\n(compute + MoE all-to-all + DP allreduce)", fontsize=10)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
