"""Rule compilation for rail_switch fabrics (rail-only and rail-optimized fat-tree).

Pure functions: a topology in, every switch's table entries out, as :class:`TableRule`
objects that :func:`controller.p4runtime.entities.encode_rule` turns into P4Runtime.

- Host-facing ports get one /32 route per attached NIC, rewriting the MACs.
- A switch with uplinks (a leaf of a per-rail Clos or of the fat-tree) sends what it does
  not hold locally to an ECMP group over its uplinks (crc16 of the 5-tuple picks the
  member). The group's prefixes are the collapsed addresses reachable through its uplinks:
  the rail's own servers on rail-only, every rail on the fat-tree.
- A spine routes each downstream switch's collapsed address block to the port(s) leading
  to it (an ECMP group when there are several).
- The topology's ``uplink_routing`` chooses the group's action, that is how its member is
  picked: ``ecmp`` (set_ecmp_group, the 5-tuple's hash), ``flowlet`` (set_flowlet_group,
  re-hashed when the flow pauses longer than ``params.flowlet_gap_us``), ``spray``
  (set_spray_group, round robin per packet).
- With the topology's ``uplink_routing: dst-server`` (d-mod-k), a switch with several ports
  towards its destinations picks one per destination server instead of hashing:
  ``server mod ports``, one /32 route per remote NIC. Every round of a pairwise all-to-all
  then loads the uplinks evenly, as the paper's full-bisection analysis assumes.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from controller.errors import ConfigError
from controller.p4runtime.entities import Exact, Lpm, TableRule
from controller.topology.generators import FLOWLET_GAP_US, UPLINK_ROUTINGS, switch_mac
from controller.topology.model import Endpoint, Topology

__all__ = ["LPM_TABLE", "SwitchRules", "compile_fabric", "compile_switch"]

LPM_TABLE = "RailIngress.ipv4_lpm"
ECMP_TABLE = "RailIngress.ecmp_nexthop"
DST = "hdr.ipv4.dst_addr"
RAIL_PROGRAMS = ("rail_switch",)


@dataclass(frozen=True, slots=True)
class SwitchRules:
    switch: str
    program: str
    rules: tuple[TableRule, ...]


def _mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def _collapse(addresses: Iterable[str]) -> list[ipaddress.IPv4Network]:
    return list(ipaddress.collapse_addresses(ipaddress.IPv4Network(a) for a in addresses))


class _Fabric:
    """Adjacency facts the compiler needs, computed once per topology."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.hosts_behind: dict[str, list[str]] = defaultdict(list)
        self.up: dict[str, list[tuple[int, Endpoint]]] = defaultdict(list)
        self.down: dict[str, list[tuple[int, Endpoint]]] = defaultdict(list)
        tier = {s.name: (2 if s.role == "spine" else 1) for s in topo.switches}
        for sw in topo.switches:
            for port, peer in sorted(topo.switch_ports(sw.name).items()):
                if not topo.is_switch(peer.node):
                    nic = topo.host(peer.node).nic(str(peer.port))
                    self.hosts_behind[sw.name].append(nic.address)
                elif tier[peer.node] > tier[sw.name]:
                    self.up[sw.name].append((port, peer))
                elif tier[peer.node] < tier[sw.name]:
                    self.down[sw.name].append((port, peer))
                else:
                    raise ConfigError("<topology>", f"switch {sw.name}", f"{peer}",
                                      "rail_switch routing supports two tiers: a link between two switches of one tier")
        self._reach_cache: dict[tuple[frozenset[str], str], list[ipaddress.IPv4Network]] = {}
        self._block_cache: dict[str, list[ipaddress.IPv4Network]] = {}
        routing = topo.params.get("uplink_routing", "ecmp")
        if routing not in UPLINK_ROUTINGS:
            raise ConfigError(topo.name, "params.uplink_routing", routing, f"one of {', '.join(UPLINK_ROUTINGS)}")
        self.routing = routing
        self.by_server = routing == "dst-server"
        gap = topo.params.get("flowlet_gap_us", FLOWLET_GAP_US)
        if not isinstance(gap, int) or isinstance(gap, bool) or not 0 <= gap < 1 << 48:
            raise ConfigError(topo.name, "params.flowlet_gap_us", gap, "microseconds, a whole number 0 or more")
        self.flowlet_gap_us = gap
        self.server_of = {nic.address: d for d, h in enumerate(topo.hosts) for nic in h.nics}

    def block(self, switch: str) -> list[ipaddress.IPv4Network]:
        """The collapsed prefixes of the hosts attached to ``switch``."""
        if switch not in self._block_cache:
            self._block_cache[switch] = _collapse(self.hosts_behind[switch])
        return self._block_cache[switch]

    def reachable_via(self, spines: Iterable[str], leaf: str) -> list[ipaddress.IPv4Network]:
        """The prefixes ``leaf`` reaches through ``spines``: every other leaf's hosts (its
        own are routed down, and a block of 5 servers collapses to a /30 and a /32 that
        would repeat a host route)."""
        key = (frozenset(spines), leaf)
        if key not in self._reach_cache:
            blocks = {peer.node for s in key[0] for _, peer in self.down[s]} - {leaf}
            nets = [net for b in sorted(blocks) for net in self.block(b)]
            self._reach_cache[key] = list(ipaddress.collapse_addresses(nets))
        return self._reach_cache[key]


def _nexthop(topo: Topology, sw: str, port: int, peer: Endpoint) -> dict[str, int]:
    dev = topo.switch(sw).device_id
    if topo.is_switch(peer.node):
        dmac = switch_mac(topo.switch(peer.node).device_id, int(peer.port))
    else:
        dmac = topo.host(peer.node).nic(str(peer.port)).mac
    return {"port": port, "dmac": _mac_int(dmac), "smac": _mac_int(switch_mac(dev, port))}


