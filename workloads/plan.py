"""Rank layout and communication plans: pure logic, no sockets.

Server (HB domain) ``d`` has ``R`` GPUs; GPU ``r`` of server ``d`` is a :class:`Rank` bound
to the address of the server's NIC on rail ``r``. Two ranks can talk

- ``local``: on the same server (inside the host: the "NVLink");
- ``rail``: on different servers, same rail (through that rail's switch);
- ``cross``: different servers and rails. A rail-only fabric cannot carry this; the data
  first moves inside the source server to the GPU of the destination rail (NCCL's PXN).

Plans say who sends what to whom; :mod:`workloads.collectives` executes them.

Ring kinds for the flat ring all-reduce (:data:`RING_KINDS`):

``pxn`` (default)
    Snake order: server 0 rails ``0..R-1``, server 1 rails ``R-1..0``, server 2 ``0..R-1``...
    Every hop is local or on one rail, except with an odd number of servers (>= 3, R >= 2):
    then the wrap-around hop ``(D-1, R-1) -> (0, 0)`` crosses rails and is relayed by
    ``(D-1, 0)``, the GPU of the source server on the destination rail (PXN).
``direct``
    The same snake, with the cross-rail wrap-around hop sent directly (fat-tree only).
``aligned``
    A ring that needs no relay for any ``D``, ``R``: the snake when it closes on a rail;
    for odd ``D`` and ``R >= 3`` the last three servers are entered on rails 0, 1, 2 and
    left on 1, 2, 0; for odd ``D`` and ``R == 2``, rail 0 forwards then rail 1 backwards.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property

from workloads.errors import PlanError

__all__ = [
    "MESH_KINDS",
    "RING_KINDS",
    "AlltoallPlan",
    "Layout",
    "Rank",
    "RingPlan",
    "RingRole",
    "Transfer",
    "alltoall_plan",
    "barrier_children",
    "barrier_parent",
    "group_ring",
    "hop_kind",
    "mesh_peers",
    "op_peers",
    "ring_plan",
]

RING_KINDS = ("pxn", "direct", "aligned")
MESH_KINDS = ("rail", "full")


@dataclass(frozen=True)
class Rank:
    """GPU ``rail`` of server ``server``: global rank ``rank``, bound to ``ip``."""

    rank: int
    server: int
    rail: int
    ip: str


@dataclass(frozen=True)
class Layout:
    """``servers`` x ``rails`` ranks; ``ranks[k].rank == k``.

    >>> lay = Layout.grid(2, 2, lambda d, r: f"10.0.{r}.{d + 1}")
    >>> lay.at(1, 0)
    Rank(rank=2, server=1, rail=0, ip='10.0.0.2')
    >>> lay.server_group(1), lay.rail_group(1)
    ((2, 3), (1, 3))
    """

    servers: int
    rails: int
    ranks: tuple[Rank, ...]

    def __post_init__(self) -> None:
        if self.servers < 1 or self.rails < 1:
            raise PlanError(f"need servers >= 1 and rails >= 1 (got {self.servers}, {self.rails})")
        if len(self.ranks) != self.servers * self.rails:
            raise PlanError(f"{self.servers} servers x {self.rails} rails need "
                            f"{self.servers * self.rails} ranks (got {len(self.ranks)})")
        seen: dict[tuple[int, int], int] = {}
        for k, r in enumerate(self.ranks):
            if r.rank != k:
                raise PlanError(f"ranks must be 0..{len(self.ranks) - 1} in order (got {r.rank} at {k})")
            if not (0 <= r.server < self.servers and 0 <= r.rail < self.rails):
                raise PlanError(f"rank {k}: server {r.server} rail {r.rail} outside "
                                f"{self.servers} x {self.rails}")
            if (r.server, r.rail) in seen:
                raise PlanError(f"rank {k}: server {r.server} rail {r.rail} already taken by "
                                f"rank {seen[(r.server, r.rail)]}")
            seen[(r.server, r.rail)] = k
            try:
                ipaddress.IPv4Address(r.ip)
            except ValueError as exc:
                raise PlanError(f"rank {k}: {r.ip!r} is not an IPv4 address") from exc

    @cached_property
    def _grid(self) -> dict[tuple[int, int], int]:
        return {(r.server, r.rail): r.rank for r in self.ranks}

    @classmethod
    def grid(cls, servers: int, rails: int, ip_of: Callable[[int, int], str]) -> Layout:
        """Ranks numbered ``server * rails + rail``, addressed by ``ip_of(server, rail)``."""
        return cls(servers, rails, tuple(Rank(d * rails + r, d, r, ip_of(d, r))
                                         for d in range(servers) for r in range(rails)))

    @property
    def world(self) -> int:
        return len(self.ranks)

    def __getitem__(self, rank: int) -> Rank:
        return self.ranks[rank]

    def at(self, server: int, rail: int) -> Rank:
        """The rank of GPU ``rail`` of server ``server``."""
        return self.ranks[self._grid[(server, rail)]]

    def server_group(self, server: int) -> tuple[int, ...]:
        """Ranks of one server, by rail."""
        return tuple(self.at(server, r).rank for r in range(self.rails))

    def rail_group(self, rail: int) -> tuple[int, ...]:
        """Ranks of one rail, by server."""
        return tuple(self.at(d, rail).rank for d in range(self.servers))


def hop_kind(layout: Layout, a: int, b: int) -> str:
    """``local`` (same server), ``rail`` (same rail) or ``cross``.

    >>> lay = Layout.grid(2, 2, lambda d, r: "10.0.0.1")
    >>> hop_kind(lay, 0, 1), hop_kind(lay, 0, 2), hop_kind(lay, 0, 3)
    ('local', 'rail', 'cross')
    """
    ra, rb = layout[a], layout[b]
    if ra.server == rb.server:
        return "local"
    return "rail" if ra.rail == rb.rail else "cross"


# ---------------------------------------------------------------- rings


@dataclass(frozen=True)
class RingRole:
    """What one rank does in each ring step.

    It sends to ``send_to`` (the next rank, or the relay of that hop), receives from
    ``recv_from`` (the previous rank, or the relay of the hop into it) and relays the
    ``(src, dst)`` hops in ``forwards``. With a single rank there is nothing to do (None).
    """

    position: int
    send_to: int | None
    recv_from: int | None
    forwards: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class RingPlan:
    """A ring: ``order[i]`` sends to ``order[i + 1]``, through relay ``via[i]`` if not None."""

    order: tuple[int, ...]
    via: tuple[int | None, ...]

    def __post_init__(self) -> None:
        if len(self.order) != len(self.via) or len(set(self.order)) != len(self.order):
            raise PlanError(f"bad ring {self.order} via {self.via}")

    @property
    def size(self) -> int:
        return len(self.order)

    def hops(self) -> list[tuple[int, int, int | None]]:
        """``(src, dst, via)`` of every hop, the wrap-around last (none for one rank)."""
        n = len(self.order)
        if n == 1:
            return []
        return [(self.order[i], self.order[(i + 1) % n], self.via[i]) for i in range(n)]

    def legs(self) -> set[tuple[int, int]]:
        """Every ``(sender, receiver)`` pair that carries data, relays included."""
        return {leg for s, d, v in self.hops() for leg in ([(s, d)] if v is None else [(s, v), (v, d)])}

    def role(self, rank: int) -> RingRole:
        """The role of ``rank`` (which may only relay: then ``position`` is -1)."""
        forwards = tuple((s, d) for s, d, v in self.hops() if v == rank)
        if rank not in self.order:
            return RingRole(-1, None, None, forwards)
        n, i = len(self.order), self.order.index(rank)
        if n == 1:
            return RingRole(0, None, None, forwards)
        nxt, prv = self.order[(i + 1) % n], self.order[(i - 1) % n]
        out_via, in_via = self.via[i], self.via[(i - 1) % n]
        return RingRole(i, nxt if out_via is None else out_via,
                        prv if in_via is None else in_via, forwards)


def group_ring(members: Iterable[int]) -> RingPlan:
    """A ring over ``members`` in the given order, without relays.

    >>> group_ring([4, 5, 6]).role(4)
    RingRole(position=0, send_to=5, recv_from=6, forwards=())
    """
    order = tuple(members)
    return RingPlan(order, (None,) * len(order))


def _snake(layout: Layout, servers: Iterable[int]) -> list[int]:
    rails = range(layout.rails)
    return [layout.at(d, r).rank for d in servers for r in (rails if d % 2 == 0 else reversed(rails))]


def _aligned(layout: Layout) -> list[int]:
    D, R = layout.servers, layout.rails
    if D == 1 or R == 1 or D % 2 == 0:
        return _snake(layout, range(D))
    if R == 2:
        return [layout.at(d, 0).rank for d in range(D)] + [layout.at(d, 1).rank for d in reversed(range(D))]
    order = _snake(layout, range(D - 3))  # an even number of servers: it ends on rail 0
    for d, (enter, leave) in zip((D - 3, D - 2, D - 1), ((0, 1), (1, 2), (2, 0)), strict=True):
        middle = [r for r in range(R) if r not in (enter, leave)]
        order += [layout.at(d, r).rank for r in (enter, *middle, leave)]
    return order


def ring_plan(layout: Layout, kind: str = "pxn") -> RingPlan:
    """The flat ring over every rank (see the module docstring for the kinds).

    >>> lay = Layout.grid(3, 2, lambda d, r: "10.0.0.1")
    >>> ring_plan(lay).order, ring_plan(lay).via
    ((0, 1, 3, 2, 4, 5), (None, None, None, None, None, 4))
    >>> ring_plan(lay, "aligned").order
    (0, 2, 4, 5, 3, 1)
    """
    if kind not in RING_KINDS:
        raise PlanError(f"unknown ring kind {kind!r} (one of {', '.join(RING_KINDS)})")
    order = _aligned(layout) if kind == "aligned" else _snake(layout, range(layout.servers))
    via: list[int | None] = [None] * len(order)
    if kind == "pxn" and len(order) > 1:
        for i, src in enumerate(order):
            dst = order[(i + 1) % len(order)]
            if hop_kind(layout, src, dst) == "cross":
                via[i] = layout.at(layout[src].server, layout[dst].rail).rank
    return RingPlan(tuple(order), tuple(via))


# ---------------------------------------------------------------- all-to-all


@dataclass(frozen=True)
class Transfer:
    """One message ``src -> dst`` carrying the chunks ``(origin, destination)``, in order."""

    src: int
    dst: int
    chunks: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class AlltoallPlan:
    """Phases run one after the other; the transfers of a phase run at once.

    Every rank starts with its own chunks ``(rank, j)`` for all ``j``; a transfer moves the
    chunks it carries from ``src`` to ``dst``. At the end rank ``j`` holds ``(i, j)`` for all ``i``.
    """

    phases: tuple[tuple[str, tuple[Transfer, ...]], ...]

    def legs(self) -> set[tuple[int, int]]:
        """Every ``(sender, receiver)`` pair that carries data."""
        return {(t.src, t.dst) for _, ts in self.phases for t in ts}

    def sends(self, phase: int, rank: int) -> list[Transfer]:
        return [t for t in self.phases[phase][1] if t.src == rank]

    def receives(self, phase: int, rank: int) -> list[Transfer]:
        return [t for t in self.phases[phase][1] if t.dst == rank]


def _rounds(name: str, transfers: tuple[Transfer, ...], shift) -> tuple[tuple[str, tuple[Transfer, ...]], ...]:
    """Split one phase into pairwise-exchange rounds: round k holds the transfers whose
    ``shift(transfer)`` is k, so every rank sends to one peer and receives from one peer
    per round (no incast). Rounds keep the phase's name; their timings add up."""
    by_round: dict[int, list[Transfer]] = {}
    for tr in transfers:
        by_round.setdefault(shift(tr), []).append(tr)
    return tuple((name, tuple(by_round[k])) for k in sorted(by_round))


