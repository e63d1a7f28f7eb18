"""Iteration time of a strategy's traffic on a direct-connect wiring or on a fat-tree (pure).

One iteration is compute, then the model-parallel transfers (all at once), then the
all-reduces (all groups at once), in that order; the emulation's workers run the same
sequence, so this model predicts what they measure. Each phase is a fluid bottleneck: the
most loaded transmitter's bytes over its rate.

- On a wiring every byte crosses each circuit of its route (host forwarding), so a link's
  load is the bytes of every route through it.
- An all-reduce is *mutable* (TopoOpt): a group splits its gradient over every ring it has
  (:func:`group_rings`), in proportion to the rings' bandwidth; a ring all-reduce over ``m``
  members moves ``2 (m - 1) / m`` of its share across each hop.
- A fat-tree is non-blocking with one NIC of ``server_mbps`` per server: a phase lasts as
  long as the busiest NIC's bytes in or out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from controller.topoopt.demand import AllReduceGroup, Demand
from controller.topoopt.wiring import Wiring

__all__ = ["Ring", "Timing", "all_group_rings", "fat_tree_time", "group_rings", "wiring_time"]


@dataclass(frozen=True, slots=True)
class Ring:
    """A ring over a group's members, carrying ``share`` of its all-reduce."""

    order: tuple[int, ...]
    share: float
    direct: bool  # every hop is one circuit


@dataclass(frozen=True, slots=True)
class Timing:
    """Milliseconds per phase, and the bytes the links carried over those injected: in all
    (``tax``) and per traffic class (model-parallel, all-reduce; 1.0 for a class with none)."""

    compute_ms: float
    mp_ms: float
    allreduce_ms: float
    tax: float
    mp_tax: float = 1.0
    allreduce_tax: float = 1.0

    @property
    def comm_ms(self) -> float:
        return self.mp_ms + self.allreduce_ms

    @property
    def total_ms(self) -> float:
        return self.compute_ms + self.mp_ms + self.allreduce_ms


def _ms(mb: float, mbps: float) -> float:
    return mb * 8e3 / mbps  # MB over Mb/s, in ms


def _ring_legs(order: Sequence[int]) -> list[tuple[int, int]]:
    return [(order[j], order[(j + 1) % len(order)]) for j in range(len(order))] if len(order) > 1 else []


def _candidate_orders(wiring: Wiring, members: tuple[int, ...]) -> list[tuple[tuple[int, ...], bool]]:
    """The group's direct rings (one switch's one-way cycle, or the duplex pairs of two
    neighbouring switches alternating, in both directions: TopologyFinder puts a duplex ring's
    two halves side by side), then its members in the order of every ring spanning
    all servers (dropping orders already there); failing both, its members' own order."""
    orders = [(o, True) for i in range(wiring.degree) if (o := wiring.cycle_through(i, members)) is not None]
    for i in range(wiring.degree - 1):  # duplex rings: two neighbouring switches of pairs, both ways
        o = wiring.duplex_cycle_through(i, i + 1, members)
        if o is not None:
            orders += [(o, True), ((o[0], *reversed(o[1:])), True)]
    want = set(members)
    for i in range(wiring.degree):
        full = wiring.cycle_through(i, range(wiring.n))
        if full is not None and len(members) < wiring.n:
            o = tuple(s for s in full if s in want)
            start = o.index(min(o))
            o = o[start:] + o[:start]
            if all(o != have for have, _ in orders):
                orders.append((o, False))
    return orders or [(members, False)]


