"""``mlfabric experiment run rail-only``: rail-only vs rail-optimized fat-tree, same GPUs and
workload, real TCP collectives through P4 switches, one results folder.

For each fabric: build it (EmulatedFabric), start one worker per GPU inside its server's
host, shape the hosts' loopback to the intra-server ("NVLink") bandwidth, then per
iteration run ring allreduce, hierarchical allreduce, all-to-all (direct where the fabric
has a path between rails, hierarchical everywhere) and a training step. Results: the raw
rows (CSV), a summary with costs and the model cross-check (JSON and a text table) and a
plot (PNG).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from mlfabric_emulation.cluster_fabric import ClusterFabric, ClusterSampler
from mlfabric_emulation.cpu_sampler import CpuSampler, fabric_cpu_sampler
from mlfabric_emulation.fabric_net import EmulatedFabric, check_free
from mlfabric_emulation.fabric_workers import path_probe, prepare_hosts, workers
from mlfabric_emulation.port_meter import PortCounterMeter, busiest_share
from mlfabric_emulation.switch_engines import engines_text, fabric_engines

from controller.cli.output import format_table
from controller.cluster import load_machines
from controller.cluster.placement import (
    crossing_info,
    crossing_text,
    place,
    placement_info,
    placement_text,
)
from controller.errors import MlfabricError
from controller.experiments.comparisons import Side, judge_ratio
from controller.experiments.core import (
    INTERRUPTED_EXIT,
    finish,
    refuse,
    results_folder,
    run_units,
    write_outcome,
)
from controller.experiments.cpu_use import (
    breakdown_row,
    breakdown_summary,
    breakdown_text,
    cpu_row,
    cpu_summary,
    cpu_verdict,
)
from controller.experiments.fidelity import (
    Verdict,
    breaches,
    judge,
    runs_of,
    undecided_note,
)
from controller.experiments.options import (
    add_common_options,
    add_data_path_options,
    experiment_parser,
)
from controller.experiments.rail_only import (
    COLLECTIVES,
    FABRICS,
    ExperimentConfig,
    collective_of,
    comparison,
    emulated_bill,
    fabrics_for,
    gpu_bytes_per_iteration,
    is_fat_tree,
    model_times,
    ops_of,
    regime_of,
    suffix_of,
    summarize,
)
from controller.experiments.results import (
    config_json,
    plot_collectives,
    write_json,
)
from controller.experiments.tcp_stats import TcpStats, parse_proc_net
from controller.experiments.tcp_stats import read_command as tcp_read_command
from controller.models.params import load_cost_params
from controller.topology import load_topology
from controller.topology.generators import UPLINK_ROUTINGS
from controller.topology.model import JUMBO_MTU, Topology
from mlfabric_base.numbers import nonnegative_float, positive_float
from workloads.config import CLUSTER_TCP_CONGESTION
from workloads.plan import ALLTOALL_SCHEDULES

log = logging.getLogger("mlfabric.experiment")


def _say(msg: str) -> None:
    print(f"[rail-only] {msg}", flush=True)


def _commands(cfg: ExperimentConfig, fabric: str, it: int) -> list[dict]:
    cmds = []
    for op in ops_of(fabric):
        if collective_of(op) not in cfg.collectives:
            continue
        size = cfg.alltoall_bytes if "alltoall" in op else cfg.allreduce_bytes
        cmds.append({"op": op, "bytes": size, "iter": it}
                    | ({"schedule": cfg.alltoall_schedule} if "alltoall" in op else {}))
    if "train-step" not in cfg.collectives:
        return cmds
    cmds.append({"op": "train_step", "bytes": cfg.allreduce_bytes, "iter": it, "compute_s": cfg.compute_s,
                 "schedule": cfg.alltoall_schedule,
                 "parallelism": {"dp_allreduce": "allreduce", "moe_bytes": cfg.alltoall_bytes,
                                 "moe_alltoall": "hier_alltoall" if fabric == "rail-only" else "alltoall"}})
    return cmds


def _row(fabric: str, cmd: dict, results: list[dict]) -> dict:
    ok = all(r.get("ok") for r in results) and len(results) > 0
    errors = sorted({r["error"] for r in results if r.get("error")})
    phases: dict[str, float] = {}
    for r in results:
        for name, sec in (r.get("phases") or {}).items():
            phases[name] = max(phases.get(name, 0.0), sec)
    return {"fabric": fabric, "op": cmd["op"], "iter": cmd["iter"], "bytes": cmd["bytes"], "ok": ok,
            "seconds": max((r.get("seconds") or 0.0) for r in results) if results else float("nan"),
            "phases": phases, "error": "; ".join(errors)}  # whole: a cause cut mid-word helps nobody


def run_fabric(fabric: str, topo: Topology, cfg: ExperimentConfig, workdir: Path,
               rows: list[dict]) -> dict:
    """Run every iteration on one fabric, appending a row per collective to ``rows`` as it
    finishes (so that an interrupted run keeps them); returns the fabric's info."""
    info: dict = {}
    _say(f"{fabric}: building {len(topo.switches)} switches, {len(topo.hosts)} servers, {len(topo.links)} links "
         f"({cfg.target} target)")
    fabric_of = (functools.partial(ClusterFabric, machines=load_machines(cfg.cluster), run_dir=workdir / "logs" / fabric,
                                   gpu_bytes=gpu_bytes_per_iteration(cfg), say=_say)
                 if cfg.cluster else EmulatedFabric)
    with fabric_of(topo, target=cfg.target, engine=cfg.engine, source_routing=is_fat_tree(fabric),
                   super_frames=cfg.super_frames, log_dir=workdir / "logs" / fabric) as fab:
        if isinstance(fab, ClusterFabric):
            info["placement"] = placement_info(fab.placement, fab.machines)
            _say(f"{fabric}: across {placement_text(fab.placement, fab.machines)}")
        info["bring_up_s"] = round(fab.timings.bring_up_s, 2)
        _say(f"{fabric}: up in {fab.timings.bring_up_s:.1f} s; rules installed")
        prepare_hosts(fab, topo, cfg)
        info["path"] = path_probe(fab, topo)
        _say(f"{fabric}: the longest GPU-to-GPU path ({info['path']['links']} links) answers in "
             f"{info['path']['rtt_ms']:.3f} ms")
        meter = (PortCounterMeter(fab.live, "port_tx", lambda sw, port, peer: sw.role in ("rail", "leaf")
                                  and fab.live.is_switch(peer.node))
                 if is_fat_tree(fabric) and fab.live is not None else None)
        names = [s.name for s in topo.switches]
        info["engines"] = fabric_engines(cfg.target, fab.log_dir, names)
        _say(f"{fabric}: switches run the {engines_text(info['engines'])}")
        cpu = fab.cpu_sampler() if isinstance(fab, ClusterFabric) else fabric_cpu_sampler(fab, names)
        with contextlib.ExitStack() as stack, workers(fab, topo, cfg, fabric, workdir) as group:
            workers_cpu = cpu.workers_sampler() if isinstance(cpu, ClusterSampler) else CpuSampler(group.pids)
            if meter is not None:
                stack.callback(meter.close)
            for warm in range(cfg.warmup):  # one-off costs (first connections' windows, first buffers): not recorded
                failed = sorted({r["error"] for cmd in _commands(cfg, fabric, -1 - warm)
                                 for r in group.run(cmd, timeout=cfg.timeout_s) if not r.get("ok")})
                _say(f"{fabric}: warm-up {warm + 1} of {cfg.warmup} done (not recorded)"
                     + (f"; it failed: {'; '.join(failed)}" if failed else ""))
            crossed = fab.tunnel_bytes() if isinstance(fab, ClusterFabric) else None
            for it in range(cfg.iterations):
                if cfg.fail_rail is not None and it == cfg.iterations - 1:
                    victim = next(s.name for s in topo.switches if s.rail == cfg.fail_rail)
                    _say(f"{fabric}: killing switch {victim} (rail {cfg.fail_rail}) before iteration {it}")
                    fab.switch_process(victim).stop()
                    info["failed_switch"] = victim
                for cmd in _commands(cfg, fabric, it):
                    t0 = time.monotonic()
                    before = meter.read() if meter and "failed_switch" not in info else None
                    with cpu.measure() as used, workers_cpu.measure() as by_workers:
                        results = group.run(cmd, timeout=cfg.timeout_s)
                    row = {**_row(fabric, cmd, results), **cpu_row(used[0]),
                           **breakdown_row(used[0], by_workers[0])}
                    if isinstance(cpu, ClusterSampler):  # every machine's share; the row's is the busiest's
                        row.update(cpu.row_fields())
                    if before is not None and meter is not None:
                        row["uplink_imbalance"] = busiest_share(before, meter.read())
                    rows.append(row)
                    status = f"{row['seconds']:.3f} s" if row["ok"] else f"FAILED ({row['error']})"
                    if row.get("uplink_imbalance"):
                        status += f"  (busiest spine uplink {row['uplink_imbalance']:.2f}x its fair share)"
                    held = "; ".join(b.text() for b in breaches(row))
                    _say(f"{fabric}: iter {it} {cmd['op']:<15} {status}  [{time.monotonic() - t0:.1f} s wall; "
                         f"{used[0].text()}]" + (f"  OVER A FIDELITY LIMIT: {held}" if held else ""))
            if isinstance(fab, ClusterFabric) and crossed is not None and cfg.iterations:
                info["crossing"] = crossing_info(fab.tunnel_bytes() - crossed, cfg.iterations, fab.placement)
                _say(f"{fabric}: {crossing_text(info['crossing'])}")
        tcp = TcpStats.total(parse_proc_net(fab.host(h.name).cmd(tcp_read_command)) for h in topo.hosts)
        info["tcp"] = tcp.as_dict()
    info["teardown_s"] = round(fab.timings.teardown_s, 2)
    return info


