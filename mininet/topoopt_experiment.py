"""``mlfabric experiment run topoopt``: TopoOpt direct-connect fabrics of degree d against a
fat-tree of the same servers, ring all-reduce and all-to-all on each, and the bandwidth tax
of host forwarding from the servers' own counters; one results folder
(controller.experiments.topoopt is the pure side).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cpu_sampler import fabric_cpu_sampler
from fabric_net import EmulatedFabric, check_free
from switch_engines import engines_text, fabric_engines

from controller.errors import ConfigError, MlfabricError
from controller.experiments.cpu_use import cpu_row, cpu_summary, cpu_verdict
from controller.experiments.fidelity import (
    Verdict,
    fidelity_lines,
    judge,
    undecided_note,
    verdicts_json,
)
from controller.experiments.options import UNDECIDED_EXIT, add_common_options, experiment_parser
from controller.experiments.results import (
    config_json,
    interrupt_on_signals,
    new_results_dir,
    write_run,
)
from controller.experiments.topoopt import (
    PAPER_TAX,
    TopoOptConfig,
    expected_tax,
    fabrics,
    forwarded,
    mean_sd,
    tax,
    tx_frames,
)
from controller.topology.model import Topology
from workloads.config import CLUSTER_TCP_CONGESTION
from workloads.driver import WorkerGroup
from workloads.errors import WorkloadError
from workloads.plan import Rank

__all__ = ["main"]

OPS = ("allreduce", "alltoall")


def _say(msg: str) -> None:
    print(f"[topoopt] {msg}", flush=True)


def build_parser() -> argparse.ArgumentParser:
    p = experiment_parser("topoopt", __doc__)
    add_common_options(p, "topoopt", repetitions=3)
    p.add_argument("--servers", type=int, default=16, help="servers of both fabrics")
    p.add_argument("--degrees", default="2,3,4", help="comma-separated TopoOpt degrees (NICs per server)")
    p.add_argument("--rate-mbps", type=float, default=5.0,
                   help="each TopoOpt NIC; the fat-tree NIC gets d x this (at 10 and 25 the fat-tree's collectives put "
                        "the 2-core machine at 68-98%%: undecided)")
    p.add_argument("--fat-tree-radix", type=int, default=8,
                   help="the fat-tree's switch radix: leaves of radix/2 servers under 2 spines; 0: one leaf for "
                        "all servers (at 25 Mb/s that leaf used 65-85%% of a core on 2 cores: switch-bound)")
    p.add_argument("--allreduce-kb", type=int, default=1280, help="all-reduce size per server, KiB")
    p.add_argument("--alltoall-kb", type=int, default=640, help="all-to-all size per server, KiB")
    p.add_argument("--quick", action="store_true", help="8 servers, degree 2, 1 repetition, small collectives")
    return p


def parse_config(argv: list[str]) -> tuple[TopoOptConfig, Path | None, bool]:
    """The configuration, the results folder and whether the run must be decided."""
    a = build_parser().parse_args(argv)
    try:
        degrees = tuple(int(d) for d in a.degrees.split(",") if d)
    except ValueError:
        raise ConfigError("<topoopt experiment>", "--degrees", a.degrees, "a comma-separated list of integers") from None
    if a.quick:
        return TopoOptConfig(target=a.target, engine=a.engine, servers=8, degrees=(2,), rate_mbps=a.rate_mbps, repetitions=1,
                             allreduce_bytes=128 * 1024, alltoall_bytes=64 * 1024,
                             fat_tree_radix=a.fat_tree_radix or None), a.out, a.require_decided
    return TopoOptConfig(target=a.target, engine=a.engine, servers=a.servers, degrees=degrees, rate_mbps=a.rate_mbps,
                         repetitions=a.repetitions, allreduce_bytes=a.allreduce_kb * 1024,
                         alltoall_bytes=a.alltoall_kb * 1024, fat_tree_radix=a.fat_tree_radix or None), a.out, \
        a.require_decided


def _counters(fab: EmulatedFabric, topo: Topology) -> dict[str, tuple[int, int]]:
    """Each server's (frames its NICs transmitted, datagrams it forwarded)."""
    out = {}
    for h in topo.hosts:
        text = fab.host(h.name).cmd("cat /proc/net/dev; echo ===; cat /proc/net/snmp")
        netdev, _, snmp = text.partition("===")
        out[h.name] = (tx_frames(netdev, f"{h.name}-"), forwarded(snmp))
    return out


