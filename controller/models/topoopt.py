"""An analytical model of TopoOpt at the paper's scale: iteration time on a TopoOpt fabric
against a fat-tree of similar cost and an ideal (non-blocking) switch, for a DLRM-like and a
transformer-like job. Pure; :mod:`controller.models.topoopt_report` writes the files.

Assumptions, each a parameter:

- ``n`` servers, each with ``d`` NICs of ``nic_gbps``; TopoOpt patches NIC ``i`` of every
  server into the ring of stride ``delta_i`` (TotientPerms, :mod:`controller.topology.totient`),
  circuits one-way as on TopoOpt's patch panels.
- All-reduce is *mutable* (TopoOpt's premise): the gradient is split over the ``d`` rings,
  each a ring all-reduce at one NIC's rate, ``2 (n - 1) / n x S / (d x B)``.
- All-to-all (model-parallel embeddings or experts) is not mutable: it rides the multi-hop
  routes the controller compiles (:func:`controller.routing.topoopt_routes.compile_host_routes`),
  every byte costing the mean route length ``L`` in link capacity, spread evenly over the
  ``n x d`` links: ``(n - 1) / n x S x L / (d x B)``.
- A fat-tree of *similar cost* has ``d x B / cost_ratio`` per server, with ``cost_ratio`` the
  paper's 3.2 (an ideal switch of TopoOpt's bandwidth costs about 3.2x a TopoOpt fabric);
  the ideal switch has ``d x B``. Both are non-blocking: all-reduce ``2 (n - 1) / n x S /
  B_server``, all-to-all ``(n - 1) / n x S / B_server``.
- An iteration is compute then communication; ``overlap`` of the communication hides behind
  compute (0 by default: the model's upper bound on the network's weight).
- Bandwidth tax: link bytes over injected bytes, ``(A + L x M) / (A + M)`` for all-reduce
  bytes ``A`` and all-to-all bytes ``M`` per iteration.

The workloads' sizes are stated assumptions in the style of the paper's DLRM and BERT-like
jobs, not measurements.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controller.errors import ConfigError
from controller.routing.topoopt_routes import wiring_of
from controller.topology.generators import topoopt

__all__ = ["COST_RATIO", "PAPER_SPEEDUP", "PAPER_TAX", "WORKLOADS", "Workload", "iteration", "mean_route_length"]

#: an ideal switch of TopoOpt's bandwidth costs about this many TopoOpt fabrics (the paper)
COST_RATIO = 3.2
#: the paper's claims the model is put next to
PAPER_SPEEDUP = "up to 3.4x faster training than a fat-tree of similar cost (simulation, 128 servers, d = 4..8)"
PAPER_TAX: dict[int, float] = {4: 1.11, 8: 1.05}


@dataclass(frozen=True, slots=True)
class Workload:
    """Per server and iteration: compute, the all-reduce's gradient and the all-to-all's bytes."""

    name: str
    compute_ms: float
    allreduce_mb: float
    alltoall_mb: float


#: assumptions (MB per server per iteration): a DLRM-like job, heavy on embedding
#: all-to-all, and a transformer-like data-parallel job, heavy on all-reduce
WORKLOADS = (
    Workload("DLRM-like", compute_ms=40.0, allreduce_mb=200.0, alltoall_mb=60.0),
    Workload("transformer-like", compute_ms=120.0, allreduce_mb=1300.0, alltoall_mb=0.0),
)


def mean_route_length(n: int, d: int) -> float:
    """Circuits a byte crosses on average between two servers of ``topoopt(n, d)``.

    >>> mean_route_length(8, 2)
    2.0
    """
    return wiring_of(topoopt(n, d)).mean_route_length()


def _ms(mb: float, gbps: float) -> float:
    return mb * 8 / gbps  # MB over Gb/s = ms


def iteration(w: Workload, *, n: int, d: int, nic_gbps: float = 100.0, cost_ratio: float = COST_RATIO,
              overlap: float = 0.0) -> dict[str, float]:
    """Iteration times (ms) of ``w`` on TopoOpt, the similar-cost fat-tree and the ideal
    switch, the speed-ups and the tax.

    >>> r = iteration(Workload("x", 0.0, 100.0, 0.0), n=16, d=4, nic_gbps=10.0)
    >>> round(r["topoopt_ms"], 1), round(r["fat_tree_ms"], 1), round(r["speedup_vs_fat_tree"], 2)
    (37.5, 120.0, 3.2)
    """
    if n < 3 or d < 1 or nic_gbps <= 0 or cost_ratio <= 0 or not 0 <= overlap < 1:
        raise ConfigError("<topoopt model>", "n/d/nic_gbps/cost_ratio/overlap", (n, d, nic_gbps, cost_ratio, overlap),
                          "n >= 3, d >= 1, positive rates and ratio, 0 <= overlap < 1")
    length = mean_route_length(n, d) if w.alltoall_mb else 1.0
    frac = (n - 1) / n
    topo_comm = _ms(2 * frac * w.allreduce_mb, d * nic_gbps) + _ms(frac * w.alltoall_mb * length, d * nic_gbps)

    def switch(gbps: float) -> float:
        return _ms(2 * frac * w.allreduce_mb, gbps) + _ms(frac * w.alltoall_mb, gbps)

    def total(comm: float) -> float:
        return w.compute_ms + max(0.0, comm - overlap * min(comm, w.compute_ms))

    topo, tree, ideal = total(topo_comm), total(switch(d * nic_gbps / cost_ratio)), total(switch(d * nic_gbps))
    injected = 2 * frac * w.allreduce_mb + frac * w.alltoall_mb
    carried = 2 * frac * w.allreduce_mb + frac * w.alltoall_mb * length
    return {"topoopt_ms": topo, "fat_tree_ms": tree, "ideal_ms": ideal, "speedup_vs_fat_tree": tree / topo,
            "ideal_vs_topoopt": topo / ideal, "tax": carried / injected if injected else 1.0,
            "route_length": length}


#: the paper-scale jobs of the co-optimized model (per iteration; stated assumptions in the
#: style of the paper's DLRM and BERT-like jobs, not measurements)
PAPER_JOBS = (
    {"name": "DLRM-like", "model": "dlrm", "compute_ms": 40.0, "dense_mb": 200.0, "tables": 64, "lookup_mb": 0.5},
    {"name": "transformer-like", "model": "transformer", "compute_ms": 120.0, "params_mb": 1300.0,
     "activation_mb": 4.0, "micro_batches": 8, "strategy": {"stages": 4}},
)


def coopt_rows(n: int = 128, degrees: tuple[int, ...] = (4, 6, 8), nic_gbps: float = 100.0,
               cost_ratio: float = COST_RATIO, max_evals: int = 300,
               progress: Callable[[str], None] | None = None) -> list[dict[str, object]]:
    """TopoOpt co-optimized (TopologyFinder alternating with the strategy search, the same code
    as the emulation's) against TotientPerms only and a fat-tree of similar cost, each with the
    strategy searched for it, per paper-scale job and degree. ``max_evals`` bounds each search
    (128 servers have 8,128 swaps; an evaluation of the DLRM-like job's 16,000 transfers takes
    about 10 ms; at d = 4, searches of 100 and of 500 evaluations end on the same strategies)."""
    from controller.topoopt.job import parse_job
    from controller.topoopt.search import best_round, co_optimize, fat_tree_score, search_strategy

    rows: list[dict[str, object]] = []
    for spec in PAPER_JOBS:
        job = parse_job({**spec, "servers": n}, "<paper-scale job>")
        for d in degrees:
            if progress:
                progress(f"{job.name}, d = {d}: co-optimizing {n} servers")
            rounds = co_optimize(job, d, nic_mbps=nic_gbps * 1e3, max_evals=max_evals)
            kept, first = best_round(rounds), rounds[0]
            _, tree, _ = search_strategy(job, job.strategy, fat_tree_score(job, d * nic_gbps * 1e3 / cost_ratio),
                                         max_evals=max_evals)
            rows.append({"workload": job.name, "d": d, "topoopt_ms": kept.timing.total_ms,
                         "totient_ms": first.timing.total_ms, "fat_tree_ms": tree.total_ms,
                         "speedup_vs_fat_tree": tree.total_ms / kept.timing.total_ms,
                         "speedup_vs_totient": first.timing.total_ms / kept.timing.total_ms,
                         "tax": kept.timing.tax, "mp_tax": kept.timing.mp_tax,
                         "allreduce_tax": kept.timing.allreduce_tax, "circuits": ", ".join(kept.wiring.labels),
                         "strategy": kept.strategy.describe()[:60], "rounds": len(rounds)})
    return rows
