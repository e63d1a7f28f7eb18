"""The project's own collective workers on an emulated fabric, as the rail-only and the
collectives experiments start them: one worker per GPU in its server's host (forked, per
server, from one process that imported them: :mod:`workloads.zygote`), talking to its
server's other GPUs over the paced NVLink (:mod:`workloads.nvlink`; or TCP over the hosts'
loopback shaped to the intra-server bandwidth, ``nvlink: loopback``), and the hosts'
minimum TCP retransmission timeout."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mlfabric_emulation.cluster_fabric import ClusterFabric, ClusterWorkers, cluster_workers
from mlfabric_emulation.fabric_net import EmulatedFabric
from mlfabric_emulation.host_config import rto_min_commands

from controller.errors import EmulationError
from controller.experiments.rail_only import ExperimentConfig, is_fat_tree
from controller.topology.model import Topology
from workloads.driver import WorkerGroup
from workloads.forked import ForkingFactory
from workloads.plan import Rank

#: the workers' niceness (see workers())
WORKER_NICE = 19

__all__ = ["gpu_ranks", "path_probe", "prepare_hosts", "set_rto_min", "shape_loopback", "worker_config", "workers"]


def gpu_ranks(topo: Topology) -> list[Rank]:
    """One rank per GPU, server by server, GPU g on the NIC of rail g."""
    ranks = []
    for d, host in enumerate(topo.hosts):
        for nic in sorted(host.nics, key=lambda n: n.rail or 0):
            ranks.append(Rank(rank=len(ranks), server=d, rail=int(nic.rail or 0), ip=nic.address))
    return ranks


def shape_loopback(fab: EmulatedFabric | ClusterFabric, topo: Topology, cfg: ExperimentConfig) -> None:
    """The intra-server bandwidth: all GPUs of a server share rails x NVLink rate on lo."""
    rate = cfg.rate_mbps * cfg.nvlink_factor * cfg.rails
    for h in topo.hosts:
        out = fab.host(h.name).cmd(
            f"tc qdisc replace dev lo root handle 1: htb default 1 r2q {max(1, int(rate * 1e6 / 8 / 10000))} && "
            f"tc class replace dev lo parent 1: classid 1:1 htb rate {rate}mbit burst 64k && echo ok")
        if "ok" not in out:
            raise EmulationError(f"cannot shape the loopback of {h.name}: {out.strip()}")


def set_rto_min(fab: EmulatedFabric | ClusterFabric, topo: Topology, ms: float, congestion: str = "") -> None:
    """Every host route's minimum retransmission timeout and, with ``congestion``, its
    congestion control (:func:`host_config.rto_min_commands`)."""
    for h in topo.hosts:
        host = fab.host(h.name)
        try:
            routes = json.loads(host.cmd("ip -j route show table all") or "[]")
        except json.JSONDecodeError as exc:
            raise EmulationError(f"cannot read the routes of {h.name}: {exc}") from exc
        for cmd in rto_min_commands(routes, ms, congestion):
            out = host.cmd(f"{cmd} && echo ok")
            if "ok" not in out:
                raise EmulationError(f"cannot set the minimum retransmission timeout of {h.name} to "
                                     f"{ms:g} ms ({cmd}): {out.strip()}")


def prepare_hosts(fab: EmulatedFabric | ClusterFabric, topo: Topology, cfg: ExperimentConfig) -> None:
    """The loopback shaped (``nvlink: loopback``) and, where the configuration asks, the
    routes' minimum RTO and congestion control set (every connection's, a library's too;
    the project's workers also set theirs per socket) and slow start after idle turned off."""
    if cfg.nvlink == "loopback":
        shape_loopback(fab, topo, cfg)
    if cfg.tcp_rto_min_ms or cfg.tcp_congestion:
        set_rto_min(fab, topo, cfg.tcp_rto_min_ms or 200, cfg.tcp_congestion)
    if not cfg.tcp_slow_start_after_idle:
        for h in topo.hosts:  # a per-namespace sysctl: each host's own
            out = fab.host(h.name).cmd("sysctl -qw net.ipv4.tcp_slow_start_after_idle=0 && echo ok")
            if "ok" not in out:
                raise EmulationError(f"cannot turn off slow start after idle on {h.name}: {out.strip()}")


