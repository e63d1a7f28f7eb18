"""Each link's measured rate against its configured rate, from two readings of the byte
counters of the switch-port interface at one end (pure: the readings are the caller's).

A link is watched at a switch port (a host's NIC lives in its namespace; the switch's side is
in the machine's): ``tx`` is what the switch sent down the link, ``rx`` what came up it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.topology.model import Link, Topology
from controller.topology.naming import switch_intf_name

__all__ = ["Counters", "LinkRate", "link_rates", "watched_interface"]

#: an interface's (tx_bytes, rx_bytes)
Counters = tuple[int, int]


@dataclass(frozen=True)
class LinkRate:
    link: str  # "a:port-b:port"
    interface: str
    tx_mbps: float  # out of the switch port
    rx_mbps: float  # into it
    rate_mbps: float | None  # configured; None: unshaped

    @property
    def utilisation(self) -> float | None:
        """The busier direction's share of the configured rate (None when unshaped)."""
        if not self.rate_mbps:
            return None
        return max(self.tx_mbps, self.rx_mbps) / self.rate_mbps

    def as_json(self) -> dict[str, object]:
        u = self.utilisation
        return {"link": self.link, "interface": self.interface, "tx_mbps": round(self.tx_mbps, 3),
                "rx_mbps": round(self.rx_mbps, 3), "rate_mbps": self.rate_mbps,
                "utilisation": None if u is None else round(u, 4)}


def link_name(link: Link) -> str:
    return f"{link.a}-{link.b}"


def watched_interface(topo: Topology, link: Link) -> str:
    """The switch-port interface a link is read at (its first end that is a switch).

    >>> from controller.topology import rail_only
    >>> t = rail_only(2, 2)
    >>> sorted({watched_interface(t, lk) for lk in t.links})[:2]
    ['rail0-eth1', 'rail0-eth2']
    """
    end = link.a if topo.is_switch(link.a.node) else link.b
    return switch_intf_name(end.node, end.port)


def link_rates(topo: Topology, before: Mapping[str, Counters], after: Mapping[str, Counters],
               seconds: float) -> list[LinkRate]:
    """Every link's rates over ``seconds`` between two readings (links whose interface is in
    neither reading are left out; a counter that went backwards, a recreated interface, reads 0).

    >>> from controller.topology import rail_only
    >>> t = rail_only(2, 2, rate_mbps=10)
    >>> first = t.links[0]
    >>> ifname = watched_interface(t, first)
    >>> r, = [r for r in link_rates(t, {ifname: (0, 0)}, {ifname: (1_250_000, 125_000)}, 1.0)]
    >>> r.tx_mbps, r.rx_mbps, r.utilisation
    (10.0, 1.0, 1.0)
    """
    if seconds <= 0:
        raise ValueError(f"seconds must be positive (got {seconds})")
    out = []
    for link in topo.links:
        ifname = watched_interface(topo, link)
        if ifname not in before or ifname not in after:
            continue
        (tx0, rx0), (tx1, rx1) = before[ifname], after[ifname]
        out.append(LinkRate(link_name(link), ifname, max(0, tx1 - tx0) * 8 / seconds / 1e6,
                            max(0, rx1 - rx0) * 8 / seconds / 1e6, link.rate_mbps))
    return out
