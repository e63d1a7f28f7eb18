"""``mlfabric experiment run checkmate``: in-network checkpointing of a real training job.

Builds a rail-only fabric with two more servers than the job uses: the shadow, with one NIC
per rail like a GPU server, and a checkpoint store on its own link (``--storage-mbps``).
Installs the job's mirror entries, then, for every repetition, trains the same
data-parallel MLP under each configuration (no checkpoint, Checkmate, a worker checkpoint
every k iterations, persisted to the store over the fabric). Then a worker is killed at a random iteration and
the job restarts from the shadow's checkpoint. One results folder: iterations.csv,
replication.csv, summary.json, table.txt, checkmate.png.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from checkmate_job import CheckmateJob, train_iteration
from cpu_sampler import CpuSampler, fabric_cpu_sampler
from fabric_net import EmulatedFabric, check_free
from switch_engines import engines_text, fabric_engines

from controller.cli.output import format_table
from controller.errors import MlfabricError
from controller.experiments.checkmate import (
    MIRROR,
    OFF,
    CheckmateConfig,
    Configuration,
    claims,
    configurations,
    fabric,
    lost_iterations,
    overhead,
    periodic_checkpoint,
    replication,
    rotation,
    storage_host,
)
from controller.experiments.checkmate_plots import plot_checkmate
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
    stopped_by,
    write_csv,
    write_json,
)
from controller.mirror import compile_mirror, install_mirror, parse_job, resolve_job
from workloads.checkmate.checkpoint import load_checkpoint
from workloads.checkmate.model import ModelSpec
from workloads.checkmate.optim import OptimizerSpec
from workloads.checkmate.shadow import SHADOW_CHECKPOINT


def _say(msg: str) -> None:
    print(f"[checkmate] {msg}", flush=True)


def job_program(cfg: CheckmateConfig, live: Any, session: int = 1) -> Any:
    workers = [{"rank": d * cfg.rails + r, "host": f"s{d}", "rail": r}
               for d in range(cfg.servers) for r in range(cfg.rails)]
    spec = parse_job({"name": "digits", "session": session, "shadow": f"s{cfg.servers}", "ring": "pxn",
                      "port": 7000, "workers": workers}, "<checkmate experiment>")
    return compile_mirror(resolve_job(spec, live))


def _training(job: CheckmateJob, cfg: CheckmateConfig, conf: Configuration, store: str) -> Any:
    return job.training(model=ModelSpec(hidden=cfg.hidden, seed=cfg.seed, batch=cfg.batch),
                        optimizer=OptimizerSpec(kind=cfg.optimizer, lr=cfg.lr), mirror=conf.mirror,
                        checkpoint_every=conf.checkpoint_every, checkpoint_mode=conf.mode,
                        checkpoint_dir=store if conf.checkpoint_every else "",
                        compute_s=cfg.compute_ms / 1000)


STORE_PORT = 7600


@contextlib.contextmanager
def checkpoint_store(fab: EmulatedFabric, cfg: CheckmateConfig, directory: Path) -> Iterator[str]:
    """The checkpoint store running in its host for the ``with`` body; yields its URL."""
    host = storage_host(cfg)
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


def _run(job: CheckmateJob, cfg: CheckmateConfig, conf: Configuration, rep: int, store: str,
         rows: list[dict], shadow_events: dict[int, list[dict]], cpu: CpuSampler, work: Path) -> None:
    training = _training(job, cfg, conf, store)
    with contextlib.ExitStack() as stack:
        shadow = None
        if conf.mirror:
            shadow = stack.enter_context(job.shadow(training, drop_rate=cfg.loss_rate, drop_seed=cfg.seed + rep,
                                                    report=work / f"shadow-{rep}.jsonl"))
        group = stack.enter_context(job.workers(f"workers-{rep}"))
        t0 = time.monotonic()
        block: list[dict] = []
        with cpu.measure() as used:
            for it in range(cfg.iterations):
                row = {"config": conf.name, "rep": rep, **train_iteration(group, training, it)}
                rows.append(row)
                block.append(row)
                if not row["ok"]:
                    _say(f"{conf.name} rep {rep}: iteration {it} FAILED: {row['error'][:120]}")
                    break
        for row in block:  # the block's CPU use on each of its iterations' rows
            row.update(cpu_row(used[0]))
        if shadow is not None:
            shadow.wait_applied(cfg.iterations - 1, timeout_s=10)
    if shadow is not None:
        shadow_events[rep] = shadow.events()  # after it stopped: with its counters
    ok = [r for r in rows if r["config"] == conf.name and r["rep"] == rep and r["ok"]]
    mean = sum(r["seconds"] for r in ok[1:]) / max(1, len(ok) - 1)
    _say(f"rep {rep} {conf.name:<16} {len(ok)} iterations, mean {mean * 1000:.1f} ms, "
         f"loss {ok[0]['loss']:.3f} -> {ok[-1]['loss']:.3f} [{time.monotonic() - t0:.1f} s wall; {used[0].text()}]"
         if ok else
         f"rep {rep} {conf.name}: no iteration completed")


def _recovery(job: CheckmateJob, cfg: CheckmateConfig, work: Path, reference: dict[int, str]) -> dict:
    """Kill a worker mid-iteration at a random iteration, restore every worker from the
    shadow's checkpoint, train to the end; compare with the uninterrupted run."""
    rng = random.Random(cfg.seed)
    kill_at = rng.randrange(2, cfg.iterations - 2)
    victim = rng.randrange(job.program.job.layout.world)
    conf = Configuration(MIRROR, True, 0)
    training = _training(job, cfg, conf, work)
    out: dict[str, Any] = {"kill_iteration": kill_at, "victim_rank": victim}
    with job.shadow(training, report=work / "shadow-recovery.jsonl") as shadow:
        with job.workers("workers-recovery") as group:
            for it in range(kill_at):
                row = train_iteration(group, training, it)
                if not row["ok"]:
                    raise MlfabricError(f"recovery run: iteration {it} failed: {row['error']}")
            completed = kill_at - 1
            delay = rng.uniform(0.005, 0.03)

            def kill() -> None:
                time.sleep(delay)
                group.kill(victim, signal.SIGKILL)

            killer = threading.Thread(target=kill)
            killer.start()
            row = train_iteration(group, training, kill_at, timeout_s=30)
            killer.join()
            if row["ok"]:
                completed = kill_at  # the kill came after the iteration finished
            _say(f"recovery: killed rank {victim} during iteration {kill_at} "
                 f"({'it failed' if not row['ok'] else 'it had finished'})")
        shadow.wait_applied(completed, timeout_s=10)
        ckpt_path = job.shadow_dir / SHADOW_CHECKPOINT
        ck = load_checkpoint(ckpt_path)
        out.update(completed=completed, shadow_checkpoint=ck.iteration,
                   lost={MIRROR: lost_iterations(completed, ck.iteration),
                         **{f"{mode} k={k}": lost_iterations(completed, periodic_checkpoint(completed, k))
                            for mode in ("sync", "checkfreq")
                            for k in cfg.checkpoint_ks}})
        _say(f"recovery: shadow checkpoint at iteration {ck.iteration}; restarting every worker from it")
        restored = dataclasses.replace(training, restore=str(ckpt_path))
        t0 = time.monotonic()
        mismatches = []
        with job.workers("workers-restored") as group:
            for it in range(ck.iteration + 1, cfg.iterations):
                row = train_iteration(group, restored, it)
                if not row["ok"]:
                    raise MlfabricError(f"restored run: iteration {it} failed: {row['error']}")
                if reference.get(it) and row["digest"] != reference[it]:
                    mismatches.append(it)
        shadow.wait_applied(cfg.iterations - 1, timeout_s=10)
        out.update(restart_s=round(time.monotonic() - t0, 2), resumed_at=ck.iteration + 1,
                   digest_mismatches_after_restore=mismatches,
                   shadow_final=next((e["digest"] for e in reversed(shadow.events())
                                      if e["event"] in ("applied", "resync")), ""))
    out["matches_uninterrupted_run"] = not mismatches and out["shadow_final"] == reference.get(cfg.iterations - 1)
    return out


