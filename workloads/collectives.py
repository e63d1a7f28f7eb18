"""Collectives over a :class:`~workloads.transport.Mesh`, on float32 numpy arrays.

Every rank calls the same functions in the same order (each call takes a new collective id
for its frame tags). Functions that time themselves return ``{phase name: seconds}``.

- :func:`ring_allreduce`: reduce-scatter then all-gather around a :class:`RingPlan`
  (possibly with PXN relays), in place.
- :func:`hier_allreduce`: reduce-scatter inside the server, ring all-reduce of the shard
  along the rail, all-gather inside the server.
- :func:`innet_allreduce`: the same with the rail step aggregated in the rail's switch.
- :func:`rings_allreduce`: one all-reduce split over several rings at once (mutable).
- :func:`transfers`: point-to-point sends and receives, all at once.
- :func:`alltoall`: executes an :class:`AlltoallPlan` (direct, or hierarchical rail-only).
- :func:`barrier`: gather to and release from rank ``(0, 0)`` over local and rail-0 hops.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from workloads.aggregation.client import SwitchAllreduce
from workloads.checkmate.capture_plan import CapturePlan
from workloads.plan import (
    AlltoallPlan,
    RingPlan,
    barrier_children,
    barrier_parent,
    group_ring,
)
from workloads.transport import Mesh, make_tag

__all__ = [
    "alltoall",
    "barrier",
    "chunk_bounds",
    "hier_allreduce",
    "innet_allreduce",
    "ring_allgather",
    "ring_allreduce",
    "ring_reduce_scatter",
    "rings_allreduce",
    "transfers",
]

Timings = dict[str, float]


def chunk_bounds(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ranges covering ``0..n``, as even as possible (like array_split).

    >>> chunk_bounds(10, 3)
    [(0, 4), (4, 7), (7, 10)]
    >>> chunk_bounds(2, 4)
    [(0, 1), (1, 2), (2, 2), (2, 2)]
    """
    q, r = divmod(n, parts)
    edges = [i * q + min(i, r) for i in range(parts + 1)]
    return list(itertools.pairwise(edges))


def _ring_steps(mesh: Mesh, plan: RingPlan, buf: np.ndarray, bounds: list[tuple[int, int]],
                reduce: bool, capture: CapturePlan | None = None) -> None:
    """The ``n - 1`` steps of a reduce-scatter (``reduce``) or an all-gather, in place.

    Reduce-scatter: at step ``s`` position ``i`` sends chunk ``i-s-1`` and adds the received
    chunk ``i-s-2``, so that it ends holding the sum of chunk ``i``. All-gather: position
    ``i`` starts with chunk ``i``, sends chunk ``i-s`` and stores chunk ``i-s-1``.
    With ``capture`` (all-gather only), the sends it mirrors go over the mirrored legs' own
    connections (:mod:`workloads.checkmate.capture_plan`).
    """
    cid = mesh.next_cid()
    role, n = plan.role(mesh.me.rank), plan.size
    if n == 1:
        return
    i = role.position
    shift = 1 if reduce else 0
    tmp = np.empty(max(b - a for a, b in bounds), dtype=buf.dtype) if reduce and i >= 0 else None
    me = mesh.me.rank

    def mirrored(a: int | None, b: int | None, step: int) -> bool:
        return capture is not None and a is not None and b is not None and \
            step in capture.mirrored_steps(a, b)

    for s in range(n - 1):
        tag = make_tag(cid, s)
        forwards = [(a, b, tag, mirrored(me, b, s)) for a, b in role.forwards]
        if i < 0:
            mesh.exchange(forwards=forwards)
            continue
        sa, sb = bounds[(i - s - shift) % n]
        ra, rb = bounds[(i - s - shift - 1) % n]
        assert role.send_to is not None and role.recv_from is not None
        into = tmp[:rb - ra] if tmp is not None else buf[ra:rb]
        mesh.exchange(sends=[(role.send_to, tag, buf[sa:sb], mirrored(me, role.send_to, s))],
                      recvs=[(role.recv_from, tag, into, mirrored(role.recv_from, me, s))],
                      forwards=forwards)
        if tmp is not None:
            np.add(buf[ra:rb], into, out=buf[ra:rb])


def ring_reduce_scatter(mesh: Mesh, plan: RingPlan, buf: np.ndarray,
                        bounds: list[tuple[int, int]]) -> None:
    """Afterwards ring position ``i`` holds in ``buf[bounds[i]]`` the sum over the ring."""
    _ring_steps(mesh, plan, buf, bounds, reduce=True)


def ring_allgather(mesh: Mesh, plan: RingPlan, buf: np.ndarray,
                   bounds: list[tuple[int, int]], capture: CapturePlan | None = None) -> None:
    """Position ``i`` contributes ``buf[bounds[i]]``; afterwards every rank has them all."""
    _ring_steps(mesh, plan, buf, bounds, reduce=False, capture=capture)


