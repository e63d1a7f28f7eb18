"""One data-parallel worker of a Checkmate job: a real model, real data, the ring all-reduce.

Each iteration: a barrier, the local gradient on this rank's shard of the global batch (plus
emulated accelerator time), the ring all-reduce of the gradient, whose mirrored all-gather
sends go over their tagged legs (:mod:`workloads.checkmate.mirror_links`), and the optimizer
step on the summed gradient. Rank 0 publishes its state for the shadow's side channel and,
as the periodic baseline, writes a synchronous checkpoint every k iterations.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from workloads.checkmate import storage
from workloads.checkmate.capture_plan import capture_plan
from workloads.checkmate.checkpoint import (
    checkpoint_bytes,
    load_checkpoint,
    load_checkpoint_bytes,
    save_checkpoint,
)
from workloads.checkmate.gemini import PeerCheckpointer
from workloads.checkmate.mirror_links import connect_mirror_legs
from workloads.checkmate.model import (
    batch_indices,
    check_world,
    init_params,
    load_dataset,
    loss_and_grad,
    param_digest,
)
from workloads.checkmate.optim import Optimizer
from workloads.checkmate.persister import BackgroundPersister, Snapshot
from workloads.checkmate.state_channel import StateServer
from workloads.checkmate.training import CIDS_PER_ITERATION, TrainingConfig
from workloads.collectives import barrier, ring_allreduce
from workloads.errors import CommandError
from workloads.plan import ring_plan
from workloads.transport import Mesh

__all__ = ["Trainer", "worker_checkpoint"]

log = logging.getLogger(__name__)

def worker_checkpoint(mode: str) -> str:
    """The baseline's latest checkpoint's name in ``checkpoint_dir``, one per checkpoint mode
    (so that a store keeps each system's latest apart).

    >>> worker_checkpoint("gemini")
    'worker-gemini-latest.npz'
    """
    return f"worker-{mode}-latest.npz"


class Trainer:
    """The training state of one rank; :meth:`step` runs one iteration."""

    def __init__(self, mesh: Mesh, cfg: TrainingConfig) -> None:
        self.mesh, self.cfg = mesh, cfg
        layout, me = mesh.layout, mesh.me
        self.world = layout.world
        check_world(cfg.model, self.world)
        self.ring = ring_plan(layout, cfg.ring)
        self.capture = capture_plan(layout, self.ring) if cfg.mirror else None
        self.params = init_params(cfg.model)
        self.optimizer = Optimizer(cfg.optimizer, self.params.size)
        self.iteration = -1  # the last completed iteration
        #: CheckFreq's two phases (checkpoint_mode "checkfreq") or Gemini's chunks to a peer
        #: ("gemini"), else None: synchronous
        self.persister: BackgroundPersister | PeerCheckpointer | None = None
        if cfg.checkpoint_every and cfg.checkpoint_mode == "checkfreq":
            self.persister = BackgroundPersister(self._persist_snapshot)
        elif cfg.checkpoint_every and cfg.checkpoint_mode == "gemini":
            self.persister = PeerCheckpointer(f"{cfg.checkpoint_dir.rstrip('/')}/{worker_checkpoint('gemini')}",
                                              self._snapshot_bytes)
        #: the last iteration whose checkpoint reached storage (-1: none)
        self.persisted = -1
        if cfg.restore:
            ck = (load_checkpoint_bytes(storage.get(cfg.restore), cfg.restore) if cfg.restore.startswith("http://")
                  else load_checkpoint(Path(cfg.restore)))
            self.params = ck.params.astype(np.float32, copy=True)
            self.optimizer.load_state(ck.optimizer_state)
            self.iteration = ck.iteration
            log.info("restored iteration %d from %s", ck.iteration, cfg.restore)
        self.X, self.y = load_dataset()
        if self.capture is not None:
            connect_mirror_legs(mesh, self.capture, port=cfg.mirror_port, session=cfg.session,
                                timeout_s=mesh.config.start_timeout_s)
        self.server: StateServer | None = None
        if me.rank == 0 and cfg.state_port:
            self.server = StateServer(me.ip, cfg.state_port)
            self.server.publish(self.iteration, self.params, self.optimizer.state())

    def step(self, iteration: int) -> dict[str, Any]:
        """Run ``iteration``; the result's extra fields (loss, digest, phases, seconds)."""
        if iteration != self.iteration + 1:
            raise CommandError(f"ckpt_train: iteration {iteration} out of order "
                               f"(this rank completed iteration {self.iteration})")
        spec, mesh, rank = self.cfg.model, self.mesh, self.mesh.me.rank
        mesh.set_cid(iteration * CIDS_PER_ITERATION)
        barrier(mesh)
        t0 = time.perf_counter()
        idx = batch_indices(spec, iteration, rank, self.world)
        loss, grad = loss_and_grad(spec, self.params, self.X[idx], self.y[idx])
        if isinstance(self.persister, PeerCheckpointer):  # Gemini: the network is idle while computing
            self.persister.interleave(t0 + self.cfg.compute_s)
        spent = time.perf_counter() - t0
        if self.cfg.compute_s > spent:
            time.sleep(self.cfg.compute_s - spent)
        t1 = time.perf_counter()
        comm = ring_allreduce(mesh, self.ring, grad, self.capture)
        t2 = time.perf_counter()
        self.optimizer.step(self.params, grad, self.world)
        t3 = time.perf_counter()
        phases = {"compute": t1 - t0, "allreduce": t2 - t1, **{f"allreduce/{k}": v for k, v in comm.items()},
                  "optimizer": t3 - t2}
        every = self.cfg.checkpoint_every
        if every and rank == 0 and (iteration + 1) % every == 0:
            if self.persister is not None:  # CheckFreq: training waits for the snapshot only
                waited, copied = self.persister.checkpoint(iteration, self.params, self.optimizer.state())
                phases["checkpoint_wait"], phases["checkpoint_snapshot"] = waited, copied
            else:
                self._persist(iteration, rank)
                self.persisted = iteration
            phases["checkpoint"] = time.perf_counter() - t3
        seconds = time.perf_counter() - t0
        self.iteration = iteration
        if self.server is not None:
            self.server.publish(iteration, self.params, self.optimizer.state())
        out = {"seconds": seconds, "phases": phases, "loss": float(loss),
               "digest": param_digest(self.params), "bytes": int(grad.nbytes)}
        if self.persister is not None:
            self.persisted = self.persister.persisted
        if every and rank == 0:
            out["persisted"] = self.persisted  # the last checkpoint that reached storage
        return out

    def _persist(self, iteration: int, rank: int, params: np.ndarray | None = None,
                 optimizer_state: dict[str, np.ndarray] | None = None) -> None:
        """Write the baseline's checkpoint: to ``checkpoint_dir`` on this host's disk, or,
        when it is an ``http://`` URL, to a checkpoint store over the fabric
        (:mod:`workloads.checkmate.storage`). The live state, or a snapshot of it."""
        state = {"iteration": iteration, "params": self.params if params is None else params,
                 "optimizer_state": self.optimizer.state() if optimizer_state is None else optimizer_state,
                 "meta": {"source": "worker", "rank": rank}}
        target = self.cfg.checkpoint_dir
        if target.startswith("http://"):
            url = f"{target.rstrip('/')}/{worker_checkpoint(self.cfg.checkpoint_mode)}"
            storage.put(url, checkpoint_bytes(**state, name=url))  # type: ignore[arg-type]
        else:
            save_checkpoint(Path(target) / worker_checkpoint(self.cfg.checkpoint_mode), **state)  # type: ignore[arg-type]

    def _snapshot_bytes(self, snap: Snapshot) -> bytes:
        iteration, params, optimizer_state = snap
        return checkpoint_bytes(iteration=iteration, params=params, optimizer_state=optimizer_state,
                                meta={"source": "gemini", "rank": self.mesh.me.rank}, name=self.cfg.checkpoint_dir)

    def _persist_snapshot(self, snap: Snapshot) -> None:
        iteration, params, optimizer_state = snap
        self._persist(iteration, self.mesh.me.rank, params, optimizer_state)

    def close(self) -> None:
        if self.persister is not None:
            self.persister.close()
        if self.server is not None:
            self.server.close()
