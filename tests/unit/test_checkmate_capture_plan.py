"""The mirrored all-gather sends cover every reduced chunk exactly once, through a switch."""

from __future__ import annotations

import pytest

from workloads.checkmate.capture_plan import capture_plan
from workloads.errors import PlanError
from workloads.plan import RING_KINDS, Layout, group_ring, ring_plan


def grid(d: int, r: int) -> Layout:
    return Layout.grid(d, r, lambda s, g: f"10.{g}.0.{s + 1}")


def allgather_sends(ring) -> dict[tuple[int, int], set[tuple[int, int]]]:
    """Simulate the all-gather: the (step, chunk) pairs each data-carrying leg carries.

    Position i sends chunk (i - s) mod n at step s to position i + 1, through the relay of
    its hop if it has one (both legs of a relayed hop carry the same frames)."""
    n = ring.size
    legs: dict[tuple[int, int], set[tuple[int, int]]] = {}
    for i, (src, dst, via) in enumerate(ring.hops()):
        hops = [(src, dst)] if via is None else [(src, via), (via, dst)]
        for s in range(n - 1):
            for leg in hops:
                legs.setdefault(leg, set()).add((s, (i - s) % n))
    return legs


SHAPES = [(d, r) for d in range(2, 33) for r in range(1, 33) if d * r <= 32]


@pytest.mark.parametrize("kind", RING_KINDS)
@pytest.mark.parametrize(("servers", "rails"), SHAPES)
def test_every_chunk_exactly_once_through_a_switch(servers: int, rails: int, kind: str) -> None:
    lay = grid(servers, rails)
    ring = ring_plan(lay, kind)
    plan = capture_plan(lay, ring)
    carried = allgather_sends(ring)
    seen: list[int] = []
    for leg in plan.legs:
        assert lay[leg.sender].server != lay[leg.receiver].server, "a mirrored leg must cross a switch"
        for step, chunk in zip(leg.steps, leg.chunks, strict=True):
            assert (step, chunk) in carried[(leg.sender, leg.receiver)], "the leg really sends it"
            assert leg.chunk_at(step) == chunk
        seen += leg.chunks
    assert sorted(seen) == list(range(ring.size))


@pytest.mark.parametrize("n", range(2, 33))
def test_artifact_rule_when_every_hop_is_switched(n: int) -> None:
    """One GPU per server: rank N-1's all-gather sends plus rank 0's first, as in Checkmate."""
    lay = grid(n, 1)
    plan = capture_plan(lay, ring_plan(lay))
    assert (plan.primary.sender, plan.primary.receiver) == (n - 1, 0)
    assert plan.primary.steps == tuple(range(n - 1))
    assert (plan.complement.sender, plan.complement.steps, plan.complement.chunks) == (0, (0,), (0,))


def test_relayed_wraparound_is_mirrored_by_the_relay() -> None:
    lay = grid(3, 2)  # snake 0,1,3,2,4,5: the wrap-around 5 -> 0 crosses rails, relayed by 4
    plan = capture_plan(lay, ring_plan(lay, "pxn"))
    assert (plan.primary.sender, plan.primary.receiver, plan.primary.relayed) == (4, 0, True)
    assert plan.mirrored_steps(4, 0) == frozenset(range(5))
    assert plan.mirrored_steps(5, 4) == frozenset()


def test_one_server_cannot_be_mirrored() -> None:
    lay = grid(1, 4)
    with pytest.raises(PlanError, match="at least two servers"):
        capture_plan(lay, group_ring(range(4)))


def test_unmirrored_step_is_named() -> None:
    lay = grid(4, 1)
    plan = capture_plan(lay, ring_plan(lay))
    with pytest.raises(PlanError, match="step 2 is not mirrored"):
        plan.complement.chunk_at(2)