def _report(cfg: CheckmateConfig, rows: list[dict], events: dict[int, list[dict]],
            recovery: dict | None, info: dict, out: Path) -> tuple[str, list[Verdict]]:
    configs = configurations(cfg)
    write_csv(out / "iterations.csv", rows)
    summary: dict[str, Any] = {"config": config_json(cfg), "overhead": overhead(rows, configs), **info}
    rep_rows = []
    for rep in sorted(events):
        rep_rows += [{"rep": rep, **r} for r in replication(rows, events[rep], rep)]
    write_csv(out / "replication.csv", rep_rows)
    holes = sum(1 for evs in events.values() for e in evs if e["event"] == "hole")
    summary["replication"] = {"iterations": len(rep_rows), "matched": sum(r["match"] for r in rep_rows),
                              "mirrored": sum(r["how"] == "mirrored" for r in rep_rows),
                              "resynced": sum(r["how"] == "resynced" for r in rep_rows), "holes": holes}
    applied = [e for evs in events.values() for e in evs if e["event"] == "applied"]
    stopped = [e for evs in events.values() for e in evs if e["event"] == "stopped"]
    summary["mirrored_bytes"] = {
        "model_bytes": info["model_bytes"],
        "frame_bytes_per_iteration": (sum(e["frame_bytes"] for e in applied) / len(applied)) if applied else None,
        "wire_bytes_per_iteration": (sum(e["wire_bytes"] for e in stopped) /
                                     max(1, sum(e["applied"] for e in stopped))) if stopped else None,
    }
    writes = sorted(r["checkpoint_s"] for r in rows if r.get("ok") and r.get("checkpoint_s"))
    summary["worker_checkpoint_ms"] = 1000 * writes[len(writes) // 2] if writes else None
    summary["recovery"] = recovery
    summary["cpu"] = cpu_summary(rows)
    summary["claims"] = claims(summary)
    judged = verdicts(rows, summary["overhead"])
    summary["fidelity"] = verdicts_json(judged)
    write_json(out / "summary.json", summary)
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
             f"on load_digits, {cfg.optimizer}, {cfg.iterations} iterations x {cfg.repetitions} repetitions",
             "", format_table(over_rows), "",
             f"replication: {rp['matched']}/{rp['iterations']} iterations bit-identical "
             f"({rp['mirrored']} from the mirrored gradient, {rp['resynced']} resynced, {rp['holes']} holes)",
             f"every configuration ends with the same parameters: {'yes' if len(digests) == 1 else 'NO'}",
             f"mirrored per iteration: {mb['frame_bytes_per_iteration']:.0f} B of frames, "
             f"{mb['wire_bytes_per_iteration']:.0f} B on the wire; model {mb['model_bytes']} B"
             if mb["frame_bytes_per_iteration"] else "mirrored per iteration: -"]
    if summary["worker_checkpoint_ms"] is not None:
        lines.append(f"a worker checkpoint (rank 0, {info['model_bytes']} B of parameters plus optimizer state, "
                     f"fsync'd) takes {summary['worker_checkpoint_ms']:.1f} ms (median)")
    engines = f" ({engines_text(info['engines'])})" if info.get("engines") else ""
    lines.append(f"switch CPU{engines}: {cpu_verdict(summary['cpu'])}")
    lines += fidelity_lines(judged)
    if info.get("interrupted"):
        lines.append(f"INTERRUPTED: {info['interrupted']}")
    if recovery:
        lines += ["", f"recovery: rank {recovery['victim_rank']} killed in iteration {recovery['kill_iteration']}; "
                      f"shadow checkpoint {recovery['shadow_checkpoint']}, resumed at {recovery['resumed_at']}; "
                      f"continued run identical to the uninterrupted one: "
                      f"{'yes' if recovery['matches_uninterrupted_run'] else 'NO'}",
                  format_table([{"configuration": k, "iterations lost": v} for k, v in recovery["lost"].items()])]
    lines += ["", "paper (Checkmate, NSDI'26) vs this run:", format_table(summary["claims"])]
    text = "\n".join(lines)
    (out / "table.txt").write_text(text + "\n")
    summary["replication_rows"] = rep_rows
    plot_checkmate(rows, summary, out / "checkmate.png",
                   title=f"Checkmate on a rail-only fabric: {cfg.world} workers, {cfg.target} target"
                         + undecided_note(judged))
    return text, judged


