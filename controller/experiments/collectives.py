"""The collectives experiment's pure side: Open MPI's ``MPI_Allreduce`` and ``MPI_Alltoall``
(its default algorithm and a forced one) next to the project's own collectives and the
analytical model, on rail-only and its fat-tree. Configuration, the model of each
algorithm's traffic, the summary and the verdicts; the Mininet runner
(``mininet/collectives_experiment.py``) measures the rows.

Every row is one timed repetition: ``fabric``, ``collective`` (allreduce or alltoall),
``bytes`` (each rank's buffer), ``library`` (open-mpi or mlfabric), ``algorithm``,
``rep``, ``seconds``, ``ok``, and the fidelity monitors of the interval it was measured in
(``block`` names that interval: Open MPI's repetitions of one size share one).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.errors import ConfigError
from controller.experiments.comparisons import Side, judge_ratio
from controller.experiments.fidelity import Verdict
from controller.experiments.ompi_tuned import ALGORITHMS, default_algorithm
from controller.experiments.rail_only import ExperimentConfig
from controller.models.collectives import (
    VETH_FRAME_OVERHEAD,
    alltoall_direct_time,
    alltoall_hierarchical_time,
    hierarchical_allreduce_time,
    ring_allreduce_time,
    tcp_payload_fraction,
)
from controller.topology.model import JUMBO_MTU, MTU_RANGE
from mlfabric_base.errors import refuse_nonfinite
from workloads.config import CLUSTER_TCP_CONGESTION

__all__ = ["COLLECTIVES", "PROJECT_OPS", "CollectivesConfig", "model_time", "series_key", "summarize", "verdicts"]

COLLECTIVES = ("allreduce", "alltoall")
#: the project's collectives each fabric runs: (worker op, collective, algorithm); the direct
#: all-to-all needs a path between rails
PROJECT_OPS = {
    "rail-only": (("allreduce", "allreduce", "ring"), ("hier_allreduce", "allreduce", "hierarchical"),
                  ("hier_alltoall", "alltoall", "hierarchical")),
    "fat-tree": (("allreduce", "allreduce", "ring"), ("hier_allreduce", "allreduce", "hierarchical"),
                 ("alltoall", "alltoall", "direct"), ("hier_alltoall", "alltoall", "hierarchical")),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectivesConfig:
    """What one run of ``mlfabric experiment run collectives`` emulates and measures."""

    gpus: int = 16
    rails: int = 4
    #: 50 Mbit/s with super-packets of 7 frames (10 Mbit/s frame by frame before, where 16 Open MPI
    #: ranks' all-to-alls kept the 2-core machine above the fidelity limit at 16)
    rate_mbps: float = 50.0
    #: intra-server bandwidth of the project's collectives (loopback) as a multiple of the NIC
    #: rate, per GPU; Open MPI's ranks of one server talk through shared memory, unshaped
    nvlink_factor: float = 8.0
    spines: int = 2
    #: 2 and 8 MiB: at 50 Mbit/s 16 ranks' per-message work kept the machine 75-94% busy at 64 KiB
    #: and up to 63% at 1 MiB (Open MPI's ranks poll while a collective runs)
    sizes_kb: tuple[int, ...] = (2048, 8192)
    #: 10: Open MPI's default all-to-all varies from run to run by up to 40% (TCP incast)
    repetitions: int = 10
    #: the algorithms of the forced Open MPI run: (allreduce, alltoall)
    forced: tuple[str, str] = ("ring", "pairwise")
    #: run the project's collectives too
    project: bool = True
    #: a waiting Open MPI rank's longest sleep between polls, us (0: it spins)
    idle_us: int = 500
    #: Open MPI MCA parameters for both runs, (name, value) pairs
    mca: tuple[tuple[str, str], ...] = ()
    target: str = "python"
    engine: str | None = None
    mtu: int = JUMBO_MTU
    tcp_congestion: str = CLUSTER_TCP_CONGESTION
    tcp_rto_min_ms: float = 1000.0
    #: the project's collectives' NVLink (ExperimentConfig.nvlink)
    nvlink: str = "unix"
    #: frames per TCP super-packet through the switches (ExperimentConfig.super_frames)
    super_frames: int = 7
    #: seconds one mpirun (every size of both collectives) may take
    timeout_s: float = 900.0
    #: a machines file: both fabrics spread over those machines (controller.cluster); "" one machine
    cluster: str = ""

    @property
    def servers(self) -> int:
        return self.gpus // self.rails

    def validate(self) -> CollectivesConfig:
        """Reject bad input before anything starts (names the value)."""
        def bad(key: str, value: object, problem: str) -> ConfigError:
            return ConfigError("<experiment>", key, value, problem)

        refuse_nonfinite("<experiment>", self)
        if not self.sizes_kb:
            raise bad("sizes_kb", self.sizes_kb, "give at least one size")
        for kb in self.sizes_kb:
            if kb < 1 or (kb * 1024) % (8 * self.gpus):
                raise bad("sizes_kb", kb, f"each size must be a positive multiple of 8 bytes x {self.gpus} ranks")
        if len(set(self.sizes_kb)) != len(self.sizes_kb):
            raise bad("sizes_kb", self.sizes_kb, "sizes must differ")
        if self.repetitions < 2:
            raise bad("repetitions", self.repetitions, "need at least 2 for a spread")
        for collective, algorithm in zip(COLLECTIVES, self.forced, strict=True):
            if algorithm not in ALGORITHMS[collective].values():
                raise bad(f"forced {collective}", algorithm, f"one of {', '.join(ALGORITHMS[collective].values())}")
        for name, value in self.mca:
            if not name or not name.replace("_", "").isalnum() or not value:
                raise bad("mca", f"{name}={value}", "give NAME=VALUE, e.g. btl_tcp_eager_limit=8388608")
        if self.idle_us < 0:
            raise bad("idle_us", self.idle_us, "must be >= 0 (0: spin)")
        if not MTU_RANGE[0] <= self.mtu <= MTU_RANGE[1]:
            raise bad("mtu", self.mtu, f"an MTU must be in {MTU_RANGE[0]}..{MTU_RANGE[1]} bytes")
        self.fabric_config().validate()
        return self

    def fabric_config(self) -> ExperimentConfig:
        """The rail-only experiment's configuration of the same fabrics and workers (its
        fabrics, worker settings and loopback shaping are reused as they are)."""
        size = max(self.sizes_kb) * 1024
        return ExperimentConfig(gpus=self.gpus, rails=self.rails, rate_mbps=self.rate_mbps,
                                nvlink_factor=self.nvlink_factor, spines=self.spines, iterations=self.repetitions,
                                warmup=1, allreduce_bytes=size, alltoall_bytes=size, target=self.target,
                                engine=self.engine, tcp_congestion=self.tcp_congestion,
                                tcp_rto_min_ms=self.tcp_rto_min_ms, mtu=self.mtu, nvlink=self.nvlink,
                                super_frames=self.super_frames, cluster=self.cluster)


def series_key(row: Mapping[str, Any]) -> str:
    """A row's series: library and algorithm, e.g. ``open-mpi rabenseifner (default)``."""
    return f"{row['library']} {row['algorithm']}"