def run_fabric(cfg: TopoOptConfig, topo: Topology, d: int, workdir: Path) -> list[dict[str, Any]]:
    """Both collectives, ``repetitions`` times each, on one fabric; a row per run."""
    ranks = [Rank(rank=s, server=s, rail=0, ip=topo.host(f"s{s}").nics[0].address) for s in range(cfg.servers)]
    config = {"ranks": [dataclasses.asdict(r) for r in ranks], "servers": cfg.servers, "rails": 1, "port": 7100,
              "timeout_s": 60.0, "start_timeout_s": 30.0, "mesh": "full", "tcp_congestion": CLUSTER_TCP_CONGESTION}
    path = workdir / f"workers-{topo.name}.json"
    path.write_text(json.dumps(config))
    rows: list[dict[str, Any]] = []
    base = {"fabric": topo.kind, "degree": d, "name": topo.name}
    with EmulatedFabric(topo, target=cfg.target, engine=cfg.engine, publish=False,
                        log_dir=workdir / "logs" / topo.name) as fab:
        names = [s.name for s in topo.switches]
        base["engines"] = engines_text(fabric_engines(cfg.target, fab.log_dir, names))
        cpu = fabric_cpu_sampler(fab, names)
        def popen(rank: Rank, argv: list[str]) -> subprocess.Popen:
            return fab.host(f"s{rank.server}").popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                      stderr=subprocess.PIPE)

        try:
            with WorkerGroup(popen, path, ranks, python=sys.executable) as group:
                for op in OPS:
                    nbytes = cfg.allreduce_bytes if op == "allreduce" else cfg.alltoall_bytes
                    for rep in range(cfg.repetitions):
                        before = _counters(fab, topo)
                        with cpu.measure() as used:
                            results = group.run({"op": op, "bytes": nbytes, "iter": rep}, timeout=180)
                        after = _counters(fab, topo)
                        ok = bool(results) and all(r.get("ok") for r in results)
                        errors = sorted({str(r["error"]) for r in results if r.get("error")})
                        seconds = max((float(r.get("seconds") or 0.0) for r in results), default=math.nan)
                        row = {**base, "op": op, "rep": rep, "bytes": nbytes, "ok": ok, "seconds": seconds,
                               "tax": tax(before, after), "error": "; ".join(errors)[:200], **cpu_row(used[0])}
                        rows.append(row)
                        _say(f"{topo.name} {op} rep {rep + 1}: "
                             + (f"{seconds:.2f} s, tax {row['tax']:.2f}" if ok else f"FAILED ({row['error'][:80]})")
                             + f"  [{used[0].text()}]")
        except WorkloadError as exc:
            rows.append({**base, "op": "start", "rep": 0, "ok": False, "seconds": math.nan, "tax": math.nan,
                         "error": str(exc)[:200]})
            _say(f"{topo.name}: workers did not start ({str(exc)[:100]})")
    return rows


