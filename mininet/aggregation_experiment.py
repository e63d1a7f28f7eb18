"""``mlfabric experiment run aggregation``: in-network aggregation (SwitchML) against the ring
and the hierarchical all-reduce, on rail-only and its rail-optimized fat-tree.

For each fabric: build it, install the aggregation job (every GPU a worker, each rail's
group summed in the switch its NICs reach: the rail switch, or the fat-tree's leaf), start
one worker per GPU, then per repetition all-reduce each size three ways: ``allreduce`` (the
flat ring), ``hier_allreduce`` (a ring along each rail) and ``innet_allreduce`` (each rail's
step through its switch). Every result is checked exactly. Each all-reduce is measured by
the shared CPU monitors and the switches' per-port counters (what each GPU's NIC sent).
Results: iterations.csv, summary.json, table.txt and aggregation.png in one folder.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import subprocess
import sys
import time
from pathlib import Path

from mlfabric_emulation.cpu_sampler import CpuSampler, fabric_cpu_sampler
from mlfabric_emulation.fabric_net import EmulatedFabric, check_free
from mlfabric_emulation.fabric_workers import path_probe, prepare_hosts, workers
from mlfabric_emulation.port_meter import PortCounterMeter, mean_and_max
from mlfabric_emulation.switch_engines import engines_text, fabric_engines

from controller.aggregate import install_aggregation
from controller.aggregate.job import ShadowSpec
from controller.dashboard import journal
from controller.errors import MlfabricError
from controller.experiments.aggregation import (
    LOSSY,
    AggregationSettings,
    aggregation_job,
    shadow_verdicts,
)
from controller.experiments.aggregation_report import plot_aggregation, report
from controller.experiments.core import (
    INTERRUPTED_EXIT,
    finish,
    refuse,
    results_folder,
    run_units,
    write_outcome,
)
from controller.experiments.cpu_use import breakdown_row, cpu_row
from controller.experiments.fidelity import breaches
from controller.experiments.options import (
    add_common_options,
    add_data_path_options,
    experiment_parser,
)
from controller.experiments.rail_only import ExperimentConfig, fabrics_for, regime_of
from controller.experiments.results import (
    config_json,
    write_csv,
    write_json,
)
from controller.topology.model import Host, Topology
from mlfabric_base.numbers import positive_float
from workloads.aggregation.wire import WORKER_PORT

FABRICS = ("rail-only", "fat-tree")


def _say(msg: str) -> None:
    print(f"[aggregation] {msg}", flush=True)


def _commands(settings: AggregationSettings, it: int) -> list[dict]:
    """Each size's all-reduces; a lossy in-network one is labelled ``innet_allreduce_lossy``
    in the rows (its workers run ``innet_allreduce`` with ``drop_every``)."""
    out = []
    for kb in settings.sizes_kb:
        for op in settings.ops:
            job = {"job": settings.job, "slots": settings.slots, "port": WORKER_PORT,
                   "drop_every": settings.loss_every if op == LOSSY else 0}
            out.append({"op": "innet_allreduce" if op == LOSSY else op, "bytes": kb * 1024, "iter": it,
                        **({"ring": "pxn"} if op == "allreduce" else {}),
                        **({"aggregation": job} if op in ("innet_allreduce", LOSSY) else {})})
    return out


def _label(cmd: dict) -> str:
    return LOSSY if (cmd.get("aggregation") or {}).get("drop_every") else cmd["op"]


def _row(fabric: str, cmd: dict, results: list[dict], nic_bytes: float, busiest: int) -> dict:
    ok = bool(results) and all(r.get("ok") for r in results)
    errors = sorted({r["error"] for r in results if r.get("error")})
    agg: dict[str, int] = {}
    for r in results:
        for k, v in (r.get("aggregation") or {}).items():
            agg[k] = agg.get(k, 0) + int(v)
    return {"fabric": fabric, "op": _label(cmd), "kb": cmd["bytes"] // 1024, "iter": cmd["iter"], "ok": ok,
            "seconds": max((r.get("seconds") or 0.0) for r in results) if results else float("nan"),
            "nic_bytes": nic_bytes, "busiest_nic_bytes": busiest, "aggregation": agg or None, "error": "; ".join(errors)}


class ShadowRecorder:
    """``workloads.aggregation.shadow`` in the shadow's host, recording each rail's sums for
    the ``with`` body; :meth:`streams` reads them once it stopped."""

    def __init__(self, fab: EmulatedFabric, host: Host, prefix: Path) -> None:
        self.prefix = prefix
        self.rails = len(host.nics)
        ips = [nic.address for nic in sorted(host.nics, key=lambda n: n.rail or 0)]
        self.proc = fab.host(host.name).popen([sys.executable, "-m", "workloads.aggregation.shadow", "--listen", *ips,
                                               "--out", str(prefix)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                              text=True)

    def __enter__(self) -> ShadowRecorder:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "shadow ready" not in line:
            self.proc.kill()
            raise MlfabricError(f"the shadow did not start: {line.strip() or 'no output'}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def streams(self) -> dict[int, bytes]:
        return {r: Path(f"{self.prefix}.rail{r}").read_bytes() for r in range(self.rails)
                if Path(f"{self.prefix}.rail{r}").exists()}


def run_fabric(fabric: str, topo: Topology, cfg: ExperimentConfig, settings: AggregationSettings, workdir: Path,
               rows: list[dict], *, shadow: bool) -> dict:
    """One fabric: its servers are the workers, and with ``shadow`` one more server is the
    Checkmate shadow of every rail (a copy of each sum from each rail switch)."""
    info: dict = {}
    worker_topo = dataclasses.replace(topo, hosts=topo.hosts[:cfg.servers])
    job = aggregation_job(worker_topo, settings)
    shadow_host = topo.hosts[cfg.servers] if shadow else None
    if shadow_host is not None:
        job = dataclasses.replace(job, shadows=tuple(ShadowSpec(shadow_host.name, r) for r in range(cfg.rails)))
    _say(f"{fabric}: building {len(topo.switches)} switches, {len(topo.hosts)} servers"
         + (f" ({shadow_host.name} the shadow)" if shadow_host else "") + f" ({cfg.target} target)")
    with EmulatedFabric(topo, target=cfg.target, engine=cfg.engine, source_routing=(fabric == "fat-tree"),
                        super_frames=cfg.super_frames,
                        log_dir=workdir / "logs" / fabric) as fab:
        assert fab.live is not None
        info["bring_up_s"] = round(fab.timings.bring_up_s, 2)
        program = install_aggregation(fab.live, job)
        info["aggregation"] = {s.switch: {"pool": [s.pool_base, s.pool_size], "workers": len(s.worker_rules)}
                               for s in program.switches}
        _say(f"{fabric}: up in {fab.timings.bring_up_s:.1f} s; aggregation job {settings.job} on "
             + ", ".join(f"{s.switch} ({len(s.worker_rules)} workers)" for s in program.switches))
        prepare_hosts(fab, worker_topo, cfg)
        info["path"] = path_probe(fab, worker_topo)
        names = [s.name for s in topo.switches]
        info["engines"] = fabric_engines(cfg.target, fab.log_dir, names)
        _say(f"{fabric}: switches run the {engines_text(info['engines'])}")
        cpu = fabric_cpu_sampler(fab, names)
        gpus = {h.name for h in worker_topo.hosts}
        meter = PortCounterMeter(fab.live, "port_rx", lambda sw, port, peer: peer.node in gpus)
        calls: list[tuple[dict | None, int, set[str]]] = []  # every in-network all-reduce, warm-ups too
        with contextlib.ExitStack() as stack:
            stack.callback(meter.close)
            recorder = stack.enter_context(ShadowRecorder(fab, shadow_host, workdir / f"shadow-{fabric}")) \
                if shadow_host is not None else None
            group = stack.enter_context(workers(fab, worker_topo, cfg, fabric, workdir))
            workers_cpu = CpuSampler(group.pids)

            def run(cmd: dict, row: dict | None = None) -> list[dict]:
                results = group.run(cmd, timeout=cfg.timeout_s)
                if cmd["op"] == "innet_allreduce":
                    calls.append((row, cmd["bytes"] // 4, {r.get("digest") or "" for r in results}))
                return results

            for warm in range(cfg.warmup):
                failed = sorted({r["error"] for cmd in _commands(settings, -1 - warm)
                                 for r in run(cmd) if not r.get("ok")})
                _say(f"{fabric}: warm-up {warm + 1} of {cfg.warmup} done (not recorded)"
                     + (f"; it failed: {'; '.join(failed)}" if failed else ""))
            for it in range(cfg.iterations):
                for cmd in _commands(settings, it):
                    t0 = time.monotonic()
                    before = meter.read()
                    row: dict = {}
                    with cpu.measure() as used, workers_cpu.measure() as by_workers:
                        results = run(cmd, row)
                    sent, busiest = mean_and_max(before, meter.read())
                    row.update({**_row(fabric, cmd, results, sent, busiest), **cpu_row(used[0]),
                                **breakdown_row(used[0], by_workers[0])})
                    rows.append(row)
                    journal.record("aggregation", fabric=fabric, op=row["op"], kb=row["kb"], ok=row["ok"],
                                   seconds=row["seconds"] if row["ok"] else None, slots=settings.slots,
                                   counters=row["aggregation"])
                    status = f"{row['seconds']:.3f} s" if row["ok"] else f"FAILED ({row['error']})"
                    held = "; ".join(b.text() for b in breaches(row))
                    _say(f"{fabric}: rep {it} {row['op']:<21} {row['kb']:>5} KiB {status}, busiest NIC sent "
                         f"{busiest / 1024:.0f} KiB [{time.monotonic() - t0:.1f} s wall; {used[0].text()}]"
                         + (f"  OVER A FIDELITY LIMIT: {held}" if held else ""))
        if recorder is not None:
            info["shadow"] = shadow_verdicts(recorder.streams(), calls, cfg.rails)
            _say(f"{fabric}: the shadow rebuilt {info['shadow']['identical']} of {info['shadow']['calls']} in-network "
                 "all-reduces bit for bit")
    info["teardown_s"] = round(fab.timings.teardown_s, 2)
    return info


def build_parser() -> argparse.ArgumentParser:
    p = experiment_parser("aggregation", __doc__)
    p.add_argument("--gpus", type=int, default=16, help="GPUs in all (servers x rails)")
    p.add_argument("--rails", type=int, default=4, help="GPUs per server = rails (1: one switch aggregates all)")
    p.add_argument("--rate-mbps", type=positive_float, default=1.0,
                   help="NIC link rate (16 workers' Python clients, at about 30 us a packet, keep 2 cores under the "
                        "60%% fidelity limit at 1; at 2 they reach 60-66%%, at 10 90%%)")
    p.add_argument("--nvlink-factor", type=positive_float, default=8.0,
                   help="in-server (NVLink) bandwidth as a multiple of the NIC rate")
    p.add_argument("--sizes-kb", type=int, nargs="+", default=[256, 1024], help="all-reduce sizes per GPU, KiB")
    p.add_argument("--slots", type=int, default=64, help="the job's slot pool on each switch (its window)")
    p.add_argument("--repetitions", type=int, default=5, help="repetitions of every all-reduce (>= 2 for a spread)")
    p.add_argument("--warmup", type=int, default=1, help="unrecorded rounds of everything first")
    p.add_argument("--spines", type=int, default=2, help="spine switches of the fat-tree baseline")
    p.add_argument("--no-shadow", action="store_true",
                   help="no Checkmate shadow (by default one more server receives a copy of every sum on each rail "
                        "and rebuilds the reduced gradient, checked bit for bit against the workers')")
    p.add_argument("--fabrics", nargs="+", choices=FABRICS, default=list(FABRICS), help="which fabrics to run")
    p.add_argument("--loss-every", type=int, default=50,
                   help="also run the in-network all-reduce with every Nth aggregation packet lost at each "
                        "worker's NIC, both ways (0: not); the kernel here has no netem or iptables to lose it on a link")
    add_common_options(p, "aggregation")
    add_data_path_options(p)
    p.add_argument("--worker-timeout", type=positive_float, default=30.0,
                   help="seconds without progress before an all-reduce fails")
    return p


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    try:
        cfg = ExperimentConfig(gpus=a.gpus, rails=a.rails, rate_mbps=a.rate_mbps, nvlink_factor=a.nvlink_factor,
                               iterations=a.repetitions, warmup=a.warmup, target=a.target, engine=a.engine,
                               spines=a.spines, worker_timeout_s=a.worker_timeout, nvlink=a.nvlink,
                               super_frames=a.super_frames).validate()
        settings = AggregationSettings(sizes_kb=tuple(a.sizes_kb), slots=a.slots, loss_every=a.loss_every).validate()
        # with a shadow, one more server on every rail: the workers are the first cfg.servers
        topos = fabrics_for(cfg if a.no_shadow else dataclasses.replace(cfg, gpus=cfg.gpus + cfg.rails))
        for topo in topos.values():
            check_free(topo)
    except MlfabricError as exc:
        return refuse(exc)
    out = results_folder("aggregation", a.out, _say)
    rows: list[dict] = []
    infos, interrupted = run_units(
        tuple(a.fabrics), lambda fabric, work: run_fabric(fabric, topos[fabric], cfg, settings, work, rows,
                                                   shadow=not a.no_shadow), out, rows, _say)
    if interrupted is not None and not rows:
        write_json(out / "summary.json", {"config": config_json(cfg), "interrupted": interrupted, "runs": infos})
        _say(f"wrote what finished to {out} (marked interrupted)")
        return INTERRUPTED_EXIT
    write_csv(out / "iterations.csv", rows)
    text, verdicts, data = report(cfg, settings, rows, infos)
    write_outcome(out, text, {"config": config_json(cfg), "settings": config_json(settings), **data}, verdicts,
                  interrupted=interrupted, regime=regime_of(cfg, infos))
    plot_aggregation(rows, out / "aggregation.png", judged=verdicts,
                     title=f"in-network aggregation vs ring, {cfg.gpus} GPUs ({cfg.servers}x{cfg.rails}), "
                           f"{cfg.rate_mbps:g} Mbit/s")
    _say(f"wrote {out}/iterations.csv, summary.json, table.txt, aggregation.png")
    return finish(out, interrupted=interrupted, failed=any(not r["ok"] for r in rows), verdicts=verdicts,
                       require_decided=a.require_decided, say=_say)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