def _pow2(n: int) -> bool:
    return n > 0 and not n & (n - 1)


def model_time(cfg: CollectivesConfig, collective: str, library: str, algorithm: str, size: int) -> float | None:
    """The network's floor for one algorithm's traffic at the emulated NIC rate (the TCP
    payload a shaped veth carries at the run's MTU), ranks numbered server by server. Open
    MPI's ranks of one server share memory (free here); the project's talk over the NVLink
    at ``nvlink_factor`` x the NIC rate (``ExperimentConfig.nvlink_payload_bytes_per_s``).
    None where no model is written.

    >>> cfg = CollectivesConfig(rate_mbps=16.0)
    >>> round(model_time(cfg, "allreduce", "open-mpi", "rabenseifner (default)", 1 << 20), 3)  # 3/8 MiB per NIC
    0.198
    >>> round(model_time(cfg, "allreduce", "open-mpi", "ring (forced)", 1 << 20), 3)  # 2 x 15/16 MiB
    0.99
    >>> round(model_time(cfg, "alltoall", "open-mpi", "linear (default)", 1 << 20), 3)  # 12/16 MiB
    0.396
    """
    n, g, d = cfg.gpus, cfg.rails, cfg.servers
    nic = cfg.rate_mbps * 1e6 / 8 * tcp_payload_fraction(cfg.mtu, VETH_FRAME_OVERHEAD)
    nv = cfg.fabric_config().nvlink_payload_bytes_per_s
    name = algorithm.split(" ")[0]
    if collective == "alltoall":
        if library == "mlfabric" and name == "hierarchical":
            return alltoall_hierarchical_time(size, n, g, nv, nic)
        # every algorithm sends each peer its block once; the off-server blocks leave
        # through the NICs (a cross-rail block through the destination rail's NIC)
        return alltoall_direct_time(size, n, g, nv if library == "mlfabric" else math.inf, nic)
    if name == "ring":
        return ring_allreduce_time(size, n, nic)
    if name == "hierarchical":
        return hierarchical_allreduce_time(size, g, d, nv, nic)
    if name == "rabenseifner" and _pow2(g) and _pow2(d):
        # recursive halving then doubling by distance 1, 2, 4...: the steps between servers
        # pair equal local ranks (one rail) and carry 2 (d - 1) / d of a 1/g share
        return 2 * (d - 1) / d * size / g / nic
    if name == "recursive_doubling" and _pow2(n) and _pow2(g):
        return math.log2(d) * size / nic
    return None


