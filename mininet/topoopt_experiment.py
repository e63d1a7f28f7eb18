"""``mlfabric experiment run topoopt``: per job and degree, TopoOpt co-optimized against
TopoOpt with TotientPerms only and fat-trees of equal cost and of equal bandwidth, each
running the job's iteration (compute, model-parallel transfers, the mutable all-reduce) with
the strategy searched for it; one results folder (controller.experiments.topoopt is the pure
side, controller.experiments.topoopt_report the table, verdicts and plots).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mlfabric_emulation.cpu_sampler import fabric_cpu_sampler
from mlfabric_emulation.fabric_net import EmulatedFabric, check_free
from mlfabric_emulation.switch_engines import engines_text, fabric_engines

from controller.errors import ConfigError, MlfabricError
from controller.experiments.core import (
    finish,
    refuse,
    results_folder,
    run_units,
    write_outcome,
)
from controller.experiments.cpu_use import cpu_row
from controller.experiments.options import (
    add_common_options,
    add_data_path_options,
    experiment_parser,
)
from controller.experiments.regime import from_probe
from controller.experiments.results import (
    config_json,
)
from controller.experiments.topoopt import (
    DEFAULT_JOBS,
    Planned,
    TopoOptConfig,
    Variant,
    plan,
    relay_bytes,
    tax,
)
from controller.experiments.topoopt_report import report, same_fabric
from controller.routing.topoopt_routes import ACCOUNTING_TABLE, accounting_commands
from controller.topology.model import Topology
from mlfabric_base.numbers import positive_float
from workloads.config import CLUSTER_TCP_CONGESTION
from workloads.driver import WorkerGroup
from workloads.errors import WorkloadError
from workloads.plan import Rank

__all__ = ["main"]


def _say(msg: str) -> None:
    print(f"[topoopt] {msg}", flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = experiment_parser("topoopt", __doc__)
    add_common_options(p, "topoopt", repetitions=TopoOptConfig().repetitions)
    p.add_argument("--jobs", default=None,
                   help="(default: topologies/jobs/topoopt-dlrm.yaml,topologies/jobs/topoopt-transformer.yaml) "
                        "comma-separated job files (controller/topoopt/job.py: a dlrm or transformer model and its "
                        "strategy)")
    p.add_argument("--servers", type=int, default=None, help="run the jobs on this many servers (default: their own)")
    p.add_argument("--degrees", default=None,
                   help="comma-separated TopoOpt degrees (NICs per server); default 3,4, or 4 with --duplex")
    p.add_argument("--rate-mbps", type=positive_float, default=TopoOptConfig().rate_mbps,
                   help="each TopoOpt NIC; the fat-trees' one NIC gets d x this (equal bandwidth) and d x this / "
                        "the cost ratio (equal cost)")
    p.add_argument("--cost-ratio", type=positive_float, default=3.2,
                   help="an ideal switch's cost over TopoOpt's at equal bandwidth (the paper: about 3.2)")
    p.add_argument("--fat-tree-radix", type=int, default=8,
                   help="the fat-trees' switch radix: leaves of radix/2 servers under 2 spines; 0: one leaf for all")
    p.add_argument("--warmup", type=int, default=1, help="untimed iterations first on every fabric")
    p.add_argument("--seed", type=int, default=0, help="the strategy search's seed")
    p.add_argument("--duplex", action="store_true",
                   help="duplex circuits, as the artifact's links: every switch wires pairs both ways and a ring takes "
                        "two switches (even degrees only); default: one-way circuits, as on a patch panel")
    p.add_argument("--quick", action="store_true", help="8 servers, degree 2, 1 repetition, no warm-up")
    add_data_path_options(p, super_frames=TopoOptConfig().super_frames, nvlink=False)
    return p


def parse_config(argv: list[str]) -> tuple[TopoOptConfig, Path | None, bool]:
    """The configuration, the results folder and whether the run must be decided."""
    a = build_parser().parse_args(argv)
    try:
        degrees = tuple(int(d) for d in (a.degrees or ("4" if a.duplex else "3,4")).split(",") if d)
    except ValueError:
        raise ConfigError("<topoopt experiment>", "--degrees", a.degrees, "a comma-separated list of integers") from None
    jobs = tuple(j for j in a.jobs.split(",") if j) if a.jobs else DEFAULT_JOBS
    common = {"target": a.target, "engine": a.engine, "jobs": jobs, "rate_mbps": a.rate_mbps,
              "cost_ratio": a.cost_ratio, "fat_tree_radix": a.fat_tree_radix or None, "seed": a.seed,
              "duplex": a.duplex, "super_frames": a.super_frames}
    if a.quick:
        cfg = TopoOptConfig(**common, servers=8, degrees=(2,), repetitions=1, warmup=0)
    else:
        cfg = TopoOptConfig(**common, servers=a.servers, degrees=degrees, repetitions=a.repetitions, warmup=a.warmup)
    return cfg, a.out, a.require_decided


def _counters(fab: EmulatedFabric, topo: Topology) -> dict[str, tuple[int, int]]:
    """Each server's (IP bytes it originated, IP bytes it forwarded for others)."""
    return {h.name: relay_bytes(fab.host(h.name).cmd(f"nft -j list table ip {ACCOUNTING_TABLE}"))
            for h in topo.hosts}


