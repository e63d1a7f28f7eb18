"""TopoOpt's TotientPerms: ring permutations for a direct-connect fabric of degree d.

A ring over n nodes with stride delta (node i -> i + delta mod n) is a single cycle iff
gcd(delta, n) = 1. TopoOpt (NSDI 2023) picks up to d such strides; its artifact
(``src/runtime/network.cc``) takes them as a geometric sequence between the smallest and
the largest candidate, so that multi-hop routes are short "coin-change" sums of strides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["coin_change_route", "diameter", "ring_strides", "stride_graph", "totient_candidates"]


def totient_candidates(n: int) -> list[int]:
    """Every stride 1 <= delta <= n/2 that makes a single ring over ``n`` nodes.

    >>> totient_candidates(12)
    [1, 5]
    """
    return [delta for delta in range(1, n // 2 + 1) if math.gcd(delta, n) == 1]


def ring_strides(n: int, d: int) -> list[int]:
    """Up to ``d`` distinct coprime strides, geometrically spaced from 1 to ~n/2.

    >>> ring_strides(16, 3)
    [1, 3, 7]
    """
    if n < 2 or d < 1:
        raise ValueError(f"need n >= 2 nodes and degree d >= 1, got n={n}, d={d}")
    candidates = totient_candidates(n)
    if len(candidates) <= d:
        return candidates
    lo, hi = candidates[0], candidates[-1]
    chosen: list[int] = []
    for k in range(d):
        target = lo * (hi / lo) ** (k / (d - 1)) if d > 1 else lo
        # nearest unused candidate to the geometric target
        best = min((c for c in candidates if c not in chosen), key=lambda c: (abs(c - target), c))
        chosen.append(best)
    return sorted(chosen)


def _moves(n: int, strides: Sequence[int]) -> list[int]:
    """Each stride is a bidirectional ring: one can move +delta or -delta."""
    out = set()
    for s in strides:
        out.add(s % n)
        out.add((-s) % n)
    return sorted(out)


def diameter(n: int, strides: Sequence[int]) -> int:
    """Largest hop count between two nodes when every ring is usable in both directions: the
    diameter of the circulant graph ``C_n(strides)``, which (the graph being vertex-transitive)
    is node 0's eccentricity: one breadth-first search, not all pairs.

    >>> diameter(16, [1, 3, 7])
    3
    """
    import networkx as nx

    graph = nx.circulant_graph(n, [s % n for s in strides])
    if not nx.is_connected(graph):
        raise ValueError(f"strides {list(strides)} do not connect {n} nodes")
    return max(nx.single_source_shortest_path_length(graph, 0).values())


def stride_graph(n: int, strides: Sequence[int]):  # -> networkx.DiGraph
    """Nodes 0..n-1, an edge u -> u + s (mod n) for every stride s, in the strides' order,
    labelled with the stride and its index (the first stride wins where two coincide).

    >>> g = stride_graph(4, [1, 3])
    >>> g.edges[0, 3]
    {'stride': 3, 'index': 1}
    """
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    for u in range(n):
        for index, s in enumerate(strides):
            v = (u + s) % n
            if v != u and not graph.has_edge(u, v):
                graph.add_edge(u, v, stride=s, index=index)
    return graph


def coin_change_route(n: int, strides: Sequence[int], src: int, dst: int) -> list[int]:
    """A shortest path src -> dst as the list of signed strides taken ("coin change").

    >>> coin_change_route(16, [1, 3, 7], 0, 10)  # 1 - 7 = -6 = 10 (mod 16)
    [1, -7]
    """
    import networkx as nx

    graph = stride_graph(n, _moves(n, strides))
    prev = dict(nx.bfs_predecessors(graph, 0))
    path: list[int] = []
    node = (dst - src) % n
    while node != 0:
        u = prev[node]
        m = graph.edges[u, node]["stride"]
        path.append(m if m <= n // 2 else m - n)
        node = u
    return sorted(path, key=abs)