#: how an all-to-all phase's transfers are ordered (:func:`alltoall_plan`)
ALLTOALL_SCHEDULES = ("pairwise", "concurrent")


def alltoall_plan(layout: Layout, kind: str = "direct", schedule: str = "pairwise") -> AlltoallPlan:
    """``direct``: every rank sends to every rank; ``hier``: rail-only.

    The hierarchical plan has phase ``intra`` (GPU ``(d, r)`` hands GPU ``(d, r')`` of its
    server every chunk bound for rail ``r'``) and phase ``rail`` (GPU ``(d, r)`` sends GPU
    ``(d', r)`` the chunks that server ``d`` holds for it).

    ``schedule`` ``pairwise`` (default) runs each phase as rounds of pairwise exchanges
    (round k: rank i sends to the peer k positions away in its group), as MPI does for
    large messages; ``concurrent`` sends everything of a phase at once, as NCCL's grouped
    sends and receives do. Over TCP a pairwise round ends when its receive has arrived, so a
    slow transfer delays every later round of its receiver (and, through it, of others):
    the direct all-to-all's rounds leave NICs idle. Concurrent transfers keep every NIC busy,
    at the price of incast (15 flows into one NIC).

    >>> lay = Layout.grid(2, 2, lambda d, r: "10.0.0.1")
    >>> [name for name, _ in alltoall_plan(lay, "hier").phases]
    ['intra', 'rail']
    >>> alltoall_plan(lay, "hier").sends(0, 0)
    [Transfer(src=0, dst=1, chunks=((0, 1), (0, 3)))]
    >>> alltoall_plan(lay, "hier").sends(1, 0)
    [Transfer(src=0, dst=2, chunks=((0, 2), (1, 2)))]
    >>> [len(ts) for _, ts in alltoall_plan(lay, "direct").phases]
    [4, 4, 4]
    """
    if schedule not in ALLTOALL_SCHEDULES:
        raise PlanError(f"unknown all-to-all schedule {schedule!r} (pairwise or concurrent)")
    D, R, W = layout.servers, layout.rails, layout.world
    if kind == "direct":
        direct = tuple(Transfer(a.rank, b.rank, ((a.rank, b.rank),))
                       for a in layout.ranks for b in layout.ranks if a.rank != b.rank)
        if schedule == "concurrent":
            return AlltoallPlan((("alltoall", direct),))
        return AlltoallPlan(_rounds("alltoall", direct, lambda tr: (tr.dst - tr.src) % W))
    if kind != "hier":
        raise PlanError(f"unknown all-to-all kind {kind!r} (direct or hier)")
    intra = tuple(
        Transfer(a.rank, layout.at(a.server, r2).rank,
                 tuple((a.rank, layout.at(d2, r2).rank) for d2 in range(D)))
        for a in layout.ranks for r2 in range(R) if r2 != a.rail)
    rail = tuple(
        Transfer(a.rank, layout.at(d2, a.rail).rank,
                 tuple((layout.at(a.server, r2).rank, layout.at(d2, a.rail).rank) for r2 in range(R)))
        for a in layout.ranks for d2 in range(D) if d2 != a.server)
    if schedule == "concurrent":
        return AlltoallPlan((("intra", intra), ("rail", rail)))
    return AlltoallPlan(
        _rounds("intra", intra, lambda tr: (layout[tr.dst].rail - layout[tr.src].rail) % R)
        + _rounds("rail", rail, lambda tr: (layout[tr.dst].server - layout[tr.src].server) % D))


