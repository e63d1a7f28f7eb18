"""Rank layout and plans of the host-side workloads: rings, groups, all-to-all, peers."""

from __future__ import annotations

import itertools

import pytest

from workloads.errors import PlanError
from workloads.plan import (
    RING_KINDS,
    Layout,
    Rank,
    alltoall_plan,
    barrier_children,
    barrier_parent,
    hop_kind,
    mesh_peers,
    op_peers,
    ring_plan,
)

SHAPES = [(d, r) for d in range(1, 7) for r in range(1, 6)]


def grid(d: int, r: int) -> Layout:
    return Layout.grid(d, r, lambda s, g: f"10.{g}.{s // 250}.{s % 250 + 1}")


def legs(src: int, dst: int, via: int | None) -> list[tuple[int, int]]:
    return [(src, dst)] if via is None else [(src, via), (via, dst)]


@pytest.mark.parametrize(("servers", "rails"), SHAPES)
@pytest.mark.parametrize("kind", RING_KINDS)
def test_rings_visit_every_rank_once(servers: int, rails: int, kind: str) -> None:
    lay = grid(servers, rails)
    plan = ring_plan(lay, kind)
    assert sorted(plan.order) == list(range(lay.world))
    assert len(plan.hops()) == (0 if lay.world == 1 else lay.world)


@pytest.mark.parametrize(("servers", "rails"), SHAPES)
@pytest.mark.parametrize("kind", ["pxn", "aligned"])
def test_rail_only_rings_keep_every_leg_on_a_rail(servers: int, rails: int, kind: str) -> None:
    lay = grid(servers, rails)
    for src, dst, via in ring_plan(lay, kind).hops():
        for a, b in legs(src, dst, via):
            assert hop_kind(lay, a, b) in ("local", "rail"), (src, dst, via)


@pytest.mark.parametrize(("servers", "rails"), SHAPES)
def test_snake_order_and_where_pxn_relays(servers: int, rails: int) -> None:
    lay = grid(servers, rails)
    plan = ring_plan(lay, "pxn")
    expected = [lay.at(d, r).rank for d in range(servers)
                for r in (range(rails) if d % 2 == 0 else reversed(range(rails)))]
    assert list(plan.order) == expected
    relayed = [(s, t, v) for s, t, v in plan.hops() if v is not None]
    if servers % 2 == 1 and servers >= 3 and rails >= 2:
        # only the wrap-around (D-1, R-1) -> (0, 0), via the source server's GPU on rail 0
        assert relayed == [(lay.at(servers - 1, rails - 1).rank, lay.at(0, 0).rank,
                            lay.at(servers - 1, 0).rank)]
    else:
        assert relayed == []
    direct = ring_plan(lay, "direct")
    assert direct.order == plan.order and set(direct.via) == {None}
    crossing = [(s, t) for s, t, _ in direct.hops() if hop_kind(lay, s, t) == "cross"]
    assert crossing == [(s, t) for s, t, _ in relayed]


@pytest.mark.parametrize(("servers", "rails"), SHAPES)
def test_aligned_ring_needs_no_relay(servers: int, rails: int) -> None:
    plan = ring_plan(grid(servers, rails), "aligned")
    assert set(plan.via) == {None}


@pytest.mark.parametrize(("servers", "rails"), [(3, 2), (3, 3), (5, 4), (2, 2), (1, 3)])
@pytest.mark.parametrize("kind", RING_KINDS)
def test_ring_roles_agree_with_hops(servers: int, rails: int, kind: str) -> None:
    lay = grid(servers, rails)
    plan = ring_plan(lay, kind)
    for src, dst, via in plan.hops():
        assert plan.role(src).send_to == (dst if via is None else via)
        assert plan.role(dst).recv_from == (src if via is None else via)
        if via is not None:
            relay = plan.role(via)
            assert (src, dst) in relay.forwards
            # a relay's own ring traffic never shares a direction of a connection it relays on
            assert relay.send_to != dst and relay.recv_from != src
    positions = sorted(plan.role(k).position for k in range(lay.world))
    assert positions == list(range(lay.world))


def test_single_rank_ring_has_nothing_to_do() -> None:
    role = ring_plan(grid(1, 1)).role(0)
    assert (role.send_to, role.recv_from, role.forwards) == (None, None, ())


@pytest.mark.parametrize(("servers", "rails"), SHAPES)
def test_hierarchical_groups_partition_the_ranks(servers: int, rails: int) -> None:
    lay = grid(servers, rails)
    by_server = [lay.server_group(d) for d in range(servers)]
    by_rail = [lay.rail_group(r) for r in range(rails)]
    for groups in (by_server, by_rail):
        assert sorted(itertools.chain.from_iterable(groups)) == list(range(lay.world))
    for d, group in enumerate(by_server):
        assert [lay[k].rail for k in group] == list(range(rails))
        assert {lay[k].server for k in group} == {d}
    for r, group in enumerate(by_rail):
        assert [lay[k].server for k in group] == list(range(servers))
        assert {lay[k].rail for k in group} == {r}


def simulate(lay: Layout, kind: str) -> dict[int, set[tuple[int, int]]]:
    """Move chunks as the plan says, checking that senders hold what they send."""
    held = {k: {(k, j) for j in range(lay.world)} for k in range(lay.world)}
    for _, transfers in alltoall_plan(lay, kind).phases:
        moved = []
        for t in transfers:
            assert t.src != t.dst
            assert set(t.chunks) <= held[t.src], t
            assert len(set(t.chunks)) == len(t.chunks)
            moved.append(t)
        for t in moved:  # a phase's transfers run at once: remove, then add
            held[t.src] -= set(t.chunks)
        for t in moved:
            held[t.dst] |= set(t.chunks)
    return held


