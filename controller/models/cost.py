"""Switch, link, cost and power counts of a rail-only network and a rail-optimized fat-tree.

The two designs of Wang et al., "Rail-only" (HOTI 2024, arXiv 2307.12169):

* **rail-only**: GPU ``r`` of every HB domain (server) connects to rail ``r``. Each rail is one
  switch when it has at most ``R`` GPUs, otherwise a per-rail folded Clos of radix-``R``
  switches. Nothing connects the rails: there is no spine across rails.
* **rail-optimized fat-tree** (the baseline): the same per-rail leaves, but their uplinks go to
  a spine layer (or spine and core) shared by all rails, at full bisection or with a leaf
  oversubscription ``o:1`` (``o`` down ports per up port).

A folded Clos of ``H`` endpoints with full bisection needs ``t`` tiers, the smallest ``t`` with
``H <= 2 * (R/2)**t`` (one switch up to ``R``, two tiers up to ``R**2/2``, three up to
``R**3/4``). Its lower ``t-1`` tiers have ``ceil(H / (R/2))`` switches each, the top tier
``ceil(H / R)``, and ``H`` links cross every tier boundary.

Every link has two ends: a GPU-to-leaf link has a NIC-side and a switch-side transceiver, a
switch-to-switch link two switch-side transceivers; every link has one cable (fiber).

Everything here is pure: inputs are frozen dataclasses, results are frozen dataclasses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "ClusterSpec",
    "Comparison",
    "ComponentCosts",
    "FabricBill",
    "clos_tiers",
    "compare",
    "fat_tree_bill",
    "rail_only_bill",
    "savings",
]

_TIER_NAMES = ("leaf", "spine", "core", "super-core")


@dataclass(frozen=True)
class ClusterSpec:
    """The cluster whose network is counted.

    Parameters
    ----------
    gpus : int
        Number of GPUs ``N`` (one NIC port per GPU at the switch port speed).
    hb_domain : int
        GPUs per HB domain ``K``: the number of rails.
    radix : int
        Ports per switch ``R`` at the NIC speed.
    oversubscription : float
        Leaf down:up port ratio of the fat-tree baseline (1.0 = full bisection).
    """

    gpus: int
    hb_domain: int = 8
    radix: int = 64
    oversubscription: float = 1.0

    def __post_init__(self) -> None:
        if self.gpus < 1 or self.hb_domain < 1:
            raise ValueError(f"gpus and hb_domain must be >= 1 (got {self.gpus}, {self.hb_domain})")
        if self.gpus % self.hb_domain:
            raise ValueError(f"gpus ({self.gpus}) must be a multiple of hb_domain ({self.hb_domain})")
        if self.radix < 2 or self.radix % 2:
            raise ValueError(f"radix must be an even number >= 2 (got {self.radix})")
        if self.oversubscription < 1.0:
            raise ValueError(f"oversubscription must be >= 1 (got {self.oversubscription})")

    @property
    def gpus_per_rail(self) -> int:
        """``M = N / K``: the GPUs on one rail."""
        return self.gpus // self.hb_domain


@dataclass(frozen=True)
class ComponentCosts:
    """Unit prices (USD) and powers (W) of the network components.

    A switch costs ``switch_price_usd + switch_price_per_port_usd * radix`` (so prices may be
    given per switch, per port, or both); the same holds for its power.
    ``count_host_links=False`` leaves out the GPU-to-leaf links, which both designs share.
    """

    switch_price_usd: float
    switch_power_w: float
    switch_transceiver_price_usd: float
    switch_transceiver_power_w: float
    nic_transceiver_price_usd: float
    nic_transceiver_power_w: float
    cable_price_usd: float
    cable_power_w: float = 0.0
    switch_price_per_port_usd: float = 0.0
    switch_power_per_port_w: float = 0.0
    count_host_links: bool = True

    def switch_unit_price(self, radix: int) -> float:
        """The price of one switch of ``radix`` ports."""
        return self.switch_price_usd + self.switch_price_per_port_usd * radix

    def switch_unit_power(self, radix: int) -> float:
        """The power of one switch of ``radix`` ports (without its transceivers)."""
        return self.switch_power_w + self.switch_power_per_port_w * radix


@dataclass(frozen=True)
class FabricBill:
    """The bill of materials of one design, with its total cost and power."""

    design: str
    gpus: int
    hb_domain: int
    radix: int
    tiers: tuple[tuple[str, int], ...]
    host_links: int
    switch_links: int
    transceivers: int
    cables: int
    switch_cost_usd: float
    optics_cost_usd: float
    cable_cost_usd: float
    switch_power_w: float
    optics_power_w: float
    cable_power_w: float

    @property
    def switches(self) -> int:
        """All switches, every tier."""
        return sum(n for _, n in self.tiers)

    @property
    def cost_usd(self) -> float:
        """Total network cost."""
        return self.switch_cost_usd + self.optics_cost_usd + self.cable_cost_usd

    @property
    def power_w(self) -> float:
        """Total network power."""
        return self.switch_power_w + self.optics_power_w + self.cable_power_w

    def tier(self, name: str) -> int:
        """Switches in the tier called ``name`` (0 when the design has no such tier)."""
        return dict(self.tiers).get(name, 0)


@dataclass(frozen=True)
class Comparison:
    """Rail-only against the fat-tree baseline for one cluster."""

    spec: ClusterSpec
    rail_only: FabricBill
    fat_tree: FabricBill

    @property
    def cost_savings(self) -> float:
        """Fraction of the fat-tree's cost that rail-only saves."""
        return savings(self.rail_only.cost_usd, self.fat_tree.cost_usd)

    @property
    def power_savings(self) -> float:
        """Fraction of the fat-tree's power that rail-only saves."""
        return savings(self.rail_only.power_w, self.fat_tree.power_w)


