"""Which machine runs which host and switch of a fabric: pure, from the topology, the
machines file and the traffic model.

Units are placed whole: a switch that is the only switch of its hosts (a fat-tree's leaf, a
rack's ToR) goes with them, unless they outweigh the smallest machine's share (then its hosts
are units alone); a host cabled to several switches (a rail-optimised server) is a unit alone. Units go to the machines in the topology's order, in contiguous blocks sized to
each machine's cores, so that neighbouring servers (a rail ring's neighbours) share a
machine. Every other switch (a rail, a spine, a circuit switch) then goes to the machine that
holds most of the bytes on its links, among the machines below their quota of switches (the
switches' share of the cores: switch processes are what runs out of cores first), ties to
the machine with the fewest switches per core.

The traffic model gives each link its bytes per iteration: a host's link carries what its NIC
sends and receives; a switch's uplinks carry the share of its hosts' bytes bound for hosts
under other switches (all-to-all spread), split evenly over them. The bytes that cross
machines are what the plan predicts the tunnels carry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from controller.cluster.machines import Machines
from controller.errors import ConfigError
from controller.topology.model import Topology

__all__ = [
    "Placement",
    "crossing_info",
    "crossing_text",
    "evaluate",
    "link_bytes",
    "nic_bytes",
    "place",
    "placement_info",
    "placement_text",
]


@dataclass(frozen=True)
class Placement:
    """Each node's machine, the links that cross machines and the bytes they carry."""

    machine_of: Mapping[str, str]
    #: indices into the topology's links of those whose ends are on different machines
    cross_links: tuple[int, ...]
    #: (machine a, machine b) in file order -> the model's bytes per iteration between them
    cross_bytes: Mapping[tuple[str, str], float]
    #: the model's bytes per iteration over all links
    total_bytes: float
    #: the topology's hosts (the other nodes are switches) and its number of links
    hosts: frozenset[str] = frozenset()
    links: int = 0

    def nodes_on(self, machine: str) -> list[str]:
        """The nodes ``machine`` runs, in the topology's order."""
        return [n for n, m in self.machine_of.items() if m == machine]

    @property
    def cross_share(self) -> float:
        """The share of the fabric's bytes that cross machines."""
        return sum(self.cross_bytes.values()) / self.total_bytes if self.total_bytes else 0.0


def nic_bytes(topo: Topology, gpu_bytes: float) -> dict[str, float]:
    """Bytes each host's NIC sends per iteration when each GPU sends ``gpu_bytes``."""
    out = {}
    for h in topo.hosts:
        gpus = h.gpus or len(h.nics) or 1
        out[h.name] = gpu_bytes * gpus / max(1, len(h.nics))
    return out


def link_bytes(topo: Topology, per_nic: Mapping[str, float]) -> list[float]:
    """Each link's bytes per iteration, both directions (see the module docstring)."""
    loads = [0.0] * len(topo.links)
    nics_under: dict[str, int] = {}
    bytes_under: dict[str, float] = {}
    total_nics = sum(len(h.nics) for h in topo.hosts) or 1
    for i, lk in enumerate(topo.links):
        ends = [lk.a.node, lk.b.node]
        hosts = [n for n in ends if not topo.is_switch(n)]
        if hosts:
            b = 2 * sum(per_nic.get(h, 0.0) for h in hosts)
            loads[i] = b
            for n in ends:
                if topo.is_switch(n):
                    nics_under[n] = nics_under.get(n, 0) + 1
                    bytes_under[n] = bytes_under.get(n, 0.0) + b
    uplinks: dict[str, list[int]] = {}
    for i, lk in enumerate(topo.links):
        if topo.is_switch(lk.a.node) and topo.is_switch(lk.b.node):
            for n in (lk.a.node, lk.b.node):
                uplinks.setdefault(n, []).append(i)
    for i, lk in enumerate(topo.links):
        if not (topo.is_switch(lk.a.node) and topo.is_switch(lk.b.node)):
            continue
        shares = []
        for n in (lk.a.node, lk.b.node):
            if n in bytes_under:
                leaving = bytes_under[n] * (1 - nics_under[n] / total_nics)
                shares.append(leaving / len(uplinks[n]))
        if shares:
            loads[i] = sum(shares) / len(shares) * (2 if len(shares) == 1 else 1)
    # links between switches without hosts (a core layer): the spread of everything above them
    core = [i for i, lk in enumerate(topo.links) if topo.is_switch(lk.a.node) and topo.is_switch(lk.b.node)
            and lk.a.node not in bytes_under and lk.b.node not in bytes_under]
    if core:
        up = sum(loads[i] for i, lk in enumerate(topo.links) if i not in core and topo.is_switch(lk.a.node)
                 and topo.is_switch(lk.b.node))
        for i in core:
            loads[i] = up / len(core)
    return loads


