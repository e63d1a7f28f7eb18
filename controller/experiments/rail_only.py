"""The rail-only experiment's pure side: configuration, checks, aggregation, the cost of the
emulated fabrics, and the model cross-check. The Mininet runner (``mininet/rail_experiment.py``)
produces the per-iteration rows; :mod:`controller.experiments.results` writes them out.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.errors import ConfigError
from controller.experiments.regime import Emulated, from_probe
from controller.models.collectives import (
    VETH_FRAME_OVERHEAD,
    alltoall_direct_time,
    alltoall_hierarchical_time,
    hierarchical_allreduce_time,
    ring_allreduce_time,
    tcp_payload_fraction,
)
from controller.models.cost import ComponentCosts
from controller.topology import check_topology, rail_fat_tree, rail_only
from controller.topology.generators import FLOWLET_GAP_US, UPLINK_ROUTINGS
from controller.topology.model import JUMBO_MTU, MTU_RANGE, Topology
from mlfabric_base.errors import refuse_nonfinite
from workloads.config import CLUSTER_TCP_CONGESTION
from workloads.plan import ALLTOALL_SCHEDULES

__all__ = ["COLLECTIVES", "FABRICS", "MAX_SUPER_FRAMES", "NVLINK_KINDS", "OPS", "ExperimentConfig", "collective_of",
           "emulated_bill", "fabrics_for", "fat_trees", "is_fat_tree", "model_times", "ops_of", "regime_of", "suffix_of", "summarize"]

FABRICS = ("rail-only", "fat-tree")
#: how GPUs of one server talk: Unix sockets paced per GPU to the NVLink rate
#: (workloads.nvlink), or TCP over the host's loopback shaped to rails x that rate (before)
NVLINK_KINDS = ("unix", "loopback")
#: the most frames a TCP super-packet may stand for (64 KB of 1,500-byte frames)
MAX_SUPER_FRAMES = 45
#: collective ops per fabric: the direct all-to-all needs a path between rails
OPS = {
    "rail-only": ("allreduce", "hier_allreduce", "hier_alltoall"),
    "fat-tree": ("allreduce", "hier_allreduce", "alltoall", "hier_alltoall"),
}
#: what ``--collectives`` chooses from: the flat (ring) all-reduce, the hierarchical one
#: (NVLink, then each rail), the all-to-alls (rail-only's hierarchical, the fat-tree's direct
#: too), the training step
COLLECTIVES = ("allreduce", "hier-allreduce", "alltoall", "train-step")


def collective_of(op: str) -> str:
    """The :data:`COLLECTIVES` member an operation belongs to.

    >>> [collective_of(op) for op in ("allreduce", "hier_allreduce", "alltoall", "hier_alltoall", "train_step")]
    ['allreduce', 'hier-allreduce', 'alltoall', 'alltoall', 'train-step']
    """
    if "alltoall" in op:
        return "alltoall"
    return op.replace("_", "-")


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentConfig:
    """What one run of ``mlfabric experiment run rail-only`` emulates."""

    gpus: int = 16
    rails: int = 4
    #: 100 Mbit/s: with super-packets and the paced NVLink the machine stays under its 60%
    #: limit (before them, 16 Mbit/s was the ceiling: docs/benchmarks.md)
    rate_mbps: float = 100.0
    #: intra-server ("NVLink") bandwidth as a multiple of the NIC rate, per GPU
    nvlink_factor: float = 8.0
    spines: int = 2
    #: how the fat-tree's leaves pick an uplink (controller.topology.generators.UPLINK_ROUTINGS):
    #: one fat-tree per scheme, each compared with rail-only
    load_balancing: tuple[str, ...] = ("ecmp",)
    #: a flowlet ends when its flow pauses this long (µs; the flowlet scheme)
    flowlet_gap_us: int = FLOWLET_GAP_US
    #: how every all-to-all orders its transfers (workloads.plan.ALLTOALL_SCHEDULES)
    alltoall_schedule: str = "concurrent"
    iterations: int = 8
    #: unrecorded rounds of every collective first (one-off costs of a fresh fabric)
    warmup: int = 3
    #: 8 MiB per GPU: each collective takes 0.6-1.3 s at 100 Mbit/s, bandwidth-bound
    allreduce_bytes: int = 8 << 20
    alltoall_bytes: int = 8 << 20
    compute_s: float = 0.05
    target: str = "python"
    #: the Python target's packet engine (mlfabric-switch --engine); None: its default
    engine: str | None = None
    timeout_s: float = 120.0
    #: a collective fails when a transfer makes no progress for this long
    worker_timeout_s: float = 15.0
    #: kill this rail's switch before the last iteration (reliability run)
    fail_rail: int | None = None
    #: every worker connection's congestion control; "" keeps the machine's default
    tcp_congestion: str = CLUSTER_TCP_CONGESTION
    #: the hosts' minimum retransmission timeout, ms; 0 keeps the kernel's (200 ms)
    tcp_rto_min_ms: float = 1000.0
    #: whether the hosts' TCP restarts slow start on a connection that idled longer than its
    #: RTO (Linux's net.ipv4.tcp_slow_start_after_idle, on by default): between collectives
    #: every connection idles, so each collective starts from a small window again
    tcp_slow_start_after_idle: bool = True
    #: the workers' SO_SNDBUF/SO_RCVBUF; 0 keeps the kernel's autotuning
    sock_buf_bytes: int = 0
    #: every fabric's MTU (jumbo frames by default, as ML training fabrics run)
    mtu: int = JUMBO_MTU
    #: the intra-server NVLink: :data:`NVLINK_KINDS`
    nvlink: str = "unix"
    #: frames per TCP super-packet the hosts send and the switches forward whole
    #: (mlfabric-switch --super-packets); 0: every frame on its own. 7 jumbo frames are the
    #: 64 KB a host's TSO hands a NIC
    super_frames: int = 7
    #: the collectives run (:data:`COLLECTIVES`)
    collectives: tuple[str, ...] = COLLECTIVES
    #: the fabrics built (:data:`FABRICS`): without the fat-tree there is nothing to
    #: compare, and each collective is judged against its model instead (a scale check)
    fabrics: tuple[str, ...] = FABRICS
    #: a machines file: every fabric spread over those machines (controller.cluster); "" one machine
    cluster: str = ""

    @property
    def servers(self) -> int:
        return self.gpus // self.rails

    @property
    def nic_bytes_per_s(self) -> float:
        return self.rate_mbps * 1e6 / 8

    @property
    def nvlink_bytes_per_s(self) -> float:
        return self.nic_bytes_per_s * self.nvlink_factor

    @property
    def nvlink_payload_bytes_per_s(self) -> float:
        """What one GPU's NVLink carries of a collective's bytes: its whole rate over Unix
        sockets (paced on payload), a loopback's TCP payload share of it (64 KiB MTU)."""
        if self.nvlink == "unix":
            return self.nvlink_bytes_per_s
        return self.nvlink_bytes_per_s * tcp_payload_fraction(65536, VETH_FRAME_OVERHEAD)

    def validate(self) -> ExperimentConfig:
        """Reject bad input before anything starts (names the value)."""
        def bad(key: str, value: object, problem: str) -> ConfigError:
            return ConfigError("<experiment>", key, value, problem)

        refuse_nonfinite("<experiment>", self)
        if self.rails < 1:
            raise bad("rails", self.rails, "need at least one rail")
        if self.gpus < 2 * self.rails or self.gpus % self.rails:
            raise bad("gpus", self.gpus, f"must be a multiple of the rail count {self.rails} with at least two servers")
        if self.rate_mbps <= 0 or self.nvlink_factor < 1:
            raise bad("rate_mbps/nvlink_factor", (self.rate_mbps, self.nvlink_factor), "must be > 0 and >= 1")
        if self.iterations < 1:
            raise bad("iterations", self.iterations, "need at least one iteration")
        if self.warmup < 0:
            raise bad("warmup", self.warmup, "must be >= 0")
        for key in ("allreduce_bytes", "alltoall_bytes"):
            value = getattr(self, key)
            if value < 4 * self.gpus or value % (4 * self.gpus):
                raise bad(key, value, f"must be a positive multiple of 4 x {self.gpus} GPUs (float32 chunks)")
        if self.fail_rail is not None and not 0 <= self.fail_rail < self.rails:
            raise bad("fail_rail", self.fail_rail, f"rails are 0..{self.rails - 1}")
        if self.target not in ("python", "bmv2"):
            raise bad("target", self.target, "python or bmv2")
        if self.alltoall_schedule not in ALLTOALL_SCHEDULES:
            raise bad("alltoall_schedule", self.alltoall_schedule, f"one of {', '.join(ALLTOALL_SCHEDULES)}")
        if not 0 <= self.tcp_rto_min_ms <= 120_000:
            raise bad("tcp_rto_min_ms", self.tcp_rto_min_ms, "must be 0 (the kernel's) to 120,000 ms")
        if self.sock_buf_bytes < 0:
            raise bad("sock_buf_bytes", self.sock_buf_bytes, "must be >= 0 (0: the kernel's autotuning)")
        if not MTU_RANGE[0] <= self.mtu <= MTU_RANGE[1]:
            raise bad("mtu", self.mtu, f"an MTU must be in {MTU_RANGE[0]}..{MTU_RANGE[1]} bytes")
        if self.nvlink not in NVLINK_KINDS:
            raise bad("nvlink", self.nvlink, f"one of {', '.join(NVLINK_KINDS)}")
        if not 0 <= self.super_frames <= MAX_SUPER_FRAMES:
            raise bad("super_frames", self.super_frames, f"must be 0 (frames only) to {MAX_SUPER_FRAMES}")
        if self.super_frames and self.target != "python":
            raise bad("super_frames", self.super_frames, "super-packets are a Python-target extension: 0 on bmv2")
        if not self.load_balancing or len(set(self.load_balancing)) != len(self.load_balancing) \
                or not set(self.load_balancing) <= set(UPLINK_ROUTINGS):
            raise bad("load_balancing", list(self.load_balancing),
                      f"one or more of {', '.join(UPLINK_ROUTINGS)}, each once")
        if not 0 <= self.flowlet_gap_us < 1 << 48:
            raise bad("flowlet_gap_us", self.flowlet_gap_us, "microseconds, 0 or more")
        for key, allowed in (("collectives", COLLECTIVES), ("fabrics", FABRICS)):
            chosen = getattr(self, key)
            if not chosen or len(set(chosen)) != len(chosen) or not set(chosen) <= set(allowed):
                raise bad(key, list(chosen), f"one or more of {', '.join(allowed)}, each once")
        if "rail-only" not in self.fabrics:
            raise bad("fabrics", list(self.fabrics), "rail-only is the fabric under test: it must be one of them")
        return self