def verdicts(rows: list[dict], overheads: list[dict[str, Any]]) -> list[Verdict]:
    """Each configuration's overhead against training without checkpoints, judged on the
    blocks of iterations of both (one interval per block: its rows share its CPU use)."""
    blocks = {(r["config"], r["rep"]): r for r in rows}
    out = []
    for o in overheads:
        if o["config"] == OFF:
            continue
        ci = o["ratio_ci95"]
        finding = (f"x{ci[0]:.3f} [{ci[1]:.3f}, {ci[2]:.3f}] the iteration time without checkpoints" if ci
                   else f"x{o['ratio']:.3f} the iteration time without checkpoints" if o["ratio"]
                   else "no run to compare")
        measured = [r for (config, _), r in blocks.items() if config in (o["config"], OFF)]
        out.append(judge(f"{o['config']} overhead", finding, measured))
    return out


def build_parser() -> argparse.ArgumentParser:
    p = experiment_parser("checkmate", __doc__)
    p.add_argument("--servers", type=int, default=4,
                   help="worker servers (the shadow is one more, the checkpoint store another)")
    p.add_argument("--storage-mbps", type=float, default=None,
                   help="the checkpoint store's link (default: the NICs' rate); the periodic baseline persists there")
    p.add_argument("--rails", type=int, default=2, help="GPUs per server = rails")
    p.add_argument("--rate-mbps", type=float, default=100.0, help="NIC link rate")
    p.add_argument("--iterations", type=int, default=30, help="training iterations per run")
    p.add_argument("--hidden", type=int, default=256, help="hidden units of the MLP")
    p.add_argument("--batch", type=int, default=64, help="global batch")
    p.add_argument("--optimizer", choices=("sgd", "adam"), default="adam", help="the training optimizer")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate")
    p.add_argument("--compute-ms", type=float, default=20.0, help="emulated accelerator time per iteration")
    p.add_argument("--checkpoint-every", type=int, nargs="+", default=[1, 10, 50],
                   help="the periodic baseline's k values")
    p.add_argument("--loss-rate", type=float, default=0.0, help="inject loss on the mirror path")
    p.add_argument("--no-recovery", action="store_true", help="skip the kill-and-restore run")
    p.add_argument("--seed", type=int, default=1, help="seed of the model, the data and the loss injection")
    add_common_options(p, "checkmate", repetitions=5)
    return p


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    try:
        cfg = CheckmateConfig(servers=a.servers, rails=a.rails, rate_mbps=a.rate_mbps, iterations=a.iterations,
                              repetitions=a.repetitions, hidden=a.hidden, batch=a.batch, optimizer=a.optimizer,
                              lr=a.lr, compute_ms=a.compute_ms, checkpoint_ks=tuple(a.checkpoint_every),
                              target=a.target, engine=a.engine, loss_rate=a.loss_rate, seed=a.seed,
                              recovery=not a.no_recovery, storage_mbps=a.storage_mbps).validate()
    except MlfabricError as exc:
        print(f"mlfabric: error: {exc}", file=sys.stderr)
        return 2
    try:  # before the results folder: a run refused for a busy machine leaves nothing
        check_free(fabric(cfg))
    except MlfabricError as exc:
        print(f"mlfabric: error: {exc}", file=sys.stderr)
        return 2
    out = a.out or new_results_dir("checkmate")
    out.mkdir(parents=True, exist_ok=True)
    _say(f"results folder: {out}")
    topo = fabric(cfg)
    rows: list[dict] = []
    events: dict[int, list[dict]] = {}
    recovery = None
    info: dict[str, Any] = {}
    try:
        with interrupt_on_signals():
            recovery = _experiment(cfg, topo, out, rows, events, info)
    except KeyboardInterrupt as exc:
        info["interrupted"] = f"stopped by {stopped_by(exc)} after {len(rows)} iterations; the emulation was torn down"
        _say(info["interrupted"])
    if not rows:
        _say("nothing finished: no results written")
        return 130
    text, judged = _report(cfg, rows, events, recovery, info, out)
    print()
    print(text)
    print()
    _say(f"wrote {out}/iterations.csv, replication.csv, summary.json, table.txt, checkmate.png")
    if "interrupted" in info:
        return 130
    if not all(r["ok"] for r in rows):
        return 1
    return UNDECIDED_EXIT if a.require_decided and not all(v.decided for v in judged) else 0