def _units(topo: Topology) -> list[list[str]]:
    """Hosts with their one switch (a leaf, a ToR), or alone; in the topology's order."""
    neighbours = {h.name: sorted({lk.other(h.name).node for lk in topo.links_of(h.name)
                                  if topo.is_switch(lk.other(h.name).node)}) for h in topo.hosts}
    units: list[list[str]] = []
    unit_of_switch: dict[str, list[str]] = {}
    for h in topo.hosts:
        sw = neighbours[h.name]
        if len(sw) == 1:
            if sw[0] not in unit_of_switch:
                unit_of_switch[sw[0]] = [sw[0]]
                units.append(unit_of_switch[sw[0]])
            unit_of_switch[sw[0]].append(h.name)
        else:
            units.append([h.name])
    return units


def _weight(topo: Topology, unit: list[str]) -> float:
    return sum(max(1, topo.host(n).gpus or len(topo.host(n).nics)) for n in unit if not topo.is_switch(n))


def place(topo: Topology, machines: Machines, *, gpu_bytes: float = 1.0) -> Placement:
    """Place ``topo`` on ``machines`` (see the module docstring).

    >>> from controller.cluster.machines import machines_from_dict
    >>> from controller.topology.generators import rail_only
    >>> ms = machines_from_dict({"machines": [{"name": "a", "ssh": "root@10.0.0.1", "cores": 2},
    ...                                       {"name": "b", "ssh": "root@10.0.0.2", "cores": 2}]})
    >>> p = place(rail_only(4, 4), ms)
    >>> sorted(p.nodes_on("a"))
    ['rail0', 'rail2', 's0', 's1']
    >>> len(p.cross_links), round(p.cross_share, 2)
    (8, 0.5)
    """
    if len(machines.machines) > len(topo.hosts) + len(topo.switches):
        raise ConfigError(machines.source, "machines", len(machines.machines),
                          f"more machines than {topo.name} has nodes ({len(topo.hosts) + len(topo.switches)})")
    total_cores = machines.cores
    units = _units(topo)
    total_w = sum(_weight(topo, u) for u in units) or 1.0
    # a unit larger than the smallest machine's share (one switch under every host) is split
    # into its hosts: its switch then goes where its bytes are
    share = total_w * min(m.cores for m in machines.machines) / total_cores
    if len(machines.machines) > 1:
        units = [part for u in units for part in ([[n] for n in u if not topo.is_switch(n)]
                                                  if len(u) > 2 and _weight(topo, u) > share else [u])]
    weights = [_weight(topo, u) for u in units]
    machine_of: dict[str, str] = {}
    # contiguous blocks sized to the cores: a unit goes to the machine whose share of the
    # cumulative weight holds the unit's midpoint
    bounds, acc = [], 0
    for m in machines.machines:
        acc += m.cores
        bounds.append(total_w * acc / total_cores)
    done = 0.0
    for u, w in zip(units, weights, strict=True):
        mid = done + w / 2
        k = next((i for i, b in enumerate(bounds) if mid <= b), len(bounds) - 1)
        for n in u:
            machine_of[n] = machines.machines[k].name
        done += w
    loads = link_bytes(topo, nic_bytes(topo, gpu_bytes))
    switches_on = {m.name: sum(1 for n, x in machine_of.items() if x == m.name and topo.is_switch(n))
                   for m in machines.machines}
    cores = {m.name: m.cores for m in machines.machines}
    # each machine's quota of switch processes (they are what runs out of cores first)
    n_switches = len(topo.switches)
    quota = {m.name: math.ceil(n_switches * m.cores / total_cores) for m in machines.machines}
    links_at: dict[str, list[int]] = {}
    for i, lk in enumerate(topo.links):
        for n in (lk.a.node, lk.b.node):
            links_at.setdefault(n, []).append(i)
    pending = [s.name for s in topo.switches if s.name not in machine_of]
    while pending:
        placed_any = False
        for name in list(pending):
            towards: dict[str, float] = {}
            for i in links_at.get(name, ()):
                other = topo.links[i].other(name).node
                if other in machine_of:
                    towards[machine_of[other]] = towards.get(machine_of[other], 0.0) + loads[i] + 1e-9
            if not towards and not (len(pending) == 1 or (not placed_any and name == pending[-1])):
                continue  # wait for a neighbour to be placed
            room = [m for m in machines.names if switches_on[m] < quota[m]] or list(machines.names)
            best = max(room, key=lambda m: (round(towards.get(m, 0.0), 6), -switches_on[m] / cores[m]))
            machine_of[name] = best
            switches_on[best] += 1
            pending.remove(name)
            placed_any = True
    return evaluate(topo, machines, machine_of, gpu_bytes=gpu_bytes, loads=loads)


