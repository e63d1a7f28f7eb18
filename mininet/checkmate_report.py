"""The Checkmate experiment's results folder: iterations.csv, tuning.csv, replication.csv,
summary.json, table.txt and the plots, from what the runner gathered; the fidelity verdict
of each configuration's overhead, and the paper's claims beside the measured ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mlfabric_emulation.switch_engines import engines_text

from controller.cli.output import format_table
from controller.experiments.checkmate import (
    MIRROR,
    SYSTEMS,
    CheckmateConfig,
    claims,
    configurations,
    loss_configuration,
    overhead,
    overhead_verdicts,
    peer_host,
    replication,
    storage_host,
    tuning_breaches,
)
from controller.experiments.checkmate_plots import plot_checkmate, plot_frequency
from controller.experiments.checkmate_tuning import Tuning, repeated_work
from controller.experiments.cpu_use import cpu_summary, cpu_verdict
from controller.experiments.fidelity import (
    Verdict,
    undecided_note,
)
from controller.experiments.results import config_json, write_csv

__all__ = ["write_report"]


def _replication_counts(rows: list[dict], events: list[dict]) -> dict[str, int]:
    holes = sum(1 for e in events if e["event"] == "hole")
    return {"iterations": len(rows), "matched": sum(r["match"] for r in rows),
            "mirrored": sum(r["how"] == "mirrored" for r in rows),
            "resynced": sum(r["how"] == "resynced" for r in rows), "holes": holes,
            "skipped": sum(r["how"] in ("hole", "missing") for r in rows),
            "wrong": sum(1 for r in rows if r["shadow_digest"] and not r["match"])}


def _replication_line(label: str, r: dict[str, Any]) -> str:
    """How the shadow's replica fared, in one line.

    >>> _replication_line("replication", {"matched": 3, "iterations": 4, "mirrored": 2, "resynced": 1, "holes": 1,
    ...                                   "skipped": 1, "wrong": 0})
    'replication: 3/4 iterations bit-identical (2 from the mirrored gradient, 1 resynced after 1 holes, 1 skipped while resyncing), 0 wrong'
    """
    return (f"{label}: {r['matched']}/{r['iterations']} iterations bit-identical ({r['mirrored']} from the mirrored "
            f"gradient, {r['resynced']} resynced after {r['holes']} holes, {r['skipped']} skipped while resyncing), "
            f"{r['wrong']} wrong")


def _frequency_rows(cfg: CheckmateConfig, summary: dict[str, Any]) -> list[dict[str, str]]:
    """Per system: the interval it sustains within the budget, its overhead there and the
    work a failure repeats there."""
    over = {o["config"]: o for o in summary["overhead"]}

    def ratio(name: str) -> str:
        o = over.get(name, {})
        ci = o.get("ratio_ci95")
        if ci:
            return f"{100 * (ci[0] - 1):+.1f}% [{100 * (ci[1] - 1):+.1f}, {100 * (ci[2] - 1):+.1f}]"
        return f"{100 * (o['ratio'] - 1):+.1f}%" if o.get("ratio") is not None else "-"

    work = summary["repeated_work"]
    out = [{"system": "Checkmate", "checkpoint every": "1 iteration", "overhead [95% CI]": ratio(MIRROR),
            "repeated work per failure": f"{work[MIRROR]:.2f} it (the kill-and-restore run)"
            if work.get(MIRROR) is not None else "-"}]
    for mode in ("checkfreq", "gemini"):
        t = summary["tuning"].get(mode)
        if t:
            out.append({"system": SYSTEMS[mode],
                        "checkpoint every": f"{t['k']} iterations (tuned from {t['first_k']}"
                                            + ("" if t["within_budget"] else ", over budget") + ")",
                        "overhead [95% CI]": ratio(f"{mode} k={t['k']}"),
                        "repeated work per failure": f"{work[mode]:.2f} it" if work.get(mode) is not None else "-"})
    if summary.get("sync_k"):
        out.append({"system": "synchronous", "checkpoint every": f"{summary['sync_k']} iterations (modelled)",
                    "overhead [95% CI]": "-", "repeated work per failure": f"~{summary['sync_k'] / 2:.1f} it (modelled)"})
    return out


def write_report(cfg: CheckmateConfig, rows: list[dict], tuning_rows: list[dict], events: dict[int, list[dict]],
            loss_events: list[dict] | None, tuned: dict[str, Tuning], recovery: dict | None, info: dict,
            out: Path) -> tuple[str, list[Verdict]]:
    configs = configurations(cfg, {m: t.k for m, t in tuned.items()})
    lossy = loss_configuration(cfg)
    write_csv(out / "iterations.csv", rows)
    if tuning_rows:
        write_csv(out / "tuning.csv", tuning_rows)
    summary: dict[str, Any] = {"config": config_json(cfg), "budget": cfg.budget,
                               "overhead": overhead(rows, configs), **info,
                               "tuning": {m: t.to_json() for m, t in tuned.items()}}
    rep_rows = []
    for rep in sorted(events):
        rep_rows += [{"rep": rep, **r} for r in replication(rows, events[rep], rep)]
    summary["replication"] = _replication_counts(rep_rows, [e for evs in events.values() for e in evs])
    if lossy is not None and loss_events is not None:
        loss_rows = [{"rep": "loss", **r} for r in replication(rows, loss_events, 0, lossy.name)]
        summary["loss_replication"] = {"mirror_loss": cfg.mirror_loss, **_replication_counts(loss_rows, loss_events)}
        rep_rows += loss_rows
    write_csv(out / "replication.csv", rep_rows)
    applied = [e for evs in events.values() for e in evs if e["event"] == "applied"]
    stopped = [e for evs in events.values() for e in evs if e["event"] == "stopped"]
    summary["mirrored_bytes"] = {
        "model_bytes": info["model_bytes"],
        "frame_bytes_per_iteration": (sum(e["frame_bytes"] for e in applied) / len(applied)) if applied else None,
        "wire_bytes_per_iteration": (sum(e["wire_bytes"] for e in stopped) /
                                     max(1, sum(e["applied"] for e in stopped))) if stopped else None,
    }
    summary["repeated_work"] = {
        MIRROR: float(recovery["lost"][MIRROR]) if recovery else None,
        **{m: repeated_work([r for r in rows if r["config"] == f"{m} k={t.k}" and r["ok"]]) for m, t in tuned.items()}}
    summary["recovery"] = recovery
    summary["cpu"] = cpu_summary(rows)
    judged = overhead_verdicts(rows, configs)
    decided = {v.comparison.removesuffix(" overhead"): v.decided for v in judged}
    summary["claims"] = claims(summary, decided, tuning_breaches(tuning_rows))
    digests = {r["digest"] for r in rows if r["ok"] and r["iteration"] == cfg.iterations - 1}
    over_rows = [{"configuration": o["config"],
                  "iteration ms (median)": f"{o['iteration_s'] * 1000:.1f}" if o["iteration_s"] else "-",
                  "min..max ms": f"{o['iteration_s_min'] * 1000:.1f}..{o['iteration_s_max'] * 1000:.1f}"
                  if o["iteration_s"] else "-",
                  "x no checkpoint: mean [95% CI]": (f"{o['ratio_ci95'][0]:.3f} [{o['ratio_ci95'][1]:.3f}, "
                                                     f"{o['ratio_ci95'][2]:.3f}]") if o["ratio_ci95"]
                  else (f"{o['ratio']:.3f}" if o["ratio"] else "-"),
                  "checkpoints /100 it": f"{o['checkpoints_per_100']:g}"} for o in summary["overhead"]]
    mb = summary["mirrored_bytes"]
    rp = summary["replication"]
    lines = [f"Checkmate: {cfg.servers} servers x {cfg.rails} GPUs = {cfg.world} workers + 1 shadow, rail-only, "
             f"{cfg.rate_mbps:g} Mbit/s, {cfg.target} target; MLP 64-{cfg.hidden}-10 ({info['params']} params) "
             f"on load_digits, {cfg.optimizer}, {cfg.iterations} iterations x {cfg.repetitions} repetitions"]
    prof = info.get("profile")
    if prof:
        lines.append(f"regime: a checkpoint ({prof['state_bytes']} B: parameters and {cfg.optimizer} state) persists "
                     f"to {storage_host(cfg)} over its {cfg.storage_mbps:g} Mb/s link in "
                     f"{prof['checkpoint_s'] * 1000:.0f} ms = {prof['checkpoint_iterations']:.1f} iterations of "
                     f"{prof['iteration_s'] * 1000:.1f} ms (asked: {cfg.checkpoint_iterations:g}); Gemini's peer is "
                     f"{peer_host(cfg)}'s memory, over the {cfg.rate_mbps:g} Mb/s NIC in the "
                     f"{prof['idle_s'] * 1000:.0f} ms compute phase")
        lines += ["", f"checkpoint frequency within a {100 * cfg.budget:g}% overhead budget:",
                  format_table(_frequency_rows(cfg, summary))]
        for t in tuned.values():
            lines.append(f"  {SYSTEMS[t.system]}'s tuning: " + ", ".join(
                f"k={r.k} {100 * r.overhead:+.1f}%" for r in t.rounds))
    lines += ["", format_table(over_rows), "", _replication_line("replication", rp)]
    lr = summary.get("loss_replication")
    if lr:
        lines.append(_replication_line(f"with {100 * lr['mirror_loss']:g}% mirror loss", lr))
    lines += [f"every configuration ends with the same parameters: {'yes' if len(digests) == 1 else 'NO'}",
              f"mirrored per iteration: {mb['frame_bytes_per_iteration']:.0f} B of frames, "
              f"{mb['wire_bytes_per_iteration']:.0f} B on the wire; model {mb['model_bytes']} B"
              if mb["frame_bytes_per_iteration"] else "mirrored per iteration: -"]
    engines = f" ({engines_text(info['engines'])})" if info.get("engines") else ""
    lines.append(f"switch CPU{engines}: {cpu_verdict(summary['cpu'])}")
    if recovery:
        lines += ["", f"recovery: rank {recovery['victim_rank']} killed in iteration {recovery['kill_iteration']}; "
                      f"shadow checkpoint {recovery['shadow_checkpoint']}, resumed at {recovery['resumed_at']}; "
                      f"{recovery['lost'][MIRROR]} iteration(s) lost; continued run identical to the uninterrupted "
                      f"one: {'yes' if recovery['matches_uninterrupted_run'] else 'NO'}"]
    resumes = info.get("resumes")
    if resumes:
        lines.append("restarts from each baseline's latest checkpoint, fetched over the fabric: " + "; ".join(
            f"{SYSTEMS[m]} (iteration {r['checkpoint']}): {'identical' if r['identical'] else 'DIFFERENT'}"
            if "error" not in r else f"{SYSTEMS[m]}: {r['error']}" for m, r in resumes.items()))
    lines += ["", "paper (Checkmate, NSDI'26) vs this run:", format_table(summary["claims"])]
    text = "\n".join(lines)  # the verdicts' lines follow (controller.experiments.core.write_outcome)
    summary["replication_rows"] = rep_rows
    note = undecided_note(judged)
    plot_checkmate(rows, summary, out / "checkmate.png",
                   title=f"Checkmate on a rail-only fabric: {cfg.world} workers, {cfg.target} target" + note)
    if prof:
        plot_frequency(summary, out / "frequency.png",
                       title=f"checkpoint frequency vs overhead, {100 * cfg.budget:g}% budget" + note)
    return text, summary, judged
