"""A direct-connect fabric's circuits as permutations, and the host routes over them (pure).

NIC ``i`` of every server is patched through circuit switch ``ocs{i}``: server ``s``
transmits to ``perms[i][s]`` (``None``: that NIC has no circuit). Circuits are one-way, as on
TopoOpt's patch panels (separate transmit and receive fibers), so a permutation is exactly
what one circuit switch can hold. A TotientPerms ring of stride ``delta`` is the permutation
``s -> s + delta``; a model-parallel matching is an involution (``u -> v`` and ``v -> u``).

Routes are destination-based and shortest: server ``s`` sends traffic for ``t`` on the NIC
whose circuit lands closest to ``t`` (ties: the lowest NIC), so every hop strictly shortens
the remaining distance and no route loops.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from controller.errors import ConfigError

__all__ = ["Hop", "Wiring", "ring_perm", "stride_perm"]

UNREACHABLE = 1 << 30


def stride_perm(n: int, delta: int) -> tuple[int, ...]:
    """The ring of stride ``delta`` over ``n`` servers.

    >>> stride_perm(4, 1)
    (1, 2, 3, 0)
    """
    return tuple((s + delta) % n for s in range(n))


def ring_perm(n: int, members: Sequence[int], delta: int) -> tuple[int | None, ...]:
    """A ring of stride ``delta`` over ``members`` (in their order); other servers idle.

    >>> ring_perm(6, [1, 3, 5], 1)
    (None, 3, None, 5, None, 1)
    """
    out: list[int | None] = [None] * n
    m = len(members)
    for j, s in enumerate(members):
        out[s] = members[(j + delta) % m]
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Hop:
    """On ``server``: traffic for ``destination`` leaves through NIC ``nic`` to ``next_hop``."""

    server: int
    destination: int
    nic: int
    next_hop: int
    hops: int  # length of the whole path


@dataclass(frozen=True)
class Wiring:
    """``perms[i][s]``: the server NIC ``i`` of server ``s`` transmits to (or None).

    ``labels[i]`` says what circuit switch ``i`` carries (``"ring 3"``, ``"mp"``...).

    >>> w = Wiring(4, (stride_perm(4, 1),), ("ring 1",))
    >>> w.distance(0, 3), w.path(1, 0)
    (3, [1, 2, 3, 0])
    """

    n: int
    perms: tuple[tuple[int | None, ...], ...]
    labels: tuple[str, ...] = ()
    _cache: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    def __post_init__(self) -> None:
        for i, p in enumerate(self.perms):
            if len(p) != self.n:
                raise ConfigError("<wiring>", f"perms[{i}]", len(p), f"one entry per server ({self.n})")
            used = [t for t in p if t is not None]
            if len(set(used)) != len(used) or any(not 0 <= t < self.n for t in used):
                raise ConfigError("<wiring>", f"perms[{i}]", p, "each server receives at most one circuit per switch")
            if any(t == s for s, t in enumerate(p)):
                raise ConfigError("<wiring>", f"perms[{i}]", p, "a circuit from a server to itself")
        if self.labels and len(self.labels) != len(self.perms):
            raise ConfigError("<wiring>", "labels", self.labels, f"one per circuit switch ({len(self.perms)})")

    @property
    def degree(self) -> int:
        return len(self.perms)

    @cached_property
    def _dist(self) -> list[list[int]]:
        """``_dist[t][s]``: circuits from ``s`` to ``t`` (reverse BFS from every destination)."""
        into: list[list[int]] = [[] for _ in range(self.n)]
        for p in self.perms:
            for s, t in enumerate(p):
                if t is not None:
                    into[t].append(s)
        out = []
        for t in range(self.n):
            dist = [UNREACHABLE] * self.n
            dist[t] = 0
            queue = deque([t])
            while queue:
                v = queue.popleft()
                for u in into[v]:
                    if dist[u] == UNREACHABLE:
                        dist[u] = dist[v] + 1
                        queue.append(u)
            out.append(dist)
        return out

    def distance(self, s: int, t: int) -> int:
        """Circuits on the shortest path from ``s`` to ``t`` (UNREACHABLE if none)."""
        return self._dist[t][s]

    @cached_property
    def connected(self) -> bool:
        """Every server reaches every other one over the one-way circuits."""
        return all(d < UNREACHABLE for row in self._dist for d in row)

    def next_hop(self, s: int, t: int) -> tuple[int, int]:
        """``(nic, server)`` of the first circuit of the route ``s -> t``."""
        key = (s, t)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        dist = self._dist[t]
        if dist[s] >= UNREACHABLE:
            raise ConfigError("<wiring>", f"route {s}->{t}", None, "no path over the one-way circuits")
        best = min(((dist[nxt], i) for i, p in enumerate(self.perms) if (nxt := p[s]) is not None),
                   default=(UNREACHABLE, -1))
        hop = (best[1], self.perms[best[1]][s])
        self._cache[key] = hop
        return hop  # type: ignore[return-value]

    def path(self, s: int, t: int) -> list[int]:
        """The servers a packet visits from ``s`` to ``t``."""
        out = [s]
        while out[-1] != t:
            out.append(self.next_hop(out[-1], t)[1])
        return out

    def links(self, s: int, t: int) -> tuple[tuple[int, int], ...]:
        """The ``(server, nic)`` transmitters the route ``s -> t`` uses (memoised: the
        strategy search asks for the same routes thousands of times)."""
        key = ("links", s, t)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        out, v = [], s
        while v != t:
            nic, nxt = self.next_hop(v, t)
            out.append((v, nic))
            v = nxt
        self._cache[key] = found = tuple(out)
        return found

    def _hop_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """Every route at once (memoised): ``dist[s, t]``, the first hop's ``nic[s, t]`` and
        ``nxt[s, t]`` (the same choice as :meth:`next_hop`: the closest landing, ties to
        the lowest NIC), and the ``(s, t)`` index arrays of each distance, farthest first."""
        hit: Any = self._cache.get("hop_arrays")
        if hit is None:
            n = self.n
            dist = np.array(self._dist, dtype=np.int64).T  # _dist[t][s]
            perms = np.array([[-1 if t is None else t for t in p] for p in self.perms], dtype=np.int64)
            cand = np.where((perms >= 0)[:, :, None], dist[np.maximum(perms, 0)], UNREACHABLE)  # (d, s, t)
            nic = cand.argmin(axis=0)
            nxt = perms[nic, np.arange(n)[:, None]]
            top = int(dist[dist < UNREACHABLE].max(initial=0))
            levels = [np.nonzero(dist == level) for level in range(top, 0, -1)]
            hit = self._cache["hop_arrays"] = (dist, nic, nxt, levels)
        return hit

    def link_loads(self, pair_weights: np.ndarray) -> tuple[np.ndarray, float, float]:
        """Each transmitter's (``server * degree + nic``) load when ``s`` sends
        ``pair_weights[s, t]`` to ``t`` over its route, and the totals injected and carried.
        Flows are pushed one distance at a time towards their destinations, all at once.

        >>> w = Wiring(3, (stride_perm(3, 1),))
        >>> loads, injected, carried = w.link_loads(np.array([[0, 0, 1.0], [0, 0, 0], [0, 0, 0]]))  # 0 -> 2
        >>> loads.tolist(), injected, carried
        ([1.0, 1.0, 0.0], 1.0, 2.0)
        """
        dist, nic, nxt, levels = self._hop_arrays()
        d = self.degree
        flow = np.array(pair_weights, dtype=float, copy=True)
        np.fill_diagonal(flow, 0.0)
        injected = float(flow.sum())
        carried = float((flow * np.where(dist < UNREACHABLE, dist, 0)).sum())
        loads = np.zeros(self.n * d)
        for s_idx, t_idx in levels:
            f = flow[s_idx, t_idx]
            np.add.at(loads, s_idx * d + nic[s_idx, t_idx], f)
            np.add.at(flow, (nxt[s_idx, t_idx], t_idx), f)
        return loads, injected, carried

    def routes(self) -> dict[int, list[Hop]]:
        """Every server's first hop towards every other server."""
        if not self.connected:
            raise ConfigError("<wiring>", "circuits", self.labels, "do not connect every pair of servers")
        return {s: [Hop(s, t, *self.next_hop(s, t), self.distance(s, t)) for t in range(self.n) if t != s]
                for s in range(self.n)}

    def mean_route_length(self) -> float:
        """Circuits a byte crosses on average between two servers (uniform traffic)."""
        n = self.n
        return sum(self._dist[t][s] for s in range(n) for t in range(n) if s != t) / (n * (n - 1))

    def is_involution(self, i: int) -> bool:
        """Circuit switch ``i`` wires pairs both ways (duplex circuits)."""
        p = self.perms[i]
        return all(p[t] == s for s, t in enumerate(p) if t is not None)

    def duplex_cycle_through(self, i: int, j: int, members: Sequence[int]) -> tuple[int, ...] | None:
        """``members`` in the order the duplex circuits of switches ``i`` and ``j`` visit
        them, alternating, when together they form one cycle through exactly them (a duplex
        ring on two NICs per server), else None.

        >>> w = Wiring(4, ((1, 0, 3, 2), (3, 2, 1, 0)))
        >>> w.duplex_cycle_through(0, 1, range(4))
        (0, 1, 2, 3)
        """
        key = ("duplex", i, j, frozenset(members))
        if key not in self._cache:
            self._cache[key] = self._duplex_cycle(i, j, members)
        return self._cache[key]

    def _duplex_cycle(self, i: int, j: int, members: Sequence[int]) -> tuple[int, ...] | None:
        want = set(members)
        if len(want) < 3 or not (self.is_involution(i) and self.is_involution(j)):
            return None
        a, b = self.perms[i], self.perms[j]
        start = min(want)
        order, use_a = [start], True
        while True:
            nxt = (a if use_a else b)[order[-1]]
            if nxt is None or nxt not in want:
                return None
            if nxt == start:
                break
            order.append(nxt)
            use_a = not use_a
            if len(order) > len(want):
                return None
        return tuple(order) if len(order) == len(want) and not use_a else None

    def cycle_through(self, i: int, members: Sequence[int]) -> tuple[int, ...] | None:
        """``members`` in the order circuit switch ``i`` visits them when its circuits form
        one cycle through exactly them, else None.

        >>> Wiring(6, (ring_perm(6, [1, 3, 5], 2),)).cycle_through(0, [1, 3, 5])
        (1, 5, 3)
        """
        key = ("cycle", i, frozenset(members))
        if key in self._cache:
            return self._cache[key]
        self._cache[key] = found = self._cycle(i, members)
        return found

    def _cycle(self, i: int, members: Sequence[int]) -> tuple[int, ...] | None:
        p, want = self.perms[i], set(members)
        start = min(want)
        order = [start]
        while True:
            nxt = p[order[-1]]
            if nxt is None or nxt not in want:
                return None
            if nxt == start:
                break
            order.append(nxt)
            if len(order) > len(want):
                return None
        return tuple(order) if len(order) == len(want) else None
