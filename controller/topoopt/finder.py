"""TopologyFinder: a wiring of degree ``d`` for a strategy's traffic (pure).

TopoOpt's split (NSDI'23, section 4; the lecture notes: "AllReduce transfers are mutable.
Model-parallel transfers are not mutable"): each server's ``d`` circuits are divided between
all-reduce rings and model-parallel circuits, and every division is tried:

- ``d_ar`` circuit switches carry rings: over each all-reduce group, TotientPerms strides
  (:func:`controller.topology.totient.ring_strides`: coprime with the group's size,
  geometrically spaced from 1 to about half of it, as the artifact picks them), so that the
  group's mutable all-reduce has ``d_ar`` direct rings and short coin-change routes. Groups
  are disjoint, so one switch holds a ring of every group at once.
- ``d_mp`` switches carry model-parallel circuits: each one a maximum-weight matching
  (networkx) of the model-parallel demand still unserved, a matched pair wired both ways.
  A pair that got a circuit is left out of the next matchings: routes take one circuit per
  neighbour, so a second one would be idle; the next matching serves the next pairs.

A division whose circuits leave servers apart (rings inside groups, matchings inside
pipelines) gets its last circuit switch replaced by one ring through every server in the
strategy's order (a pipeline's stages one after another, so it also carries activations
directly); each division is weighed with and without that ring. The division with the
shortest modelled iteration (:func:`controller.topoopt.timing.wiring_time`)
wins, among those that connect every server; ties go to fewer model-parallel circuits.
Routes are then compiled over all circuits (:class:`controller.topoopt.wiring.Wiring`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from controller.errors import ConfigError
from controller.topology.totient import ring_strides, totient_candidates
from controller.topoopt.demand import Demand
from controller.topoopt.timing import Timing, wiring_time
from controller.topoopt.wiring import Wiring, ring_perm, stride_perm

__all__ = ["Found", "duplex_ring", "duplex_rings_over_groups", "find_wiring", "matchings", "rings_over_groups",
           "totient_wiring"]


@dataclass(frozen=True, slots=True)
class Found:
    """TopologyFinder's choice and every division it weighed: ``tried[d_mp] = ms`` (None:
    that division leaves servers unconnected)."""

    wiring: Wiring
    rings: int
    matchings: int
    timing: Timing
    tried: dict[int, float | None]


def duplex_ring(n: int, members: Sequence[int], delta: int) -> tuple[tuple[int | None, ...], tuple[int | None, ...]]:
    """The duplex ring of stride ``delta`` over ``members`` as two switches of duplex pairs:
    along the cycle, the first switch wires edges 0-1, 2-3, ..., the second 1-2, 3-4, ...
    (with an odd count the cycle cannot alternate: the edge back to the start is missing,
    and that hop goes round by routes).

    >>> duplex_ring(4, [0, 1, 2, 3], 1)
    ((1, 0, 3, 2), (3, 2, 1, 0))
    """
    m = len(members)
    cycle = [members[(k * delta) % m] for k in range(m)]
    first: list[int | None] = [None] * n
    second: list[int | None] = [None] * n
    for k in range(m if m % 2 == 0 else m - 1):
        a, b = cycle[k], cycle[(k + 1) % m]
        into = first if k % 2 == 0 else second
        into[a], into[b] = b, a
    return tuple(first), tuple(second)


def totient_wiring(n: int, d: int, *, duplex: bool = False) -> Wiring:
    """TotientPerms over every server, whatever the job: the rings of ``d`` strides, or
    with ``duplex`` circuits, ``d / 2`` strides, each a duplex ring on two switches (the
    artifact's links: a stride takes two units of degree).

    >>> totient_wiring(16, 3).labels
    ('ring 1', 'ring 3', 'ring 7')
    >>> totient_wiring(16, 4, duplex=True).labels
    ('duplex ring 1', 'duplex ring 1', 'duplex ring 7', 'duplex ring 7')
    """
    if duplex:
        if d % 2:
            raise ConfigError("<topoopt>", "degree", d, "duplex rings take two circuits each: use an even degree")
        strides = ring_strides(n, d // 2)
        if len(strides) < d // 2:
            raise ConfigError("<topoopt>", "degree", d, f"{n} servers have only {len(strides)} distinct ring strides")
        perms = [p for st in strides for p in duplex_ring(n, range(n), st)]
        return Wiring(n, tuple(perms), tuple(f"duplex ring {st}" for st in strides for _ in range(2)))
    strides = ring_strides(n, d)
    if len(strides) < d:
        raise ConfigError("<topoopt>", "degree", d, f"{n} servers have only {len(strides)} distinct ring strides")
    return Wiring(n, tuple(stride_perm(n, s) for s in strides), tuple(f"ring {s}" for s in strides))


def _one_way_strides(m: int, count: int) -> list[int]:
    """Up to ``count`` strides of distinct one-way rings over ``m`` members.

    >>> _one_way_strides(4, 3), _one_way_strides(2, 2)
    ([1, 3], [1])
    """
    first = ring_strides(m, count)
    reverse = [m - st for st in first if m - st not in first and m - st > 0]
    rest = [st for st in totient_candidates(m) if st not in first]
    return (first + reverse + rest + [m - st for st in rest])[:count]


def rings_over_groups(demand: Demand, count: int) -> list[tuple[tuple[int | None, ...], str]]:
    """``count`` circuit switches of rings, each holding one ring of every group.

    A group of ``m`` has as many distinct one-way rings as strides coprime with ``m``: the
    TotientPerms ones up to ``m/2`` first, then their reverses ``m - delta`` (a circuit is
    one-way, so the reverse ring is other circuits). A switch beyond that carries a ring of
    the next TotientPerms stride over every server instead (a second circuit to the same
    neighbour would be idle: routes take one).

    >>> from controller.topoopt.demand import AllReduceGroup, Demand
    >>> d = Demand(6, (AllReduceGroup((0, 2, 4), 1.0), AllReduceGroup((1, 3, 5), 1.0)), {})
    >>> rings_over_groups(d, 3)
    [((2, 3, 4, 5, 0, 1), 'ring 1 per group'), ((4, 5, 0, 1, 2, 3), 'ring 2 per group'), ((1, 2, 3, 4, 5, 0), 'ring 1')]
    """
    n = demand.servers
    groups = [g for g in demand.groups if len(g.members) > 1]
    if not groups or count < 1:
        return []
    if len(groups) == 1 and len(groups[0].members) == n:
        strides = ring_strides(n, count)
        return [(ring_perm(n, groups[0].members, st), f"ring {st}") for st in strides]
    per_group = [_one_way_strides(len(g.members), count) for g in groups]
    out = []
    for k in range(min(count, max(len(st) for st in per_group))):
        perm: list[int | None] = [None] * n
        for g, strides in zip(groups, per_group, strict=True):
            if k < len(strides):
                for s, t in enumerate(ring_perm(n, g.members, strides[k])):
                    if t is not None:
                        perm[s] = t
        out.append((tuple(perm), f"ring {sorted({st[k] for st in per_group if k < len(st)})[0]} per group"))
    spare = count - len(out)
    if spare:
        taken = {tuple(p) for p, _ in out}
        for st in totient_candidates(n):
            if spare == 0:
                break
            perm_all = stride_perm(n, st)
            if perm_all not in taken:
                out.append((perm_all, f"ring {st}"))
                spare -= 1
    return out


def duplex_rings_over_groups(demand: Demand, count: int) -> list[tuple[tuple[int | None, ...], str]]:
    """``count`` (even) switches of duplex rings: TotientPerms strides over each group, two
    switches per stride.

    >>> from controller.topoopt.demand import AllReduceGroup, Demand
    >>> d = Demand(8, (AllReduceGroup((0, 2, 4, 6), 1.0), AllReduceGroup((1, 3, 5, 7), 1.0)), {})
    >>> [lbl for _, lbl in duplex_rings_over_groups(d, 2)]
    ['duplex ring 1 per group', 'duplex ring 1 per group']
    """
    n = demand.servers
    groups = [g for g in demand.groups if len(g.members) > 1]
    if not groups or count < 2:
        return []
    per_group = [ring_strides(len(g.members), count // 2) for g in groups]
    out = []
    for k in range(count // 2):
        first: list[int | None] = [None] * n
        second: list[int | None] = [None] * n
        for g, strides in zip(groups, per_group, strict=True):
            if k < len(strides):
                a, b = duplex_ring(n, g.members, strides[k])
                for s in range(n):
                    first[s] = a[s] if a[s] is not None else first[s]
                    second[s] = b[s] if b[s] is not None else second[s]
        whole = len(groups) == 1 and len(groups[0].members) == n
        label = f"duplex ring {per_group[0][min(k, len(per_group[0]) - 1)]}" + ("" if whole else " per group")
        out += [(tuple(first), label), (tuple(second), label)]
    return out


def matchings(demand: Demand, count: int) -> list[tuple[tuple[int | None, ...], str]]:
    """``count`` circuit switches of model-parallel circuits: maximum-weight matchings.

    >>> from controller.topoopt.demand import Demand
    >>> d = Demand(4, (), {(0, 1): 5.0, (1, 0): 5.0, (1, 2): 1.0, (2, 1): 1.0, (2, 3): 4.0, (3, 2): 4.0})
    >>> matchings(d, 2)
    [((1, 0, 3, 2), 'mp'), ((None, 2, 1, None), 'mp')]
    """
    import networkx as nx

    n = demand.servers
    pair: dict[tuple[int, int], float] = {}
    for (u, v), mb in demand.mp.items():
        key = (min(u, v), max(u, v))
        pair[key] = pair.get(key, 0.0) + mb
    out = []
    for _ in range(count):
        graph = nx.Graph()
        for (u, v), mb in sorted(pair.items()):
            if mb > 0:
                graph.add_edge(u, v, weight=mb)
        perm: list[int | None] = [None] * n
        for u, v in sorted(tuple(sorted(e)) for e in nx.max_weight_matching(graph)):
            perm[u], perm[v] = v, u
            pair[u, v] = 0.0
        if all(p is None for p in perm):
            break
        out.append((tuple(perm), "mp"))
    return out


def find_wiring(demand: Demand, d: int, *, nic_mbps: float, duplex: bool = False) -> Found:
    """The best division of ``d`` circuits per server between rings and matchings; with
    ``duplex`` circuits (every switch wires pairs both ways, as the artifact's links), rings
    take switches two by two."""
    if d < 1:
        raise ConfigError("<topoopt>", "degree", d, "must be >= 1")
    n = demand.servers
    has_ar = any(len(g.members) > 1 for g in demand.groups)
    tried: dict[int, float | None] = {}
    best: Found | None = None
    for d_mp in range(d + 1):
        d_ar = d - d_mp
        if (has_ar and d_ar == 0) or (not demand.mp and d_mp) or (duplex and d_ar % 2):
            continue
        rings = duplex_rings_over_groups(demand, d_ar) if duplex else rings_over_groups(demand, d_ar)
        circuits = rings + matchings(demand, d_mp)
        order = demand.order or tuple(range(n))
        spanning = (ring_perm(n, order, 1), "ring over all")
        variants = [circuits] + ([[*circuits[:-1], spanning]] if circuits and not duplex else [])
        if d_mp == 0 and len(totient_candidates(n)) >= (d // 2 if duplex else d):
            totient = totient_wiring(n, d, duplex=duplex)
            variants.append(list(zip(totient.perms, totient.labels, strict=True)))
        for variant in variants:
            wiring = Wiring(n, tuple(p for p, _ in variant), tuple(lbl for _, lbl in variant))
            if len(variant) != d or not wiring.connected:
                continue
            timing = wiring_time(demand, wiring, nic_mbps=nic_mbps)
            if tried.get(d_mp) is None or timing.comm_ms < tried[d_mp]:  # type: ignore[operator]
                tried[d_mp] = timing.comm_ms
            if best is None or timing.comm_ms < best.timing.comm_ms - 1e-9:
                best = Found(wiring, d_ar, d_mp, timing, tried)
        tried.setdefault(d_mp, None)
    if best is None:
        raise ConfigError("<topoopt>", "degree", d, "no division of the circuits connects every server: the "
                                                    "strategy's groups and transfers leave servers apart")
    return Found(best.wiring, best.rings, best.matchings, best.timing, tried)
