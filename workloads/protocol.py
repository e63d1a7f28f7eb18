"""The line protocol between the driver and a worker (the worker's stdin and stdout).

Worker -> driver, once, after the mesh is connected: ``READY <rank>``.

Driver -> worker, one JSON object a line::

    {"op": "allreduce" | "hier_allreduce" | "alltoall" | "hier_alltoall" | "train_step"
           | "ckpt_train" | "quit",
     "bytes": N,            # per-rank buffer (all-reduce) or total sent per rank (all-to-all)
     "iter": I,             # echoed
     "ring": "pxn",         # allreduce only: ring kind (pxn | direct | aligned)
     "schedule": "pairwise",  # every all-to-all of the command: pairwise rounds | concurrent
     "compute_s": x,        # train_step only: emulated compute, slept before communicating
     "parallelism": {       # train_step only: see Parallelism (all keys optional)
         "dp_allreduce": "hier_allreduce",  # | "allreduce" | "rail_allreduce": the `bytes` gradient
         "ring": "pxn", "tp_bytes": 0,
         "moe_bytes": 0, "moe_alltoall": "hier_alltoall", "moe_count": 1},
     "training": {...},     # ckpt_train only: one iteration of a real data-parallel job
                            # (workloads.checkmate.training.TrainingConfig)
     "step": {...},         # job_step only: compute, model-parallel transfers, all-reduces
                            # over several rings (workloads.job_step)
     "aggregation": {"job": J, "slots": S, "port": P, "drop_every": N},  # innet_allreduce only:
                            # the job as `mlfabric aggregate add` installed it, and the loss
                            # at the worker's NIC (workloads.aggregation)
     "verify": true,        # check the result against the deterministic inputs
     "seq": S}              # optional, echoed: lets the driver drop stale results

Unknown keys and bad values are refused (``ok: false``, ``bad command: ...``).

Worker -> driver, one JSON line per command but quit (which ends the worker, exit 0)::

    {"rank": K, "op": ..., "iter": I, "ok": true | false, "error": null | "...",
     "seconds": total, "phases": {"name": seconds, ...}, "bytes": N, "seq": S}

``seconds`` runs from the end of the barrier that starts every command to the end of the
operation on this rank (verification excluded). ``phases`` names: allreduce
``reduce_scatter, allgather``; hier_allreduce ``intra_reduce_scatter, rail_allreduce,
intra_allgather``; alltoall ``alltoall``; hier_alltoall ``intra, rail``; train_step
``compute, tp_allreduce, moe_alltoall, dp_allreduce`` (those used), plus their breakdown as
``moe_alltoall/intra`` etc. ``bytes`` is the size actually used (rounded down to whole
float32, and for all-to-all to a multiple of ``4 * world``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workloads.aggregation.wire import WORKER_PORT
from workloads.errors import CommandError
from workloads.plan import ALLTOALL_SCHEDULES, RING_KINDS

__all__ = ["OPS", "Command", "Parallelism", "error_result", "parse_command", "parse_ready",
           "ready_line"]

OPS = ("allreduce", "hier_allreduce", "innet_allreduce", "alltoall", "hier_alltoall", "train_step", "ckpt_train",
       "job_step", "quit")
DP_OPS = ("allreduce", "hier_allreduce", "rail_allreduce")
MOE_OPS = ("alltoall", "hier_alltoall")
_PAR_KEYS = ("dp_allreduce", "ring", "tp_bytes", "moe_bytes", "moe_alltoall", "moe_count")


def _int(obj: Mapping[str, Any], key: str, default: int, minimum: int | None = 0) -> int:
    value = obj.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CommandError(f"{key}: must be an integer (got {value!r})")
    if minimum is not None and value < minimum:
        raise CommandError(f"{key}: must be >= {minimum} (got {value!r})")
    return value


def _choice(obj: Mapping[str, Any], key: str, default: str, choices: tuple[str, ...]) -> str:
    value = obj.get(key, default)
    if value not in choices:
        raise CommandError(f"{key}: must be one of {', '.join(choices)} (got {value!r})")
    return str(value)


def _unknown(obj: Mapping[str, Any], known: set[str] | tuple[str, ...], where: str) -> None:
    extra = sorted(set(obj) - set(known))
    if extra:
        raise CommandError(f"{where}unknown key {extra[0]!r} (known: {', '.join(sorted(known))})")


@dataclass(frozen=True, kw_only=True)
class Parallelism:
    """What one ``train_step`` communicates, in this order, after ``compute_s`` of compute.

    ``tp_bytes``
        An all-reduce of that size inside each server (tensor parallelism); 0: none.
    ``moe_bytes``, ``moe_alltoall``, ``moe_count``
        ``moe_count`` all-to-alls of ``moe_bytes`` (MoE): ``alltoall`` (direct, needs mesh
        ``full``) or ``hier_alltoall`` (rail-only); ``moe_bytes`` 0: none.
    ``dp_allreduce``, ``ring``
        How the ``bytes`` gradient is all-reduced: ``allreduce`` (flat ring over every rank,
        ring kind ``ring``), ``hier_allreduce``, or ``rail_allreduce`` (each GPU with the GPUs
        of its rail only: tensor parallelism inside the server, data parallelism across).
    """

    dp_allreduce: str = "hier_allreduce"
    ring: str = "pxn"
    tp_bytes: int = 0
    moe_bytes: int = 0
    moe_alltoall: str = "hier_alltoall"
    moe_count: int = 1

    @classmethod
    def from_dict(cls, obj: Any) -> Parallelism:
        if not isinstance(obj, Mapping):
            raise CommandError(f"parallelism: must be an object (got {obj!r})")
        _unknown(obj, _PAR_KEYS, "parallelism: ")
        return cls(dp_allreduce=_choice(obj, "dp_allreduce", "hier_allreduce", DP_OPS),
                   ring=_choice(obj, "ring", "pxn", RING_KINDS), tp_bytes=_int(obj, "tp_bytes", 0),
                   moe_bytes=_int(obj, "moe_bytes", 0),
                   moe_alltoall=_choice(obj, "moe_alltoall", "hier_alltoall", MOE_OPS),
                   moe_count=_int(obj, "moe_count", 1))


@dataclass(frozen=True, kw_only=True)
class Command:
    """One parsed command line.

    >>> parse_command('{"op": "allreduce", "bytes": 1024, "iter": 3}')
    Command(op='allreduce', bytes=1024, iter=3, ring='pxn', schedule='pairwise', compute_s=0.0, parallelism=Parallelism(dp_allreduce='hier_allreduce', ring='pxn', tp_bytes=0, moe_bytes=0, moe_alltoall='hier_alltoall', moe_count=1), verify=True, seq=None, training=None, step=None, aggregation=None)
    >>> parse_command({"op": "alltoall", "colour": 1})
    Traceback (most recent call last):
    ...
    workloads.errors.CommandError: unknown key 'colour' (known: aggregation, bytes, compute_s, iter, op, parallelism, ring, schedule, seq, step, training, verify)
    """

    op: str
    bytes: int = 0
    iter: int = 0
    ring: str = "pxn"
    #: every all-to-all of the command (alltoall, hier_alltoall, train_step's MoE): pairwise
    #: rounds or all at once (:data:`workloads.plan.ALLTOALL_SCHEDULES`)
    schedule: str = "pairwise"
    compute_s: float = 0.0
    parallelism: Parallelism = field(default_factory=Parallelism)
    verify: bool = True
    seq: int | None = None
    #: ckpt_train only: the training job (:class:`workloads.checkmate.training.TrainingConfig`)
    training: Mapping[str, Any] | None = None
    #: job_step only: the iteration (:mod:`workloads.job_step`), checked by the executor
    step: Mapping[str, Any] | None = None
    #: innet_allreduce only: {"job", "slots", "port", "drop_every"} of the installed aggregation job
    aggregation: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "bytes": self.bytes, "iter": self.iter}
        if self.op == "allreduce":
            out["ring"] = self.ring
        if self.op in ("alltoall", "hier_alltoall", "train_step"):
            out["schedule"] = self.schedule
        if self.op == "train_step":
            out["compute_s"] = self.compute_s
            out["parallelism"] = {k: getattr(self.parallelism, k) for k in _PAR_KEYS}
        if self.training is not None:
            out["training"] = dict(self.training)
        if self.step is not None:
            out["step"] = dict(self.step)
        if self.aggregation is not None:
            out["aggregation"] = dict(self.aggregation)
        out["verify"] = self.verify
        if self.seq is not None:
            out["seq"] = self.seq
        return out


def parse_command(line: str | Mapping[str, Any]) -> Command:
    """Parse and check one command (a JSON line or an already decoded object)."""
    if isinstance(line, str):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CommandError(f"not JSON: {exc.msg} (got {line[:80]!r})") from exc
    else:
        obj = line
    if not isinstance(obj, Mapping):
        raise CommandError(f"a command is a JSON object (got {obj!r})")
    _unknown(obj, {"op", "bytes", "iter", "ring", "schedule", "compute_s", "parallelism", "verify", "seq", "training",
                   "step", "aggregation"}, "")
    op = _choice(obj, "op", "", OPS)
    compute = obj.get("compute_s", 0.0)
    if isinstance(compute, bool) or not isinstance(compute, int | float) or compute < 0:
        raise CommandError(f"compute_s: must be a number of seconds >= 0 (got {compute!r})")
    verify = obj.get("verify", True)
    if not isinstance(verify, bool):
        raise CommandError(f"verify: must be true or false (got {verify!r})")
    seq = _int(obj, "seq", 0, minimum=None) if obj.get("seq") is not None else None
    training = obj.get("training")
    if (op == "ckpt_train") != isinstance(training, Mapping):
        raise CommandError(f"training: an object for ckpt_train, and only for it (got {training!r})")
    step = obj.get("step")
    if (op == "job_step") != isinstance(step, Mapping):
        raise CommandError(f"step: an object for job_step, and only for it (got {step!r})")
    aggregation = obj.get("aggregation")
    if (op == "innet_allreduce") != isinstance(aggregation, Mapping):
        raise CommandError(f"aggregation: an object for innet_allreduce, and only for it (got {aggregation!r})")
    if aggregation is not None:
        _unknown(aggregation, ("job", "slots", "port", "drop_every"), "aggregation: ")
        aggregation = {"job": _int(aggregation, "job", 0, minimum=1), "slots": _int(aggregation, "slots", 64, minimum=1),
                       "port": _int(aggregation, "port", WORKER_PORT, minimum=1),
                       "drop_every": _int(aggregation, "drop_every", 0)}
    return Command(training=training, step=step, aggregation=aggregation, op=op, bytes=_int(obj, "bytes", 0), iter=_int(obj, "iter", 0, minimum=None),
                   ring=_choice(obj, "ring", "pxn", RING_KINDS),
                   schedule=_choice(obj, "schedule", "pairwise", ALLTOALL_SCHEDULES), compute_s=float(compute),
                   parallelism=Parallelism.from_dict(obj.get("parallelism", {})), verify=verify, seq=seq)


def error_result(rank: int, raw: Any, error: str) -> dict[str, Any]:
    """The result line of a command that failed before it ran (``raw`` as received)."""
    obj = raw if isinstance(raw, Mapping) else {}
    out: dict[str, Any] = {"rank": rank, "op": obj.get("op"), "iter": obj.get("iter"), "ok": False, "error": error,
           "seconds": 0.0, "phases": {}, "bytes": obj.get("bytes")}
    if obj.get("seq") is not None:
        out["seq"] = obj["seq"]
    return out


def ready_line(rank: int) -> str:
    """The line a worker prints once its mesh is connected.

    >>> ready_line(3)
    'READY 3'
    """
    return f"READY {rank}"


def parse_ready(line: str) -> int | None:
    """The rank of a READY line, else None.

    >>> parse_ready("READY 3\\n"), parse_ready('{"rank": 3}')
    (3, None)
    """
    parts = line.split()
    if len(parts) == 2 and parts[0] == "READY" and parts[1].isdigit():
        return int(parts[1])
    return None