def fabrics_for(cfg: ExperimentConfig, rail_only_topology: Topology | None = None) -> dict[str, Topology]:
    """The two fabrics with the same servers and GPUs; a given rail-only topology is checked."""
    if rail_only_topology is not None:
        topo = rail_only_topology
        if topo.kind != "rail-only":
            raise ConfigError(topo.name, "kind", topo.kind, "the rail-only experiment needs a rail-only topology")
        errors = check_topology(topo, topo.name)
        if errors:
            raise errors[0]
        if topo.rails != cfg.rails or len(topo.hosts) != cfg.servers:
            raise ConfigError(topo.name, "params", dict(topo.params),
                              f"expected {cfg.servers} servers of {cfg.rails} GPUs (from --gpus {cfg.gpus} --rails {cfg.rails})")
        topo = dataclasses.replace(topo, mtu=cfg.mtu, links=tuple(dataclasses.replace(lk, mtu=None) for lk in topo.links))
    else:
        topo = rail_only(cfg.servers, cfg.rails, rate_mbps=cfg.rate_mbps, mtu=cfg.mtu)
    out = {"rail-only": topo}
    if "fat-tree" not in cfg.fabrics:
        return out
    for name, scheme in fat_trees(cfg).items():
        out[name] = rail_fat_tree(cfg.servers, cfg.rails, spines=cfg.spines, rate_mbps=cfg.rate_mbps, mtu=cfg.mtu,
                                  uplink_routing=scheme, flowlet_gap_us=cfg.flowlet_gap_us)
    return out