def worker_config(topo: Topology, cfg: ExperimentConfig, fabric: str) -> dict[str, Any]:
    """The workers' configuration (:class:`workloads.config.WorkloadConfig`'s dict)."""
    ranks = gpu_ranks(topo)
    return {"ranks": [dataclasses.asdict(r) for r in ranks],
            "servers": cfg.servers, "rails": cfg.rails, "port": 7000, "timeout_s": cfg.worker_timeout_s,
            # every worker waits for its last peer to start, and 2 cores start 1,024 workers and
            # their 68,000 connections in minutes: longer with more GPUs (1,024: +256 s)
            "start_timeout_s": cfg.worker_timeout_s + len(ranks) / 4,
            # a fat-tree reaches every GPU; rail-only only the same server and rail
            "mesh": "full" if is_fat_tree(fabric) else "rail", "tcp_congestion": cfg.tcp_congestion,
            "sock_buf_bytes": cfg.sock_buf_bytes, "local": "unix" if cfg.nvlink == "unix" else "tcp",
            "nvlink_bytes_per_s": cfg.nvlink_bytes_per_s if cfg.nvlink == "unix" else 0.0}


@contextlib.contextmanager
def workers(fab: EmulatedFabric | ClusterFabric, topo: Topology, cfg: ExperimentConfig, fabric: str,
            workdir: Path) -> Iterator[WorkerGroup | ClusterWorkers]:
    """The project's workers, one per GPU, for the ``with`` body; stopped after it. On a
    fabric across machines each machine starts its GPUs' (:func:`cluster_workers`)."""
    ranks = gpu_ranks(topo)
    config = worker_config(topo, cfg, fabric)
    config_path = workdir / f"workers-{fabric}.json"
    config_path.write_text(json.dumps(config))
    if isinstance(fab, ClusterFabric):
        with cluster_workers(fab, config, ranks, config_path, WORKER_NICE) as group:
            yield group
        return

    def netns_of(server: int) -> str:
        return f"/proc/{fab.host(topo.hosts[server].name).pid}/ns/net"

    # the workers forked from one process that imported them once (workloads.zygote), each
    # entering its server's namespace: a third of the memory per worker, one interpreter
    # start-up for the job. At nice 19: where the machine runs out of cores the switches (the
    # emulated network) go first, instead of dropping frames behind a thousand workers
    # (1,024 GPUs: their start-up lost hellos to starved switches, and TCP's backoff outlasted
    # every deadline)
    with ForkingFactory(ranks, netns_of=netns_of, python=sys.executable, nice=WORKER_NICE) as factory, \
            WorkerGroup(factory, config_path, ranks, python=sys.executable) as group:
        yield group


def path_probe(fab: EmulatedFabric | ClusterFabric, topo: Topology, *, count: int = 20) -> dict[str, float]:
    """The fabric's longest GPU-to-GPU path, probed: ``links`` it crosses one way, its
    round trip (``rtt_ms``, the median of ``count`` pings, each through every switch on the
    way) and the queue a shaped link holds (``queue_packets``, its interface's
    ``tx_queue_len``): the regime's measured side (controller.experiments.regime)."""
    import re
    import statistics

    ranks = gpu_ranks(topo)
    a = ranks[0]
    # rail-only: the same rail on another server (one switch); a fat-tree: another rail too
    # (leaf, spine, leaf)
    cross = topo.kind != "rail-only" and topo.rails > 1
    b = next(r for r in ranks if r.server != a.server and (r.rail != a.rail) == cross)
    host = fab.host(topo.hosts[a.server].name)
    out = host.cmd(f"ping -n -c {count} -i 0.01 -W 1 -I {a.ip} {b.ip}")
    rtts = [float(x) for x in re.findall(r"time=([0-9.]+) ms", out)]
    if not rtts:
        raise EmulationError(f"no ping from {a.ip} to {b.ip} got an answer: {out.strip()[-200:]}")
    nic = next(n for n in topo.hosts[a.server].nics if n.address == a.ip)
    qlen = host.cmd(f"cat /sys/class/net/{topo.hosts[a.server].name}-{nic.name}/tx_queue_len").strip()
    return {"rtt_ms": statistics.median(rtts), "links": 4 if cross else 2,
            "queue_packets": float(qlen) if qlen.isdigit() else 1000.0}
