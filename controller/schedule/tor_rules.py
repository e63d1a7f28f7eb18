"""tor_switch's entries in an optical fabric: pure, a topology and a schedule in, rules out.

Without a schedule a ToR knows its hosts (``ipv4_lpm``), which rack every address is in
(``rack_of``) and which of its ports are uplinks (``uplinks``); traffic for other racks is
dropped until a schedule gives it a clock, a slot grid (``slot_of_phase``) and time-flow
entries (``timeflow``: (version, rack, arrival slot, transit) -> (uplink port, slots to
wait)). ``timeflow_flip`` is filled only while the controller switches configurations
(:mod:`controller.reconfigure`).
"""

from __future__ import annotations

import ipaddress

from controller.p4runtime.entities import Exact, Lpm, Range, TableRule
from controller.schedule.model import Schedule
from controller.schedule.tdn import tdn_of_slots
from controller.schedule.timeflow import slots, timeflow
from controller.topology.model import Topology
from controller.topology.optical import rack_prefix, tor_uplink_port

__all__ = ["CLOCK", "FLIP", "SCHEDULED_TABLES", "SLOT_OF_PHASE", "TDN_OF_SLOT", "TIMEFLOW", "TIMEFLOW_FLIP",
           "tor_clock_rule",
           "tor_flip_rules", "tor_schedule_rules", "tor_static_rules", "tor_timeflow_rules"]

CLOCK = "TorIngress.clock"
FLIP = "TorIngress.flip"
SLOT_OF_PHASE = "TorIngress.slot_of_phase"
TIMEFLOW = "TorIngress.timeflow"
TIMEFLOW_FLIP = "TorIngress.timeflow_flip"
TDN_OF_SLOT = "TorIngress.tdn_of_slot"
#: the tables a schedule fills (cleared before another schedule is installed)
SCHEDULED_TABLES = (CLOCK, FLIP, SLOT_OF_PHASE, TIMEFLOW, TIMEFLOW_FLIP, TDN_OF_SLOT)


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


def tor_clock_rule(schedule: Schedule, *, started_at_us: int = 0, epoch_us: int = 0, hold: bool = False,
                   version: int = 0) -> TableRule:
    """The ``clock`` action of a ToR: its phase is the schedule's phase since ``epoch_us``.

    >>> from controller.schedule.generators import round_robin
    >>> tor_clock_rule(round_robin(4, slice_us=900, night_us=100), started_at_us=5000, epoch_us=200).params
    {'version': 0, 'offset_us': 1800, 'cycle_us': 3000, 'hold': 0}
    """
    if schedule.kind == "one-shot":
        return TableRule(CLOCK, {}, "TorIngress.unclocked", {"version": version, "hold": int(hold)}, is_default=True)
    grid = slots(schedule)
    offset = (started_at_us - epoch_us) % grid.cycle_us
    return TableRule(CLOCK, {}, "TorIngress.set_clock",
                     {"version": version, "offset_us": offset, "cycle_us": grid.cycle_us, "hold": int(hold)},
                     is_default=True)


def tor_schedule_rules(topo: Topology, schedule: Schedule, name: str, *, routing: str = "direct",
                       started_at_us: int = 0, epoch_us: int = 0, hold: bool = False,
                       version: int = 0, margin_us: int = 0) -> list[TableRule]:
    """The clock (a default action), slot windows and time-flow entries of ToR ``name``.

    ``hold``: the switch has calendar queues (it holds a packet until ``meta.release_us``),
    so a packet whose slot has not come waits instead of being dropped."""
    clock = tor_clock_rule(schedule, started_at_us=started_at_us, epoch_us=epoch_us, hold=hold, version=version)
    return [clock, *tor_timeflow_rules(topo, schedule, name, routing=routing, version=version, margin_us=margin_us)]


def tor_timeflow_rules(topo: Topology, schedule: Schedule, name: str, *, routing: str = "direct",
                       version: int = 0, margin_us: int = 0) -> list[TableRule]:
    """The slot windows, the TDN of each slot (TDTCP) and the time-flow entries of ToR
    ``name`` under ``version``, sending
    nothing in the first and the last ``margin_us`` of a day."""
    grid = slots(schedule, margin_us)
    rack = _rack(name)
    rules: list[TableRule] = []
    if schedule.kind != "one-shot":
        rules += [TableRule(SLOT_OF_PHASE,
                            {"meta.version": Exact(version),
                             "meta.phase_us": Range(k * grid.slot_us, (k + 1) * grid.slot_us - 1)},
                            "TorIngress.set_slot", {"slot": k, "start_us": k * grid.slot_us}, priority=1)
                  for k in range(grid.count)]
    rules += [TableRule(TDN_OF_SLOT, {"meta.version": Exact(version), "meta.slot": Exact(k)}, "TorIngress.set_tdn",
                        {"tdn": tdn}) for k, tdn in enumerate(tdn_of_slots(schedule, margin_us))]
    for e in timeflow(schedule, routing, margin_us):
        if e.tor != rack:
            continue
        rules.append(TableRule(TIMEFLOW,
                               {"meta.version": Exact(version), "meta.rack": Exact(e.dst), "meta.slot": Exact(e.arrival),
                                "meta.transit": Exact(int(e.transit))},
                               "TorIngress.send", {"port": tor_uplink_port(topo, e.uplink), "wait_slots": e.wait_slots,
                                                   "wait_us": e.wait_slots * grid.slot_us}))
    return rules


def tor_flip_rules(topo: Topology, schedule: Schedule, name: str, *, routing: str = "direct",
                   margin_us: int = 0) -> list[TableRule]:
    """``timeflow_flip``: where ToR ``name`` sends a packet that must wait for the next
    configuration, ``schedule``: its time-flow entries for a packet arriving at that
    configuration's epoch (slot 0). The wait counts one more slot, so that a ToR without
    calendar queues drops the packet rather than sending it before the epoch."""
    grid = slots(schedule, margin_us)
    rack = _rack(name)
    return [TableRule(TIMEFLOW_FLIP, {"meta.rack": Exact(e.dst), "meta.transit": Exact(int(e.transit))},
                      "TorIngress.send_at_epoch",
                      {"port": tor_uplink_port(topo, e.uplink), "wait_slots": e.wait_slots + 1,
                       "wait_us": e.wait_slots * grid.slot_us})
            for e in timeflow(schedule, routing, margin_us) if e.tor == rack and e.arrival == 0]