def fat_trees(cfg: ExperimentConfig) -> dict[str, str]:
    """Each fat-tree of the run and its load balancing: ``fat-tree`` when there is one,
    ``fat-tree-SCHEME`` each when there are several.

    >>> fat_trees(ExperimentConfig()), fat_trees(ExperimentConfig(load_balancing=("ecmp", "spray")))
    ({'fat-tree': 'ecmp'}, {'fat-tree-ecmp': 'ecmp', 'fat-tree-spray': 'spray'})
    """
    if len(cfg.load_balancing) == 1:
        return {"fat-tree": cfg.load_balancing[0]}
    return {f"fat-tree-{scheme}": scheme for scheme in cfg.load_balancing}


def is_fat_tree(fabric: str) -> bool:
    return fabric == "fat-tree" or fabric.startswith("fat-tree-")


def ops_of(fabric: str) -> tuple[str, ...]:
    """The collectives a fabric runs (every fat-tree the fat-tree's)."""
    return OPS["fat-tree" if is_fat_tree(fabric) else fabric]


def emulated_bill(topo: Topology, prices: ComponentCosts) -> dict[str, float]:
    """Switches, links and ports of an emulated fabric, priced with the cost model's components."""
    switch_links = sum(1 for lk in topo.links if topo.is_switch(lk.a.node) and topo.is_switch(lk.b.node))
    host_links = len(topo.links) - switch_links
    ports = 2 * switch_links + host_links
    per_switch_ports = max((len(topo.switch_ports(s.name)) for s in topo.switches), default=0)
    switches = len(topo.switches)
    xcvr_sw = host_links + 2 * switch_links
    cost = (switches * prices.switch_unit_price(max(per_switch_ports, 1))
            + xcvr_sw * prices.switch_transceiver_price_usd + host_links * prices.nic_transceiver_price_usd
            + (host_links + switch_links) * prices.cable_price_usd)
    power = (switches * prices.switch_unit_power(max(per_switch_ports, 1))
             + xcvr_sw * prices.switch_transceiver_power_w + host_links * prices.nic_transceiver_power_w
             + (host_links + switch_links) * prices.cable_power_w)
    return {"switches": switches, "links": len(topo.links), "switch_links": switch_links,
            "ports": ports, "cost_usd": cost, "power_w": power}