def summarize(rows: Iterable[Mapping[str, Any]], cfg: CollectivesConfig) -> list[dict[str, Any]]:
    """Per (fabric, collective, size, series): median, min and max over the successful
    repetitions, the model's time and its error.

    >>> rows = [{"fabric": "f", "collective": "allreduce", "bytes": 1 << 20, "library": "open-mpi",
    ...          "algorithm": "ring (forced)", "ok": True, "seconds": s} for s in (1.0, 1.2, 1.1)]
    >>> s = summarize(rows, CollectivesConfig(rate_mbps=16.0))[0]
    >>> s["median_s"], s["ok"], round(s["model_s"], 3), f"{s['model_error']:+.0%}"
    (1.1, 3, 0.99, '+11%')
    """
    groups: dict[tuple[str, str, int, str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["fabric"], r["collective"], int(r["bytes"]), r["library"], r["algorithm"]), []).append(r)
    out = []
    for (fabric, collective, size, library, algorithm), rs in groups.items():
        times = [float(r["seconds"]) for r in rs if r["ok"]]
        model = model_time(cfg, collective, library, algorithm, size)
        median = statistics.median(times) if times else float("nan")
        out.append({"fabric": fabric, "collective": collective, "bytes": size, "library": library,
                    "algorithm": algorithm, "median_s": median,
                    "min_s": min(times) if times else float("nan"), "max_s": max(times) if times else float("nan"),
                    "ok": len(times), "failed": len(rs) - len(times), "model_s": model,
                    "model_error": (median - model) / model if model and times else None})
    return out


def _op(row: Mapping[str, Any]) -> tuple[str, int, str]:
    return row["collective"], int(row["bytes"]), series_key(row)


def _intervals(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One row per measured interval (Open MPI's repetitions of a block share one), a
    successful one where the block has one (a failed run's figures are not judged)."""
    seen: dict[str, Mapping[str, Any]] = {}
    for r in rows:
        block = str(r.get("block") or id(r))
        if block not in seen or (r.get("ok") and not seen[block].get("ok")):
            seen[block] = r
    return list(seen.values())


def verdicts(rows: Sequence[Mapping[str, Any]], cfg: CollectivesConfig) -> dict[str, tuple[Verdict, dict[str, float]]]:
    """Each comparison's verdict and its ratio's spread, by the one rule
    (:func:`controller.experiments.comparisons.judge_ratio`), paired by repetition:

    - per collective and size, Open MPI's default on rail-only against the fat-tree;
    - per collective, at the largest size, the forced algorithm on rail-only against the
      fat-tree (a ring's cross-rail edges are where the fabrics differ);
    - per fabric and collective, at the largest size, Open MPI's default against the
      project's hierarchical collective.
    """
    out: dict[str, tuple[Verdict, dict[str, float]]] = {}

    def side(fabric: str, op: tuple[str, int, str]) -> Side:
        return Side(f"{fabric} {op[2]} {op[1] // 1024} KiB", [r for r in rows if r["fabric"] == fabric and _op(r) == op])

    def compare(name: str, a: tuple[str, tuple[str, int, str]], b: tuple[str, tuple[str, int, str]],
                subject: str) -> None:
        num, den = side(*a), side(*b)
        out[name] = judge_ratio(name, subject, num, den, key=lambda r: r["rep"],
                                intervals=_intervals([*num.rows, *den.rows]))

    for collective in COLLECTIVES:
        for kb in cfg.sizes_kb:
            size = kb * 1024
            default = f"open-mpi {default_algorithm(collective, cfg.gpus, size)} (default)"
            compare(f"{collective} {kb} KiB: rail-only / fat-tree", ("rail-only", (collective, size, default)),
                    ("fat-tree", (collective, size, default)), "rail-only is")
    size = max(cfg.sizes_kb) * 1024
    for collective, algorithm in zip(COLLECTIVES, cfg.forced, strict=True):
        forced = f"open-mpi {algorithm} (forced)"
        compare(f"{collective} {max(cfg.sizes_kb)} KiB, {algorithm}: rail-only / fat-tree",
                ("rail-only", (collective, size, forced)), ("fat-tree", (collective, size, forced)), "rail-only is")
    if cfg.project:
        for fabric in ("rail-only", "fat-tree"):
            for collective in COLLECTIVES:
                default = f"open-mpi {default_algorithm(collective, cfg.gpus, size)} (default)"
                compare(f"{collective} {max(cfg.sizes_kb)} KiB on {fabric}: Open MPI / mlfabric hierarchical",
                        (fabric, (collective, size, default)), (fabric, (collective, size, "mlfabric hierarchical")),
                        "Open MPI's default is")
    return out
