"""The Checkmate experiment's restarts: a worker killed mid-iteration and every worker
restored from the shadow's checkpoint, and every worker restarted from each baseline's
latest checkpoint; each continued run compared with the uninterrupted one."""

from __future__ import annotations

import dataclasses
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

from mlfabric_emulation.checkmate_job import CheckmateJob, train_iteration

from controller.errors import MlfabricError
from controller.experiments.checkmate import (
    MIRROR,
    SYSTEMS,
    CheckmateConfig,
    lost_iterations,
    periodic_checkpoint,
)
from workloads.checkmate.checkpoint import load_checkpoint
from workloads.checkmate.shadow import SHADOW_CHECKPOINT
from workloads.checkmate.trainer import worker_checkpoint
from workloads.checkmate.training import TrainingConfig

__all__ = ["RESUMED_ITERATIONS", "recovery", "resume_from_baselines"]


def _say(msg: str) -> None:
    print(f"[checkmate] {msg}", flush=True)


def recovery(job: CheckmateJob, cfg: CheckmateConfig, work: Path, reference: dict[int, str],
             training: TrainingConfig) -> dict:
    """Kill a worker mid-iteration at a random iteration, restore every worker from the
    shadow's checkpoint, train to the end; compare with the uninterrupted run."""
    rng = random.Random(cfg.seed)
    kill_at = rng.randrange(2, cfg.iterations - 2)
    victim = rng.randrange(job.program.job.layout.world)
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
                   lost={MIRROR: lost_iterations(completed, ck.iteration)},
                   lost_if_synchronous={f"sync k={k}": lost_iterations(completed, periodic_checkpoint(completed, k))
                                        for k in cfg.checkpoint_ks})
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


#: iterations trained after restarting from a baseline's checkpoint
RESUMED_ITERATIONS = 3


def resume_from_baselines(job: CheckmateJob, cfg: CheckmateConfig, urls: dict[str, str], dirs: dict[str, Path],
                          reference: dict[int, str], plain: TrainingConfig) -> dict[str, dict[str, Any]]:
    """Restart every worker from each baseline's latest checkpoint (the store's, or the
    peer's memory for Gemini), which the workers fetch over the fabric, and train a few
    iterations: the run must continue exactly as the uninterrupted one. (Which iteration it
    holds is read from the store's own directory.)"""
    out: dict[str, dict[str, Any]] = {}
    latest = {}
    for mode in SYSTEMS:
        where = "peer" if mode == "gemini" else "store"
        try:
            latest[mode] = load_checkpoint(dirs[where] / worker_checkpoint(mode)).iteration
        except (MlfabricError, OSError) as exc:
            out[mode] = {"error": str(exc)[:200]}
    end = max(latest.values(), default=0) + RESUMED_ITERATIONS
    if end >= cfg.iterations:  # the uninterrupted run, trained on past the experiment's iterations
        with job.workers("workers-reference") as group:
            for it in range(end + 1):
                row = train_iteration(group, plain, it)
                reference[it] = row["digest"] if row["ok"] else ""
    for mode, at in latest.items():
        url = f"{urls['peer' if mode == 'gemini' else 'store']}/{worker_checkpoint(mode)}"
        training = dataclasses.replace(plain, restore=url)
        its = range(at + 1, at + 1 + RESUMED_ITERATIONS)
        same = []
        with job.workers(f"workers-resume-{mode}") as group:
            for it in its:
                row = train_iteration(group, training, it)
                same.append(row["ok"] and row["digest"] == reference.get(it))
        out[mode] = {"checkpoint": at, "iterations": len(same), "identical": bool(same) and all(same)}
        _say(f"restart from {SYSTEMS[mode]}'s latest checkpoint (iteration {at}, {url}): "
             f"{len(same)} iterations, {'identical' if out[mode]['identical'] else 'DIFFERENT'}")
    return out
