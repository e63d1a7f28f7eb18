"""The TopoOpt experiment's pure side: configuration, the four fabrics each job runs on, the
iteration each fabric's workers execute, counters in, figures and verdicts out.

Per job (a DLRM-like and a transformer-like one, :mod:`controller.topoopt.job`) and degree
``d``, four fabrics of the same servers, each with the strategy searched for it:

- ``topoopt``: TopoOpt co-optimized, the alternation of TopologyFinder and the strategy
  search (:func:`controller.topoopt.search.co_optimize`), its best round;
- ``totient``: TopoOpt with TotientPerms rings only (round 0: the strategy searched on it);
- ``fat-tree-cost``: a fat-tree of equal cost: one NIC of ``d x rate / 3.2`` per server (the
  paper: an ideal switch costs about 3.2x TopoOpt);
- ``fat-tree-bw``: a fat-tree of equal bandwidth: one NIC of ``d x rate``.

The fat-trees are two-tier (leaves of ``fat_tree_radix / 2`` servers under two spines, full
bisection), so that no single leaf carries everything. Every fabric's workers run the same
iteration as the model (:mod:`controller.topoopt.timing`): compute, the model-parallel
transfers, then every all-reduce split over its rings, each result checked.

The *bandwidth tax* is what the fabric carries over what the servers inject. Every byte a
server sends crosses one circuit, and each server counts the IP bytes it originates and
those it forwards for others (nftables counters on its output and forward hooks,
:func:`controller.routing.topoopt_routes.accounting_commands`); the tax is the bytes carried
(originated plus forwarded) over the bytes originated, ACKs included.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.errors import ConfigError
from controller.models.topoopt import COST_RATIO, PAPER_TAX
from controller.routing.topoopt_routes import ACCOUNTING_TABLE, wiring_of
from controller.topology import rail_fat_tree, topoopt_wired
from controller.topology.model import Topology
from controller.topoopt.demand import compute_ms, demand
from controller.topoopt.job import Job, Strategy, load_job
from controller.topoopt.search import (
    Round,
    best_round,
    co_optimize,
    fat_tree_score,
    search_strategy,
)
from controller.topoopt.timing import Timing, all_group_rings
from controller.topoopt.wiring import Wiring
from mlfabric_base.errors import refuse_nonfinite

__all__ = ["COST_RATIO", "DEFAULT_JOBS", "FABRICS", "PAPER_TAX", "Planned", "TopoOptConfig", "Variant",
           "expected_tax", "mean_sd", "plan", "relay_bytes", "step_spec", "tax"]

REPO = Path(__file__).resolve().parents[2]
DEFAULT_JOBS = (str(REPO / "topologies/jobs/topoopt-dlrm.yaml"), str(REPO / "topologies/jobs/topoopt-transformer.yaml"))
#: the fabrics of every (job, degree), in the order they run
FABRICS = {"topoopt": "TopoOpt, co-optimized", "totient": "TopoOpt, TotientPerms only",
           "fat-tree-cost": "fat-tree, equal cost", "fat-tree-bw": "fat-tree, equal bandwidth"}


@dataclass(frozen=True, slots=True, kw_only=True)
class TopoOptConfig:
    """What one run of ``mlfabric experiment run topoopt`` emulates."""

    target: str = "python"
    #: the Python target's packet engine (mlfabric-switch --engine); None: its default
    engine: str | None = None
    jobs: tuple[str, ...] = DEFAULT_JOBS
    #: None: each job's own server count
    servers: int | None = None
    degrees: tuple[int, ...] = (3, 4)
    #: 25 Mb/s with super-packets of 7 frames (5 Mb/s frame by frame before; frame by frame at 25 the
    #: DLRM-like job's TopoOpt fabric kept the machine 66% busy)
    rate_mbps: float = 25.0
    #: 5: each repetition places the fat-trees' flows anew by ECMP, and 3 left two transformer
    #: comparisons spread too wide to tell
    repetitions: int = 5
    #: untimed iterations first on every fabric (TCP windows, ARP, caches)
    warmup: int = 1
    #: the fat-tree switches' radix: leaves of radix/2 servers under 2 spines (None: one leaf)
    fat_tree_radix: int | None = 8
    cost_ratio: float = COST_RATIO
    seed: int = 0
    #: duplex circuits (every switch wires pairs both ways, as the artifact's links): rings
    #: take two switches each; False: one-way circuits, as on a patch panel
    duplex: bool = False
    #: frames per TCP super-packet through the circuit switches (ExperimentConfig.super_frames);
    #: 0: the hosts hand their qdiscs one frame per packet
    super_frames: int = 7

    def __post_init__(self) -> None:
        def bad(key: str, value: object, problem: str) -> ConfigError:
            return ConfigError("<topoopt experiment>", key, value, problem)

        refuse_nonfinite("<topoopt experiment>", self)
        if self.target not in ("python", "bmv2"):
            raise bad("--target", self.target, "is python or bmv2")
        if not self.jobs:
            raise bad("--jobs", self.jobs, "name at least one job file")
        if not self.degrees or min(self.degrees) < 1:
            raise bad("--degrees", self.degrees, "are >= 1")
        if self.repetitions < 1 or self.warmup < 0:
            raise bad("--repetitions", (self.repetitions, self.warmup), "repetitions >= 1, warm-up >= 0")
        if self.rate_mbps <= 0 or self.cost_ratio <= 0:
            raise bad("--rate-mbps", (self.rate_mbps, self.cost_ratio), "a positive rate and cost ratio")
        from controller.experiments.rail_only import MAX_SUPER_FRAMES

        if not 0 <= self.super_frames <= MAX_SUPER_FRAMES:
            raise bad("--super-frames", self.super_frames, f"must be in 0..{MAX_SUPER_FRAMES}")
        if self.super_frames and self.target != "python":
            raise bad("--super-frames", self.super_frames, "is the Python target's (BMv2 takes frames only): use 0")
        if self.servers is not None and self.servers < 3:
            raise bad("--servers", self.servers, "must be >= 3")
        for job in self.load_jobs():
            if self.fat_tree_radix is not None:
                try:
                    rail_fat_tree(job.servers, 1, radix=self.fat_tree_radix)
                except ConfigError:
                    raise bad("--fat-tree-radix", self.fat_tree_radix,
                              "must be a power of two >= 4 (0: one leaf)") from None
            from controller.topoopt.finder import totient_wiring

            for d in self.degrees:
                try:
                    totient_wiring(job.servers, d, duplex=self.duplex)
                except ConfigError as exc:
                    raise bad("--degrees", d, exc.problem) from None

    def load_jobs(self) -> list[Job]:
        return [resized(load_job(p), self.servers) for p in self.jobs]


def resized(job: Job, servers: int | None) -> Job:
    """``job`` on ``servers`` servers (its own count if None), from its default strategy."""
    import dataclasses

    if servers is None or servers == job.servers:
        return job
    if job.model == "dlrm":
        tables = min(job.tables, servers)
        start = Strategy(tables=tuple(t * servers // tables % servers for t in range(tables)))
        return dataclasses.replace(job, name=f"{job.name.rsplit('-', 1)[0]}-{servers}", servers=servers,
                                   tables=tables, strategy=start)
    stages = job.strategy.stages if servers % job.strategy.stages == 0 else 1
    return dataclasses.replace(job, name=f"{job.name.rsplit('-', 1)[0]}-{servers}", servers=servers,
                               strategy=Strategy(stages=stages, placement=tuple(range(servers))))


@dataclass(frozen=True, slots=True)
class Variant:
    """One fabric of a (job, degree): its topology, strategy, the model's iteration and the
    workers' ``step`` (:mod:`workloads.job_step`)."""

    fabric: str
    topology: Topology
    strategy: Strategy
    model: Timing
    step: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Planned:
    """A (job, degree): the alternation's rounds and the four fabrics."""

    job: Job
    degree: int
    rounds: list[Round] = field(default_factory=list)
    variants: list[Variant] = field(default_factory=list)