def savings(new: float, baseline: float) -> float:
    """``1 - new / baseline`` (0.0 when the baseline is 0).

    >>> savings(25.0, 100.0)
    0.75
    """
    return 0.0 if baseline == 0 else 1.0 - new / baseline


def _upper_tier_count(leaves: int, radix: int) -> int:
    """Tiers above the leaves that connect ``leaves`` leaf switches (folded Clos)."""
    tiers, reach = 1, radix  # one spine tier reaches R leaves; each further tier x R/2
    while leaves > reach:
        tiers += 1
        reach *= radix // 2
    return tiers


def clos_tiers(hosts: int, radix: int) -> tuple[int, ...]:
    """Switches per tier, leaf first, of a full-bisection folded Clos for ``hosts`` endpoints.

    Parameters
    ----------
    hosts : int
        Endpoints (switch ports facing GPUs).
    radix : int
        Ports per switch.

    Returns
    -------
    tuple of int
        One count per tier; ``(1,)`` when a single switch suffices.

    Examples
    --------
    >>> clos_tiers(16, 64), clos_tiers(128, 64), clos_tiers(4096, 64)
    ((1,), (4, 2), (128, 128, 64))
    """
    if hosts <= 0:
        return ()
    if hosts <= radix:
        return (1,)
    half = radix // 2
    leaves = math.ceil(hosts / half)
    upper = _upper_tier_count(leaves, radix)
    return (leaves,) + (math.ceil(hosts / half),) * (upper - 1) + (math.ceil(hosts / radix),)