def gpu_bytes_per_iteration(cfg: ExperimentConfig) -> float:
    """The bytes one GPU sends in an iteration of the configured collectives, by the model,
    counted as if all of it left through its NIC (an upper bound: a flat ring's hops inside a
    server take NVLink): a ring all-reduce over every GPU sends 2(n-1)/n of its size, the
    hierarchical one 2(d-1)/d of a rail's share over d servers, an all-to-all its share for
    the other servers; a training step its hierarchical all-reduce and all-to-all. What
    placement weighs links by, and the plan's crossing bytes.

    >>> round(gpu_bytes_per_iteration(ExperimentConfig()) / 2**20, 2)
    33.0
    """
    n, d, r = cfg.gpus, cfg.servers, cfg.rails
    ring = 2 * (n - 1) / n * cfg.allreduce_bytes
    hier = 2 * (d - 1) / d * cfg.allreduce_bytes / r if d > 1 else 0.0
    a2a = cfg.alltoall_bytes * (n - r) / n
    per = {"allreduce": ring, "hier-allreduce": hier, "alltoall": a2a, "train-step": hier + a2a}
    return sum(per[c] for c in cfg.collectives)


def model_times(cfg: ExperimentConfig) -> dict[str, float]:
    """The analytical model's completion time of each collective at the emulated bandwidths:
    the TCP payload a shaped veth carries at the run's MTU, and what the NVLink carries
    (:attr:`ExperimentConfig.nvlink_payload_bytes_per_s`)."""
    n, g = cfg.gpus, cfg.rails
    nic = cfg.nic_bytes_per_s * tcp_payload_fraction(cfg.mtu, VETH_FRAME_OVERHEAD)
    nv = cfg.nvlink_payload_bytes_per_s
    return {
        "allreduce": ring_allreduce_time(cfg.allreduce_bytes, n, nic),
        "hier_allreduce": hierarchical_allreduce_time(cfg.allreduce_bytes, g, cfg.servers, nv, nic),
        "alltoall": alltoall_direct_time(cfg.alltoall_bytes, n, g, nv, nic),
        "hier_alltoall": alltoall_hierarchical_time(cfg.alltoall_bytes, n, g, nv, nic),
    }


