"""``mlfabric experiment run collectives``: Open MPI's ``MPI_Allreduce`` and ``MPI_Alltoall``
on rail-only and its fat-tree, next to the project's own collectives and the model.

On each fabric: Open MPI twice through ``mlfabric launch --mpi``'s machinery (one rank per
GPU, each on its rail's NIC), once with its default algorithm choice (recorded from
coll/tuned's decision table) and once forced (a ring allreduce and a pairwise all-to-all by
default), every size of both collectives in one ``mpirun``. Rank 0 hand-shakes each
(collective, size) block with this runner (:class:`workloads.mpi_collectives.Pacer`), so
every block is measured with the fidelity monitors on its own. Then the project's ring and
hierarchical collectives at the same sizes. One results folder: the rows (CSV), the summary
and verdicts (JSON), a text table and a plot.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from mlfabric_emulation.cluster_fabric import ClusterFabric, ClusterSampler, MachinePart
from mlfabric_emulation.cpu_sampler import CpuSampler, fabric_cpu_sampler
from mlfabric_emulation.fabric_net import EmulatedFabric, check_free
from mlfabric_emulation.fabric_workers import path_probe, prepare_hosts, workers
from mlfabric_emulation.switch_engines import engines_text, fabric_engines

from controller.cluster import load_machines
from controller.cluster.placement import place as place_on
from controller.cluster.placement import placement_info, placement_text
from controller.errors import EmulationError, MlfabricError
from controller.experiments.collectives import COLLECTIVES, PROJECT_OPS, CollectivesConfig
from controller.experiments.collectives_report import plot_sizes, report
from controller.experiments.core import (
    FAILED_EXIT,
    INTERRUPTED_EXIT,
    finish,
    refuse,
    results_folder,
    run_units,
    write_outcome,
)
from controller.experiments.cpu_use import breakdown_row, cpu_row
from controller.experiments.fidelity import breaches, undecided_note
from controller.experiments.ompi_tuned import (
    ALGORITHMS,
    check_version,
    default_algorithm,
    forced_mca,
    parse_version,
)
from controller.experiments.options import (
    add_common_options,
    add_data_path_options,
    experiment_parser,
)
from controller.experiments.rail_only import FABRICS, fabrics_for, regime_of
from controller.experiments.results import (
    config_json,
    write_csv,
    write_json,
)
from controller.launch.hosts import HostAccess
from controller.launch.placement import place
from controller.launch.runner import LaunchResult, kill_tagged
from controller.topology.model import Topology
from mlfabric_base.numbers import positive_float


def _say(msg: str) -> None:
    print(f"[collectives] {msg}", flush=True)


class _Mpirun(threading.Thread):
    """One ``mpirun`` of the job in the background; :attr:`result` or :attr:`error` after."""

    def __init__(self, fab: EmulatedFabric, command: list[str], mca: dict[str, str], idle_us: int,
                 log: Path) -> None:
        super().__init__(daemon=True)
        from controller.launch.mpirun import run_mpirun

        self._run = run_mpirun
        live = fab.live
        assert live is not None
        self.placement = place(live, gpus=True)
        self.pids = HostAccess.of(live)  # across machines, each host's machine too
        self.command, self.mca, self.idle_us, self.log = command, mca, idle_us, log
        self.launch_id = uuid.uuid4().hex
        self.result: LaunchResult | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.log.open("w") as out:
                self.result = self._run(self.placement, self.command, self.pids, launch_id=self.launch_id,
                                        mca=self.mca, out=out, idle_us=self.idle_us)
        except BaseException as exc:  # reported by the pacing loop
            self.error = exc

    def stop(self) -> None:
        kill_tagged(self.launch_id)
        self.join(timeout=10)

    def failure(self) -> str:
        if self.error is not None:
            return f"mpirun failed: {self.error}"
        if self.result is not None and self.result.failed_rank is not None:
            slot = self.placement.ranks[self.result.failed_rank]
            return f"rank {self.result.failed_rank} (on {slot.host}, {slot.ifname}, rail {slot.rail}) failed"
        if self.result is not None and self.result.exit_code:
            return f"mpirun exited {self.result.exit_code}"
        return "mpirun ended before this block"


class _PaceFiles:
    """Rank 0's hand-shake files (:class:`workloads.mpi_collectives.Pacer`) in ``folder``: on
    this machine, or, on a fabric across machines, on rank 0's machine through its part
    (``part``), which waits for a file there so that nothing polls over SSH."""

    def __init__(self, folder: Path, part: MachinePart | None = None) -> None:
        self.folder, self.part = folder, part
        if part is not None:
            part.call("make_dirs", path=str(folder))

    def wait(self, name: str, job: _Mpirun, timeout_s: float) -> bool:
        """Until the file exists (True), the job ends or the timeout passes (False)."""
        path = self.folder / name
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if self.part is None:
                if path.exists():
                    return True
                time.sleep(0.005)
            elif self.part.call("wait_file", path=str(path), timeout_s=max(0.0, min(1.0, left))):
                return True
            if not job.is_alive():  # it may have written the file just before it ended
                return path.exists() if self.part is None else bool(
                    self.part.call("wait_file", path=str(path), timeout_s=0.0))
            if left <= 0:
                return False

    def touch(self, name: str) -> None:
        if self.part is None:
            (self.folder / name).touch()
        else:
            self.part.call("touch", path=str(self.folder / name))

    def read_json(self, name: str) -> dict:
        path = self.folder / name
        return json.loads(path.read_text() if self.part is None else self.part.call("read_text", path=str(path)))


def run_open_mpi(fabric: str, fab: EmulatedFabric | ClusterFabric, cfg: CollectivesConfig, run: str,
                 cpu: CpuSampler | ClusterSampler,
                 workdir: Path, out: Path, rows: list[dict]) -> dict:
    """One ``mpirun`` of every size of both collectives: ``run`` is ``default`` or ``forced``;
    Open MPI's own output is kept in ``out``."""
    pace = Path(tempfile.mkdtemp(prefix=f"pace-{fabric}-{run}-", dir=workdir))
    command = [sys.executable, "-m", "workloads.mpi_collectives", "--sizes-kb", *map(str, cfg.sizes_kb),
               "--repetitions", str(cfg.repetitions), "--pace-dir", str(pace)]
    mca = dict(cfg.mca) | ({} if run == "default" else {k: v for c, a in zip(COLLECTIVES, cfg.forced, strict=True)
                                                         for k, v in forced_mca(c, a).items()})
    job = _Mpirun(fab, command, mca, cfg.idle_us, out / f"open-mpi-{fabric}-{run}.log")
    files = _PaceFiles(pace, fab.part_of(job.placement.ranks[0].host) if isinstance(fab, ClusterFabric) else None)
    blocks = [(c, kb) for c in COLLECTIVES for kb in cfg.sizes_kb]
    info: dict = {"mca": mca, "algorithms": {}}
    job.start()
    try:
        for i, (collective, kb) in enumerate(blocks):
            size = kb * 1024
            algorithm = (f"{default_algorithm(collective, cfg.gpus, size)} (default)" if run == "default"
                         else f"{cfg.forced[COLLECTIVES.index(collective)]} (forced)")
            info["algorithms"][f"{collective} {kb} KiB"] = algorithm
            base = {"fabric": fabric, "collective": collective, "bytes": size, "library": "open-mpi",
                    "algorithm": algorithm, "block": f"{fabric}/{run}/{i}"}
            started = time.monotonic()
            if not files.wait(f"ready-{i}.json", job, cfg.timeout_s):
                rows.append({**base, "rep": 0, "ok": False, "seconds": float("nan"), "error": job.failure()})
                _say(f"{fabric}: Open MPI {collective} {kb} KiB FAILED ({job.failure()})")
                break
            with cpu.measure() as used:
                files.touch(f"go-{i}")
                done = files.wait(f"done-{i}.json", job, cfg.timeout_s)
            if not done:
                rows.append({**base, "rep": 0, "ok": False, "seconds": float("nan"), "error": job.failure()})
                _say(f"{fabric}: Open MPI {collective} {kb} KiB FAILED ({job.failure()})")
                break
            result = files.read_json(f"done-{i}.json")
            monitors = {**cpu_row(used[0]), **(cpu.row_fields() if isinstance(cpu, ClusterSampler) else {})}
            for rep, seconds in enumerate(result["times"]):
                rows.append({**base, "rep": rep, "ok": bool(result["exact"]), "seconds": seconds,
                             "error": "" if result["exact"] else "inexact result", **monitors})
            held = "; ".join(b.text() for b in breaches(monitors))
            _say(f"{fabric}: Open MPI {algorithm:<28} {collective:<9} {kb:>5} KiB  median {result['median_s']:.3f} s"
                 f"{'' if result['exact'] else '  INEXACT'}  [{time.monotonic() - started:.1f} s; {used[0].text()}]"
                 + (f"  OVER A FIDELITY LIMIT: {held}" if held else ""))
        job.join(timeout=60)
    finally:
        if job.is_alive():
            job.stop()
    if job.result is not None and job.result.exit_code:
        info["failure"] = job.failure()
    return info