#: each headline comparison: (rail-only's op, fat-tree's op)
COMPARISONS = {"allreduce": ("allreduce", "allreduce"), "alltoall": ("hier_alltoall", "alltoall")}


def comparison_name(name: str, fat_tree: str) -> str:
    """``allreduce`` against the only fat-tree, ``allreduce vs fat-tree-spray`` against one of several."""
    return name if fat_tree == "fat-tree" else f"{name} vs {fat_tree}"


def _verdicts(rows: list[dict], fat_tree_names: list[str], collectives: Sequence[str] = COLLECTIVES
              ) -> tuple[dict[str, Verdict], dict[str, dict[str, float]]]:
    """Each comparison's verdict and its ratio's spread, paired by iteration (the one rule:
    :func:`controller.experiments.comparisons.judge_ratio`), against every fat-tree, for
    the collectives run."""
    out, spreads = {}, {}
    for ft in fat_tree_names:
        for base, (mine, theirs) in COMPARISONS.items():
            if base not in collectives:
                continue
            name = comparison_name(base, ft)
            out[name], spreads[name] = judge_ratio(
                name, "rail-only is",
                Side(f"rail-only {mine}", [r for r in rows if (r["fabric"], r["op"]) == ("rail-only", mine)]),
                Side(f"{ft} {theirs}", [r for r in rows if (r["fabric"], r["op"]) == (ft, theirs)]))
    return out, spreads


