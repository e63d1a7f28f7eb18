"""A strategy's traffic per iteration: the all-reduce groups (mutable: any ring will do) and
the model-parallel demand matrix (not mutable: these bytes go from this server to that one).
Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from controller.topoopt.job import Job, Strategy

__all__ = ["AllReduceGroup", "Demand", "compute_ms", "demand"]


@dataclass(frozen=True, slots=True)
class AllReduceGroup:
    """``members`` all-reduce ``mb`` MB of gradient each (in this ring order by default)."""

    members: tuple[int, ...]
    mb: float


@dataclass(frozen=True, slots=True)
class Demand:
    """``groups``: the all-reduces, run at once; ``mp[(u, v)]``: MB from ``u`` to ``v``;
    ``order``: the servers in the strategy's order (a pipeline's stages one after another)."""

    servers: int
    groups: tuple[AllReduceGroup, ...]
    mp: dict[tuple[int, int], float]
    order: tuple[int, ...] = ()
    #: ``mp`` as an ``[s, t]`` matrix (made from ``mp`` when not given)
    matrix: np.ndarray = field(default=None, compare=False, repr=False)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        if self.matrix is None:
            m = np.zeros((self.servers, self.servers))
            for (u, v), mb in self.mp.items():
                m[u, v] += mb
            object.__setattr__(self, "matrix", m)

    def mp_out(self, s: int) -> float:
        return float(self.matrix[s].sum())

    def mp_in(self, s: int) -> float:
        return float(self.matrix[:, s].sum())


def demand(job: Job, strategy: Strategy) -> Demand:
    """The traffic of one iteration of ``job`` under ``strategy``.

    DLRM-like: every server all-reduces the dense layers' gradient; the holder of each table
    sends ``lookup_mb`` of activations to every other server and gets as much gradient back.
    Transformer-like: stage ``k`` of every replica all-reduces ``params_mb / stages`` with the
    other replicas' stage ``k``; consecutive stages of a replica exchange ``stages x
    activation_mb`` each way (a replica of ``S`` stages carries ``S`` servers' share of the
    batch).

    >>> from controller.topoopt.job import Job, Strategy
    >>> j = Job(name="t", model="transformer", servers=4, compute_ms=0, params_mb=2.0, activation_mb=0.25,
    ...         strategy=Strategy(stages=2, placement=(0, 1, 2, 3)))
    >>> d = demand(j, j.strategy)
    >>> d.groups
    (AllReduceGroup(members=(0, 2), mb=1.0), AllReduceGroup(members=(1, 3), mb=1.0))
    >>> sorted(d.mp.items())
    [((0, 1), 0.5), ((1, 0), 0.5), ((2, 3), 0.5), ((3, 2), 0.5)]
    """
    job.check(strategy)
    n = job.servers
    mp: dict[tuple[int, int], float] = {}
    if job.model == "dlrm":
        groups = (AllReduceGroup(tuple(range(n)), job.dense_mb),) if job.dense_mb else ()
        # every table's holder to every other server and back: lookup x (tables at u + at v)
        held = np.bincount(np.array(strategy.tables, dtype=np.int64), minlength=n).astype(float)
        matrix = job.lookup_mb * (held[:, None] + held[None, :])
        np.fill_diagonal(matrix, 0.0)
        us, vs = np.nonzero(matrix)
        mp = dict(zip(zip(us.tolist(), vs.tolist(), strict=True), matrix[us, vs].tolist(), strict=True))
        return Demand(n, groups, mp, tuple(range(n)), matrix)
    k, place = strategy.stages, strategy.placement
    replicas = n // k
    out = []
    for stage in range(k):
        members = tuple(place[r * k + stage] for r in range(replicas))
        if len(members) > 1 and job.params_mb:
            out.append(AllReduceGroup(members, job.params_mb / k))
    if job.activation_mb and k > 1:
        per_boundary = job.activation_mb * k
        for r in range(replicas):
            for stage in range(k - 1):
                a, b = place[r * k + stage], place[r * k + stage + 1]
                mp[a, b] = mp.get((a, b), 0.0) + per_boundary
                mp[b, a] = mp.get((b, a), 0.0) + per_boundary
    return Demand(n, tuple(out), mp, tuple(place))


def compute_ms(job: Job, strategy: Strategy) -> float:
    """An iteration's compute under ``strategy``: a pipeline of ``S`` stages over ``M``
    micro-batches idles ``(S - 1) / M`` of it (GPipe's bubble); DLRM's compute is fixed.

    >>> from controller.topoopt.job import Job, Strategy
    >>> j = Job(name="t", model="transformer", servers=4, compute_ms=80, micro_batches=8,
    ...         strategy=Strategy(stages=4, placement=(0, 1, 2, 3)))
    >>> compute_ms(j, j.strategy)
    110.0
    """
    if job.model == "transformer":
        return job.compute_ms * (job.micro_batches + strategy.stages - 1) / job.micro_batches
    return job.compute_ms