def run_project(fabric: str, fab: EmulatedFabric | ClusterFabric, topo: Topology, cfg: CollectivesConfig,
                cpu: CpuSampler | ClusterSampler, workdir: Path, rows: list[dict]) -> None:
    """The project's collectives at every size: one warm-up, then the repetitions."""
    fcfg = cfg.fabric_config()
    with workers(fab, topo, fcfg, fabric, workdir) as group:
        workers_cpu = cpu.workers_sampler() if isinstance(cpu, ClusterSampler) else CpuSampler(group.pids)
        for kb in cfg.sizes_kb:
            for op, collective, algorithm in PROJECT_OPS[fabric]:
                cmd = {"op": op, "bytes": kb * 1024} | ({"schedule": fcfg.alltoall_schedule} if "alltoall" in op else {})
                group.run({**cmd, "iter": -1}, timeout=fcfg.timeout_s)  # warm-up, not recorded
                times = []
                for rep in range(cfg.repetitions):
                    with cpu.measure() as used, workers_cpu.measure() as by_workers:
                        results = group.run({**cmd, "iter": rep}, timeout=fcfg.timeout_s)
                    ok = bool(results) and all(r.get("ok") for r in results)
                    seconds = max((r.get("seconds") or 0.0) for r in results) if ok else float("nan")
                    rows.append({"fabric": fabric, "collective": collective, "bytes": kb * 1024, "library": "mlfabric",
                                 "algorithm": algorithm, "block": "", "rep": rep, "ok": ok, "seconds": seconds,
                                 "error": "; ".join(sorted({r["error"] for r in results if r.get("error")})),
                                 **cpu_row(used[0]), **breakdown_row(used[0], by_workers[0]),
                                 **(cpu.row_fields() if isinstance(cpu, ClusterSampler) else {})})
                    times.append(seconds)
                good = sorted(t for t in times if t == t)
                _say(f"{fabric}: mlfabric {algorithm:<28} {collective:<9} {kb:>5} KiB  "
                     + (f"median {good[len(good) // 2]:.3f} s" if good else "FAILED"))