def _experiment(cfg: CheckmateConfig, topo: Any, out: Path, rows: list[dict], events: dict[int, list[dict]],
                info: dict[str, Any]) -> dict | None:
    """Everything that runs inside the emulation; fills ``rows``, ``events`` and ``info``."""
    recovery = None
    with tempfile.TemporaryDirectory(prefix="mlfabric-checkmate-") as tmp:
        work = Path(tmp)
        with EmulatedFabric(topo, target=cfg.target, engine=cfg.engine, log_dir=work / "logs") as fab:
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
            from workloads.checkmate.model import param_count

            info.update(params=param_count(ModelSpec(hidden=cfg.hidden, seed=cfg.seed, batch=cfg.batch)),
                        bring_up_s=round(fab.timings.bring_up_s, 2))
            info["model_bytes"] = 4 * info["params"]
            configs = configurations(cfg)
            with checkpoint_store(fab, cfg, work / "store") as store:
                _say(f"checkpoint store on {storage_host(cfg)} ({store}), its link at "
                     f"{cfg.storage_mbps or cfg.rate_mbps:g} Mb/s")
                for rep in range(cfg.repetitions):
                    for conf in rotation(configs, rep):
                        _run(job, cfg, conf, rep, store, rows, events, cpu, work)
                    write_csv(out / "iterations.csv", rows)
            if cfg.recovery:
                reference = {r["iteration"]: r["digest"] for r in rows
                             if r["config"] == configs[0].name and r["rep"] == 0 and r["ok"]}
                recovery = _recovery(job, cfg, work, reference)
    return recovery


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
