"""The optical fabric: racks of hosts under ToRs, whose uplinks go to circuit switches.

ToR ``r`` (``tor{r}``, role ``tor``, program tor_switch) has its hosts on ports
``1..hosts``; its uplink ``u`` (port ``hosts + 1 + u``) is cabled to port ``r + 1`` of
circuit switch ``ocs{u}`` (role ``ocs``, program circuit_switch), so a schedule's rack
``r`` is the circuit switches' port ``r + 1``. Host ``i`` of rack ``r`` is ``h{r}_{i}`` at
``10.200.{r}.{i + 1}``.
"""

from __future__ import annotations

import ipaddress

from controller.errors import ConfigError
from controller.topology.model import JUMBO_MTU, Endpoint, Host, Link, Nic, Switch, Topology

__all__ = ["optical", "rack_prefix", "tor_uplink_port"]


def rack_prefix(rack: int) -> ipaddress.IPv4Network:
    """The addresses of rack ``rack``'s hosts."""
    return ipaddress.IPv4Network(f"10.200.{rack}.0/24")


def tor_uplink_port(topo: Topology, uplink: int) -> int:
    """The ToR port of uplink ``uplink`` (to circuit switch ``uplink``)."""
    return int(topo.params["hosts_per_rack"]) + 1 + uplink  # type: ignore[call-overload]


def optical(racks: int, hosts: int = 1, *, uplinks: int = 1, rate_mbps: float | None = 100.0,
            name: str | None = None, mtu: int = JUMBO_MTU) -> Topology:
    """An optical fabric of ``racks`` ToRs, ``hosts`` hosts each, ``uplinks`` circuit switches.

    >>> t = optical(4, 2, uplinks=2)
    >>> [s.name for s in t.switches], t.switch_ports("ocs1")[3]
    (['tor0', 'tor1', 'tor2', 'tor3', 'ocs0', 'ocs1'], Endpoint(node='tor2', port=4))
    """
    if not 2 <= racks <= 250:
        raise ConfigError("<optical>", "racks", racks, "must be in 2..250")
    if not 1 <= hosts <= 200:
        raise ConfigError("<optical>", "hosts", hosts, "must be in 1..200 per rack")
    if not 1 <= uplinks <= 16:
        raise ConfigError("<optical>", "uplinks", uplinks, "must be in 1..16")
    host_list, links = [], []
    switches = [Switch(f"tor{r}", "tor", "tor_switch", r + 1) for r in range(racks)]
    switches += [Switch(f"ocs{u}", "ocs", "circuit_switch", 1000 + u) for u in range(uplinks)]
    for r in range(racks):
        for i in range(hosts):
            h = f"h{r}_{i}"
            host_list.append(Host(h, (Nic("eth0", f"10.200.{r}.{i + 1}/16", f"02:c8:00:00:{r:02x}:{i + 1:02x}"),)))
            links.append(Link(Endpoint(h, "eth0"), Endpoint(f"tor{r}", i + 1), rate_mbps))
        for u in range(uplinks):
            links.append(Link(Endpoint(f"tor{r}", hosts + 1 + u), Endpoint(f"ocs{u}", r + 1), rate_mbps))
    params: dict[str, object] = {"racks": racks, "hosts_per_rack": hosts, "uplinks": uplinks,
                                 "rate_mbps": rate_mbps}
    return Topology(name or f"optical-{racks}x{hosts}" + (f"x{uplinks}" if uplinks > 1 else ""), "optical", tuple(host_list), tuple(switches),
                    tuple(links), params, mtu=mtu)