def _route(prefix: ipaddress.IPv4Network, action: str, params: dict[str, int]) -> TableRule:
    return TableRule(LPM_TABLE, {DST: Lpm(int(prefix.network_address), prefix.prefixlen)}, action, params)


def _group_action(fab: _Fabric, group: int, size: int) -> tuple[str, dict[str, int]]:
    """The route's action for a group of ``size`` equal paths: how its member is picked."""
    if fab.routing == "flowlet":
        return "RailIngress.set_flowlet_group", {"group": group, "size": size, "gap_us": fab.flowlet_gap_us}
    if fab.routing == "spray":
        return "RailIngress.set_spray_group", {"group": group, "size": size}
    return "RailIngress.set_ecmp_group", {"group": group, "size": size}


def _ecmp(topo: Topology, fab: _Fabric, sw: str, group: int, members: list[tuple[int, Endpoint]],
          prefixes: list[ipaddress.IPv4Network]) -> list[TableRule]:
    action, params = _group_action(fab, group, len(members))
    rules = [_route(p, action, params) for p in prefixes]
    for i, (port, peer) in enumerate(members):
        rules.append(TableRule(ECMP_TABLE, {"meta.ecmp_group": Exact(group), "meta.ecmp_member": Exact(i)},
                               "RailIngress.set_nexthop", _nexthop(topo, sw, port, peer)))
    return rules


def _by_server(topo: Topology, fab: _Fabric, sw: str, members: list[tuple[int, Endpoint]],
               prefixes: list[ipaddress.IPv4Network]) -> list[TableRule]:
    """d-mod-k: one /32 route per NIC of ``prefixes`` not attached to ``sw`` itself, through
    member ``server mod len(members)``."""
    rules, local = [], set(fab.hosts_behind[sw])
    for address, server in sorted(fab.server_of.items(), key=lambda kv: ipaddress.IPv4Address(kv[0])):
        if address not in local and any(ipaddress.IPv4Address(address) in p for p in prefixes):
            port, peer = members[server % len(members)]
            rules.append(_route(ipaddress.IPv4Network(address), "RailIngress.set_nexthop",
                                _nexthop(topo, sw, port, peer)))
    return rules


def _spread(topo: Topology, fab: _Fabric, sw: str, group: int, members: list[tuple[int, Endpoint]],
            prefixes: list[ipaddress.IPv4Network]) -> list[TableRule]:
    """``prefixes`` spread over ``members``: an ECMP group, or d-mod-k routes."""
    if fab.by_server:
        return _by_server(topo, fab, sw, members, prefixes)
    return _ecmp(topo, fab, sw, group, members, prefixes)


def compile_switch(topo: Topology, name: str, fabric: _Fabric | None = None) -> SwitchRules:
    """Every entry of switch ``name``; pure and deterministic."""
    fab = fabric or _Fabric(topo)
    sw = topo.switch(name)
    if sw.program not in RAIL_PROGRAMS:
        raise ConfigError("<topology>", f"switch {name}", sw.program, f"no rule compiler for program (known: {RAIL_PROGRAMS})")
    rules: list[TableRule] = []
    for port, peer in sorted(topo.switch_ports(name).items()):
        if not topo.is_switch(peer.node):
            nic = topo.host(peer.node).nic(str(peer.port))
            rules.append(_route(ipaddress.IPv4Network(nic.address), "RailIngress.set_nexthop",
                                _nexthop(topo, name, port, peer)))
    if fab.up[name]:
        spines = [peer.node for _, peer in fab.up[name]]
        rules += _spread(topo, fab, name, 1, fab.up[name], fab.reachable_via(spines, name))
    by_peer: dict[str, list[tuple[int, Endpoint]]] = defaultdict(list)
    for port, peer in fab.down[name]:
        by_peer[peer.node].append((port, peer))
    for group, (peer_name, ports) in enumerate(sorted(by_peer.items()), start=2):
        prefixes = fab.block(peer_name)
        if len(ports) == 1:
            port, peer = ports[0]
            rules += [_route(p, "RailIngress.set_nexthop", _nexthop(topo, name, port, peer)) for p in prefixes]
        else:
            rules += _spread(topo, fab, name, group, ports, prefixes)
    return SwitchRules(name, sw.program, tuple(rules))


def compile_fabric(topo: Topology) -> dict[str, SwitchRules]:
    """The entries of every switch, keyed by switch name: rail_switch fabrics, and optical
    fabrics (ToRs' hosts, racks and uplinks; a schedule adds their time-flow entries and sets
    the circuit switches up, which start dark)."""
    if topo.kind == "optical":
        from controller.schedule.tor_rules import tor_static_rules

        for sw in topo.switches:
            want = {"tor": "tor_switch", "ocs": "circuit_switch"}.get(sw.role)
            if want is None or sw.program != want:
                raise ConfigError("<topology>", f"switch {sw.name}", sw.program,
                                  f"an optical fabric's {sw.role} runs {want or 'tor_switch or circuit_switch'}")
        return {s.name: SwitchRules(s.name, s.program, tuple(tor_static_rules(topo, s.name) if s.role == "tor" else ()))
                for s in topo.switches}
    if topo.kind == "topoopt":  # circuits pinned once per job; the servers forward (host_commands)
        from controller.routing.topoopt_routes import circuit_rules

        return {s.name: SwitchRules(s.name, s.program, tuple(circuit_rules(topo, s.name))) for s in topo.switches}
    fab = _Fabric(topo)
    return {s.name: compile_switch(topo, s.name, fab) for s in topo.switches}