def ring_allreduce(mesh: Mesh, plan: RingPlan, buf: np.ndarray,
                   capture: CapturePlan | None = None) -> Timings:
    """Sum ``buf`` (1-D) over the ring, in place; phases ``reduce_scatter``, ``allgather``.
    With ``capture``, the all-gather's mirrored sends use the mirrored legs' connections."""
    bounds = chunk_bounds(len(buf), plan.size)
    t0 = time.perf_counter()
    ring_reduce_scatter(mesh, plan, buf, bounds)
    t1 = time.perf_counter()
    ring_allgather(mesh, plan, buf, bounds, capture)
    return {"reduce_scatter": t1 - t0, "allgather": time.perf_counter() - t1}


def hier_allreduce(mesh: Mesh, buf: np.ndarray) -> Timings:
    """Sum ``buf`` over every rank: inside the server, then along the rail, then back.

    GPU ``(d, r)`` ends the intra-server reduce-scatter with shard ``r`` summed over server
    ``d``, all-reduces it with the GPUs of rail ``r`` (a ring over the servers, all hops on
    the rail) and the intra-server all-gather spreads the shards again.
    Phases: ``intra_reduce_scatter``, ``rail_allreduce``, ``intra_allgather``.
    """
    layout, me = mesh.layout, mesh.me
    intra = group_ring(layout.server_group(me.server))
    rail = group_ring(layout.rail_group(me.rail))
    shards = chunk_bounds(len(buf), layout.rails)
    t0 = time.perf_counter()
    ring_reduce_scatter(mesh, intra, buf, shards)
    t1 = time.perf_counter()
    a, b = shards[me.rail]
    ring_allreduce(mesh, rail, buf[a:b])
    t2 = time.perf_counter()
    ring_allgather(mesh, intra, buf, shards)
    return {"intra_reduce_scatter": t1 - t0, "rail_allreduce": t2 - t1,
            "intra_allgather": time.perf_counter() - t2}


def innet_allreduce(mesh: Mesh, switch: SwitchAllreduce, buf: np.ndarray) -> Timings:
    """:func:`hier_allreduce` with the rail step aggregated in the rail's switch: GPU
    ``(d, r)`` sends shard ``r`` (summed over server ``d``) to rail ``r``'s switch, which adds
    the servers' shards and multicasts the sum back (in-network aggregation). On one GPU per
    server, the intra-server steps are empty and this is the flat in-network all-reduce.
    Phases: ``intra_reduce_scatter``, ``rail_aggregate``, ``intra_allgather``.
    """
    layout, me = mesh.layout, mesh.me
    intra = group_ring(layout.server_group(me.server))
    shards = chunk_bounds(len(buf), layout.rails)
    t0 = time.perf_counter()
    ring_reduce_scatter(mesh, intra, buf, shards)
    t1 = time.perf_counter()
    a, b = shards[me.rail]
    summed, _ = switch.allreduce_float(buf[a:b])
    buf[a:b] = summed
    t2 = time.perf_counter()
    ring_allgather(mesh, intra, buf, shards)
    return {"intra_reduce_scatter": t1 - t0, "rail_aggregate": t2 - t1,
            "intra_allgather": time.perf_counter() - t2}


def alltoall(mesh: Mesh, plan: AlltoallPlan, send: np.ndarray) -> tuple[np.ndarray, Timings]:
    """Row ``j`` of ``send`` (shape ``(world, m)``) goes to rank ``j``; row ``i`` of the
    result came from rank ``i``. One timing per phase name (rounds of a phase add up).
    """
    me, world = mesh.me.rank, mesh.layout.world
    if send.ndim != 2 or send.shape[0] != world:
        raise ValueError(f"send buffer must have shape ({world}, m), got {send.shape}")
    m = send.shape[1]
    held: dict[tuple[int, int], np.ndarray] = {(me, j): send[j] for j in range(world)}
    result = np.empty_like(send)
    placed: set[int] = set()  # rows received straight into the result
    timings: Timings = {}
    for index, (name, _) in enumerate(plan.phases):
        cid = mesh.next_cid()
        tag = make_tag(cid, 0)
        t0 = time.perf_counter()
        sends = []
        for t in plan.sends(index, me):
            rows = [held.pop(c) for c in t.chunks]
            sends.append((t.dst, tag, rows[0] if len(rows) == 1 else np.stack(rows)))
        incoming = []
        for t in plan.receives(index, me):
            first = t.chunks[0][0]
            if t.chunks == tuple((first + k, me) for k in range(len(t.chunks))):
                incoming.append((t, result[first:first + len(t.chunks)]))
                placed.update(range(first, first + len(t.chunks)))
            else:
                incoming.append((t, np.empty((len(t.chunks), m), dtype=send.dtype)))
        mesh.exchange(sends=sends, recvs=[(t.src, tag, out) for t, out in incoming])
        for t, out in incoming:
            held.update(zip(t.chunks, out, strict=True))
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0
    for i in range(world):
        if i not in placed:
            result[i] = held[(i, me)]
    return result, timings


