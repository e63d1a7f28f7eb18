"""``mlfabric experiment run rotor``: a round-robin optical fabric under bulk traffic and a
ring all-reduce, one results folder.

For each schedule shape of the plan (slice and night, controller.experiments.rotor.plan)
and each repetition: build the fabric (EmulatedFabric: ToRs on tor_switch, one circuit
switch), then per point install the round-robin schedule on one epoch with the point's
routing and ToR behaviour (calendar queues hold, or drop as stock BMv2 does) and run a
staircase of constant-rate UDP loads (workloads.paced_udp) on the point's pattern. Then, on
the reference shape, ring all-reduce over real TCP (workloads' workers, one host per rack)
with each routing. Results: results.json (with the engine each switch ran), runs.csv,
table.txt, rotor.png, rotor-load.png, and each fabric's switch logs in logs/.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mlfabric_emulation.cpu_sampler import CpuSampler, fabric_cpu_sampler
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
from controller.experiments.cpu_use import cpu_row, cpu_summary, cpu_verdict
from controller.experiments.fidelity import Verdict, undecided_note
from controller.experiments.options import add_common_options, experiment_parser
from controller.experiments.regime import from_probe
from controller.experiments.rotor import (
    ROUTINGS,
    Point,
    RotorConfig,
    pattern_pairs,
    plan,
    schedule_of,
)
from controller.experiments.rotor_analysis import (
    aggregate,
    allreduce_expectation,
    analyze_run,
    summarize_allreduce,
)
from controller.experiments.rotor_report import report, verdicts
from controller.schedule.install import install_schedule
from controller.topology import optical
from controller.topology.model import ETHERNET_MTU
from mlfabric_base.numbers import finite_floats, positive_float
from workloads.config import CLUSTER_TCP_CONGESTION
from workloads.driver import WorkerGroup
from workloads.errors import WorkloadError
from workloads.plan import Rank

__all__ = ["main"]


def _say(msg: str) -> None:
    print(f"[rotor] {msg}", flush=True)


def _ip(rack: int) -> str:
    return f"10.200.{rack}.1"


def _fabric(cfg: RotorConfig, slice_us: int, log_dir: Path) -> EmulatedFabric:
    """The Python target paces its data ports at the link rate itself and keeps one slot's
    worth of packets per egress queue (so a slot's overflow is dropped rather than carried
    far into the next days); the CPU port stays unpaced, so that clock probes see no queue.
    BMv2 has no such flags: its links are shaped with htb."""
    # Ethernet's MTU, not jumbo: a 9,000-byte frame takes 7 ms at 10 Mb/s, a large part of a
    # 16-64 ms slice, where a real circuit serializes one in microseconds
    topo = optical(cfg.racks, 1, uplinks=1, rate_mbps=cfg.rate_mbps, mtu=ETHERNET_MTU)
    if cfg.target == "python":
        depth = math.ceil(slice_us / 1e6 * cfg.line_pps) + 2
        paced = [arg for port in range(1, cfg.racks + 1) for arg in ("--queue-rate-port", f"{port}:{cfg.line_pps:.2f}")]
        return EmulatedFabric(topo, target="python", engine=cfg.engine, shape=False, publish=False, calendar_queues=True,
                              switch_args=(*paced, "--queue-depth", str(depth)), log_dir=log_dir)
    return EmulatedFabric(topo, target=cfg.target, engine=cfg.engine, publish=False, log_dir=log_dir)


def _reap(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def run_point(fab: EmulatedFabric, cfg: RotorConfig, point: Point) -> dict[str, Any]:
    """Install the point's schedule and run its staircase; the analysed run."""
    assert fab.live is not None
    schedule = schedule_of(point, cfg.racks)
    _, clocks = install_schedule(fab.live, schedule, routing=point.routing, hold=point.calendar == "hold")
    pairs = pattern_pairs(point.pattern, cfg.racks)
    sources = sorted({s for s, _ in pairs})
    dests = sorted({d for _, d in pairs})
    seconds = [cfg.probe_seconds] + [cfg.level_seconds] * (len(cfg.levels) - 1)
    levels = ",".join(f"{lv * cfg.line_pps:.3f}:{s}" for lv, s in zip(cfg.levels, seconds, strict=True))
    idle = schedule.cycle_us / 1e6 + 0.5  # a held packet may wait a whole cycle
    procs: list[subprocess.Popen] = []
    with _cpu_sampler(fab).measure() as used:
        try:
            recvs = {d: fab.host(f"h{d}_0").popen(
                [sys.executable, "-m", "workloads.paced_udp", "recv", _ip(d), "--seconds", f"{sum(seconds) + 0.5:.2f}",
                 "--idle", f"{idle:.2f}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for d in dests}
            procs += recvs.values()
            time.sleep(0.3)  # receivers bind before the first datagram
            sends = {s: fab.host(f"h{s}_0").popen(
                [sys.executable, "-m", "workloads.paced_udp", "send", str(s),
                 ",".join(_ip(d) for s2, d in pairs if s2 == s), "--levels", levels, "--size", str(cfg.payload_bytes)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for s in sources}
            procs += sends.values()
            sent: dict[int, list[int]] = {}
            for s, p in sends.items():
                out, err = p.communicate(timeout=sum(seconds) + 30)
                if p.returncode:
                    raise MlfabricError(f"sender on rack {s} failed: {err.strip()[-300:]}")
                sent[s] = json.loads(out)["sent"]
            rows: list[list[float]] = []
            for d, p in recvs.items():
                out, err = p.communicate(timeout=sum(seconds) + idle + 30)
                if p.returncode:
                    raise MlfabricError(f"receiver on rack {d} failed: {err.strip()[-300:]}")
                rows += json.loads(out)["rows"]
        finally:
            _reap(procs)
    result = analyze_run(point, cfg.levels, sent, rows)
    result["worst_skew_us"] = max(c.skew_bound_us for c in clocks)
    result.update(cpu_row(used[0]))
    return result


def _cpu_sampler(fab: EmulatedFabric) -> CpuSampler:
    return fabric_cpu_sampler(fab, [s.name for s in fab.topo.switches])


def run_allreduce(fab: EmulatedFabric, cfg: RotorConfig, point: Point, workdir: Path) -> list[dict[str, Any]]:
    """Ring all-reduce, one rank per rack, ``allreduce_iterations`` times on ``point``'s
    schedule and routing; a row per iteration."""
    assert fab.live is not None
    install_schedule(fab.live, schedule_of(point, cfg.racks), routing=point.routing, hold=point.calendar == "hold")
    ranks = [Rank(rank=r, server=r, rail=0, ip=_ip(r)) for r in range(cfg.racks)]
    config = {"ranks": [dataclasses.asdict(r) for r in ranks], "servers": cfg.racks, "rails": 1, "port": 7000,
              "timeout_s": cfg.worker_timeout_s, "start_timeout_s": cfg.worker_timeout_s, "mesh": "full", "tcp_congestion": CLUSTER_TCP_CONGESTION}
    path = workdir / f"workers-{point.routing}.json"
    path.write_text(json.dumps(config))

    def popen(rank: Rank, argv: list[str]) -> subprocess.Popen:
        return fab.host(f"h{rank.server}_0").popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                   stderr=subprocess.PIPE)

    rows: list[dict[str, Any]] = []
    base = {"routing": point.routing, "calendar": point.calendar, "bytes": cfg.allreduce_bytes}
    cpu = _cpu_sampler(fab)
    try:
        with WorkerGroup(popen, path, ranks, python=sys.executable) as group:
            for it in range(cfg.allreduce_iterations):
                with cpu.measure() as used:
                    results = group.run({"op": "allreduce", "bytes": cfg.allreduce_bytes, "iter": it},
                                        timeout=cfg.worker_timeout_s * 3)
                ok = bool(results) and all(r.get("ok") for r in results)
                errors = sorted({str(r["error"]) for r in results if r.get("error")})
                rows.append({**base, "iter": it, "ok": ok, "error": "; ".join(errors)[:200],
                             "seconds": max((float(r.get("seconds") or 0.0) for r in results), default=math.nan),
                             **cpu_row(used[0])})
                _say(f"all-reduce {point.routing}/{point.calendar} iter {it}: "
                     + (f"{rows[-1]['seconds']:.2f} s" if ok else f"FAILED ({rows[-1]['error'][:80]})")
                     + f"  [{used[0].text()}]")
                if not ok:
                    break
    except WorkloadError as exc:  # the mesh could not even connect (circuits never up for a SYN)
        rows.append({**base, "iter": len(rows), "ok": False, "error": str(exc)[:200], "seconds": math.nan})
        _say(f"all-reduce {point.routing}/{point.calendar}: FAILED ({str(exc)[:100]})")
    return rows


def _csv_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in runs:
        for i, lv in enumerate(r["levels"]):
            out.append({"point": r["point"], "rep": r["rep"], "offered": lv, "sent": r["sent"][i],
                        "on_path": r["on_path"][i], "detour": r["detour"][i], "throughput": r["throughput"],
                        "probe_delivered": r["probe_delivered"], "delay_p50_ms": r["delay_p50_ms"],
                        "delay_p99_ms": r["delay_p99_ms"], "worst_skew_us": r["worst_skew_us"]})
    return out


def _write(cfg: RotorConfig, out: Path, points: list[Point], runs: list[dict[str, Any]],
           allreduce: list[dict[str, Any]], ref: Point, interrupted: str | None,
           engines: dict[str, dict[str, str]] | None = None) -> list[Verdict]:
    """The folder's table, results.json, runs.csv and plots; the verdicts."""
    from controller.experiments.rotor_plots import plot_load, plot_rotor

    rows = aggregate(points, runs, cfg)
    summary = summarize_allreduce(allreduce)
    expected = {p.routing: allreduce_expectation(cfg, p) for p in (dataclasses.replace(ref, routing=r) for r in ROUTINGS)}
    text = report(cfg, rows, summary, expected, interrupted=interrupted)
    cpu = cpu_summary([*runs, *allreduce])
    judged = verdicts(points, runs, allreduce)
    text += f"\nswitch CPU: {cpu_verdict(cpu)}"
    write_outcome(out, text, {"config": dataclasses.asdict(cfg), "cpu": cpu, "points": rows, "runs": runs,
                              "allreduce": allreduce, "allreduce_summary": summary,
                              "allreduce_expected": expected, "engines": engines or {}}, judged,
                  summary_name="results.json", rows=_csv_rows(runs), interrupted=interrupted,
                  regime=from_probe(None, nic_mbps=cfg.rate_mbps, mtu=ETHERNET_MTU, slot_ms=cfg.reference_slice_ms))
    if rows:
        plot_rotor(rows, out / "rotor.png", title=f"round-robin fabric, {cfg.racks} racks, {cfg.target} target"
                                                  + undecided_note(judged))
        plot_load(rows, out / "rotor-load.png")
    return judged


def parse_config(argv: list[str]) -> tuple[RotorConfig, Path | None, bool, bool]:
    """The configuration, the results folder, whether only to rewrite its report and whether
    the run must be decided."""
    a = build_parser().parse_args(argv)
    if a.report_only is not None:
        return _stored_config(a.report_only / "results.json").validate(), a.report_only, True, a.require_decided
    return _config(a), a.out, False, a.require_decided


def build_parser() -> argparse.ArgumentParser:
    p = experiment_parser("rotor", __doc__)
    add_common_options(p, "rotor", repetitions=3)
    p.add_argument("--racks", type=int, default=4, help="racks (ToRs), >= 4")
    p.add_argument("--seconds", type=positive_float, default=1.0, help="seconds per offered-load level")
    p.add_argument("--slices-ms", type=finite_floats, default=(16.0, 32.0, 64.0), help="slice sweep, e.g. 16,32,64")
    p.add_argument("--reference-slice-ms", type=positive_float, default=32.0,
                   help="the slice of the duty-cycle sweep and of the other runs")
    p.add_argument("--nights-ms", type=finite_floats, default=None, help="duty-cycle sweep: nights at the reference slice")
    p.add_argument("--duty-cycles", type=finite_floats, default=None, help="or the duty cycles themselves, e.g. 0.8,0.67,0.5 (nights rounded to 0.1 ms)")
    p.add_argument("--patterns", default="hot-pair,permutation,all-to-all",
                   help="traffic patterns, comma separated")
    p.add_argument("--levels", type=finite_floats, default=(0.1, 0.25, 0.5, 0.75, 1.0),
                   help="offered load per source, fractions of the link rate (the first is the delay probe)")
    p.add_argument("--rate-mbps", type=positive_float, default=10.0,
                   help="circuit link rate (the switches pace their ports to it; up to 50)")
    p.add_argument("--allreduce-kb", type=int, default=384, help="ring all-reduce size, KiB")
    p.add_argument("--allreduce-iterations", type=int, default=3, help="all-reduces per run")
    p.add_argument("--quick", action="store_true", help="one repetition of a small plan (for tests)")
    p.add_argument("--report-only", type=Path, default=None, metavar="DIR",
                   help="no emulation: rewrite DIR's table and plots from its results.json")
    return p


def _config(a: argparse.Namespace) -> RotorConfig:
    """The configuration the parsed options ask for."""
    nights = a.nights_ms if a.nights_ms is not None else (8.0, 16.0, 32.0)
    if a.duty_cycles is not None:
        # nights rounded to 0.1 ms, so that the schedule's slot grid stays coarse enough to install
        nights = tuple(round(a.reference_slice_ms * (1 / d - 1), 1) for d in a.duty_cycles if 0 < d <= 1)
    cfg = RotorConfig(target=a.target, engine=a.engine, racks=a.racks, repetitions=a.repetitions, rate_mbps=a.rate_mbps,
                      slices_ms=a.slices_ms, reference_slice_ms=a.reference_slice_ms, nights_ms=nights,
                      patterns=tuple(x for x in a.patterns.split(",") if x), levels=a.levels,
                      level_seconds=a.seconds, probe_seconds=1.5 * a.seconds, allreduce_bytes=a.allreduce_kb * 1024,
                      allreduce_iterations=a.allreduce_iterations)
    if a.quick:
        cfg = dataclasses.replace(cfg, repetitions=1, slices_ms=(cfg.reference_slice_ms,), nights_ms=(16.0,),
                                  patterns=("hot-pair",), levels=(0.2, 1.0), level_seconds=0.8, probe_seconds=1.0,
                                  allreduce_bytes=32 * 1024, allreduce_iterations=1, worker_timeout_s=8.0)
    return cfg.validate()


def _stored_config(path: Path) -> RotorConfig:
    """The configuration a results.json was written with."""
    try:
        data = json.loads(path.read_text())["config"]
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(str(path), "config", None, f"not a rotor results file: {exc}") from exc
    return RotorConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def main(argv: list[str]) -> int:
    try:
        cfg, out_arg, report_only, require_decided = parse_config(argv)
    except MlfabricError as exc:
        return refuse(exc)
    points = plan(cfg)
    ref = next(p for p in points if p.sweep == "patterns")
    if report_only and out_arg is not None:
        stored = json.loads((out_arg / "results.json").read_text())
        _write(cfg, out_arg, points, stored["runs"], stored["allreduce"], ref, stored.get("interrupted"),
               stored.get("engines"))
        return 0
    shapes = list(dict.fromkeys(p.shape for p in points))
    try:  # before the results folder: a run refused for a busy machine leaves nothing
        check_free(optical(cfg.racks, 1, uplinks=1, rate_mbps=cfg.rate_mbps, mtu=ETHERNET_MTU))
    except MlfabricError as exc:
        return refuse(exc)
    out = results_folder("rotor", out_arg, _say)
    _say(f"{len(points)} points on {len(shapes)} schedule shapes x {cfg.repetitions} repetitions, {cfg.target} target, "
         f"{cfg.rate_mbps:g} Mb/s links ({cfg.line_pps:.0f} datagrams/s), then ring all-reduce")
    runs: list[dict[str, Any]] = []
    allreduce: list[dict[str, Any]] = []
    engines: dict[str, dict[str, str]] = {}  # per fabric (repetition and shape), per switch
    t_start = time.monotonic()
    total = len(points) * cfg.repetitions
    fabrics = {f"rep{rep + 1}-{shape[0]}+{shape[1]}us": (rep, shape) for rep in range(cfg.repetitions)
               for shape in shapes}

    def one_fabric(name: str, work: Path) -> None:
        rep, shape = fabrics[name]
        with _fabric(cfg, shape[0], out / "logs" / name) as fab:
            engines[name] = fabric_engines(cfg.target, fab.log_dir, [s.name for s in fab.topo.switches])
            _say(f"{name}: switches run the {engines_text(engines[name])}")
            for point in (p for p in points if p.shape == shape):
                t0 = time.monotonic()
                result = run_point(fab, cfg, point)
                result["rep"] = rep
                runs.append(result)
                _say(f"[{len(runs)}/{total}, {time.monotonic() - t_start:.0f} s] rep {rep + 1} "
                     f"{shape[0] / 1000:g}+{shape[1] / 1000:g} ms {point.pattern} {point.routing} "
                     f"{point.calendar}: throughput {result['throughput']:.2f}, light-load delivered "
                     f"{result['probe_delivered']:.2f}, delay p50 {result['delay_p50_ms']:.1f} ms "
                     f"[{time.monotonic() - t0:.1f} s]")
            if rep == cfg.repetitions - 1 and shape == ref.shape:
                for routing in ROUTINGS:
                    allreduce.extend(run_allreduce(fab, cfg, dataclasses.replace(ref, routing=routing), work))

    _, interrupted = run_units(list(fabrics), one_fabric, out, [], _say)
    judged = _write(cfg, out, points, runs, allreduce, ref, interrupted, engines)
    _say(f"wrote {out}/results.json, runs.csv, table.txt, rotor.png, rotor-load.png "
         f"({time.monotonic() - t_start:.0f} s)")
    # an all-reduce may fail by design (stock BMv2 drops what waits for its circuit: TCP cannot
    # connect); the table and the verdicts (too few runs) say so
    return finish(out, interrupted=interrupted, failed=False, verdicts=judged, require_decided=require_decided,
                       say=_say)


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main(sys.argv[1:]))