def all_group_rings(wiring: Wiring, groups: Sequence[AllReduceGroup | Sequence[int]]) -> list[tuple[Ring, ...]]:
    """The rings each group's all-reduce uses on ``wiring``, with each one's share.

    A group's rings are its direct rings (a circuit switch whose circuits form one cycle
    through exactly its members: TopologyFinder's) and the rings that span every server
    (TotientPerms), visiting its members in the order each does, hop by hop over routes;
    failing both, its members' own order over routes. Shares are proportional to bandwidth:
    a ring's cost is the most legs of all groups' rings that share one of its transmitters.

    >>> from controller.topoopt.wiring import stride_perm
    >>> w = Wiring(8, (stride_perm(8, 1), stride_perm(8, 3)))
    >>> [(r.order[:3], r.share, r.direct) for r in all_group_rings(w, [range(8)])[0]]
    [((0, 1, 2), 0.5, True), ((0, 3, 6), 0.5, True)]
    >>> [(r.order, r.direct) for r in all_group_rings(w, [[0, 2, 4, 6]])[0]]
    [((0, 2, 4, 6), False), ((0, 6, 4, 2), False)]
    """
    per_group: list[list[tuple[tuple[int, ...], bool, set[tuple[int, int]]]]] = []
    usage: dict[tuple[int, int], int] = {}
    for g in groups:
        members = tuple(g.members if isinstance(g, AllReduceGroup) else g)
        if len(members) < 2:
            per_group.append([])
            continue
        rings = []
        for order, direct in _candidate_orders(wiring, members):
            links = {link for a, b in _ring_legs(order) for link in wiring.links(a, b)}
            for link in links:
                usage[link] = usage.get(link, 0) + 1
            rings.append((order, direct, links))
        per_group.append(rings)
    out = []
    for rings in per_group:
        weights = [1.0 / max(usage[link] for link in links) for _, _, links in rings]
        total = sum(weights)
        out.append(tuple(Ring(o, w / total, direct) for (o, direct, _), w in zip(rings, weights, strict=True)))
    return out


def group_rings(wiring: Wiring, group: AllReduceGroup | Sequence[int]) -> tuple[Ring, ...]:
    """The rings of one group alone (:func:`all_group_rings`)."""
    return all_group_rings(wiring, [group])[0]


def wiring_time(demand: Demand, wiring: Wiring, *, nic_mbps: float, compute_ms: float = 0.0) -> Timing:
    """One iteration on a direct-connect ``wiring`` whose NICs send ``nic_mbps`` each.

    >>> from controller.topoopt.demand import demand as demand_of
    >>> from controller.topoopt.job import Job, Strategy
    >>> from controller.topoopt.wiring import stride_perm
    >>> j = Job(name="x", model="dlrm", servers=4, compute_ms=0, dense_mb=1.0, tables=1, lookup_mb=0.0,
    ...         strategy=Strategy(tables=(0,)))
    >>> t = wiring_time(demand_of(j, j.strategy), Wiring(4, (stride_perm(4, 1),)), nic_mbps=8.0)
    >>> round(t.allreduce_ms), t.tax   # 2 x 3/4 MB at 1 MB/s
    (1500, 1.0)
    """
    n = wiring.n
    mp_w = _pair_weights(demand, n)
    mp_load, mp_injected, mp_carried = wiring.link_loads(mp_w)
    ar_w = np.zeros((n, n))
    for g, rings in zip(demand.groups, all_group_rings(wiring, demand.groups), strict=True):
        m = len(g.members)
        for ring in rings:
            mb = 2 * (m - 1) / m * g.mb * ring.share
            for a, b in _ring_legs(ring.order):
                ar_w[a, b] += mb
    ar_load, ar_injected, ar_carried = wiring.link_loads(ar_w)
    injected, carried = mp_injected + ar_injected, mp_carried + ar_carried
    return Timing(compute_ms, _ms(float(mp_load.max(initial=0.0)), nic_mbps),
                  _ms(float(ar_load.max(initial=0.0)), nic_mbps), carried / injected if injected else 1.0,
                  mp_carried / mp_injected if mp_injected else 1.0,
                  ar_carried / ar_injected if ar_injected > 1e-12 else 1.0)


def _pair_weights(demand: Demand, n: int) -> np.ndarray:
    """The model-parallel demand as a matrix ``[s, t]``."""
    return demand.matrix


def fat_tree_time(demand: Demand, *, server_mbps: float, compute_ms: float = 0.0) -> Timing:
    """One iteration on a non-blocking fat-tree with one NIC of ``server_mbps`` per server.

    >>> import numpy as np

from controller.topoopt.demand import AllReduceGroup, Demand
    >>> round(fat_tree_time(Demand(4, (AllReduceGroup((0, 1, 2, 3), 1.0),), {}), server_mbps=8.0).allreduce_ms)
    1500
    """
    n = demand.servers
    w = _pair_weights(demand, n)
    mp = float(max(w.sum(axis=1).max(initial=0.0), w.sum(axis=0).max(initial=0.0)))
    ar = max((2 * (len(g.members) - 1) / len(g.members) * g.mb for g in demand.groups), default=0.0)
    return Timing(compute_ms, _ms(mp, server_mbps), _ms(ar, server_mbps), 1.0)