def _bytes(mb: float) -> int:
    return round(mb * 1e6 / 4) * 4


def step_spec(job: Job, strategy: Strategy, wiring: Wiring | None) -> dict[str, Any]:
    """The workers' iteration: ``job`` under ``strategy`` on ``wiring`` (its rings), or on a
    fat-tree (None: each group one ring in its members' order).

    >>> from controller.topoopt.job import Job, Strategy
    >>> j = Job(name="t", model="transformer", servers=4, compute_ms=100, params_mb=0.002, activation_mb=0.001,
    ...         micro_batches=2, strategy=Strategy(stages=2, placement=(0, 1, 2, 3)))
    >>> s = step_spec(j, j.strategy, None)
    >>> s["compute_s"], s["mp"][:2], s["groups"][0]
    (0.15, [[0, 1, 2000], [1, 0, 2000]], {'bytes': 1000, 'rings': [[0, 2]], 'shares': [1.0]})
    """
    dem = demand(job, strategy)
    mp = [[u, v, _bytes(mb)] for (u, v), mb in sorted(dem.mp.items())]
    groups = []
    rings_of = all_group_rings(wiring, dem.groups) if wiring is not None else [None] * len(dem.groups)
    for g, rings in zip(dem.groups, rings_of, strict=True):
        if rings is None:
            groups.append({"bytes": _bytes(g.mb), "rings": [list(g.members)], "shares": [1.0]})
        elif rings:
            groups.append({"bytes": _bytes(g.mb), "rings": [list(r.order) for r in rings],
                           "shares": [round(r.share, 6) for r in rings]})
    return {"compute_s": round(compute_ms(job, strategy) / 1000, 6), "mp": mp, "groups": groups}


