"""Static routes of an optical fabric's ToRs (rail_switch): pure, a topology in, rules out.

Each ToR routes its own hosts down (/32) and every other rack's /24 up through uplink 0.
Whether a packet then gets through is the circuit switches' business: it crosses only in
the slices whose matching connects the two racks (time-flow tables that pick the slice and
uplink come with the calendar queues).
"""

from __future__ import annotations

import ipaddress

from controller.p4runtime.entities import Lpm, TableRule
from controller.topology.model import Topology
from controller.topology.optical import tor_uplink_port

__all__ = ["compile_tor"]


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def compile_tor(topo: Topology, name: str) -> list[TableRule]:
    """The ipv4_lpm entries of ToR ``name``.

    >>> from controller.topology.optical import optical
    >>> [r.params["port"] for r in compile_tor(optical(3, 1), "tor0")]
    [1, 2, 2]
    """
    rules = []
    rack = int(name.removeprefix("tor"))
    smac = 0x02_5F_00_00_00_00 | topo.switch(name).device_id << 8
    for port, peer in sorted(topo.switch_ports(name).items()):
        if topo.is_switch(peer.node):
            continue
        nic = topo.host(peer.node).nic(str(peer.port))
        rules.append(TableRule("RailIngress.ipv4_lpm",
                               {"hdr.ipv4.dst_addr": Lpm(int(ipaddress.IPv4Address(nic.address)), 32)},
                               "RailIngress.set_nexthop", {"port": port, "dmac": _mac(nic.mac), "smac": smac}))
    up = tor_uplink_port(topo, 0)
    for other in range(int(topo.params["racks"])):  # type: ignore[call-overload]
        if other == rack:
            continue
        net = ipaddress.IPv4Network(f"10.200.{other}.0/24")
        rules.append(TableRule("RailIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(int(net.network_address), 24)},
                               "RailIngress.set_nexthop",
                               {"port": up, "dmac": 0x02_5F_00_00_00_00 | (other + 1) << 8, "smac": smac}))
    return rules
