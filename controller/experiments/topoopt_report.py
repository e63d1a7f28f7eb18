"""The TopoOpt experiment's figures: per job and degree, the four fabrics' iteration times
(measured mean ± sd, and the model's), TopoOpt's speed-up over each baseline with its
verdict, the tax, the alternation's rounds, a plot and a drawing of each co-optimized fabric.
Pure but for writing the figures."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from controller.experiments.comparisons import Side, judge_ratio
from controller.experiments.cpu_use import cpu_summary, cpu_verdict
from controller.experiments.fidelity import (
    Verdict,
    judge,
    runs_of,
    undecided_note,
)
from controller.experiments.topoopt import (
    FABRICS,
    PAPER_TAX,
    Planned,
    TopoOptConfig,
    Variant,
    mean_sd,
)
from controller.models.topoopt import PAPER_SPEEDUP
from controller.topoopt.job import job_to_dict

__all__ = ["report", "same_fabric", "summarise", "verdicts"]

BASELINES = ("totient", "fat-tree-cost", "fat-tree-bw")


def same_fabric(p: Planned, v: Variant) -> bool:
    """True for the TotientPerms fabric when the alternation kept it: nothing to run twice."""
    if v.fabric != "totient":
        return False
    top = next(x for x in p.variants if x.fabric == "topoopt")
    return top.topology.params["circuits"] == v.topology.params["circuits"] and top.strategy == v.strategy


def summarise(planned: Sequence[Planned], rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (job, degree, fabric): measured and modelled seconds, tax, phases."""
    out = []
    for p in planned:
        for v in p.variants:
            source = "topoopt" if same_fabric(p, v) else v.fabric
            everything = [r for r in rows if r["job"] == p.job.name and r["degree"] == p.degree
                          and r["fabric"] == source]
            mine = [r for r in everything if r.get("kind", "iteration") == "iteration"]
            ok = [r for r in mine if r.get("ok")]
            by_class = {r["traffic_class"]: r["tax"] for r in everything if r.get("kind") == "class" and r.get("ok")}
            out.append({"job": p.job.name, "degree": p.degree, "fabric": v.fabric, "same_as_topoopt": source != v.fabric,
                        "seconds": mean_sd([r["seconds"] for r in ok]), "model_s": v.model.total_ms / 1000,
                        "model_phases_s": {"compute": v.model.compute_ms / 1000, "mp": v.model.mp_ms / 1000,
                                           "allreduce": v.model.allreduce_ms / 1000},
                        "phases_s": {ph: mean_sd([r.get(f"{ph}_s", float("nan")) for r in ok])[0]
                                     for ph in ("compute", "mp", "allreduce")},
                        "tax": mean_sd([r["tax"] for r in ok]), "model_tax": v.model.tax,
                        "model_tax_by_class": {"mp": v.model.mp_tax, "allreduce": v.model.allreduce_tax},
                        "tax_by_class": {c: by_class.get(c, float("nan")) for c in ("mp", "allreduce")},
                        "strategy": v.strategy.describe(), "circuits": v.topology.params.get("labels"),
                        "runs": len(mine), "failed": len(mine) - len(ok)})
    return out


def _entry(summary: list[dict[str, Any]], job: str, d: int, fabric: str) -> dict[str, Any]:
    return next(e for e in summary if e["job"] == job and e["degree"] == d and e["fabric"] == fabric)


def verdicts(planned: Sequence[Planned], rows: Sequence[dict[str, Any]],
             summary: list[dict[str, Any]]) -> list[Verdict]:
    """TopoOpt co-optimized against each baseline, per job and degree, by the one rule
    (:func:`controller.experiments.comparisons.judge_ratio`): the baseline's iteration time
    over TopoOpt's, paired by repetition, judged on the runs of both fabrics."""
    out = []
    for p in planned:
        def side(fabric: str, p: Planned = p) -> Side:
            return Side(f"{FABRICS[fabric]}", [r for r in rows if r["job"] == p.job.name and r["degree"] == p.degree
                                               and r["fabric"] == fabric and r.get("kind", "iteration") == "iteration"])

        top = side("topoopt")
        for base in BASELINES:
            label = f"{p.job.name} d={p.degree} vs {FABRICS[base]}"
            if _entry(summary, p.job.name, p.degree, base)["same_as_topoopt"]:
                # nothing to measure: the alternation kept TotientPerms' fabric and strategy
                out.append(judge(label, "the same fabric: TopologyFinder kept TotientPerms", top.rows,
                                 runs=(runs_of(top.label, top.rows),), needed=1))
                continue
            verdict, spread = judge_ratio(label, "TopoOpt is", side(base), top, key=lambda r: r["rep"],
                                          below="slower", above="faster", even_within=0.03)
            if verdict.finding:
                verdict = dataclasses.replace(verdict, finding=f"{verdict.finding}: {_speedup(spread['mean'])}")
            out.append(verdict)
    return out


def _speedup(ratio: float) -> str:
    """``1.52x as fast`` or ``takes 1.25x as long`` (a baseline's time over TopoOpt's).

    >>> _speedup(1.52), _speedup(0.8)
    ('1.52x as fast', 'takes 1.25x as long')
    """
    return f"{ratio:.2f}x as fast" if ratio >= 1 else f"takes {1 / ratio:.2f}x as long"