# ---------------------------------------------------------------- barrier and peers


def barrier_parent(layout: Layout, rank: int) -> int | None:
    """Barrier tree: GPUs report to rail 0 of their server, rail-0 GPUs to ``(0, 0)``.

    It uses only local and rail-0 hops, so it works on a rail-only fabric.
    """
    r = layout[rank]
    if r.rail != 0:
        return layout.at(r.server, 0).rank
    return None if r.server == 0 else layout.at(0, 0).rank


def barrier_children(layout: Layout, rank: int) -> tuple[int, ...]:
    return tuple(k.rank for k in layout.ranks if barrier_parent(layout, k.rank) == rank)


def op_peers(layout: Layout, rank: int) -> dict[str, frozenset[int]]:
    """The peers ``rank`` exchanges data with, per operation.

    Keys: ``allreduce:<ring kind>``, ``hier_allreduce``, ``alltoall``, ``hier_alltoall``,
    ``barrier``.

    >>> lay = Layout.grid(2, 2, lambda d, r: "10.0.0.1")
    >>> sorted(op_peers(lay, 0)["hier_allreduce"]), sorted(op_peers(lay, 0)["alltoall"])
    ([1, 2], [1, 2, 3])
    """
    me = layout[rank]
    peers: dict[str, frozenset[int]] = {}
    for kind in RING_KINDS:
        role = ring_plan(layout, kind).role(rank)
        ends = {role.send_to, role.recv_from, *(p for hop in role.forwards for p in hop)}
        peers[f"allreduce:{kind}"] = frozenset(p for p in ends if p is not None and p != rank)
    groups = set(layout.server_group(me.server)) | set(layout.rail_group(me.rail))
    peers["hier_allreduce"] = frozenset(groups - {rank})
    for name, kind in (("alltoall", "direct"), ("hier_alltoall", "hier")):
        plan = alltoall_plan(layout, kind)
        peers[name] = frozenset(t.dst if t.src == rank else t.src for _, ts in plan.phases
                                for t in ts if rank in (t.src, t.dst))
    parent = barrier_parent(layout, rank)
    peers["barrier"] = frozenset({*barrier_children(layout, rank), *([parent] if parent is not None else [])})
    return peers


def mesh_peers(layout: Layout, rank: int, mesh: str = "rail") -> tuple[int, ...]:
    """The peers a worker connects to at start-up.

    ``rail``: every peer on its server or its rail (all that a rail-only fabric reaches: enough
    for every operation but ``alltoall`` and ``allreduce`` with ring ``direct``); ``full``:
    every peer (fat-tree).

    >>> lay = Layout.grid(2, 2, lambda d, r: "10.0.0.1")
    >>> mesh_peers(lay, 0), mesh_peers(lay, 0, "full")
    ((1, 2), (1, 2, 3))
    """
    if mesh not in MESH_KINDS:
        raise PlanError(f"unknown mesh kind {mesh!r} (rail or full)")
    return tuple(p for p in range(layout.world)
                 if p != rank and (mesh == "full" or hop_kind(layout, rank, p) != "cross"))
