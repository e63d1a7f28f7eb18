"""The TopoOpt experiment's pure side: configuration, the fabrics compared, what the compiled
routes predict for the bandwidth tax, counters in, figures out.

A TopoOpt fabric of ``servers`` servers of degree ``d`` (each NIC patched through a circuit
switch into a TotientPerms ring: one-way circuits, the servers forwarding for each other)
against a fat-tree of the same servers whose one NIC has the same total rate, d NICs' worth
(at equal injection bandwidth, the non-blocking packet switch TopoOpt is measured against).
The fat-tree is two-tier by default: leaves of ``fat_tree_radix / 2`` servers under two
spines, with full bisection. One leaf for all 16 servers (``fat_tree_radix=None``) used 65-85%
of a core at 25 Mb/s, so its times were the switch's, not the network's.
Collectives: ring all-reduce along the stride-1 permutation (rank r on server r, so ring
neighbours share a circuit) and direct all-to-all over the multi-hop routes; both check
their results.

The *bandwidth tax* is what the fabric carries over what the servers inject. Every frame a
server's NICs transmit crosses one circuit (``/proc/net/dev``), and its kernel counts those
it forwarded for others (``ForwDatagrams``); the tax is the frames carried over the frames
originated (carried minus forwarded), ACKs included. (The kernel's ``OutRequests`` will not
do: it counts TCP's segments before software segmentation.) Uniform all-to-all spreads data
and ACKs evenly over the server pairs, so the compiled routes predict its tax exactly: the
mean route length.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.errors import ConfigError
from controller.routing.topoopt_routes import compile_host_routes
from controller.topology import rail_fat_tree, topoopt
from controller.topology.model import Topology

__all__ = ["PAPER_TAX", "TopoOptConfig", "expected_tax", "fabrics", "forwarded", "mean_sd", "tax", "tx_frames"]

#: the paper's bandwidth tax of host forwarding (lecture notes, fig. 13), by degree
PAPER_TAX = {4: 1.11, 8: 1.05}


@dataclass(frozen=True, slots=True, kw_only=True)
class TopoOptConfig:
    """What one run of ``mlfabric experiment run topoopt`` emulates."""

    target: str = "python"
    #: the Python target's packet engine (mlfabric-switch --engine); None: its default
    engine: str | None = None
    servers: int = 16
    degrees: tuple[int, ...] = (2, 3, 4)
    rate_mbps: float = 5.0
    repetitions: int = 3
    allreduce_bytes: int = 1280 * 1024
    alltoall_bytes: int = 640 * 1024
    #: the fat-tree switches' radix: leaves of radix/2 servers under 2 spines (None: one leaf)
    fat_tree_radix: int | None = 8

    def __post_init__(self) -> None:
        def bad(key: str, value: object, problem: str) -> ConfigError:
            return ConfigError("<topoopt experiment>", key, value, problem)

        if self.target not in ("python", "bmv2"):
            raise bad("--target", self.target, "is python or bmv2")
        if self.servers < 3:
            raise bad("--servers", self.servers, "must be >= 3")
        if not self.degrees or min(self.degrees) < 1:
            raise bad("--degrees", self.degrees, "are >= 1")
        if self.repetitions < 1:
            raise bad("--repetitions", self.repetitions, "must be >= 1")
        for d in self.degrees:
            topoopt(self.servers, d)  # refuses a degree these servers cannot have, by name
        if self.fat_tree_radix is not None:
            try:
                rail_fat_tree(self.servers, 1, radix=self.fat_tree_radix)
            except ConfigError:
                raise bad("--fat-tree-radix", self.fat_tree_radix, "must be a power of two >= 4 (0: one leaf)") from None


def fabrics(cfg: TopoOptConfig, d: int) -> tuple[Topology, Topology]:
    """The TopoOpt fabric of degree ``d`` and its fat-tree (one NIC of ``d`` x the rate).

    >>> topo, tree = fabrics(TopoOptConfig(degrees=(2,)), 2)
    >>> sorted(s.name for s in tree.switches)
    ['rail0-leaf0', 'rail0-leaf1', 'rail0-leaf2', 'rail0-leaf3', 'spine0', 'spine1']
    >>> len(fabrics(TopoOptConfig(degrees=(2,), fat_tree_radix=None), 2)[1].switches)
    3
    """
    return (topoopt(cfg.servers, d, rate_mbps=cfg.rate_mbps),
            rail_fat_tree(cfg.servers, 1, spines=2, radix=cfg.fat_tree_radix, rate_mbps=cfg.rate_mbps * d,
                          name=f"fat-tree-{cfg.servers}x{d}"))


def expected_tax(topo: Topology) -> float:
    """Uniform all-to-all's tax: the mean route length over all ordered server pairs.

    >>> expected_tax(topoopt(8, 2))  # one-way strides 1 and 3: 1,2,1,2,3,2,3 circuits
    2.0
    """
    return statistics.fmean(r.hops for rs in compile_host_routes(topo).values() for r in rs)


def forwarded(snmp: str) -> int:
    r"""``ForwDatagrams`` from a host's ``/proc/net/snmp``.

    >>> forwarded("Ip: Forwarding OutRequests ForwDatagrams\nIp: 1 120 30\n")
    30
    """
    lines = [ln.split() for ln in snmp.splitlines() if ln.startswith("Ip:")]
    if len(lines) < 2:
        raise ConfigError("/proc/net/snmp", "Ip", snmp[:80], "no Ip counters")
    return int(dict(zip(lines[0][1:], lines[1][1:], strict=False))["ForwDatagrams"])


def tx_frames(netdev: str, prefix: str) -> int:
    r"""Frames transmitted by the interfaces named ``prefix...`` in a ``/proc/net/dev``.

    >>> tx_frames("  s0-eth0: 100 5 0 0 0 0 0 0 900 7 0 0 0 0 0 0\n    lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n", "s0-")
    7
    """
    total = 0
    for line in netdev.splitlines():
        name, sep, rest = line.partition(":")
        if sep and name.strip().startswith(prefix):
            total += int(rest.split()[9])
    return total


def tax(before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]]) -> float:
    """From each server's ``(frames transmitted, datagrams forwarded)`` before and after.

    >>> tax({"s0": (0, 0), "s1": (0, 0)}, {"s0": (100, 0), "s1": (30, 30)})  # s1 relayed 30 of its 30
    1.3
    """
    carried = sum(after[h][0] - before[h][0] for h in after)
    passed = sum(after[h][1] - before[h][1] for h in after)
    made = carried - passed
    return carried / made if made > 0 else float("nan")


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample sd of the finite values (NaN when there are none)."""
    ok = [v for v in values if v == v]
    if not ok:
        return float("nan"), float("nan")
    return statistics.fmean(ok), statistics.stdev(ok) if len(ok) > 1 else 0.0