def run_fabric(fabric: str, topo: Topology, cfg: CollectivesConfig, workdir: Path, out: Path,
               rows: list[dict]) -> dict:
    _say(f"{fabric}: building {len(topo.switches)} switches, {len(topo.hosts)} servers ({cfg.target} target)")
    info: dict = {}
    fabric_of = (functools.partial(ClusterFabric, machines=load_machines(cfg.cluster),
                                   run_dir=workdir / "logs" / fabric, say=_say) if cfg.cluster else EmulatedFabric)
    with fabric_of(topo, target=cfg.target, engine=cfg.engine, source_routing=(fabric == "fat-tree"),
                   super_frames=cfg.super_frames, log_dir=workdir / "logs" / fabric, publish=False) as fab:
        if isinstance(fab, ClusterFabric):
            info["placement"] = placement_info(fab.placement, fab.machines)
            _say(f"{fabric}: across {placement_text(fab.placement, fab.machines)}")
        info["bring_up_s"] = round(fab.timings.bring_up_s, 2)
        prepare_hosts(fab, topo, cfg.fabric_config())
        info["path"] = path_probe(fab, topo)
        names = [s.name for s in topo.switches]
        info["engines"] = fabric_engines(cfg.target, fab.log_dir, names)
        _say(f"{fabric}: up in {fab.timings.bring_up_s:.1f} s; switches run the {engines_text(info['engines'])}")
        cpu = fab.cpu_sampler() if isinstance(fab, ClusterFabric) else fabric_cpu_sampler(fab, names)
        for run in ("default", "forced"):
            info[f"open-mpi {run}"] = run_open_mpi(fabric, fab, cfg, run, cpu, workdir, out, rows)
        if cfg.project:
            run_project(fabric, fab, topo, cfg, cpu, workdir, rows)
    return info


