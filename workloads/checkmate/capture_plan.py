"""Which all-gather sends the switches mirror so that the shadow sees each reduced chunk once.

The ring all-reduce (:func:`workloads.collectives.ring_allreduce`) splits the gradient into
``n`` chunks. After the reduce-scatter, ring position ``i`` holds chunk ``i`` fully reduced;
in all-gather step ``s`` (``0 <= s <= n - 2``) position ``i`` sends chunk ``(i - s) mod n``
over hop ``i`` (to position ``i + 1``). So hop ``i`` carries every chunk but ``i + 1``, and
chunk ``c`` crosses it at step ``(i - c) mod n``.

Checkmate's artifact captures "rank N-1's all-gather sends plus rank 0's first": hop ``n-1``
(the wrap-around) carries every chunk but chunk 0, and rank 0 sends chunk 0 at step 0. Here
only hops that cross servers pass through a switch (hops inside a server stay on its
"NVLink"), so the rule becomes:

- the *primary* hop ``P`` is the last switched hop of the ring (the wrap-around when it is
  switched, as in the artifact): all of its ``n - 1`` all-gather sends are mirrored;
- the *complement* hop ``C`` is the first other switched hop: only its send of the chunk
  ``P`` never carries, ``(P + 1) mod n``, at step ``(C - P - 1) mod n``, is mirrored.

A ring over at least two servers leaves and re-enters every server, so it has at least two
switched hops. A relayed hop (PXN: source -> relay inside the server, relay -> destination
on the rail) is switched on its relay leg, so the relay sends the mirrored copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.errors import PlanError
from workloads.plan import Layout, RingPlan

__all__ = ["CaptureLeg", "CapturePlan", "capture_plan"]


@dataclass(frozen=True)
class CaptureLeg:
    """One mirrored TCP leg: ``sender -> receiver`` crosses a switch.

    ``hop`` is the ring position whose all-gather sends the leg carries (the sender itself,
    or the source of a relayed hop), ``steps`` the all-gather steps that are mirrored and
    ``chunks`` the chunk each of them carries.
    """

    sender: int
    receiver: int
    hop: int
    steps: tuple[int, ...]
    chunks: tuple[int, ...]
    relayed: bool

    def chunk_at(self, step: int) -> int:
        """The chunk sent at all-gather ``step`` (a PlanError if that step is not mirrored)."""
        try:
            return self.chunks[self.steps.index(step)]
        except ValueError:
            raise PlanError(f"leg {self.sender}->{self.receiver}: step {step} is not mirrored "
                            f"(mirrored steps: {self.steps})") from None


@dataclass(frozen=True)
class CapturePlan:
    """The two mirrored legs of a ring; together they carry every chunk exactly once."""

    ring: RingPlan
    primary: CaptureLeg
    complement: CaptureLeg

    @property
    def legs(self) -> tuple[CaptureLeg, CaptureLeg]:
        return (self.primary, self.complement)

    @property
    def chunks(self) -> int:
        return self.ring.size

    def leg(self, sender: int, receiver: int) -> CaptureLeg:
        for leg in self.legs:
            if (leg.sender, leg.receiver) == (sender, receiver):
                return leg
        raise PlanError(f"rank {sender} -> rank {receiver} is not a mirrored leg of this ring")

    def mirrored_steps(self, sender: int, receiver: int) -> frozenset[int]:
        """The all-gather steps ``sender`` sends (or relays) to ``receiver`` mirrored; empty
        when that pair is not a mirrored leg."""
        return frozenset(s for leg in self.legs if (leg.sender, leg.receiver) == (sender, receiver)
                         for s in leg.steps)


def _switched_leg(layout: Layout, ring: RingPlan, hop: int) -> tuple[int, int, bool] | None:
    """The leg of ring hop ``hop`` that crosses servers, as ``(sender, receiver, relayed)``."""
    src, dst, via = ring.hops()[hop]
    if via is None:
        return (src, dst, False) if layout[src].server != layout[dst].server else None
    if layout[src].server != layout[via].server:
        raise PlanError(f"ring hop {src}->{dst} is relayed by rank {via} on another server")
    return (via, dst, True) if layout[via].server != layout[dst].server else None


def capture_plan(layout: Layout, ring: RingPlan) -> CapturePlan:
    """The mirrored legs of ``ring`` over ``layout`` (see the module docstring).

    >>> from workloads.plan import ring_plan
    >>> lay = Layout.grid(4, 1, lambda d, r: f"10.0.0.{d + 1}")
    >>> p = capture_plan(lay, ring_plan(lay))
    >>> p.primary.sender, p.primary.receiver, p.primary.steps, p.primary.chunks
    (3, 0, (0, 1, 2), (3, 2, 1))
    >>> p.complement.sender, p.complement.steps, p.complement.chunks
    (0, (0,), (0,))
    """
    n = ring.size
    switched = [(hop, leg) for hop in range(n) if (leg := _switched_leg(layout, ring, hop)) is not None]
    if len(switched) < 2:
        servers = sorted({layout[r].server for r in ring.order})
        raise PlanError(f"a ring over servers {servers} has {len(switched)} hop(s) through a switch; "
                        "mirroring needs a ring that spans at least two servers")
    p_hop, (p_send, p_recv, p_relay) = switched[-1]
    c_hop, (c_send, c_recv, c_relay) = switched[0]
    missing = (p_hop + 1) % n
    primary = CaptureLeg(p_send, p_recv, p_hop, tuple(range(n - 1)),
                         tuple((p_hop - s) % n for s in range(n - 1)), p_relay)
    complement = CaptureLeg(c_send, c_recv, c_hop, ((c_hop - missing) % n,), (missing,), c_relay)
    return CapturePlan(ring, primary, complement)