def _table(cfg: TopoOptConfig, planned: Sequence[Planned], summary: list[dict[str, Any]],
           rows: Sequence[dict[str, Any]], judged: list[Verdict]) -> str:
    circuits = "duplex circuits (a ring takes two switches)" if cfg.duplex else "one-way circuits (a patch panel)"
    lines = [f"TopoOpt: {cfg.target} target, {circuits}; TopoOpt NICs at {cfg.rate_mbps:g} Mb/s each; fat-trees: one NIC of d x that "
             f"(equal bandwidth) or d x that / {cfg.cost_ratio:g} (equal cost), leaves of "
             f"{(cfg.fat_tree_radix or 0) // 2 or 'all'} servers under 2 spines; mean ± sd over {cfg.repetitions} "
             f"repetitions, each with fresh workers and connections and {cfg.warmup} warm-up iteration(s)", ""]
    for p in planned:
        job = job_to_dict(p.job)
        lines.append(f"{p.job.name}, d = {p.degree}: {', '.join(f'{k} {v}' for k, v in job.items() if k not in ('name', 'strategy'))}")
        lines.append("  alternation (score: the modelled iteration):")
        for r in p.rounds:
            lines.append(f"    round {r.round} {r.step:<16} {r.timing.total_ms / 1000:6.3f} s  circuits "
                         f"{', '.join(r.wiring.labels)}; {r.strategy.describe()}")
        lines.append(f"  {'fabric':<30}{'measured s':<16}{'model s':<9}{'compute/mp/all-reduce s':<26}"
                     f"{'tax (mp/all-reduce)':<27}{'model tax (mp/all-reduce)':<27}strategy")
        for fabric, name in FABRICS.items():
            e = _entry(summary, p.job.name, p.degree, fabric)
            (m, sd), (tx, txsd) = e["seconds"], e["tax"]
            ph = "/".join(f"{e['phases_s'][k]:.2f}" for k in ("compute", "mp", "allreduce"))
            same = " (=)" if e["same_as_topoopt"] else ""
            cls, got = e["model_tax_by_class"], e["tax_by_class"]
            by_class = f"{e['model_tax']:.2f} ({cls['mp']:.2f}/{cls['allreduce']:.2f})"
            measured_tax = f"{tx:.2f} ± {txsd:.2f} ({got['mp']:.2f}/{got['allreduce']:.2f})"
            lines.append(f"  {name + same:<30}{m:6.2f} ± {sd:<6.2f}{e['model_s']:<9.2f}{ph:<26}"
                         f"{measured_tax:<27}{by_class:<27}{e['strategy'][:70]}")
        lines.append("")
    lines += ["(=): the alternation kept TotientPerms, so that fabric is the co-optimized one, run once; model tax: "
              "data bytes only (the measured counts frames, and ACKs ride the one-way routes back)",
              f"paper: {PAPER_SPEEDUP}; tax {PAPER_TAX[4]} at d=4, {PAPER_TAX[8]} at d=8 (whole iterations, duplex "
              "links); measured: tax = frames the servers' NICs sent over the frames they originated, ACKs included", ""]
    for fabric in FABRICS:
        mine = [r for r in rows if r["fabric"] == fabric]
        engines = sorted({str(r["engines"]) for r in mine if r.get("engines")})
        on = f" ({', '.join(engines)})" if engines else ""
        if mine:
            lines.append(f"switch CPU, {fabric}{on}: {cpu_verdict(cpu_summary(mine))}")
    return "\n".join(lines)  # the verdicts' lines follow (controller.experiments.core.write_outcome)


def _plot(planned: Sequence[Planned], summary: list[dict[str, Any]], path: Path, note: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 3.2 * len(planned)), 4.2))
    width = 0.2
    for k, (fabric, name) in enumerate(FABRICS.items()):
        xs = [i + (k - 1.5) * width for i in range(len(planned))]
        es = [_entry(summary, p.job.name, p.degree, fabric) for p in planned]
        ax.bar(xs, [e["seconds"][0] for e in es], width, yerr=[e["seconds"][1] for e in es], label=name, capsize=3)
        ax.scatter(xs, [e["model_s"] for e in es], marker="_", s=220, color="black", zorder=3,
                   label="model" if k == 0 else None)
    ax.set_xticks(range(len(planned)), [f"{p.job.name}\nd = {p.degree}" for p in planned])
    ax.set_ylabel("iteration time, s (mean ± sd)")
    ax.set_title(f"TopoOpt co-optimized vs TotientPerms only and fat-trees{note}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(cfg: TopoOptConfig, planned: Sequence[Planned], rows: Sequence[dict[str, Any]],
           out: Path) -> tuple[str, dict[str, Any], list[Verdict], list[Path]]:
    """The table, the results' data, the verdicts and the figures written into ``out``."""
    from controller.topology.draw_direct import draw_direct_connect

    summary = summarise(planned, rows)
    judged = verdicts(planned, rows, summary)
    figures = [_plot(planned, summary, out / "topoopt.png", undecided_note(judged))]
    for p in planned:
        top = next(v for v in p.variants if v.fabric == "topoopt")
        figures.append(draw_direct_connect(top.topology, out / f"{top.topology.name}.png"))
    rounds = [{"job": p.job.name, "degree": p.degree, "round": r.round, "step": r.step, "model_s": r.timing.total_ms / 1000,
               "circuits": list(r.wiring.labels), "strategy": job_to_dict(p.job, r.strategy)["strategy"],
               "evaluated": r.evaluated} for p in planned for r in p.rounds]
    data = {"summary": summary, "rounds": rounds}
    return _table(cfg, planned, summary, rows, judged), data, judged, figures