@pytest.mark.parametrize(("servers", "rails"), SHAPES)
@pytest.mark.parametrize("kind", ["direct", "hier"])
def test_alltoall_plans_deliver_every_pair_once(servers: int, rails: int, kind: str) -> None:
    lay = grid(servers, rails)
    held = simulate(lay, kind)
    for k in range(lay.world):
        assert held[k] == {(i, k) for i in range(lay.world)}


@pytest.mark.parametrize(("servers", "rails"), SHAPES)
def test_hierarchical_alltoall_is_rail_only(servers: int, rails: int) -> None:
    lay = grid(servers, rails)
    plan = alltoall_plan(lay, "hier", schedule="concurrent")
    names = [name for name, _ in plan.phases]
    assert names == ["intra", "rail"]
    assert all(hop_kind(lay, t.src, t.dst) == "local" for t in plan.phases[0][1])
    assert all(hop_kind(lay, t.src, t.dst) == "rail" for t in plan.phases[1][1])
    # phase 1 carries (R-1) * D chunks per rank, phase 2 (D-1) * R: the paper's shares
    for k in range(lay.world):
        assert sum(len(t.chunks) for t in plan.sends(0, k)) == (rails - 1) * servers
        assert sum(len(t.chunks) for t in plan.sends(1, k)) == (servers - 1) * rails


@pytest.mark.parametrize(("servers", "rails"), SHAPES)
@pytest.mark.parametrize("kind", ["direct", "hier"])
def test_pairwise_rounds_have_no_incast(servers: int, rails: int, kind: str) -> None:
    """Each round of the default schedule: every rank sends to and receives from at most one peer."""
    lay = grid(servers, rails)
    plan = alltoall_plan(lay, kind)
    concurrent = alltoall_plan(lay, kind, schedule="concurrent")
    assert plan.legs() == concurrent.legs()
    for _, transfers in plan.phases:
        assert len({t.src for t in transfers}) == len(transfers)
        assert len({t.dst for t in transfers}) == len(transfers)


def test_direct_alltoall_sends_to_every_peer() -> None:
    lay = grid(2, 3)
    plan = alltoall_plan(lay, "direct", schedule="concurrent")
    assert len(plan.phases) == 1
    for k in range(lay.world):
        assert sorted(t.dst for t in plan.sends(0, k)) == [j for j in range(lay.world) if j != k]


@pytest.mark.parametrize(("servers", "rails"), SHAPES)
def test_barrier_tree_spans_all_ranks_over_rail_hops(servers: int, rails: int) -> None:
    lay = grid(servers, rails)
    assert barrier_parent(lay, lay.at(0, 0).rank) is None
    for k in range(lay.world):
        node, depth = k, 0
        while (parent := barrier_parent(lay, node)) is not None:
            assert hop_kind(lay, node, parent) != "cross"
            assert node in barrier_children(lay, parent)
            node, depth = parent, depth + 1
        assert node == lay.at(0, 0).rank and depth <= 2


@pytest.mark.parametrize(("servers", "rails"), SHAPES)
def test_rail_mesh_covers_every_rail_only_operation(servers: int, rails: int) -> None:
    lay = grid(servers, rails)
    for k in range(lay.world):
        rail_mesh, full = set(mesh_peers(lay, k, "rail")), set(mesh_peers(lay, k, "full"))
        assert full == set(range(lay.world)) - {k}
        assert all(hop_kind(lay, k, p) != "cross" for p in rail_mesh)
        for op, peers in op_peers(lay, k).items():
            assert peers <= full, op
            if op not in ("alltoall", "allreduce:direct"):
                assert peers <= rail_mesh, op


def test_rank_peers_for_a_two_by_two() -> None:
    lay = grid(2, 2)
    peers = op_peers(lay, 0)
    assert peers["allreduce:pxn"] == {1, 2}
    assert peers["hier_alltoall"] == {1, 2}
    assert peers["alltoall"] == {1, 2, 3}
    assert peers["barrier"] == {1, 2}


@pytest.mark.parametrize(("ranks", "match"), [
    ((Rank(0, 0, 0, "10.0.0.1"),), "need 2 ranks"),
    ((Rank(0, 0, 0, "10.0.0.1"), Rank(1, 0, 0, "10.0.0.2")), "already taken by rank 0"),
    ((Rank(0, 0, 0, "10.0.0.1"), Rank(1, 0, 2, "10.0.0.2")), "outside"),
    ((Rank(0, 0, 0, "10.0.0.1"), Rank(2, 0, 1, "10.0.0.2")), "in order"),
    ((Rank(0, 0, 0, "10.0.0.1"), Rank(1, 0, 1, "10.0.0")), "not an IPv4 address"),
])
def test_layout_rejects_inconsistent_ranks(ranks: tuple[Rank, ...], match: str) -> None:
    with pytest.raises(PlanError, match=match):
        Layout(1, 2, ranks)


def test_unknown_kinds_are_rejected() -> None:
    with pytest.raises(PlanError, match="ring kind 'star'"):
        ring_plan(grid(2, 2), "star")
    with pytest.raises(PlanError, match="all-to-all kind"):
        alltoall_plan(grid(2, 2), "ring")
    with pytest.raises(PlanError, match="mesh kind"):
        mesh_peers(grid(2, 2), 0, "half")