def _model_verdicts(rows: list[dict], summary: list[dict], model: dict[str, float]) -> dict[str, Verdict]:
    """With rail-only alone: each collective's median against the analytical model, a
    finding only where every iteration's emulation held (controller.experiments.fidelity)."""
    out = {}
    for s in summary:
        op = s["op"]
        mine = [r for r in rows if (r["fabric"], r["op"]) == ("rail-only", op)]
        m = model.get(op)
        finding = (f"median {s['median_s']:.3f} s, the model {m:.3f} s ({(s['median_s'] - m) / m:+.0%})"
                   if m and s["ok"] else f"median {s['median_s']:.3f} s (no model)")
        name = f"rail-only {op} against its model"
        out[name] = judge(name, finding, mine, runs=[runs_of(f"rail-only {op}", mine)])
    return out


def uplink_share_text(rows: list[dict], fat_tree: str) -> str | None:
    """The busiest spine uplink's share of its fair share during the fat-tree's all-to-alls:
    median and worst over the iterations (None when it was not measured)."""
    shares = sorted(r["uplink_imbalance"] for r in rows if r["fabric"] == fat_tree and r["op"] == "alltoall"
                    and r.get("uplink_imbalance"))
    if not shares:
        return None
    return (f"busiest spine uplink during the all-to-alls, {fat_tree}: {statistics.median(shares):.2f}x its fair "
            f"share (median; worst {shares[-1]:.2f}x, over {len(shares)})")


