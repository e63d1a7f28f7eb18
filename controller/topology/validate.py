"""Semantic checks of a parsed topology (``mlfabric topology check``).

Every problem is a :class:`~controller.errors.ConfigError` naming the file, the key path
and the offending value; :func:`check_topology` returns them all, :func:`require_valid`
raises the first.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter

from controller.errors import ConfigError
from controller.topology.model import Topology

__all__ = ["KINDS", "MAX_PORT", "check_topology", "project_programs", "require_valid"]

#: the kinds of fabric the controller compiles rules for (``custom``: hand-written)
KINDS = ("rail-only", "rail-fat-tree", "optical", "topoopt", "custom")

#: switch data ports are 1..509: 510 is the CPU port, 511 BMv2's drop port
MAX_PORT = 509
_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


def project_programs() -> tuple[str, ...]:
    """The P4 programs a switch of a topology may run: ``p4src/*.p4``."""
    from controller.p4build import PROGRAM_DIRS

    return tuple(sorted(p.stem for p in PROGRAM_DIRS[0].glob("*.p4")))


def check_topology(topo: Topology, file: str = "<topology>") -> list[ConfigError]:
    errors: list[ConfigError] = []

    def err(key: str, value: object, problem: str) -> None:
        errors.append(ConfigError(file, key, value, problem))

    if topo.kind not in KINDS:
        err("kind", topo.kind, f"is not a kind of fabric mlfabric knows ({', '.join(KINDS)})")
    programs = project_programs()
    for i, s in enumerate(topo.switches):
        if s.program not in programs:
            err(f"switches[{i}].program", s.program, f"is no program in p4src/ ({', '.join(programs)})")

    names = Counter([h.name for h in topo.hosts] + [s.name for s in topo.switches])
    for name, n in names.items():
        if n > 1:
            err("hosts/switches", name, f"node name used {n} times")
    seen_ip: dict[str, str] = {}
    seen_mac: dict[str, str] = {}
    for i, h in enumerate(topo.hosts):
        for j, nic in enumerate(h.nics):
            key = f"hosts[{i}].nics[{j}]"
            try:
                iface = ipaddress.ip_interface(nic.ip)
            except ValueError:
                err(f"{key}.ip", nic.ip, "not an IP address with prefix (e.g. 10.0.0.1/16)")
            else:
                addr = str(iface.ip)
                if addr in seen_ip:
                    err(f"{key}.ip", nic.ip, f"address already used by {seen_ip[addr]}")
                seen_ip[addr] = f"{h.name}:{nic.name}"
            if not _MAC.match(nic.mac):
                err(f"{key}.mac", nic.mac, "not a MAC address (aa:bb:cc:dd:ee:ff)")
            elif nic.mac.lower() in seen_mac:
                err(f"{key}.mac", nic.mac, f"MAC already used by {seen_mac[nic.mac.lower()]}")
            else:
                seen_mac[nic.mac.lower()] = f"{h.name}:{nic.name}"
            if nic.rail is not None and h.gpus and nic.rail >= h.gpus:
                err(f"{key}.rail", nic.rail, f"host {h.name} has {h.gpus} GPUs: rails are 0..{h.gpus - 1}")
        nic_names = Counter(n.name for n in h.nics)
        for nname, n in nic_names.items():
            if n > 1:
                err(f"hosts[{i}].nics", nname, f"NIC name used {n} times on host {h.name}")
    ids = Counter(s.device_id for s in topo.switches)
    grpcs = Counter(s.grpc for s in topo.switches if s.grpc)
    for i, s in enumerate(topo.switches):
        if ids[s.device_id] > 1:
            err(f"switches[{i}].device_id", s.device_id, "device id used by more than one switch")
        if s.grpc and grpcs[s.grpc] > 1:
            err(f"switches[{i}].grpc", s.grpc, "gRPC address used by more than one switch")
    used: dict[tuple[str, str | int], int] = {}
    for i, lk in enumerate(topo.links):
        for side, ep in (("a", lk.a), ("b", lk.b)):
            key = f"links[{i}].{side}"
            if topo.is_switch(ep.node):
                if not isinstance(ep.port, int) or not 1 <= ep.port <= MAX_PORT:
                    err(key, str(ep), f"switch ports are numbers 1..{MAX_PORT}")
            elif ep.node in names:
                host = topo.host(ep.node)
                if all(n.name != ep.port for n in host.nics):
                    err(key, str(ep), f"host {host.name} has no NIC {ep.port!r}")
            else:
                err(key, str(ep), "dangling link: no host or switch of that name")
                continue
            if (ep.node, ep.port) in used:
                err(key, str(ep), f"port already used by links[{used[(ep.node, ep.port)]}]")
            used[(ep.node, ep.port)] = i
        _check_rail_wiring(topo, i, lk, err)
    if topo.kind == "rail-only":
        _check_rail_only(topo, err)
    _check_connected(topo, err)
    return errors


def _check_connected(topo: Topology, err) -> None:
    """Every node reaches every other over the links (networkx's connected components)."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from([h.name for h in topo.hosts] + [s.name for s in topo.switches])
    graph.add_edges_from((lk.a.node, lk.b.node) for lk in topo.links if lk.a.node in graph and lk.b.node in graph)
    if graph.number_of_nodes() > 1 and not nx.is_connected(graph):
        parts = sorted(nx.connected_components(graph), key=len)
        err("links", sorted(parts[0])[:5], f"the fabric is in {len(parts)} pieces: these nodes reach no other")


def _check_rail_only(topo: Topology, err) -> None:
    """No switch may serve more than one rail, and no link may join two rails."""
    for i, s in enumerate(topo.switches):
        if s.role not in ("rail", "leaf", "spine") or s.rail is None:
            err(f"switches[{i}]", s.name, f"a rail-only fabric has only switches of one rail each; {s.role} {s.name} serves no rail (a spine across rails is a fat-tree)")
    for i, lk in enumerate(topo.links):
        if topo.is_switch(lk.a.node) and topo.is_switch(lk.b.node):
            ra, rb = topo.switch(lk.a.node).rail, topo.switch(lk.b.node).rail
            if ra != rb:
                err(f"links[{i}]", f"{lk.a} - {lk.b}", f"joins rail {ra} and rail {rb}: not rail-only")


def _check_rail_wiring(topo: Topology, i: int, lk, err) -> None:
    """GPU r of every server must connect to a switch of rail r."""
    for host_ep, sw_ep in ((lk.a, lk.b), (lk.b, lk.a)):
        if topo.is_switch(host_ep.node) or not topo.is_switch(sw_ep.node):
            continue
        try:
            nic = topo.host(host_ep.node).nic(str(host_ep.port))
        except KeyError:
            return
        sw = topo.switch(sw_ep.node)
        if nic.rail is not None and sw.rail is not None and nic.rail != sw.rail:
            err(f"links[{i}]", f"{host_ep} - {sw_ep}",
                f"GPU {nic.rail} of {host_ep.node} is wired to {sw.name}, the switch of rail {sw.rail}")


def require_valid(topo: Topology, file: str = "<topology>") -> Topology:
    errors = check_topology(topo, file)
    if errors:
        raise errors[0]
    return topo
