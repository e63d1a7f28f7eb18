"""Who a ToR notifies of a TDN change: pure, a topology and a choice in, rules out.

Per ToR the controller picks every host of the rack (``all``), one host (its name) or
``none``. The ToR clones its trigger to a clone session whose replicas are those hosts'
ports; its egress turns each copy into ICMP type 7 for the host behind the port, from the
rack's gateway address (``.254`` of the rack's prefix).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from controller.errors import ConfigError
from controller.p4runtime.entities import Exact, TableRule
from controller.topology.model import Topology
from controller.topology.optical import rack_prefix

__all__ = ["NOTIFY_SESSION", "NotifyPlan", "notify_plan"]

#: the clone session the ToRs' notifications use (Checkmate's mirror sessions are 100 + n)
NOTIFY_SESSION = 250


@dataclass(frozen=True)
class NotifyPlan:
    """A ToR's notification rules and its clone session's replicas (empty: notify nobody)."""

    tor: str
    hosts: tuple[str, ...]
    rules: tuple[TableRule, ...]
    replicas: tuple[tuple[int, int], ...]


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def notify_plan(topo: Topology, tor: str, target: str = "all") -> NotifyPlan:
    """The notification set-up of ToR ``tor`` for ``target``: ``all``, ``none`` or a host of its rack.

    >>> from controller.topology.optical import optical
    >>> plan = notify_plan(optical(2, 2), "tor1", "h1_1")
    >>> plan.hosts, plan.replicas, [r.table for r in plan.rules]
    (('h1_1',), ((2, 1),), ['TorIngress.notify', 'TorEgress.notify_host'])
    """
    sw = topo.switch(tor)
    if sw.role != "tor":
        raise ConfigError(topo.name, "tor", tor, "notifications come from ToRs (role tor)")
    ports = {peer.node: (port, peer) for port, peer in sorted(topo.switch_ports(tor).items())
             if not topo.is_switch(peer.node)}
    if target == "all":
        chosen = list(ports)
    elif target == "none":
        chosen = []
    elif target in ports:
        chosen = [target]
    else:
        raise ConfigError(topo.name, f"{tor}.notify", target,
                          f"is all, none or a host of the rack ({', '.join(ports) or 'it has none'})")
    rack = int(tor.removeprefix("tor"))
    gateway = int(ipaddress.IPv4Address(rack_prefix(rack).network_address)) + 254
    smac = 0x02_5F_00_00_00_00 | sw.device_id << 8
    rules: list[TableRule] = [TableRule("TorIngress.notify", {}, "TorIngress.notify_via" if chosen else "NoAction",
                                        {"session": NOTIFY_SESSION} if chosen else {}, is_default=True)]
    replicas = []
    for host in chosen:
        port, peer = ports[host]
        nic = topo.host(host).nic(str(peer.port))
        rules.append(TableRule("TorEgress.notify_host", {"standard_metadata.egress_port": Exact(port)},
                               "TorEgress.notification",
                               {"dmac": _mac(nic.mac), "smac": smac,
                                "dst": int(ipaddress.IPv4Address(nic.address)), "src": gateway}))
        replicas.append((port, 1))
    return NotifyPlan(tor, tuple(chosen), tuple(rules), tuple(replicas))