def _report(cfg: ExperimentConfig, topos: dict[str, Topology], rows: list[dict],
            infos: dict) -> tuple[str, dict, list[Verdict]]:
    """The table (the verdicts' lines follow it: core.write_outcome), summary.json's data and
    the verdicts."""
    params = load_cost_params()
    bills = {f: emulated_bill(topos[f], params.costs) for f in topos}
    fat_tree_names = [f for f in topos if is_fat_tree(f)]
    base = bills[fat_tree_names[0] if fat_tree_names else "rail-only"]
    summary = summarize(rows)
    ratios = comparison(summary)
    model = model_times(cfg)
    fabric_rows = [{"fabric": f, "switches": b["switches"], "links": b["links"], "ports": b["ports"],
                    "relative cost": f"{b['cost_usd'] / base['cost_usd']:.2f}",
                    "relative power": f"{b['power_w'] / base['power_w']:.2f}",
                    "bring-up s": infos[f].get("bring_up_s", "")} for f, b in bills.items()]
    coll_rows = []
    for s in summary:
        m = model.get(s["op"])
        err = (s["median_s"] - m) / m if m and s["ok"] else None
        coll_rows.append({"fabric": s["fabric"], "op": s["op"], "median s": f"{s['median_s']:.3f}",
                          "min s": f"{s['min_s']:.3f}", "max s": f"{s['max_s']:.3f}", "ok/failed": f"{s['ok']}/{s['failed']}",
                          "model s": f"{m:.3f}" if m else "-", "model error": f"{err:+.0%}" if err is not None else "-"})
    lines = [
        f"{'Rail-only vs rail-optimized fat-tree' if fat_tree_names else 'Rail-only alone'}: "
        f"{cfg.servers} servers x {cfg.rails} GPUs, {cfg.rate_mbps} Mbit/s NICs, "
        f"MTU {cfg.mtu},"
        f" NVLink {cfg.nvlink_factor:g}x NIC ({cfg.nvlink}),"
        f" {f'super-packets of {cfg.super_frames} frames' if cfg.super_frames else 'frame by frame'},"
        f" {cfg.alltoall_schedule} all-to-alls,"
        f"{'' if cfg.tcp_slow_start_after_idle else ' no slow start after idle,'} {cfg.target} target,"
        f" {cfg.iterations} iterations",
        "", format_table(fabric_rows), "", format_table(coll_rows), "",
    ]
    verdicts, spreads = _verdicts(rows, fat_tree_names, cfg.collectives)
    if not fat_tree_names:  # nothing to compare with: each collective against its model
        for name, verdict in _model_verdicts(rows, summary, model).items():
            verdicts[name] = verdict
            lines.append(f"{name}: {verdict.finding}: {verdict.text()}")

    def spread_text(name: str) -> str:
        sp = spreads[name]
        return (f"{sp['mean']:.3f} ± {sp['sd']:.3f}, 95% CI {sp['low']:.3f}-{sp['high']:.3f} over {sp['n']} "
                f"iterations: {verdicts[name].text()}")

    for ft in fat_tree_names:
        scheme = f", {topos[ft].params.get('uplink_routing', 'ecmp')} load balancing" if len(fat_tree_names) > 1 else ""
        if f"allreduce_ratio{suffix_of(ft)}" in ratios:
            lines.append(f"allreduce rail-only / {ft}: {spread_text(comparison_name('allreduce', ft))} "
                         f"(expected: even, within 5%{scheme})")
        if f"alltoall_ratio{suffix_of(ft)}" in ratios:
            lines.append(f"all-to-all rail-only (hierarchical) / {ft} (direct): "
                         f"{spread_text(comparison_name('alltoall', ft))} (paper: 1.08-1.11 with NVLink >> NIC{scheme})")
        share = uplink_share_text(rows, ft)
        if share:
            lines.append(share)
    cpu = {f: cpu_summary(r for r in rows if r["fabric"] == f) for f in topos}
    breakdown = {f: breakdown_summary(r for r in rows if r["fabric"] == f) for f in topos}
    for f in topos:
        engines = (infos.get(f) or {}).get("engines")
        on = f" ({engines_text(engines)})" if engines else ""
        lines.append(f"switch CPU, {f}{on}: {cpu_verdict(cpu[f])}")
        if breakdown[f]:
            b = breakdown[f]
            lines.append(f"where the machine's CPU went, {f} (median cores per collective): {breakdown_text(b)}")
        if (infos.get(f) or {}).get("tcp"):
            lines.append(f"the hosts' TCP, {f}: {TcpStats(**infos[f]['tcp']).text()}")
        if (infos.get(f) or {}).get("crossing"):
            lines.append(f"across machines, {f}: {crossing_text(infos[f]['crossing'])}")
    ratios = {**ratios, **{f"{k}_spread": v for k, v in spreads.items()}}
    data = {"config": config_json(cfg), "fabrics": bills, "collectives": summary, "ratios": ratios, "model_s": model,
            "runs": infos, "cpu": cpu, "cpu_breakdown_cores": breakdown}
    return "\n".join(lines), data, list(verdicts.values())


