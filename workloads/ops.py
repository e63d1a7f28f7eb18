"""One command on one worker: deterministic inputs, barrier, the timed operation, checks.

Inputs are deterministic per rank so that every result can be checked exactly:

- all-reduce: rank ``k`` contributes ``(arange(n) % 251) * (k + 1)``; the sum over a group is
  the pattern times ``sum(k + 1)``. Every partial sum is an integer below ``2**24`` (exact in
  float32) while ``250 * W(W+1)/2 < 2**24``, i.e. up to 365 ranks; beyond, a relative
  tolerance of 1e-6 applies.
- all-to-all: the chunk from rank ``i`` to rank ``j`` is filled with ``i * 1000 + j``.

Sizes: an all-reduce of ``bytes`` reduces ``bytes // 4`` float32; an all-to-all of ``bytes``
sends ``bytes // (4 * world)`` float32 to each rank (itself included). The result's ``bytes``
is the size actually used.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from workloads.aggregation.client import AggregationConfig, SwitchAllreduce
from workloads.aggregation.shadow import digest
from workloads.aggregation.wire import service_address
from workloads.collectives import alltoall, barrier, hier_allreduce, innet_allreduce, ring_allreduce
from workloads.errors import CommandError, PlanError, VerificationError, WorkloadError
from workloads.plan import (
    alltoall_plan,
    group_ring,
    hop_kind,
    ring_plan,
)
from workloads.protocol import Command
from workloads.transport import Mesh

__all__ = ["Executor", "allreduce_input", "alltoall_input", "check_allreduce", "check_alltoall"]

log = logging.getLogger(__name__)

Timings = dict[str, float]


#: the inputs' multipliers cycle every this many ranks: a float32 sum stays exact (every
#: partial sum below 2**24) up to 2,048 ranks, in whatever order a collective adds (with
#: ``rank + 1`` a 1,024-GPU all-reduce's sums reached 1.3e8 and their rounding differed)
MULTIPLIER_CYCLE = 64


def _multiplier(rank: int) -> int:
    return rank % MULTIPLIER_CYCLE + 1


def allreduce_input(rank: int, n: int) -> np.ndarray:
    """The all-reduce input of ``rank``: ``(arange(n) % 251) * (rank % 64 + 1)`` (a new
    array: the all-reduce works in place).

    >>> allreduce_input(1, 4)
    array([0., 2., 4., 6.], dtype=float32)
    >>> allreduce_input(65, 4)
    array([0., 2., 4., 6.], dtype=float32)
    """
    return _pattern(n) * np.float32(_multiplier(rank))


@functools.lru_cache(maxsize=8)
def _pattern(n: int) -> np.ndarray:
    """``arange(n) % 251`` as float32, built by tiling (much faster than ``%`` on big arrays);
    made once per size (read-only): every command of a run uses the same few sizes."""
    out = np.tile(np.arange(251, dtype=np.float32), -(-n // 251))[:n]
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=8)
def _allreduce_expected(n: int, factor: int) -> np.ndarray:
    out = _pattern(n) * np.float32(factor)
    out.flags.writeable = False
    return out


def check_allreduce(out: np.ndarray, ranks: tuple[int, ...], what: str) -> None:
    """Raise VerificationError unless ``out`` is the sum of the inputs of ``ranks``.

    >>> check_allreduce(allreduce_input(0, 300) * 3, (0, 1), "test")
    >>> check_allreduce(allreduce_input(0, 300), (0, 1), "test")
    Traceback (most recent call last):
    ...
    workloads.errors.VerificationError: test: wrong result at element 1 of 300: got 1.0, expected 3.0
    """
    factor = sum(_multiplier(k) for k in ranks)
    expected = _allreduce_expected(len(out), factor)
    if 250 * factor < 2**24 and np.array_equal(out, expected):
        return
    good = out == expected if 250 * factor < 2**24 else np.isclose(out, expected, rtol=1e-6, atol=0)
    if not good.all():
        i = int(np.argmin(good))
        raise VerificationError(f"{what}: wrong result at element {i} of {len(out)}: "
                                f"got {float(out[i])}, expected {float(expected[i])}")


@functools.lru_cache(maxsize=8)
def alltoall_input(rank: int, world: int, m: int) -> np.ndarray:
    """Row ``j`` (for rank ``j``) filled with ``rank * 1000 + j`` (made once per shape and
    read-only: an all-to-all only sends it)."""
    out = np.repeat((rank * 1000 + np.arange(world, dtype=np.float32))[:, None], m, axis=1)
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=8)
def _alltoall_expected(world: int, m: int, rank: int) -> np.ndarray:
    out = np.repeat((np.arange(world, dtype=np.float32) * 1000 + rank)[:, None], m, axis=1)
    out.flags.writeable = False
    return out


def check_alltoall(out: np.ndarray, rank: int, what: str) -> None:
    """Raise VerificationError unless row ``i`` of ``out`` is all ``i * 1000 + rank``."""
    if out.ndim == 2 and np.array_equal(out, _alltoall_expected(out.shape[0], out.shape[1], rank)):
        return
    expected = (np.arange(out.shape[0], dtype=np.float32) * 1000 + rank)[:, None]
    bad = np.argwhere(out != expected)
    if len(bad):
        i, j = (int(x) for x in bad[0])
        raise VerificationError(f"{what}: element {j} of the chunk from rank {i} is {float(out[i, j])}, "
                                f"expected {float(expected[i, 0])}")


_Step = tuple[set[tuple[int, int]], Callable[[], Timings], Callable[[], None]]
"""The ``(sender, receiver)`` pairs a step needs over the whole job, its run, its check."""


class Executor:
    """Runs commands on one worker's mesh; every worker runs the same commands in order."""

    def __init__(self, mesh: Mesh) -> None:
        self.mesh = mesh
        self._trainer: Any = None  # workloads.checkmate.trainer.Trainer, made by ckpt_train
        self._agg: tuple[tuple[int, int, int], SwitchAllreduce] | None = None  # made by innet_allreduce
        #: the last innet_allreduce's packets: sent, received, retransmitted...
        self.aggregation: dict[str, int] | None = None
        self.digest: str | None = None  # ...and its result's digest
        self.layout, self.me = mesh.layout, mesh.me
        # plans are made on first use: the direct all-to-all's lists every pair of GPUs, a
        # million transfers (~200 MB a worker) at 1,024 GPUs, where rail-only never runs it
        self._rings: dict[str, Any] = {}
        self._a2a: dict[tuple[str, str], Any] = {}

    def execute(self, cmd: Command) -> dict[str, Any]:
        """Run ``cmd`` (not quit) and return its result line as a dict. Never raises for a
        workload failure: that becomes ``ok: false`` with the error."""
        result: dict[str, Any] = {"rank": self.me.rank, "op": cmd.op, "iter": cmd.iter, "ok": False,
                                  "error": None, "seconds": 0.0, "phases": {}, "bytes": 0}
        if cmd.seq is not None:
            result["seq"] = cmd.seq
        if cmd.op == "ckpt_train":
            return self._ckpt_train(cmd, result)
        try:
            steps, nbytes = self._steps(cmd)
            result["bytes"] = nbytes
            legs = set().union(*(legs for legs, _, _ in steps)) if steps else set()
            self._check_fabric(cmd.op, legs)
            self.mesh.require({b if a == self.me.rank else a for a, b in legs if self.me.rank in (a, b)},
                              cmd.op)
            try:
                barrier(self.mesh)
            except WorkloadError as exc:
                raise type(exc)(f"barrier before {cmd.op}: {exc}") from exc
            t0 = time.perf_counter()
            for _, run, _ in steps:
                for name, seconds in run().items():
                    result["phases"][name] = result["phases"].get(name, 0.0) + seconds
            result["seconds"] = time.perf_counter() - t0
            if cmd.op == "innet_allreduce":
                result["aggregation"], result["digest"] = self.aggregation, self.digest
            if cmd.verify:
                for _, _, check in steps:
                    check()
            result["ok"] = True
        except WorkloadError as exc:
            result["error"] = str(exc)
        except Exception as exc:  # a bug: report it, log the traceback, leave no mesh half-used
            log.exception("rank %d: %s failed", self.me.rank, cmd.op)
            self.mesh.abort(f"internal error in {cmd.op}: {exc!r}")
            result["error"] = f"internal error: {exc!r}"
        return result

    def _ckpt_train(self, cmd: Command, result: dict[str, Any]) -> dict[str, Any]:
        """One iteration of a Checkmate job (:mod:`workloads.checkmate.trainer`)."""
        from workloads.checkmate.trainer import Trainer
        from workloads.checkmate.training import TrainingConfig

        try:
            assert cmd.training is not None
            cfg = TrainingConfig.from_dict(cmd.training, "ckpt_train.training")
            if self._trainer is None:
                self._trainer = Trainer(self.mesh, cfg)
            elif self._trainer.cfg.replica_fields() != cfg.replica_fields():
                raise CommandError("ckpt_train: the job's configuration changed mid-training")
            result.update(self._trainer.step(cmd.iter))
            result["ok"] = True
        except WorkloadError as exc:
            result["error"] = str(exc)
            self.mesh.abort(str(exc))
        except Exception as exc:  # a bug: report it, log the traceback, leave no mesh half-used
            log.exception("rank %d: ckpt_train failed", self.me.rank)
            self.mesh.abort(f"internal error in ckpt_train: {exc!r}")
            result["error"] = f"internal error: {exc!r}"
        return result

    def close(self) -> None:
        if self._trainer is not None:
            self._trainer.close()
        if self._agg is not None:
            self._agg[1].close()

    def _check_fabric(self, op: str, legs: set[tuple[int, int]]) -> None:
        """On a rail mesh, refuse cross-rail legs. Every rank checks the whole job's legs, so
        all refuse together, before any I/O, and the mesh stays usable."""
        if self.mesh.config.mesh == "full":
            return
        for a, b in sorted(legs):
            if hop_kind(self.layout, a, b) == "cross":
                ra, rb = self.layout[a], self.layout[b]
                raise PlanError(
                    f"{op}: rank {a} (server {ra.server}, rail {ra.rail}) would send to rank {b} "
                    f"(server {rb.server}, rail {rb.rail}) across rails, but the mesh is 'rail' "
                    "(a rail-only fabric); cross-rail peers need mesh 'full' (fat-tree)")

    # ------------------------------------------------------------ building blocks

    def _ring(self, n: int, kind: str, prefix: str = "") -> _Step:
        buf = allreduce_input(self.me.rank, n)
        plan = self._rings.get(kind)
        if plan is None:
            plan = self._rings[kind] = ring_plan(self.layout, kind)
        return (plan.legs(), lambda: _prefixed(prefix, ring_allreduce(self.mesh, plan, buf)),
                lambda: check_allreduce(buf, plan.order, f"{prefix or 'allreduce'} ({kind} ring)"))

    def _hier(self, n: int, prefix: str = "") -> _Step:
        buf = allreduce_input(self.me.rank, n)
        return (set(), lambda: _prefixed(prefix, hier_allreduce(self.mesh, buf)),  # local and rail legs only
                lambda: check_allreduce(buf, tuple(range(self.layout.world)), prefix or "hier_allreduce"))

    def _innet(self, n: int, job: Mapping[str, Any]) -> _Step:
        """hier_allreduce with each rail's step aggregated by the rail's switch."""
        buf = allreduce_input(self.me.rank, n)
        agg = self._aggregator(job)
        before = agg.stats.as_dict()

        def run() -> Timings:
            phases = innet_allreduce(self.mesh, agg, buf)
            self.aggregation = {k: v - before[k] for k, v in agg.stats.as_dict().items()}
            self.digest = digest(buf)  # what a Checkmate shadow of the job rebuilds, bit for bit
            return phases

        return (set(), run, lambda: check_allreduce(buf, tuple(range(self.layout.world)), "innet_allreduce"))

    def _aggregator(self, job: Mapping[str, Any]) -> SwitchAllreduce:
        """One client per job for the worker's life: a slot's set alternates across calls."""
        key = (job["job"], job["slots"], job["port"])
        if self._agg is None or self._agg[0] != key:
            if self._agg is not None:
                self._agg[1].close()
            config = AggregationConfig(job=job["job"], slots=job["slots"], port=job["port"])
            self._agg = (key, SwitchAllreduce(self.me.ip, service_address(self.me.rail), config))
        self._agg[1].drop_every = job["drop_every"]
        return self._agg[1]

    def _group(self, n: int, members: tuple[int, ...], name: str) -> _Step:
        """A ring all-reduce inside one server or one rail: local or rail legs only."""
        buf = allreduce_input(self.me.rank, n)
        plan = group_ring(members)
        return (plan.legs(), lambda: {name: sum(ring_allreduce(self.mesh, plan, buf).values())},
                lambda: check_allreduce(buf, members, name))

    def _alltoall(self, nbytes: int, kind: str, schedule: str, name: str,
                  count: int = 1) -> tuple[_Step, int]:
        world = self.layout.world
        m = nbytes // (4 * world)
        send = alltoall_input(self.me.rank, world, m)
        plan = self._a2a.get((kind, schedule))
        if plan is None:
            plan = self._a2a[kind, schedule] = alltoall_plan(self.layout, kind, schedule)
        outs: list[np.ndarray] = []

        def run() -> Timings:
            total: Timings = {}
            for _ in range(count):
                out, phases = alltoall(self.mesh, plan, send)
                outs.append(out)
                for phase, seconds in _prefixed(name, phases).items():
                    total[phase] = total.get(phase, 0.0) + seconds
            return total

        def check() -> None:
            for out in outs:
                check_alltoall(out, self.me.rank, f"{name or 'alltoall'} ({kind}, {schedule})")

        return (plan.legs(), run, check), 4 * m * world

    def _steps(self, cmd: Command) -> tuple[list[_Step], int]:
        n = cmd.bytes // 4
        if cmd.op == "allreduce":
            return [self._ring(n, cmd.ring)], 4 * n
        if cmd.op == "hier_allreduce":
            return [self._hier(n)], 4 * n
        if cmd.op == "innet_allreduce":
            assert cmd.aggregation is not None
            return [self._innet(n, cmd.aggregation)], 4 * n
        if cmd.op in ("alltoall", "hier_alltoall"):
            step, used = self._alltoall(cmd.bytes, "direct" if cmd.op == "alltoall" else "hier", cmd.schedule, "")
            return [step], used
        if cmd.op == "train_step":
            return self._train_step(cmd), 4 * n
        if cmd.op == "job_step":
            from workloads.job_step import parse_step, step_parts

            job = parse_step(cmd.step, self.layout.world)
            return step_parts(job, self.me.rank, self.mesh), sum(n for s, _, n in job.mp if s == self.me.rank)
        raise ValueError(f"no steps for op {cmd.op!r}")

    def _train_step(self, cmd: Command) -> list[_Step]:
        """compute, then tensor-parallel all-reduce, MoE all-to-alls, data-parallel all-reduce."""
        par, me, n = cmd.parallelism, self.me, cmd.bytes // 4

        def compute() -> Timings:
            t0 = time.perf_counter()
            time.sleep(cmd.compute_s)
            return {"compute": time.perf_counter() - t0}

        steps: list[_Step] = [(set(), compute, lambda: None)] if cmd.compute_s else []
        if par.tp_bytes:
            steps.append(self._group(par.tp_bytes // 4, self.layout.server_group(me.server), "tp_allreduce"))
        if par.moe_bytes and par.moe_count:
            kind = "direct" if par.moe_alltoall == "alltoall" else "hier"
            steps.append(self._alltoall(par.moe_bytes, kind, cmd.schedule, "moe_alltoall", par.moe_count)[0])
        if par.dp_allreduce == "allreduce":
            steps.append(self._ring(n, par.ring, "dp_allreduce"))
        elif par.dp_allreduce == "hier_allreduce":
            steps.append(self._hier(n, "dp_allreduce"))
        else:
            steps.append(self._group(n, self.layout.rail_group(me.rail), "dp_allreduce"))
        return steps


def _prefixed(prefix: str, phases: Timings) -> Timings:
    """Phases as they are, or under ``prefix`` with their total and a ``prefix/name`` breakdown.

    >>> _prefixed("dp", {"a": 1.0, "b": 2.0})
    {'dp': 3.0, 'dp/a': 1.0, 'dp/b': 2.0}
    """
    if not prefix:
        return phases
    return {prefix: sum(phases.values()), **{f"{prefix}/{k}": v for k, v in phases.items()}}