def plan(cfg: TopoOptConfig, job: Job, d: int) -> Planned:
    """The alternation and the four fabrics of ``job`` at degree ``d`` (pure)."""
    rate = cfg.rate_mbps
    rounds = co_optimize(job, d, nic_mbps=rate, seed=cfg.seed, duplex=cfg.duplex)
    best, first = best_round(rounds), rounds[0]
    out = []
    for key, rnd in (("topoopt", best), ("totient", first)):
        topo = topoopt_wired(rnd.wiring, rate_mbps=rate, name=f"{job.name}-{key}-d{d}")
        out.append(Variant(key, topo, rnd.strategy, rnd.timing, step_spec(job, rnd.strategy, rnd.wiring)))
    for key, mbps in (("fat-tree-cost", d * rate / cfg.cost_ratio), ("fat-tree-bw", d * rate)):
        strategy, timing, _ = search_strategy(job, job.strategy, fat_tree_score(job, mbps), seed=cfg.seed)
        topo = rail_fat_tree(job.servers, 1, spines=2, radix=cfg.fat_tree_radix, rate_mbps=round(mbps, 4),
                             name=f"{job.name}-{key}-d{d}")
        out.append(Variant(key, topo, strategy, timing, step_spec(job, strategy, None)))
    return Planned(job, d, rounds, out)


def expected_tax(topo: Topology) -> float:
    """Uniform all-to-all's tax: the mean route length over all ordered server pairs.

    >>> from controller.topology import topoopt
    >>> expected_tax(topoopt(8, 2))  # one-way strides 1 and 3: 1,2,1,2,3,2,3 circuits
    2.0
    """
    return wiring_of(topo).mean_route_length()


def relay_bytes(nft_json: str) -> tuple[int, int]:
    """``(originated, forwarded)`` IP bytes from ``nft -j list table ip mlfabric_acct``.

    >>> relay_bytes('{"nftables": [{"rule": {"chain": "originated", "expr": [{"counter": {"packets": 2, "bytes": 900}}]}},'
    ...             ' {"rule": {"chain": "forwarded", "expr": [{"counter": {"packets": 1, "bytes": 300}}]}}]}')
    (900, 300)
    """
    counts: dict[str, int] = {}
    try:
        for item in json.loads(nft_json)["nftables"]:
            rule = item.get("rule")
            if rule:
                for expr in rule["expr"]:
                    if "counter" in expr:
                        counts[rule["chain"]] = counts.get(rule["chain"], 0) + int(expr["counter"]["bytes"])
    except (ValueError, KeyError, TypeError):
        raise ConfigError("nft", ACCOUNTING_TABLE, nft_json[:80], "is not nft's JSON listing of the table") from None
    if set(counts) != {"originated", "forwarded"}:
        raise ConfigError("nft", ACCOUNTING_TABLE, sorted(counts),
                          "needs its originated and forwarded counters (make setup installs nftables)")
    return counts["originated"], counts["forwarded"]


def tax(before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]]) -> float:
    """From each server's ``(bytes originated, bytes forwarded)`` before and after.

    >>> tax({"s0": (0, 0), "s1": (0, 0)}, {"s0": (100, 0), "s1": (0, 30)})  # s1 relayed 30 of s0's 100
    1.3
    """
    made = sum(after[h][0] - before[h][0] for h in after)
    passed = sum(after[h][1] - before[h][1] for h in after)
    return (made + passed) / made if made > 0 else float("nan")


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample sd of the finite values (NaN when there are none)."""
    ok = [v for v in values if v == v]
    if not ok:
        return float("nan"), float("nan")
    return statistics.fmean(ok), statistics.stdev(ok) if len(ok) > 1 else 0.0