def build_parser() -> argparse.ArgumentParser:
    d = ExperimentConfig()
    p = experiment_parser("rail-only", __doc__)
    p.add_argument("--gpus", type=int, default=d.gpus, help="GPUs in all (servers x rails)")
    p.add_argument("--rails", type=int, default=d.rails, help="GPUs per server = rails")
    p.add_argument("--topology", type=Path, help="a rail-only topology file to use instead of generating one")
    p.add_argument("--rate-mbps", type=positive_float, default=d.rate_mbps,
                   help="NIC link rate (each collective's line reports the switches' and the machine's CPU use; "
                        "the default keeps a 2-core machine under its 60%% fidelity limit)")
    p.add_argument("--nvlink-factor", type=positive_float, default=d.nvlink_factor,
                   help="in-server (NVLink) bandwidth as a multiple of the NIC rate")
    p.add_argument("--iterations", type=int, default=d.iterations, help="repetitions of each collective (>= 2 for a spread)")
    p.add_argument("--warmup", type=int, default=d.warmup,
                   help="unrecorded rounds of every collective before the first iteration (with one, the "
                        "hierarchical all-to-all still sped up by 12%% over the first 6 iterations)")
    p.add_argument("--allreduce-kb", type=int, default=d.allreduce_bytes // 1024, help="all-reduce size per GPU, KiB")
    p.add_argument("--alltoall-kb", type=int, default=d.alltoall_bytes // 1024, help="all-to-all size per GPU, KiB")
    p.add_argument("--compute-ms", type=nonnegative_float, default=1000 * d.compute_s,
                   help="compute time per iteration in the iteration-time estimate")
    p.add_argument("--spines", type=int, default=2, help="spine switches of the fat-tree baseline")
    p.add_argument("--load-balancing", nargs="+", choices=UPLINK_ROUTINGS, default=list(d.load_balancing),
                   metavar="SCHEME",
                   help="how the fat-tree's leaves pick an uplink, one fat-tree per scheme given, each compared with "
                        "rail-only: ecmp (a 5-tuple hash, as plain fat-trees do: flows collide), flowlet (a flow "
                        "moves to a re-hashed uplink when it pauses longer than --flowlet-gap-us, as LetFlow), "
                        "spray (each packet to the next uplink, as adaptive-routing and packet-spraying AI fabrics "
                        "do; the hosts' TCP absorbs the reordering), dst-server (d-mod-k: every pairwise all-to-all "
                        "round evenly spread, the paper's ideal full bisection)")
    p.add_argument("--flowlet-gap-us", type=int, default=d.flowlet_gap_us,
                   help="flowlet load balancing: a pause longer than this ends a flowlet (µs)")
    p.add_argument("--alltoall-schedule", choices=ALLTOALL_SCHEDULES, default="concurrent",
                   help="how every all-to-all orders its transfers: all at once (concurrent, as NCCL's grouped "
                        "sends and receives do: the paper's setting) or pairwise rounds (as MPI does; over TCP "
                        "each round waits for its receive, and the direct all-to-all's NICs idle half the time)")
    p.add_argument("--tcp-congestion", default=CLUSTER_TCP_CONGESTION,
                   help="every worker connection's congestion control (\"\": the machine's default)")
    p.add_argument("--tcp-rto-min-ms", type=nonnegative_float, default=1000.0,
                   help="the hosts' minimum retransmission timeout, ms (0: the kernel's 200). The emulated links "
                        "are thousands of times slower than a cluster's, so their queues hold hundreds of ms: "
                        "with 200 ms, a concurrent all-to-all at 16 Mbit/s fires hundreds of spurious timeouts a "
                        "cluster never sees; where packets are really lost (50 Mbit/s), 1 s costs more")
    p.add_argument("--tcp-slow-start-after-idle", type=int, choices=(0, 1), default=int(d.tcp_slow_start_after_idle),
                   help="the hosts' net.ipv4.tcp_slow_start_after_idle: 1 (Linux's default) restarts every connection "
                        "that idled between collectives from a small window; 0 keeps its window, as RDMA transports "
                        "(which have no slow start) do")
    p.add_argument("--sock-buf-kb", type=int, default=0,
                   help="the workers' socket buffers, KiB (0: the kernel's autotuning)")
    p.add_argument("--fabrics", nargs="+", choices=FABRICS, default=list(d.fabrics), metavar="FABRIC",
                   help="the fabrics built: rail-only and fat-tree (compared), or rail-only alone (a scale check: "
                        "each collective judged against its model, as at 1,024 GPUs)")
    p.add_argument("--collectives", nargs="+", choices=COLLECTIVES, default=list(d.collectives),
                   metavar="COLLECTIVE",
                   help="what runs each iteration: allreduce (a ring over every GPU), hier-allreduce (NVLink, then "
                        "each rail's ring), alltoall, train-step (its all-reduce and all-to-all as configured)")
    p.add_argument("--mtu", type=int, default=JUMBO_MTU,
                   help="every link's MTU, bytes (jumbo by default: ML fabrics run 9,000-byte frames, and the "
                        "emulation's cost is per frame)")
    add_common_options(p, "rail-only")
    add_data_path_options(p, super_frames=d.super_frames)
    p.add_argument("--fail-rail", type=int, default=None, help="kill this rail's switch before the last iteration")
    p.add_argument("--cluster", type=Path, default=None, metavar="MACHINES",
                   help="spread every fabric over the machines of this file, reached over SSH (docs/cluster.md; "
                        "mlfabric cluster plan shows the placement); an interval holds only if every machine held")
    p.add_argument("--worker-timeout", type=positive_float, default=15.0,
                   help="seconds without progress before a collective fails (a dead peer or path)")
    return p


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    try:
        cfg = ExperimentConfig(gpus=a.gpus, rails=a.rails, rate_mbps=a.rate_mbps, nvlink_factor=a.nvlink_factor,
                               iterations=a.iterations, warmup=a.warmup, allreduce_bytes=a.allreduce_kb * 1024,
                               alltoall_bytes=a.alltoall_kb * 1024, compute_s=a.compute_ms / 1000,
                               target=a.target, engine=a.engine, fail_rail=a.fail_rail, spines=a.spines,
                               load_balancing=tuple(a.load_balancing), flowlet_gap_us=a.flowlet_gap_us,
                               alltoall_schedule=a.alltoall_schedule,
                               tcp_congestion=a.tcp_congestion, tcp_rto_min_ms=a.tcp_rto_min_ms,
                               tcp_slow_start_after_idle=bool(a.tcp_slow_start_after_idle),
                               sock_buf_bytes=a.sock_buf_kb * 1024,
                               worker_timeout_s=a.worker_timeout, mtu=a.mtu, nvlink=a.nvlink,
                               super_frames=a.super_frames, fabrics=tuple(a.fabrics),
                               collectives=tuple(a.collectives),
                               cluster=str(a.cluster) if a.cluster else "").validate()
        topos = fabrics_for(cfg, load_topology(a.topology) if a.topology else None)
        if cfg.cluster:  # each machine checks its own interfaces when it builds its part
            machines = load_machines(cfg.cluster)
            for topo in topos.values():
                place(topo, machines)
        else:
            for topo in topos.values():  # before the results folder: a refused run leaves nothing
                check_free(topo)
    except MlfabricError as exc:
        return refuse(exc)
    out = results_folder("rail-only", a.out, _say)
    rows: list[dict] = []
    infos, interrupted = run_units(list(topos), lambda fabric, work: run_fabric(fabric, topos[fabric], cfg, work, rows),
                                   out, rows, _say)
    if interrupted is not None and set(topos) - set(infos):  # a fabric never ran: nothing to compare
        write_json(out / "summary.json", {"config": config_json(cfg), "interrupted": interrupted, "runs": infos})
        _say(f"wrote what finished to {out} (marked interrupted)")
        return INTERRUPTED_EXIT
    text, data, verdicts = _report(cfg, topos, rows, infos)
    write_outcome(out, text, data, verdicts, interrupted=interrupted, regime=regime_of(cfg, infos))
    killed = {f: (cfg.iterations - 1, f"{infos[f]['failed_switch']} killed") for f in topos
              if isinstance(infos.get(f), dict) and infos[f].get("failed_switch")}
    plot_collectives(rows, out / "collectives.png", events=killed,
                     title=f"rail-only vs fat-tree, {cfg.gpus} GPUs ({cfg.servers}x{cfg.rails}), {cfg.rate_mbps} Mbit/s"
                           + undecided_note(verdicts))
    _say(f"wrote {out}/iterations.csv, summary.json, table.txt, collectives.png")
    # with --fail-rail the last iteration fails on purpose
    return finish(out, interrupted=interrupted, failed=cfg.fail_rail is None and not all(r["ok"] for r in rows),
                       verdicts=verdicts, require_decided=a.require_decided, say=_say)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
