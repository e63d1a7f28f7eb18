"""The strategy search and its alternation with TopologyFinder (pure, seeded).

TopoOpt alternates a parallelization search (FlexFlow's MCMC in the artifact) with
TopologyFinder until neither improves. Here the search is small and explicit: first-
improvement hill climbing over shard placements (a table moved to another server; two
servers of a pipeline swapped) and the data/model-parallel degree (the pipeline's depth),
scored by the iteration-time model (:mod:`controller.topoopt.timing`) on the current
topology, visiting moves in a seeded random order. A move is taken only if it strictly
shortens the iteration, so no search ever worsens its score, and each alternation round
starts from the last round's strategy; the alternation stops at the first round that does
not improve on the best so far.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from controller.topoopt.demand import compute_ms, demand
from controller.topoopt.finder import find_wiring, totient_wiring
from controller.topoopt.job import Job, Strategy
from controller.topoopt.timing import Timing, fat_tree_time, wiring_time
from controller.topoopt.wiring import Wiring

__all__ = ["Round", "co_optimize", "moves", "search_strategy"]

Score = Callable[[Strategy], Timing]


@dataclass(frozen=True, slots=True)
class Round:
    """One step of the alternation: what it did and where it left the job."""

    round: int
    step: str  # "strategy search" | "TopologyFinder"
    strategy: Strategy
    wiring: Wiring
    timing: Timing
    evaluated: int = 0


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def moves(job: Job, s: Strategy, rng: random.Random) -> Iterator[Strategy]:
    """Every neighbour of ``s``, in a seeded random order.

    >>> from controller.topoopt.job import Job, Strategy
    >>> j = Job(name="x", model="dlrm", servers=3, compute_ms=0, dense_mb=1, tables=1, lookup_mb=1,
    ...         strategy=Strategy(tables=(0,)))
    >>> sorted(m.tables for m in moves(j, j.strategy, random.Random(0)))
    [(1,), (2,)]
    """
    n = job.servers
    cands: list[Strategy] = []
    if job.model == "dlrm":
        for t, here in enumerate(s.tables):
            for there in range(n):
                if there != here:
                    tables = list(s.tables)
                    tables[t] = there
                    cands.append(Strategy(tables=tuple(tables)))
    else:
        for i in range(n):
            for j in range(i + 1, n):
                p = list(s.placement)
                p[i], p[j] = p[j], p[i]
                cands.append(Strategy(stages=s.stages, placement=tuple(p)))
        cands += [Strategy(stages=k, placement=s.placement) for k in _divisors(n) if k != s.stages]
    rng.shuffle(cands)
    yield from cands


def search_strategy(job: Job, start: Strategy, score: Score, *, seed: int = 0,
                    max_evals: int = 4000) -> tuple[Strategy, Timing, int]:
    """The best strategy hill climbing reaches from ``start``: ``(strategy, timing, evaluations)``."""
    rng = random.Random(seed)
    best, best_t = start, score(start)
    evals = 1
    improved = True
    while improved and evals < max_evals:
        improved = False
        for cand in moves(job, best, rng):
            t = score(cand)
            evals += 1
            if t.total_ms < best_t.total_ms - 1e-9:
                best, best_t, improved = cand, t, True
                break
            if evals >= max_evals:
                break
    return best, best_t, evals


def _on(job: Job, wiring: Wiring, nic_mbps: float) -> Score:
    return lambda s: wiring_time(demand(job, s), wiring, nic_mbps=nic_mbps, compute_ms=compute_ms(job, s))


def fat_tree_score(job: Job, server_mbps: float) -> Score:
    return lambda s: fat_tree_time(demand(job, s), server_mbps=server_mbps, compute_ms=compute_ms(job, s))


def co_optimize(job: Job, d: int, *, nic_mbps: float, seed: int = 0, max_rounds: int = 6,
                max_evals: int = 4000, duplex: bool = False) -> list[Round]:
    """TopoOpt's alternation from TotientPerms; round 0 is the strategy search on
    TotientPerms alone (the TotientPerms-only fabric), the best round the last one kept.

    >>> from controller.topoopt.job import Job, Strategy
    >>> j = Job(name="t", model="transformer", servers=8, compute_ms=0, params_mb=1.0, activation_mb=0.1,
    ...         strategy=Strategy(stages=2, placement=tuple(range(8))))
    >>> rounds = co_optimize(j, 2, nic_mbps=100.0)
    >>> rounds[0].timing.total_ms >= min(r.timing.total_ms for r in rounds)
    True
    """
    wiring = totient_wiring(job.servers, d, duplex=duplex)
    strategy, timing, evals = search_strategy(job, job.strategy, _on(job, wiring, nic_mbps), seed=seed,
                                              max_evals=max_evals)
    rounds = [Round(0, "strategy search", strategy, wiring, timing, evals)]
    best = timing.total_ms
    for k in range(1, max_rounds + 1):
        found = find_wiring(demand(job, strategy), d, nic_mbps=nic_mbps, duplex=duplex)
        t = wiring_time(demand(job, strategy), found.wiring, nic_mbps=nic_mbps, compute_ms=compute_ms(job, strategy))
        rounds.append(Round(k, "TopologyFinder", strategy, found.wiring, t))
        strategy, t, evals = search_strategy(job, strategy, _on(job, found.wiring, nic_mbps), seed=seed + k,
                                             max_evals=max_evals)
        rounds.append(Round(k, "strategy search", strategy, found.wiring, t, evals))
        if t.total_ms >= best - 1e-9:
            break
        best = t.total_ms
    return rounds


def best_round(rounds: list[Round]) -> Round:
    """The round the alternation keeps: the shortest iteration, the earliest on ties."""
    return min(rounds, key=lambda r: (round(r.timing.total_ms, 9), r.round))