def _table(cfg: TopoOptConfig, rows: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    summary = []
    for d in cfg.degrees:
        topo, _ = fabrics(cfg, d)
        entry: dict[str, Any] = {"degree": d, "strides": topo.params["strides"], "diameter": topo.params["diameter"],
                                 "tax_expected": expected_tax(topo), "tax_paper": PAPER_TAX.get(d)}
        for op in OPS:
            for kind in ("topoopt", "rail-fat-tree"):
                secs = [r["seconds"] for r in rows if r["degree"] == d and r["fabric"] == kind and r["op"] == op and r["ok"]]
                entry[f"{op}_{kind}"] = mean_sd(secs)
            t, f = entry[f"{op}_topoopt"][0], entry[f"{op}_rail-fat-tree"][0]
            entry[f"{op}_ratio"] = t / f if f == f and f else float("nan")
        taxes = [r["tax"] for r in rows if r["degree"] == d and r["fabric"] == "topoopt" and r["op"] == "alltoall" and r["ok"]]
        entry["tax_measured"] = mean_sd(taxes)
        summary.append(entry)
    tree = (f"leaves of {cfg.fat_tree_radix // 2} servers under 2 spines" if cfg.fat_tree_radix
            and cfg.servers > cfg.fat_tree_radix else "one leaf")
    lines = [f"{cfg.servers} servers, {cfg.target} target; TopoOpt NICs at {cfg.rate_mbps:g} Mb/s each, the fat-tree's "
             f"({tree}) one NIC at d x that; all-reduce {cfg.allreduce_bytes // 1024} KiB, all-to-all {cfg.alltoall_bytes // 1024} "
             f"KiB per rank; mean ± sd over {cfg.repetitions}", "",
             f"{'d':<3}{'strides':<16}{'all-reduce s: TopoOpt / fat-tree (ratio)':<44}"
             f"{'all-to-all s: TopoOpt / fat-tree (ratio)':<44}{'tax measured':<16}{'routes':<8}{'paper':<6}"]

    def pair(e: dict[str, Any], op: str) -> str:
        (t, ts), (f, fs) = e[f"{op}_topoopt"], e[f"{op}_rail-fat-tree"]
        return f"{t:.2f}±{ts:.2f} / {f:.2f}±{fs:.2f} ({e[f'{op}_ratio']:.2f}x)"

    for e in summary:
        tm, tsd = e["tax_measured"]
        paper = f"{e['tax_paper']:.2f}" if e["tax_paper"] else "-"
        lines.append(f"{e['degree']:<3}{e['strides']!s:<16}{pair(e, 'allreduce'):<44}{pair(e, 'alltoall'):<44}"
                     f"{tm:.2f}±{tsd:.2f}{'':<5}{e['tax_expected']:<8.2f}{paper:<6}")
    lines += ["", "tax measured: frames the servers' NICs sent over the frames they originated, during all-to-all, "
              "ACKs included; routes: the mean compiled route length, which uniform all-to-all must give;",
              "paper (TopoOpt, NSDI'23): 1.11 at d=4, 1.05 at d=8, over whole training iterations whose all-reduce "
              "rides the direct rings, with circuits usable both ways.", ""]
    for kind in ("topoopt", "rail-fat-tree"):
        mine = [r for r in rows if r["fabric"] == kind]
        engines = sorted({str(r["engines"]) for r in mine if r.get("engines")})
        on = f" ({', '.join(engines)})" if engines else ""
        lines.append(f"switch CPU, {kind}{on}: {cpu_verdict(cpu_summary(mine))}")
    lines += fidelity_lines(verdicts(rows, summary))
    return "\n".join(lines), summary


def verdicts(rows: list[dict[str, Any]], summary: list[dict[str, Any]]) -> list[Verdict]:
    """Each (degree, collective) comparison of TopoOpt with the fat-tree, judged on the runs
    of both fabrics it rests on."""
    out = []
    for e in summary:
        for op in OPS:
            ratio = e[f"{op}_ratio"]
            finding = (f"TopoOpt takes {ratio:.2f}x the fat-tree's time" if ratio == ratio
                       else "no successful run to compare")
            measured = [r for r in rows if r["degree"] == e["degree"] and r["op"] == op]
            out.append(judge(f"{op} d={e['degree']}", finding, measured))
    return out


def _plot(cfg: TopoOptConfig, summary: list[dict[str, Any]], path: Path, *, note: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    ds = [e["degree"] for e in summary]
    width = 0.2
    for k, (op, kind, label) in enumerate((("allreduce", "topoopt", "all-reduce, TopoOpt"),
                                           ("allreduce", "rail-fat-tree", "all-reduce, fat-tree"),
                                           ("alltoall", "topoopt", "all-to-all, TopoOpt"),
                                           ("alltoall", "rail-fat-tree", "all-to-all, fat-tree"))):
        means = [e[f"{op}_{kind}"][0] for e in summary]
        sds = [e[f"{op}_{kind}"][1] for e in summary]
        left.bar([d + (k - 1.5) * width for d in ds], means, width, yerr=sds, label=label)
    left.set_xlabel("degree d (NICs per server)")
    left.set_ylabel("completion time, s")
    left.set_xticks(ds)
    left.legend(fontsize=8)
    left.set_title(f"{cfg.servers} servers: collectives, TopoOpt vs fat-tree{note}", fontsize=10 if note else None)
    right.errorbar(ds, [e["tax_measured"][0] for e in summary], yerr=[e["tax_measured"][1] for e in summary],
                   marker="o", label="measured (all-to-all)")
    right.plot(ds, [e["tax_expected"] for e in summary], marker="x", ls="--", label="mean compiled route length")
    right.scatter(list(PAPER_TAX), list(PAPER_TAX.values()), color="black", marker="*", s=80, zorder=3,
                  label="paper (training traffic)")
    right.set_xlabel("degree d")
    right.set_ylabel("bandwidth tax")
    right.legend(fontsize=8)
    right.set_title("host forwarding's bandwidth tax")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str]) -> int:
    try:
        cfg, out_arg, require_decided = parse_config(argv)
    except MlfabricError as exc:
        print(f"mlfabric: error: {exc}", file=sys.stderr)
        return 2
    try:  # before the results folder: a run refused for a busy machine leaves nothing
        for topo_ in [t for d in cfg.degrees for t in fabrics(cfg, d)]:
            check_free(topo_)
    except MlfabricError as exc:
        print(f"mlfabric: error: {exc}", file=sys.stderr)
        return 2
    out = out_arg or new_results_dir("topoopt")
    out.mkdir(parents=True, exist_ok=True)
    _say(f"results folder: {out}")
    _say(f"{cfg.servers} servers, degrees {', '.join(map(str, cfg.degrees))}, {cfg.target} target, "
         f"{cfg.repetitions} repetitions")
    rows: list[dict[str, Any]] = []
    interrupted = None
    t0 = time.monotonic()
    try:
        with interrupt_on_signals(), tempfile.TemporaryDirectory(prefix="mlfabric-topoopt-") as tmp:
            for d in cfg.degrees:
                for topo in fabrics(cfg, d):
                    rows += run_fabric(cfg, topo, d, Path(tmp))
    except KeyboardInterrupt as exc:
        interrupted = f"stopped by {exc or 'SIGINT'} after {len(rows)} runs; the emulation was torn down"
        _say(interrupted)
    text, summary = _table(cfg, rows)
    judged = verdicts(rows, summary)
    figure = _plot(cfg, summary, out / "topoopt.png", note=undecided_note(judged))
    write_run(out, text, {"config": config_json(cfg), "summary": summary, "runs": rows, "interrupted": interrupted,
                          "fidelity": verdicts_json(judged)}, rows)
    _say(f"wrote {out}/results.json, runs.csv, table.txt, {figure.name} ({time.monotonic() - t0:.0f} s)")
    if interrupted:
        return 130
    return UNDECIDED_EXIT if require_decided and not all(v.decided for v in judged) else 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main(sys.argv[1:]))