def _timed(group: WorkerGroup, fab: EmulatedFabric, topo: Topology, cpu: Any, step: dict[str, Any], rep: int,
           base: dict[str, Any]) -> dict[str, Any]:
    """One timed iteration, its tax and what the monitors saw: a row (``kind`` "iteration")."""
    before = _counters(fab, topo)
    with cpu.measure() as used:
        results = group.run({"op": "job_step", "step": step, "iter": rep}, timeout=300)
    after = _counters(fab, topo)
    ok = bool(results) and all(r.get("ok") for r in results)
    errors = sorted({str(r["error"]) for r in results if r.get("error")})
    seconds = max((float(r.get("seconds") or 0.0) for r in results), default=math.nan)
    phases = {p: max(float(r.get("phases", {}).get(p, 0.0)) for r in results) for p in ("compute", "mp", "allreduce")}
    row = {**base, "kind": "iteration", "rep": rep, "ok": ok, "seconds": seconds,
           **{f"{p}_s": s for p, s in phases.items()}, "tax": tax(before, after), "error": "; ".join(errors)[:200],
           **cpu_row(used[0])}
    _say(f"{topo.name} rep {rep + 1}: "
         + (f"{seconds:.2f} s (model {base['model_s']:.2f}), tax {row['tax']:.2f}" if ok
            else f"FAILED ({row['error'][:80]})") + f"  [{used[0].text()}]")
    return row


def _class_taxes(group: WorkerGroup, fab: EmulatedFabric, topo: Topology, step: dict[str, Any],
                 base: dict[str, Any]) -> list[dict[str, Any]]:
    """Each traffic class alone, untimed, for its bandwidth tax: a row each (``kind`` "class")."""
    rows = []
    alone = {"mp": {**step, "compute_s": 0.0, "groups": []}, "allreduce": {**step, "compute_s": 0.0, "mp": []}}
    for cls, only in alone.items():
        if not only["mp"] and not only["groups"]:
            continue
        before = _counters(fab, topo)
        results = group.run({"op": "job_step", "step": only, "iter": 1000}, timeout=300)
        after = _counters(fab, topo)
        rows.append({**base, "kind": "class", "traffic_class": cls, "rep": 0, "seconds": math.nan,
                     "ok": bool(results) and all(r.get("ok") for r in results), "tax": tax(before, after)})
    return rows


