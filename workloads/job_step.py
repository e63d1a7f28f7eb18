"""``job_step``: one iteration of a job with a parallelization strategy (TopoOpt's jobs).

Compute (slept), then the model-parallel transfers all at once, then every all-reduce group
split over its rings (TopoOpt's mutable all-reduce), as
:mod:`controller.topoopt.timing` models it. The command's ``step`` object::

    {"compute_s": 0.3,
     "mp": [[src, dst, bytes], ...],            # model-parallel transfers, one per ordered pair
     "groups": [{"bytes": N,                    # each member's gradient
                 "rings": [[r0, r1, ...], ...], # every ring over the same members
                 "shares": [0.5, 0.5]}]}        # the gradient's split over the rings

Transfer ``src -> dst`` carries float32 ``src * 1000 + dst``; a group's members all-reduce
:func:`workloads.ops.allreduce_input`; both are checked exactly.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from workloads.collectives import rings_allreduce, transfers
from workloads.errors import CommandError, VerificationError
from workloads.ops import Timings, allreduce_input, check_allreduce
from workloads.plan import group_ring

__all__ = ["Group", "JobStep", "parse_step", "step_parts"]


@dataclass(frozen=True, slots=True)
class Group:
    """Members all-reduce ``bytes`` each, split over ``rings`` by ``shares``."""

    bytes: int
    rings: tuple[tuple[int, ...], ...]
    shares: tuple[float, ...]

    @property
    def members(self) -> frozenset[int]:
        return frozenset(self.rings[0])


@dataclass(frozen=True, slots=True)
class JobStep:
    compute_s: float
    mp: tuple[tuple[int, int, int], ...]
    groups: tuple[Group, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"compute_s": self.compute_s, "mp": [list(t) for t in self.mp],
                "groups": [{"bytes": g.bytes, "rings": [list(r) for r in g.rings], "shares": list(g.shares)}
                           for g in self.groups]}


def _ints(value: Any, what: str, world: int) -> tuple[int, ...]:
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < world
                                          for v in value):
        raise CommandError(f"{what}: must be a list of ranks 0..{world - 1} (got {value!r})")
    return tuple(value)


def parse_step(obj: Any, world: int) -> JobStep:
    """The checked ``step`` of a ``job_step`` command for a job of ``world`` ranks.

    >>> parse_step({"mp": [[0, 1, 64]], "groups": [{"bytes": 8, "rings": [[0, 1]], "shares": [1]}]}, 2).mp
    ((0, 1, 64),)
    >>> parse_step({"mp": [[0, 0, 64]]}, 2)
    Traceback (most recent call last):
    ...
    workloads.errors.CommandError: step.mp[0]: a transfer [src, dst, bytes] between two ranks (got [0, 0, 64])
    """
    if not isinstance(obj, Mapping):
        raise CommandError(f"step: must be an object (got {obj!r})")
    extra = sorted(set(obj) - {"compute_s", "mp", "groups"})
    if extra:
        raise CommandError(f"step: unknown key {extra[0]!r} (known: compute_s, groups, mp)")
    compute = obj.get("compute_s", 0.0)
    if isinstance(compute, bool) or not isinstance(compute, int | float) or compute < 0:
        raise CommandError(f"step.compute_s: must be a number of seconds >= 0 (got {compute!r})")
    mp, pairs = [], set()
    for i, t in enumerate(obj.get("mp", [])):
        ok = isinstance(t, list) and len(t) == 3 and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                         for v in t)
        src, dst, n = t if ok else (0, 0, 0)
        if not ok or src == dst or src >= world or dst >= world or (src, dst) in pairs:
            raise CommandError(f"step.mp[{i}]: a transfer [src, dst, bytes] between two ranks (got {t!r})")
        pairs.add((src, dst))
        mp.append((src, dst, n))
    groups: list[Group] = []
    seen: set[int] = set()
    for i, g in enumerate(obj.get("groups", [])):
        where = f"step.groups[{i}]"
        if not isinstance(g, Mapping) or set(g) != {"bytes", "rings", "shares"}:
            raise CommandError(f"{where}: an object with bytes, rings and shares (got {g!r})")
        rings = tuple(_ints(r, f"{where}.rings", world) for r in g["rings"]) if isinstance(g["rings"], list) else ()
        shares = g["shares"]
        if not rings or any(sorted(r) != sorted(rings[0]) or len(set(r)) != len(r) for r in rings):
            raise CommandError(f"{where}.rings: rings over the same members, each once (got {g['rings']!r})")
        if not isinstance(shares, list) or len(shares) != len(rings) or \
                any(isinstance(s, bool) or not isinstance(s, int | float) or s < 0 for s in shares) or not sum(shares):
            raise CommandError(f"{where}.shares: one share >= 0 per ring, not all 0 (got {shares!r})")
        nbytes = g["bytes"]
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
            raise CommandError(f"{where}.bytes: must be an integer >= 0 (got {nbytes!r})")
        if seen & set(rings[0]):
            raise CommandError(f"{where}: rank {sorted(seen & set(rings[0]))[0]} is in two groups")
        seen |= set(rings[0])
        groups.append(Group(nbytes, rings, tuple(float(s) for s in shares)))
    return JobStep(float(compute), tuple(mp), tuple(groups))


def _payload(src: int, dst: int, nbytes: int) -> np.ndarray:
    return np.full(nbytes // 4, np.float32(src * 1000 + dst), dtype=np.float32)


def step_parts(step: JobStep, me: int, mesh: Any) -> list[tuple[set[tuple[int, int]], Any, Any]]:
    """The executor's steps (``(legs, run, check)``) of ``step`` on rank ``me``: every rank
    runs all three parts, so that the collective ids stay in step."""
    legs = {(s, d) for s, d, _ in step.mp}
    sends = [(d, _payload(s, d, n)) for s, d, n in step.mp if s == me]
    recvs = [(s, np.empty(n // 4, dtype=np.float32)) for s, d, n in step.mp if d == me]
    mine = [g for g in step.groups if me in g.members]
    group = mine[0] if mine else None
    buf = allreduce_input(me, group.bytes // 4) if group else np.empty(0, dtype=np.float32)
    plans = [group_ring(r) for r in group.rings] if group else []
    for g in step.groups:
        legs |= {leg for r in g.rings for leg in group_ring(r).legs()}

    def compute() -> Timings:
        t0 = time.perf_counter()
        time.sleep(step.compute_s)
        return {"compute": time.perf_counter() - t0}

    def run_mp() -> Timings:
        return {"mp": transfers(mesh, sends, recvs)["transfers"]}

    def check_mp() -> None:
        for src, out in recvs:
            want = np.float32(src * 1000 + me)
            bad = np.flatnonzero(out != want)
            if len(bad):
                raise VerificationError(f"job_step: element {int(bad[0])} of the transfer from rank {src} is "
                                        f"{float(out[bad[0]])}, expected {float(want)}")

    def run_ar() -> Timings:
        t = rings_allreduce(mesh, plans, buf, list(group.shares) if group else [])
        return {"allreduce": sum(t.values())}

    def check_ar() -> None:
        if group:
            check_allreduce(buf, tuple(sorted(group.members)), f"job_step all-reduce over {len(group.rings)} rings")

    return [(set(), compute, lambda: None), (legs, run_mp, check_mp), (set(), run_ar, check_ar)]