def regime_of(cfg: ExperimentConfig, infos: Mapping[str, Any]) -> Emulated:
    """The emulation's side of the regime (controller.experiments.regime), from the
    fat-tree's probe of its longest GPU-to-GPU path (else rail-only's: each fabric's info's
    ``path``): the per-link latency, the shapers' queues, the hosts' minimum RTO."""
    probe = next((infos[f]["path"] for f in (*sorted(f for f in infos if is_fat_tree(f)), "rail-only")
                  if isinstance(infos.get(f), Mapping) and infos[f].get("path")), None)
    return from_probe(probe, nic_mbps=cfg.rate_mbps, mtu=cfg.mtu, super_frames=cfg.super_frames,
                      min_rto_ms=cfg.tcp_rto_min_ms or 200.0, compute_ms=1000 * cfg.compute_s)


def summarize(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Median completion time per (fabric, op) over the successful iterations.

    >>> summarize([{"fabric": "f", "op": "allreduce", "iter": i, "ok": True, "seconds": s}
    ...            for i, s in enumerate([1.0, 3.0, 2.0])])
    [{'fabric': 'f', 'op': 'allreduce', 'median_s': 2.0, 'min_s': 1.0, 'max_s': 3.0, 'ok': 3, 'failed': 0}]
    """
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["fabric"], r["op"]), []).append(r)
    out = []
    for (fabric, op), rs in groups.items():
        times = [r["seconds"] for r in rs if r["ok"]]
        out.append({"fabric": fabric, "op": op,
                    "median_s": statistics.median(times) if times else float("nan"),
                    "min_s": min(times) if times else float("nan"),
                    "max_s": max(times) if times else float("nan"),
                    "ok": len(times), "failed": len(rs) - len(times)})
    return out


def suffix_of(fabric: str) -> str:
    """What a fat-tree's names add to a comparison's: "" for the only fat-tree, ``_SCHEME`` else."""
    return "" if fabric == "fat-tree" else "_" + fabric.removeprefix("fat-tree-")


def comparison(summary: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """rail-only / fat-tree ratios, per fat-tree: allreduce (same algorithm) and all-to-all
    (each fabric's best); ``allreduce_ratio`` for the only fat-tree, ``allreduce_ratio_SCHEME``
    for each of several."""
    t = {(s["fabric"], s["op"]): s["median_s"] for s in summary}
    out: dict[str, float] = {}
    for ft in sorted({s["fabric"] for s in summary if is_fat_tree(s["fabric"])}):
        end = suffix_of(ft)
        if ("rail-only", "allreduce") in t and (ft, "allreduce") in t:
            out[f"allreduce_ratio{end}"] = t[("rail-only", "allreduce")] / t[(ft, "allreduce")]
        if ("rail-only", "hier_alltoall") in t and (ft, "alltoall") in t:
            out[f"alltoall_ratio{end}"] = t[("rail-only", "hier_alltoall")] / t[(ft, "alltoall")]
    return out