def barrier(mesh: Mesh) -> None:
    """Return once every rank has entered (gather to ``(0, 0)``, then release)."""
    cid = mesh.next_cid()
    up, down = make_tag(cid, 0), make_tag(cid, 1)
    me, layout = mesh.me.rank, mesh.layout
    children, parent = barrier_children(layout, me), barrier_parent(layout, me)
    nothing = np.empty(0, dtype=np.uint8)
    mesh.exchange(recvs=[(c, up, nothing) for c in children])
    if parent is not None:
        mesh.exchange(sends=[(parent, up, nothing)])
        mesh.exchange(recvs=[(parent, down, nothing)])
    mesh.exchange(sends=[(c, down, nothing) for c in children])


def _layers(plans: list[RingPlan], me: int) -> list[list[int]]:
    """The rings (indices) split into layers in which this rank sends to distinct peers and
    receives from distinct peers: one connection carries one frame at a time."""
    layers: list[tuple[set[int], set[int], list[int]]] = []
    for k, plan in enumerate(plans):
        role = plan.role(me)
        for outs, ins, members in layers:  # noqa: B007 (the layer found is used below)
            if role.send_to not in outs and role.recv_from not in ins:
                break
        else:
            outs, ins, members = set(), set(), []
            layers.append((outs, ins, members))
        outs.add(role.send_to)  # type: ignore[arg-type]
        ins.add(role.recv_from)  # type: ignore[arg-type]
        members.append(k)
    return [members for _, _, members in layers]


def rings_allreduce(mesh: Mesh, plans: list[RingPlan], buf: np.ndarray, shares: list[float]) -> Timings:
    """Sum ``buf`` over the rings' members, in place, splitting it over every ring in
    proportion to ``shares`` (TopoOpt's mutable all-reduce): ring ``k`` reduces its slice with
    a reduce-scatter and an all-gather, all rings at once, step by step.

    Every ring must hold the same members, without relays; each rank calls it with the same
    plans and shares. Phases ``reduce_scatter``, ``allgather``.
    """
    me = mesh.me.rank
    cid = mesh.next_cid()
    m = plans[0].size if plans else 1
    if m < 2 or any(p.size != m or me not in p.order for p in plans):
        if m >= 2:
            raise ValueError(f"rank {me}: every ring must hold the same {m} members")
        return {"reduce_scatter": 0.0, "allgather": 0.0}
    weights = [max(0.0, s) for s in shares]
    total = sum(weights) or 1.0
    edges = [0]
    for w in weights:
        edges.append(min(len(buf), edges[-1] + round(len(buf) * w / total)))
    edges[-1] = len(buf)
    slices = [buf[a:b] for a, b in itertools.pairwise(edges)]
    bounds = [chunk_bounds(len(s), m) for s in slices]
    roles = [p.role(me) for p in plans]
    layers = _layers(plans, me)
    tmps = [np.empty(max(b - a for a, b in bd), dtype=buf.dtype) for bd in bounds]
    timings: Timings = {}
    for phase, reduce in (("reduce_scatter", True), ("allgather", False)):
        t0 = time.perf_counter()
        shift = 1 if reduce else 0
        for s in range(m - 1):
            for layer in layers:
                sends, recvs, adds = [], [], []
                for k in layer:
                    role, bd, sl = roles[k], bounds[k], slices[k]
                    i = role.position
                    tag = make_tag(cid, (k << 12) | (2 * s + (0 if reduce else 1)))
                    sa, sb = bd[(i - s - shift) % m]
                    ra, rb = bd[(i - s - shift - 1) % m]
                    into = tmps[k][:rb - ra] if reduce else sl[ra:rb]
                    sends.append((role.send_to, tag, sl[sa:sb]))
                    recvs.append((role.recv_from, tag, into))
                    if reduce:
                        adds.append((sl[ra:rb], into))
                mesh.exchange(sends=sends, recvs=recvs)
                for dst, src in adds:
                    np.add(dst, src, out=dst)
        timings[phase] = time.perf_counter() - t0
    return timings


def transfers(mesh: Mesh, sends: list[tuple[int, np.ndarray]], recvs: list[tuple[int, np.ndarray]]) -> Timings:
    """Point-to-point transfers (model-parallel activations), all at once: ``sends`` to
    peers, ``recvs`` from peers into the given arrays (one of each per peer at most).
    Phase ``transfers``."""
    tag = make_tag(mesh.next_cid(), 0)
    t0 = time.perf_counter()
    mesh.exchange(sends=[(p, tag, b) for p, b in sends], recvs=[(p, tag, b) for p, b in recvs])
    return {"transfers": time.perf_counter() - t0}