def _named(counts: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    if len(counts) > len(_TIER_NAMES):
        raise ValueError(f"{len(counts)} tiers is more than this model names ({len(_TIER_NAMES)})")
    return tuple(zip(_TIER_NAMES, counts, strict=False))


def _bill(design: str, spec: ClusterSpec, prices: ComponentCosts, counts: tuple[int, ...],
          switch_links: int) -> FabricBill:
    host_links = spec.gpus if prices.count_host_links else 0
    switches = sum(counts)
    sw_xcvr = host_links + 2 * switch_links
    nic_xcvr = host_links
    cables = host_links + switch_links
    return FabricBill(
        design=design, gpus=spec.gpus, hb_domain=spec.hb_domain, radix=spec.radix,
        tiers=_named(counts), host_links=host_links, switch_links=switch_links,
        transceivers=sw_xcvr + nic_xcvr, cables=cables,
        switch_cost_usd=switches * prices.switch_unit_price(spec.radix),
        optics_cost_usd=sw_xcvr * prices.switch_transceiver_price_usd
        + nic_xcvr * prices.nic_transceiver_price_usd,
        cable_cost_usd=cables * prices.cable_price_usd,
        switch_power_w=switches * prices.switch_unit_power(spec.radix),
        optics_power_w=sw_xcvr * prices.switch_transceiver_power_w
        + nic_xcvr * prices.nic_transceiver_power_w,
        cable_power_w=cables * prices.cable_power_w,
    )


def rail_only_bill(spec: ClusterSpec, prices: ComponentCosts) -> FabricBill:
    """The rail-only network: ``K`` independent rails, each a switch or a per-rail Clos.

    Examples
    --------
    >>> p = ComponentCosts(1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    >>> b = rail_only_bill(ClusterSpec(gpus=128, hb_domain=8, radix=64), p)
    >>> b.tiers, b.switch_links, b.cost_usd
    ((('leaf', 8),), 0, 8.0)
    """
    per_rail = clos_tiers(spec.gpus_per_rail, spec.radix)
    counts = tuple(n * spec.hb_domain for n in per_rail)
    switch_links = (len(per_rail) - 1) * spec.gpus  # full bisection inside each rail
    return _bill("rail-only", spec, prices, counts, switch_links)


def fat_tree_bill(spec: ClusterSpec, prices: ComponentCosts) -> FabricBill:
    """The rail-optimized fat-tree: per-rail leaves plus a spine (and core) across all rails.

    Leaves have ``down = floor(R * o / (o + 1))`` GPU ports and ``R - down`` uplinks. Each leaf
    uses one uplink per ``o`` GPUs it serves. The tiers above the leaves form a folded Clos
    over those uplinks: one spine tier when there are at most ``R`` leaves, otherwise spine
    and core (and so on), ``ceil(U / (R/2))`` switches per middle tier and ``ceil(U / R)`` at
    the top, for ``U`` uplinks.

    Examples
    --------
    >>> p = ComponentCosts(1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    >>> b = fat_tree_bill(ClusterSpec(gpus=512, hb_domain=8, radix=64), p)
    >>> b.tiers, b.switch_links
    ((('leaf', 16), ('spine', 8)), 512)
    """
    o, radix, per_rail = spec.oversubscription, spec.radix, spec.gpus_per_rail
    down = max(1, math.floor(radix * o / (o + 1)))
    leaves_per_rail = math.ceil(per_rail / down)
    leaves = leaves_per_rail * spec.hb_domain
    # GPUs are spread evenly over a rail's leaves; each leaf has ceil(served / o) uplinks.
    base, extra = divmod(per_rail, leaves_per_rail)
    up_per_rail = extra * math.ceil((base + 1) / o) + (leaves_per_rail - extra) * math.ceil(base / o)
    uplinks = up_per_rail * spec.hb_domain
    upper = _upper_tier_count(leaves, radix)
    counts = (leaves,) + (math.ceil(uplinks / (radix // 2)),) * (upper - 1) + (math.ceil(uplinks / radix),)
    return _bill("fat-tree", spec, prices, counts, upper * uplinks)


def compare(spec: ClusterSpec, prices: ComponentCosts) -> Comparison:
    """Both designs for one cluster, with rail-only's savings.

    Examples
    --------
    >>> p = ComponentCosts(100.0, 10.0, 1.0, 1.0, 1.0, 1.0, 0.0)
    >>> c = compare(ClusterSpec(gpus=512), p)
    >>> round(c.cost_savings, 3), round(c.power_savings, 3)
    (0.59, 0.517)
    """
    return Comparison(spec, rail_only_bill(spec, prices), fat_tree_bill(spec, prices))