def run_fabric(cfg: TopoOptConfig, planned: Planned, v: Variant, workdir: Path) -> list[dict[str, Any]]:
    """The job's iteration on one fabric, ``repetitions`` times. Each repetition starts its
    workers afresh (new TCP connections, so the fat-trees' ECMP places the flows anew: that
    placement is part of the spread), runs the warm-up, then one timed iteration. The last
    also runs each traffic class alone for its tax."""
    topo, job = v.topology, planned.job
    ranks = [Rank(rank=s, server=s, rail=0, ip=topo.host(f"s{s}").nics[0].address) for s in range(job.servers)]
    config = {"ranks": [dataclasses.asdict(r) for r in ranks], "servers": job.servers, "rails": 1, "port": 7100,
              "timeout_s": 120.0, "start_timeout_s": 30.0, "mesh": "full", "tcp_congestion": CLUSTER_TCP_CONGESTION}
    path = workdir / f"workers-{topo.name}.json"
    path.write_text(json.dumps(config))
    rows: list[dict[str, Any]] = []
    base = {"job": job.name, "degree": planned.degree, "fabric": v.fabric, "name": topo.name,
            "model_s": v.model.total_ms / 1000, "model_tax": v.model.tax}
    with EmulatedFabric(topo, target=cfg.target, engine=cfg.engine, publish=False,
                        frame_skbs=not cfg.super_frames, super_frames=cfg.super_frames,
                        log_dir=workdir / "logs" / topo.name) as fab:
        for h in topo.hosts:
            fab.host(h.name).cmd(" && ".join(accounting_commands()))
        names = [s.name for s in topo.switches]
        base["engines"] = engines_text(fabric_engines(cfg.target, fab.log_dir, names))
        cpu = fabric_cpu_sampler(fab, names)

        def popen(rank: Rank, argv: list[str]) -> subprocess.Popen:
            return fab.host(f"s{rank.server}").popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                      stderr=subprocess.PIPE)

        try:
            for rep in range(cfg.repetitions):
                with WorkerGroup(popen, path, ranks, python=sys.executable) as group:
                    for warm in range(cfg.warmup):
                        results = group.run({"op": "job_step", "step": v.step, "iter": -1 - warm}, timeout=300)
                        if not all(r.get("ok") for r in results):
                            raise WorkloadError(next(str(r.get("error")) for r in results if not r.get("ok")))
                    rows.append(_timed(group, fab, topo, cpu, v.step, rep, base))
                    if rep == cfg.repetitions - 1:
                        rows += _class_taxes(group, fab, topo, v.step, base)
        except WorkloadError as exc:
            rows.append({**base, "kind": "iteration", "rep": 0, "ok": False, "seconds": math.nan, "tax": math.nan,
                         "error": str(exc)[:200]})
            _say(f"{topo.name}: FAILED ({str(exc)[:100]})")
    return rows


def main(argv: list[str]) -> int:
    try:
        cfg, out_arg, require_decided = parse_config(argv)
        if shutil.which("nft") is None:
            raise ConfigError("<topoopt experiment>", "nft", None,
                              "is needed: the servers count the bytes they relay with nftables (make setup installs it)")
        planned = [plan(cfg, job, d) for job in cfg.load_jobs() for d in cfg.degrees]
        for p in planned:  # before the results folder: a run refused for a busy machine leaves nothing
            for v in p.variants:
                check_free(v.topology)
    except MlfabricError as exc:
        return refuse(exc)
    out = results_folder("topoopt", out_arg, _say)
    for p in planned:
        best = min(p.rounds, key=lambda r: r.timing.total_ms)
        _say(f"{p.job.name} d={p.degree}: {len(p.rounds)} alternation steps; kept round {best.round}: "
             f"{', '.join(best.wiring.labels)}; {best.strategy.describe()}")
    rows: list[dict[str, Any]] = []
    t0 = time.monotonic()
    runs = {v.topology.name: (p, v) for p in planned for v in p.variants if not same_fabric(p, v)}

    def one_fabric(name: str, work: Path) -> None:
        p, v = runs[name]
        _say(f"fabric {list(runs).index(name) + 1} of {len(runs)}: {name} ({time.monotonic() - t0:.0f} s so far)")
        rows.extend(run_fabric(cfg, p, v, work))

    _, interrupted = run_units(list(runs), one_fabric, out, rows, _say, csv_name="runs.csv")
    text, data, judged, figures = report(cfg, planned, rows, out)
    write_outcome(out, text, {"config": config_json(cfg), **data, "runs": rows}, judged, summary_name="results.json",
                  rows=rows, interrupted=interrupted,
                  regime=from_probe(None, nic_mbps=cfg.rate_mbps, mtu=planned[0].variants[0].topology.mtu,
                                    super_frames=cfg.super_frames))
    _say(f"wrote {out}/results.json, runs.csv, table.txt, {', '.join(f.name for f in figures)} "
         f"({time.monotonic() - t0:.0f} s)")
    return finish(out, interrupted=interrupted, failed=not all(r.get("ok", True) for r in rows), verdicts=judged,
                       require_decided=require_decided, say=_say)


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main(sys.argv[1:]))
