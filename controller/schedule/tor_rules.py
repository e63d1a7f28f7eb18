"""tor_switch's entries in an optical fabric: pure, a topology and a schedule in, rules out.

Without a schedule a ToR knows its hosts (``ipv4_lpm``), which rack every address is in
(``rack_of``) and which of its ports are uplinks (``uplinks``); traffic for other racks is
dropped until a schedule gives it a clock, a slot grid (``slot_of_phase``) and time-flow
entries (``timeflow``: (rack, arrival slot, transit) -> (uplink port, slots to wait)).
"""

from __future__ import annotations

import ipaddress

from controller.p4runtime.entities import Exact, Lpm, Range, TableRule
from controller.schedule.model import Schedule
from controller.schedule.timeflow import slots, timeflow
from controller.topology.model import Topology
from controller.topology.optical import rack_prefix, tor_uplink_port

__all__ = ["SCHEDULED_TABLES", "tor_schedule_rules", "tor_static_rules"]

#: the tables a schedule fills (cleared before another schedule is installed)
SCHEDULED_TABLES = ("TorIngress.slot_of_phase", "TorIngress.timeflow")


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def _rack(name: str) -> int:
    return int(name.removeprefix("tor"))


def tor_static_rules(topo: Topology, name: str) -> list[TableRule]:
    """Host routes, rack prefixes and uplink ports of ToR ``name`` (no schedule needed).

    >>> from controller.topology.optical import optical
    >>> sorted({r.table for r in tor_static_rules(optical(3, 2), "tor1")})
    ['TorIngress.ipv4_lpm', 'TorIngress.rack_of', 'TorIngress.uplinks']
    """
    rules = []
    smac = 0x02_5F_00_00_00_00 | topo.switch(name).device_id << 8
    for port, peer in sorted(topo.switch_ports(name).items()):
        if topo.is_switch(peer.node):
            rules.append(TableRule("TorIngress.uplinks", {"standard_metadata.ingress_port": Exact(port)},
                                   "TorIngress.from_circuit", {}))
            continue
        nic = topo.host(peer.node).nic(str(peer.port))
        rules.append(TableRule("TorIngress.ipv4_lpm",
                               {"hdr.ipv4.dst_addr": Lpm(int(ipaddress.IPv4Address(nic.address)), 32)},
                               "TorIngress.set_nexthop", {"port": port, "dmac": _mac(nic.mac), "smac": smac}))
    for other in range(int(topo.params["racks"])):  # type: ignore[call-overload]
        if other != _rack(name):
            net = rack_prefix(other)
            rules.append(TableRule("TorIngress.rack_of", {"hdr.ipv4.dst_addr": Lpm(int(net.network_address),
                                                                                   net.prefixlen)},
                                   "TorIngress.set_rack", {"rack": other}))
    return rules


def tor_schedule_rules(topo: Topology, schedule: Schedule, name: str, *, routing: str = "direct",
                       started_at_us: int = 0, epoch_us: int = 0, hold: bool = False) -> list[TableRule]:
    """The clock (a default action), slot windows and time-flow entries of ToR ``name``.

    ``hold``: the switch has calendar queues (it holds a packet until ``meta.release_us``),
    so a packet whose slot has not come waits instead of being dropped."""
    grid = slots(schedule)
    rack = _rack(name)
    rules: list[TableRule] = []
    if schedule.kind == "one-shot":
        rules.append(TableRule("TorIngress.clock", {}, "TorIngress.unclocked", {}, is_default=True))
    else:
        offset = (started_at_us - epoch_us) % grid.cycle_us
        rules.append(TableRule("TorIngress.clock", {}, "TorIngress.set_clock",
                               {"offset_us": offset, "cycle_us": grid.cycle_us, "hold": int(hold)},
                               is_default=True))
        rules += [TableRule("TorIngress.slot_of_phase",
                            {"meta.phase_us": Range(k * grid.slot_us, (k + 1) * grid.slot_us - 1)},
                            "TorIngress.set_slot", {"slot": k, "start_us": k * grid.slot_us}, priority=1)
                  for k in range(grid.count)]
    for e in timeflow(schedule, routing):
        if e.tor != rack:
            continue
        rules.append(TableRule("TorIngress.timeflow",
                               {"meta.rack": Exact(e.dst), "meta.slot": Exact(e.arrival),
                                "meta.transit": Exact(int(e.transit))},
                               "TorIngress.send", {"port": tor_uplink_port(topo, e.uplink), "wait_slots": e.wait_slots,
                                                   "wait_us": e.wait_slots * grid.slot_us}))
    return rules
