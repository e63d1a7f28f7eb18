"""``mlfabric experiment run checkmate``: in-network checkpointing of a real training job.

Builds a rail-only fabric with two more servers than the job uses: the shadow, with one NIC
per rail like a GPU server, and a checkpoint store on its own link (``--storage-mbps``, by
default the link on which persisting a checkpoint takes ``--checkpoint-iterations``
iterations, the regime of the paper's jobs). Installs the job's mirror entries, then:

1. profiles an iteration, a full checkpoint and a snapshot, and tunes CheckFreq's and
   Gemini's checkpoint interval to the overhead budget (``--budget``) as their tuners do
   (:mod:`controller.experiments.checkmate_tuning`);
2. for every repetition, trains the same data-parallel MLP under each configuration: no
   checkpoint, Checkmate, and each baseline (synchronous, CheckFreq to the store, Gemini to
   a peer's memory) at equal frequency and at its tuned one;
3. runs Checkmate once with mirror loss (``--mirror-loss``), and kills a worker at a random
   iteration to restart the job from the shadow's checkpoint.

One results folder: iterations.csv, tuning.csv, replication.csv, summary.json, table.txt,
checkmate.png, frequency.png.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mlfabric_emulation.checkmate_job import CheckmateJob, train_iteration
from mlfabric_emulation.checkmate_report import write_report
from mlfabric_emulation.checkmate_restarts import recovery, resume_from_baselines
from mlfabric_emulation.cpu_sampler import CpuSampler, fabric_cpu_sampler
from mlfabric_emulation.fabric_net import EmulatedFabric, check_free
from mlfabric_emulation.fabric_workers import path_probe
from mlfabric_emulation.switch_engines import engines_text, fabric_engines

from controller.dashboard import journal
from controller.errors import MlfabricError
from controller.experiments.checkmate import (
    MIRROR,
    OFF,
    SYSTEMS,
    CheckmateConfig,
    Configuration,
    configurations,
    fabric,
    loss_configuration,
    peer_host,
    predicted_iteration_s,
    rotation,
    storage_host,
)
from controller.experiments.checkmate_tuning import (
    CHECKFREQ_STEP,
    GEMINI_STEP,
    Tuning,
    checkfreq_first_k,
    gemini_first_k,
    storage_mbps_for,
    sync_k,
    tune,
)
from controller.experiments.core import (
    INTERRUPTED_EXIT,
    finish,
    refuse,
    results_folder,
    run_units,
    write_outcome,
)
from controller.experiments.cpu_use import cpu_row
from controller.experiments.options import add_common_options, experiment_parser
from controller.experiments.regime import from_probe
from controller.experiments.results import (
    write_csv,
)
from controller.mirror import compile_mirror, install_mirror, parse_job, resolve_job
from mlfabric_base.numbers import nonnegative_float, positive_float, unit_fraction
from workloads.checkmate.checkpoint import checkpoint_bytes
from workloads.checkmate.model import ModelSpec, init_params, param_count
from workloads.checkmate.optim import Optimizer, OptimizerSpec


def _say(msg: str) -> None:
    print(f"[checkmate] {msg}", flush=True)


def job_program(cfg: CheckmateConfig, live: Any, session: int = 1) -> Any:
    workers = [{"rank": d * cfg.rails + r, "host": f"s{d}", "rail": r}
               for d in range(cfg.servers) for r in range(cfg.rails)]
    spec = parse_job({"name": "digits", "session": session, "shadow": f"s{cfg.servers}", "ring": "pxn",
                      "port": 7000, "workers": workers}, "<checkmate experiment>")
    return compile_mirror(resolve_job(spec, live))


def _model(cfg: CheckmateConfig) -> ModelSpec:
    return ModelSpec(hidden=cfg.hidden, seed=cfg.seed, batch=cfg.batch)


def state_bytes(cfg: CheckmateConfig) -> int:
    """The bytes of one checkpoint: parameters and optimizer state, as the trainer sends them."""
    spec = _model(cfg)
    params = init_params(spec)
    state = Optimizer(OptimizerSpec(kind=cfg.optimizer, lr=cfg.lr), params.size).state()
    return len(checkpoint_bytes(iteration=0, params=params, optimizer_state=state, meta={"rank": 0}))


def with_regime(cfg: CheckmateConfig) -> CheckmateConfig:
    """``cfg`` with its storage link derived from the regime when not given."""
    if cfg.storage_mbps is not None:
        return cfg
    predicted = predicted_iteration_s(cfg, 4 * param_count(_model(cfg)))
    mbps = storage_mbps_for(state_bytes(cfg), predicted, cfg.checkpoint_iterations)
    return dataclasses.replace(cfg, storage_mbps=round(mbps, 3))


def _training(job: CheckmateJob, cfg: CheckmateConfig, conf: Configuration, urls: dict[str, str]) -> Any:
    return job.training(model=_model(cfg), optimizer=OptimizerSpec(kind=cfg.optimizer, lr=cfg.lr),
                        mirror=conf.mirror, checkpoint_every=conf.checkpoint_every, checkpoint_mode=conf.mode,
                        checkpoint_dir=(urls["peer"] if conf.mode == "gemini" else urls["store"])
                        if conf.checkpoint_every else "",
                        compute_s=cfg.compute_ms / 1000)


STORE_PORT = 7600
#: the shadow stands for the paper's separate CPU cluster: on this machine it runs at the
#: lowest priority, so it takes the cores the workers and switches leave idle, not theirs
SHADOW_NICENESS = 19


@contextlib.contextmanager
def checkpoint_store(fab: EmulatedFabric, host: str, directory: Path) -> Iterator[str]:
    """A checkpoint store running in ``host`` for the ``with`` body, keeping its checkpoints
    in ``directory`` (a tmpfs one for a peer's memory); yields its URL on the host's first NIC."""
    proc = fab.host(host).popen([sys.executable, "-m", "workloads.checkmate.storage", "--dir", str(directory),
                                 "--port", str(STORE_PORT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline() if proc.stdout is not None else b""
        if not line.startswith(b"READY"):
            err = proc.stderr.read().decode(errors="replace")[-300:] if proc.stderr is not None else ""
            raise MlfabricError(f"the checkpoint store on {host} did not start: {err or line!r}")
        yield f"http://{fab.topo.host(host).nics[0].address}:{STORE_PORT}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _run(job: CheckmateJob, cfg: CheckmateConfig, conf: Configuration, rep: int | str, urls: dict[str, str],
         rows: list[dict], cpu: CpuSampler, work: Path, iterations: int | None = None) -> list[dict] | None:
    """Train ``conf`` for ``iterations`` (default: the run's) with fresh workers, appending a
    row per iteration to ``rows``; the shadow's events when it mirrors."""
    training = _training(job, cfg, conf, urls)
    iterations = iterations or cfg.iterations
    with contextlib.ExitStack() as stack:
        shadow = None
        if conf.mirror:
            seed = cfg.seed + (rep if isinstance(rep, int) else 0)
            shadow = stack.enter_context(job.shadow(training, drop_rate=conf.mirror_loss, drop_seed=seed,
                                                    report=work / f"shadow-{rep}-{len(rows)}.jsonl",
                                                    niceness=SHADOW_NICENESS))
        group = stack.enter_context(job.workers(f"workers-{rep}"))
        t0 = time.monotonic()
        block: list[dict] = []

        def iterate(its: range) -> bool:
            for it in its:
                row = {"config": conf.name, "rep": rep, **train_iteration(group, training, it)}
                rows.append(row)
                block.append(row)
                journal.record("checkmate", config=conf.name, rep=rep, iteration=it, of=iterations, ok=row["ok"],
                               mirrored=conf.mirror)
                if not row["ok"]:
                    _say(f"{conf.name} rep {rep}: iteration {it} FAILED: {row['error'][:120]}")
                    return False
            return True

        # iteration 0 starts the workers' trainers (imports, the data set, connections): it is
        # left out of the timings, and out of the CPU measurement, which would see only that
        used: list[Any] = []
        if iterate(range(1)):
            with cpu.measure() as used:
                iterate(range(1, iterations))
        for row in block if used else ():  # the block's CPU use on each of its iterations' rows
            row.update(cpu_row(used[0]))
        if shadow is not None:
            shadow.wait_applied(iterations - 1, timeout_s=10)
    events = shadow.events() if shadow is not None else None  # after it stopped: with its counters
    if events is not None:
        journal.record("shadow", config=conf.name, rep=rep, iterations=iterations,
                       applied=len({e["iteration"] for e in events if e.get("event") == "applied"}),
                       resyncs=sum(1 for e in events if e.get("event") == "resync"))
    ok = [r for r in block if r["ok"]]
    mean = sum(r["seconds"] for r in ok[1:]) / max(1, len(ok) - 1)
    _say(f"rep {rep} {conf.name:<16} {len(ok)} iterations, mean {mean * 1000:.1f} ms, "
         f"loss {ok[0]['loss']:.3f} -> {ok[-1]['loss']:.3f} [{time.monotonic() - t0:.1f} s wall"
         + (f"; {used[0].text()}]" if used else "]")
         if ok else
         f"rep {rep} {conf.name}: no iteration completed")
    return events


def _mean_s(rows: list[dict]) -> float:
    ts = [r["seconds"] for r in rows if r["ok"] and r["iteration"] > 0]
    if not ts:
        raise MlfabricError("profiling: no iteration completed")
    return statistics.fmean(ts)


def _tune(job: CheckmateJob, cfg: CheckmateConfig, urls: dict[str, str], cpu: CpuSampler, work: Path,
          rows: list[dict], info: dict[str, Any]) -> dict[str, Tuning]:
    """Profile as the baselines' tuners do, then tune each to the budget against measurement:
    an iteration without checkpoints, a full synchronous checkpoint (CheckFreq's t_f), the
    snapshot's stall (t_s, its first checkpoint's, with nothing in flight) and the compute
    phase's idle span (Gemini's)."""
    def block(conf: Configuration, iterations: int | None = None) -> list[dict]:
        before = len(rows)
        _run(job, cfg, conf, "tune", urls, rows, cpu, work, iterations)
        return rows[before:]

    base = block(Configuration(OFF, False, 0))
    iteration_s = _mean_s(base)
    idle_s = statistics.median(r["compute_s"] for r in base if r["ok"])
    short = max(5, min(cfg.iterations, 8))
    full_s = statistics.median(r["checkpoint_s"] for r in block(Configuration("sync k=1", False, 1, "sync"), short)
                               if r["ok"])
    snapshot_s = next(r["checkpoint_s"] for r in block(Configuration("checkfreq k=1", False, 1, "checkfreq"), short)
                      if r["ok"])
    size = state_bytes(cfg)
    info["profile"] = {"iteration_s": iteration_s, "idle_s": idle_s, "checkpoint_s": full_s,
                       "snapshot_s": snapshot_s, "state_bytes": size,
                       "checkpoint_iterations": full_s / iteration_s}
    _say(f"profile: iteration {iteration_s * 1000:.1f} ms (compute {idle_s * 1000:.1f} ms, the network idle), "
         f"checkpoint of {size} B persisted in {full_s * 1000:.0f} ms = {full_s / iteration_s:.1f} iterations, "
         f"snapshot {snapshot_s * 1000:.1f} ms")

    def measure(mode: str) -> Any:
        def overhead_at(k: int) -> float:
            over = _mean_s(block(Configuration(f"{mode} k={k}", False, k, mode))) / iteration_s - 1
            _say(f"tuning {SYSTEMS[mode]}: every {k} iteration(s) costs {100 * over:+.1f}% "
                 f"(budget {100 * cfg.budget:g}%)")
            return over
        return overhead_at

    first = {"checkfreq": checkfreq_first_k(iteration_s, full_s, snapshot_s),
             "gemini": gemini_first_k(size, idle_s, cfg.rate_mbps)}
    steps = {"checkfreq": CHECKFREQ_STEP, "gemini": GEMINI_STEP}
    tuned = {mode: tune(mode, first[mode], steps[mode], measure(mode), cfg.budget, cfg.tune_rounds)
             for mode in first}
    info["sync_k"] = sync_k(full_s, iteration_s, cfg.budget)
    for t in tuned.values():
        _say(f"tuned {SYSTEMS[t.system]}: every {t.k} iteration(s)"
             + ("" if t.within_budget else f", still over the budget after {len(t.rounds)} rounds"))
    return tuned


def build_parser() -> argparse.ArgumentParser:
    d = CheckmateConfig()  # the defaults are the configuration's, written once
    p = experiment_parser("checkmate", __doc__)
    p.add_argument("--servers", type=int, default=d.servers,
                   help="worker servers (the shadow is one more, the checkpoint store another)")
    p.add_argument("--storage-mbps", type=positive_float, default=None,
                   help="the checkpoint store's link (default: derived from --checkpoint-iterations)")
    p.add_argument("--checkpoint-iterations", type=positive_float, default=d.checkpoint_iterations,
                   help="the regime: persisting a checkpoint to the store takes this many iterations "
                        "(sets the store's link unless --storage-mbps is given)")
    p.add_argument("--budget", type=unit_fraction, default=d.budget,
                   help="the overhead budget to which CheckFreq's and Gemini's frequency is tuned (0.05: 5%%)")
    p.add_argument("--tune-rounds", type=int, default=d.tune_rounds, help="tuning rounds per system at most")
    p.add_argument("--rails", type=int, default=d.rails, help="GPUs per server = rails")
    p.add_argument("--rate-mbps", type=positive_float, default=d.rate_mbps, help="NIC link rate")
    p.add_argument("--iterations", type=int, default=d.iterations, help="training iterations per run")
    p.add_argument("--hidden", type=int, default=d.hidden, help="hidden units of the MLP")
    p.add_argument("--batch", type=int, default=d.batch, help="global batch")
    p.add_argument("--optimizer", choices=("sgd", "adam"), default=d.optimizer, help="the training optimizer")
    p.add_argument("--lr", type=positive_float, default=d.lr, help="learning rate")
    p.add_argument("--compute-ms", type=nonnegative_float, default=d.compute_ms,
                   help="emulated accelerator time per iteration (the network is idle meanwhile)")
    p.add_argument("--checkpoint-every", type=int, nargs="+", default=list(d.checkpoint_ks),
                   help="the baselines' intervals compared at equal frequency (their tuned ones are added)")
    p.add_argument("--mirror-loss", type=unit_fraction, default=d.mirror_loss,
                   help="loss on the mirror path in one extra Checkmate run (0: no such run)")
    p.add_argument("--no-tuning", action="store_true", help="skip profiling and tuning the baselines")
    p.add_argument("--no-recovery", action="store_true", help="skip the kill-and-restore run")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of the model, the data and the loss injection")
    add_common_options(p, "checkmate", repetitions=d.repetitions)
    return p


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    try:
        cfg = with_regime(CheckmateConfig(
            servers=a.servers, rails=a.rails, rate_mbps=a.rate_mbps, iterations=a.iterations,
            repetitions=a.repetitions, hidden=a.hidden, batch=a.batch, optimizer=a.optimizer, lr=a.lr,
            compute_ms=a.compute_ms, checkpoint_ks=tuple(a.checkpoint_every), target=a.target, engine=a.engine,
            mirror_loss=a.mirror_loss, seed=a.seed, recovery=not a.no_recovery, storage_mbps=a.storage_mbps,
            checkpoint_iterations=a.checkpoint_iterations, budget=a.budget, tune_rounds=a.tune_rounds,
            tune=not a.no_tuning).validate())
        check_free(fabric(cfg))  # before the results folder: a run refused for a busy machine leaves nothing
    except MlfabricError as exc:
        return refuse(exc)
    out = results_folder("checkmate", a.out, _say)
    run = _Run()
    _, interrupted = run_units(["checkmate"], lambda _unit, _work: _experiment(cfg, fabric(cfg), out, run),
                               out, run.rows, _say)
    if interrupted is not None:
        run.info["interrupted"] = interrupted
    if not run.rows:
        _say("nothing finished: no results written")
        return INTERRUPTED_EXIT
    text, summary, judged = write_report(cfg, run.rows, run.tuning_rows, run.events, run.loss_events, run.tuned,
                                         run.recovery, run.info, out)
    write_outcome(out, text, summary, judged, interrupted=interrupted,
                  regime=from_probe(run.info.get("path"), nic_mbps=cfg.rate_mbps, mtu=fabric(cfg).mtu,
                                    compute_ms=cfg.compute_ms))
    _say(f"wrote {out}/iterations.csv, replication.csv, summary.json, table.txt, checkmate.png"
         + (", tuning.csv, frequency.png" if run.tuned else ""))
    return finish(out, interrupted=interrupted, failed=not all(r["ok"] for r in run.rows + run.tuning_rows),
                       verdicts=judged, require_decided=a.require_decided, say=_say)


@dataclasses.dataclass
class _Run:
    """What a run has gathered so far: kept when a signal stops it."""

    rows: list[dict] = dataclasses.field(default_factory=list)
    tuning_rows: list[dict] = dataclasses.field(default_factory=list)
    events: dict[int, list[dict]] = dataclasses.field(default_factory=dict)
    loss_events: list[dict] | None = None
    tuned: dict[str, Tuning] = dataclasses.field(default_factory=dict)
    recovery: dict | None = None
    info: dict[str, Any] = dataclasses.field(default_factory=dict)


def _experiment(cfg: CheckmateConfig, topo: Any, out: Path, run: _Run) -> None:
    """Everything that runs inside the emulation; fills ``run``."""
    info = run.info
    with tempfile.TemporaryDirectory(prefix="mlfabric-checkmate-") as tmp, \
            tempfile.TemporaryDirectory(prefix="mlfabric-gemini-", dir=_memory_dir()) as peer_memory:
        work = Path(tmp)
        with EmulatedFabric(topo, target=cfg.target, engine=cfg.engine, log_dir=work / "logs") as fab:
            info["path"] = path_probe(fab, topo)
            program = job_program(cfg, fab.live)
            switches = install_mirror(program)
            _say(f"fabric up in {fab.timings.bring_up_s:.1f} s ({cfg.target} target); mirror entries on "
                 f"{', '.join(switches)}; mirrored legs: "
                 + ", ".join(f"{lg.leg.sender}->{lg.leg.receiver} ({len(lg.leg.steps)} sends)" for lg in program.legs))
            job = CheckmateJob(fab, program, work, worker_timeout_s=cfg.worker_timeout_s)
            names = [s.name for s in topo.switches]
            info["engines"] = fabric_engines(cfg.target, fab.log_dir, names)
            _say(f"switches run the {engines_text(info['engines'])}")
            cpu = fabric_cpu_sampler(fab, names)
            info.update(params=param_count(_model(cfg)), bring_up_s=round(fab.timings.bring_up_s, 2))
            info["model_bytes"] = 4 * info["params"]
            with checkpoint_store(fab, storage_host(cfg), work / "store") as store, \
                    checkpoint_store(fab, peer_host(cfg), Path(peer_memory)) as peer:
                urls = {"store": store, "peer": peer}
                _say(f"checkpoint store on {storage_host(cfg)} ({store}), its link at {cfg.storage_mbps:g} Mb/s; "
                     f"Gemini's peer memory on {peer_host(cfg)} ({peer})")
                if cfg.tune:
                    run.tuned.update(_tune(job, cfg, urls, cpu, work, run.tuning_rows, info))
                configs = configurations(cfg, {m: t.k for m, t in run.tuned.items()})
                for rep in range(cfg.repetitions):
                    for conf in rotation(configs, rep):
                        events = _run(job, cfg, conf, rep, urls, run.rows, cpu, work)
                        if events is not None:
                            run.events[rep] = events
                    write_csv(out / "iterations.csv", run.rows)
                lossy = loss_configuration(cfg)
                if lossy is not None:
                    run.loss_events = _run(job, cfg, lossy, 0, urls, run.rows, cpu, work)
                if cfg.recovery:
                    reference: dict[int, str] = {r["iteration"]: r["digest"] for r in run.rows
                                 if r["config"] == OFF and r["rep"] == 0 and r["ok"]}
                    run.recovery = recovery(job, cfg, work, reference,
                                            _training(job, cfg, Configuration(MIRROR, True, 0), urls))
                    dirs = {"store": work / "store", "peer": Path(peer_memory)}
                    run.info["resumes"] = resume_from_baselines(
                        job, cfg, urls, dirs, reference, _training(job, cfg, Configuration(OFF, False, 0), urls))


def _memory_dir() -> str | None:
    """Where a peer keeps checkpoints in memory: tmpfs, when the machine has it."""
    return "/dev/shm" if Path("/dev/shm").is_dir() and shutil.disk_usage("/dev/shm").free > 64 << 20 else None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