def evaluate(topo: Topology, machines: Machines, machine_of: Mapping[str, str], *, gpu_bytes: float = 1.0,
             loads: list[float] | None = None) -> Placement:
    """Any placement of ``topo`` (every node to one of ``machines``) with its crossing links and
    bytes: :func:`place`'s, or another placer's to compare it with."""
    missing = [n for n in [*(h.name for h in topo.hosts), *(s.name for s in topo.switches)] if n not in machine_of]
    if missing:
        raise ConfigError(machines.source, "placement", missing[0], f"{len(missing)} nodes have no machine")
    loads = loads if loads is not None else link_bytes(topo, nic_bytes(topo, gpu_bytes))
    cross = tuple(i for i, lk in enumerate(topo.links) if machine_of[lk.a.node] != machine_of[lk.b.node])
    order = {m: i for i, m in enumerate(machines.names)}
    cross_bytes: dict[tuple[str, str], float] = {}
    for i in cross:
        lk = topo.links[i]
        x, y = sorted((machine_of[lk.a.node], machine_of[lk.b.node]), key=order.__getitem__)
        cross_bytes[(x, y)] = cross_bytes.get((x, y), 0.0) + loads[i]
    ordered = {n: machine_of[n] for n in [*(h.name for h in topo.hosts), *(s.name for s in topo.switches)]}
    total = math.fsum(loads)
    return Placement(machine_of=ordered, cross_links=cross, cross_bytes=cross_bytes, total_bytes=total,
                     hosts=frozenset(h.name for h in topo.hosts), links=len(topo.links))


def placement_info(p: Placement, machines: Machines) -> dict[str, object]:
    """A placement as JSON values (a results folder's ``summary.json``)."""
    return {"machine_of": dict(p.machine_of), "cross_links": len(p.cross_links),
            "cross_bytes": {f"{a}-{b}": round(v) for (a, b), v in p.cross_bytes.items()},
            "cross_share": round(p.cross_share, 4), "tunnel": machines.tunnel}


def placement_text(p: Placement, machines: Machines) -> str:
    """One line: each machine's nodes counted, and the links and bytes that cross.

    >>> from controller.cluster.machines import machines_from_dict
    >>> from controller.topology.generators import rail_only
    >>> ms = machines_from_dict({"machines": [{"name": "a", "ssh": "root@10.0.0.1", "cores": 2},
    ...                                       {"name": "b", "ssh": "root@10.0.0.2", "cores": 2}]})
    >>> placement_text(place(rail_only(4, 4), ms), ms)
    '2 machines (a: 2 hosts, 2 switches; b: 2 hosts, 2 switches); 8 of 16 links cross them (VXLAN), 50% of the bytes'
    """
    parts = []
    for m in machines.names:
        nodes = p.nodes_on(m)
        hosts = sum(1 for n in nodes if n in p.hosts)
        parts.append(f"{m}: {hosts} hosts, {len(nodes) - hosts} switches")
    return (f"{len(machines.names)} machines ({'; '.join(parts)}); {len(p.cross_links)} of {p.links} links cross "
            f"them ({machines.tunnel.upper()}), {p.cross_share:.0%} of the bytes")


def crossing_info(measured_bytes: int, iterations: int, p: Placement) -> dict[str, float]:
    """What crossed machines per iteration, measured (the tunnels' counters over the recorded
    iterations), beside what the plan predicted."""
    planned = sum(p.cross_bytes.values())
    measured = measured_bytes / iterations
    return {"measured_mib_per_iteration": round(measured / 2**20, 1), "plan_mib_per_iteration": round(planned / 2**20, 1),
            "measured_over_plan": round(measured / planned, 3) if planned else 0.0}


def crossing_text(c: dict[str, float]) -> str:
    """One line of :func:`crossing_info`.

    >>> crossing_text({"measured_mib_per_iteration": 301.2, "plan_mib_per_iteration": 528.0, "measured_over_plan": 0.57})
    "the tunnels carried 301.2 MiB per iteration, 0.57x the plan's 528.0 MiB (an upper bound: hops inside a server take NVLink)"
    """
    return (f"the tunnels carried {c['measured_mib_per_iteration']} MiB per iteration, {c['measured_over_plan']:.2f}x "
            f"the plan's {c['plan_mib_per_iteration']} MiB (an upper bound: hops inside a server take NVLink)")
