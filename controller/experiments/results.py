"""One results folder per run: raw rows (CSV), summary (JSON), a text table and plots."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "FABRIC_COLOURS",
    "collective_series",
    "config_json",
    "interrupt_on_signals",
    "new_results_dir",
    "plot_collectives",
    "results_root",
    "stopped_by",
    "write_csv",
    "write_json",
]

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


def stopped_by(exc: BaseException) -> str:
    """The signal that stopped a run: the one :func:`interrupt_on_signals` named, else
    SIGINT (Ctrl-C's KeyboardInterrupt carries no message).

    >>> stopped_by(KeyboardInterrupt()), stopped_by(KeyboardInterrupt("SIGTERM"))
    ('SIGINT', 'SIGTERM')
    """
    return str(exc) or "SIGINT"


def results_root() -> Path:
    """Where runs write their folders: ``$MLFABRIC_RESULTS_DIR``, else ``results/`` in the repository."""
    env = os.environ.get("MLFABRIC_RESULTS_DIR")
    return Path(env) if env else REPO / "results"


def new_results_dir(experiment: str, base: Path | None = None) -> Path:
    """``<results root>/<experiment>-<YYYYmmdd-HHMMSS>/`` (created)."""
    root = base or results_root()
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


def config_json(config: Any) -> dict[str, Any]:
    """A run's configuration (a dataclass) as JSON values, for ``summary.json``.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class C:
    ...     rate_mbps: float = 100.0
    ...     path: Path = Path("t.yaml")
    >>> config_json(C())
    {'rate_mbps': 100.0, 'path': 't.yaml'}
    """
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path


#: one colour per fabric, the same in every panel
FABRIC_COLOURS = {"rail-only": "tab:blue", "fat-tree": "tab:orange", "fat-tree-ecmp": "tab:orange",
                  "fat-tree-flowlet": "tab:green", "fat-tree-spray": "tab:red", "fat-tree-dst-server": "tab:purple"}


def collective_series(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, list[int] | list[float]]]]:
    """Per collective and fabric: the iterations and times that succeeded and the iterations
    that failed (pure: what :func:`plot_collectives` draws).

    >>> rows = [{"op": "allreduce", "fabric": "rail-only", "iter": 0, "ok": True, "seconds": 1.0},
    ...         {"op": "allreduce", "fabric": "rail-only", "iter": 1, "ok": False, "seconds": float("nan")}]
    >>> collective_series(rows)["allreduce"]["rail-only"]
    {'iters': [0], 'seconds': [1.0], 'failed': [1]}
    """
    out: dict[str, dict[str, dict[str, list[Any]]]] = {}
    for r in sorted(rows, key=lambda r: (r["op"], r["fabric"], r["iter"])):
        if r["op"] == "train_step":
            continue
        series = out.setdefault(r["op"], {}).setdefault(r["fabric"], {"iters": [], "seconds": [], "failed": []})
        if r["ok"]:
            series["iters"].append(r["iter"])
            series["seconds"].append(r["seconds"])
        else:
            series["failed"].append(r["iter"])
    return out


def plot_collectives(rows: Sequence[Mapping[str, Any]], path: Path, *, title: str,
                     events: Mapping[str, tuple[int, str]] | None = None) -> Path:
    """One panel per collective, each fabric in its own colour, failed runs as red crosses,
    and ``events`` (fabric -> (iteration, label), e.g. a rail switch killed) as dashed lines;
    the last panel is the training step's iteration time per fabric (bars with min/max)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = collective_series(rows)
    ops = list(series)
    fig, axes = plt.subplots(1, len(ops) + 1, figsize=(4 * (len(ops) + 1), 4.2), squeeze=False)
    for ax, op in zip(axes[0], ops, strict=False):
        for fabric, s in series[op].items():
            colour = FABRIC_COLOURS.get(fabric, "0.3")
            ax.plot(s["iters"], s["seconds"], marker="o", color=colour, label=fabric)
            if s["failed"]:
                top = max((t for f in series[op].values() for t in f["seconds"]), default=1.0)
                ax.scatter(s["failed"], [top * 1.05] * len(s["failed"]), marker="x", color="red", s=60, zorder=3,
                           label=f"{fabric}: failed")
        for fabric, (it, label) in (events or {}).items():
            ax.axvline(it - 0.5, color=FABRIC_COLOURS.get(fabric, "0.3"), ls="--", lw=1)
            ax.annotate(label, (it - 0.5, ax.get_ylim()[1]), fontsize=7, rotation=90, va="top", ha="right")
        ax.set_title(op)
        ax.set_xlabel("iteration")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_ylabel("completion time (s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    bx = axes[0][-1]
    fabrics = [f for f in FABRIC_COLOURS if any(r["fabric"] == f and r["op"] == "train_step" and r["ok"] for r in rows)]
    for i, fabric in enumerate(fabrics):
        ts = [r["seconds"] for r in rows if r["fabric"] == fabric and r["op"] == "train_step" and r["ok"]]
        mid = sorted(ts)[len(ts) // 2]
        bx.bar(i, mid, color=FABRIC_COLOURS[fabric], yerr=[[mid - min(ts)], [max(ts) - mid]], capsize=6)
        bx.annotate(f"{mid:.2f} s", (i, mid), ha="center", va="bottom", fontsize=8)
    # more than two fabrics (a fat-tree per load balancing): their names do not fit side by side
    bx.set_xticks(range(len(fabrics)), fabrics, rotation=30 if len(fabrics) > 2 else 0,
                  ha="right" if len(fabrics) > 2 else "center", fontsize=8 if len(fabrics) > 2 else None)
    bx.set_ylabel("iteration time (s)")
    bx.set_title("training step\n(compute + MoE all-to-all + DP allreduce)", fontsize=10)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