def build_parser() -> argparse.ArgumentParser:
    d = CollectivesConfig()
    p = experiment_parser("collectives", __doc__)
    p.add_argument("--gpus", type=int, default=d.gpus, help="GPUs (ranks), rails x servers")
    p.add_argument("--rails", type=int, default=d.rails, help="rails (GPUs per server)")
    p.add_argument("--rate-mbps", type=positive_float, default=d.rate_mbps, help="every NIC's rate, Mbit/s")
    p.add_argument("--sizes-kb", type=int, nargs="+", default=list(d.sizes_kb), help="each rank's buffer, KiB")
    p.add_argument("--forced-allreduce", choices=list(ALGORITHMS["allreduce"].values()), default=d.forced[0],
                   help="the allreduce algorithm of the forced Open MPI run")
    p.add_argument("--forced-alltoall", choices=list(ALGORITHMS["alltoall"].values()), default=d.forced[1],
                   help="the all-to-all algorithm of the forced Open MPI run")
    p.add_argument("--no-project", action="store_true", help="skip the project's own collectives")
    p.add_argument("--mpi-idle-us", type=int, default=d.idle_us,
                   help="a waiting Open MPI rank's longest sleep between polls, us (0: spin, as Open MPI does)")
    p.add_argument("--mca", action="append", default=[], metavar="NAME=VALUE",
                   help="an Open MPI MCA parameter for both runs (repeatable), e.g. btl_tcp_eager_limit=8388608")
    p.add_argument("--cluster", type=Path, default=None, metavar="MACHINES",
                   help="spread both fabrics over the machines of this file (docs/cluster.md); mpirun runs in "
                        "rank 0's host on its machine")
    add_common_options(p, "collectives", repetitions=d.repetitions)
    add_data_path_options(p, super_frames=d.super_frames)
    return p


def _installed_open_mpi() -> str | None:
    """The installed Open MPI's version (None: none, or it does not say)."""
    try:
        out = subprocess.run(["ompi_info", "--version"], capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(out.stdout)


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    try:
        cfg = CollectivesConfig(gpus=a.gpus, rails=a.rails, rate_mbps=a.rate_mbps, sizes_kb=tuple(a.sizes_kb),
                                repetitions=a.repetitions, forced=(a.forced_allreduce, a.forced_alltoall),
                                project=not a.no_project, idle_us=a.mpi_idle_us, target=a.target,
                                mca=tuple(tuple(x.split("=", 1)) if "=" in x else (x, "") for x in a.mca),
                                engine=a.engine, nvlink=a.nvlink, super_frames=a.super_frames,
                                cluster=str(a.cluster) if a.cluster else "").validate()
        topos = fabrics_for(cfg.fabric_config(), None)
        if cfg.cluster:  # each machine checks its own interfaces when it builds its part
            machines = load_machines(cfg.cluster)
            for topo in topos.values():
                place_on(topo, machines)
        else:
            for topo in topos.values():
                check_free(topo)
        check_version(_installed_open_mpi())
    except MlfabricError as exc:
        return refuse(exc)
    out = results_folder("collectives", a.out, _say)
    rows: list[dict] = []
    try:
        infos, interrupted = run_units(
            FABRICS, lambda fabric, work: run_fabric(fabric, topos[fabric], cfg, work, out, rows), out, rows, _say)
    except EmulationError as exc:
        print(f"mlfabric: error: {exc}", file=sys.stderr)
        write_csv(out / "iterations.csv", rows)
        return FAILED_EXIT
    write_csv(out / "iterations.csv", rows)
    if interrupted is not None and set(topos) - set(infos):
        write_json(out / "summary.json", {"config": config_json(cfg), "interrupted": interrupted, "runs": infos})
        _say(f"wrote what finished to {out} (marked interrupted)")
        return INTERRUPTED_EXIT
    text, verdicts, data = report(rows, cfg)
    write_outcome(out, text, {"config": config_json(cfg), "runs": infos, **data}, verdicts, interrupted=interrupted,
                  regime=regime_of(cfg.fabric_config(), infos))
    plot_sizes(rows, cfg, out / "collectives.png",
               title=f"Open MPI and mlfabric collectives, {cfg.gpus} GPUs ({cfg.servers}x{cfg.rails}), "
                     f"{cfg.rate_mbps:g} Mbit/s" + undecided_note(verdicts))
    _say(f"wrote {out}/iterations.csv, summary.json, table.txt, collectives.png")
    return finish(out, interrupted=interrupted, failed=any(not r["ok"] for r in rows), verdicts=verdicts,
                       require_decided=a.require_decided, say=_say)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
