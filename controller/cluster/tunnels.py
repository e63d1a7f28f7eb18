"""The kernel tunnels that join a fabric's links across machines: pure.

Each link whose ends are on different machines becomes a pair of Ethernet tunnel ends, one
on each machine, named as the link's interface would be on one machine (``rail0-eth2``,
``s1-eth0``), keyed by the link's index so that two tunnels between the same machines never
mix: VXLAN (the default: Mininet's cluster edition has none, mininet/mininet#552; kernels
without GRE, as this project's CI machines, have it) or GRETAP (the cluster edition's
RemoteGRELink). A tunnel carries frames of the link's MTU whole: the underlay between the
machines needs that MTU plus the tunnel's :data:`OVERHEAD` (Mininet's cluster edition instead
forced 1,450 bytes on every link, which a fabric of 9,000-byte frames cannot take).
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.cluster.machines import Machines
from controller.cluster.placement import Placement
from controller.errors import EmulationError
from controller.topology.model import Topology
from controller.topology.naming import switch_intf_name

__all__ = ["KINDS", "OVERHEAD", "VXLAN_PORT", "TunnelEnd", "check_underlay_mtu", "tunnel_commands", "tunnel_ends"]

KINDS = ("vxlan", "gretap")
#: bytes a tunnel adds to a frame: outer IPv4 (20) + UDP (8) and VXLAN (8), or GRE with a key
#: (8); + the inner Ethernet header (14)
OVERHEAD = {"vxlan": 50, "gretap": 42}
#: VXLAN's IANA port
VXLAN_PORT = 4789


@dataclass(frozen=True)
class TunnelEnd:
    """One machine's end of a cross-machine link."""

    link: int
    #: the interface's name, as on one machine
    intf: str
    #: the node it belongs to, and its switch port (None: a host's NIC)
    node: str
    port: int | None
    local: str
    remote: str
    key: int
    mtu: int
    rate_mbps: float | None
    kind: str = "vxlan"


def tunnel_ends(topo: Topology, placement: Placement, machines: Machines) -> dict[str, list[TunnelEnd]]:
    """Per machine, its ends of the links that cross machines.

    >>> from controller.cluster.machines import machines_from_dict
    >>> from controller.cluster.placement import place
    >>> from controller.topology.generators import rail_only
    >>> ms = machines_from_dict({"machines": [{"name": "a", "ssh": "root@10.0.0.1", "cores": 2},
    ...                                       {"name": "b", "ssh": "root@10.0.0.2", "cores": 2}]})
    >>> t = rail_only(4, 4)
    >>> ends = tunnel_ends(t, place(t, ms), ms)
    >>> e = ends["a"][0]
    >>> e.intf, e.node, e.port, e.remote, e.mtu
    ('rail0-eth3', 'rail0', 3, '10.0.0.2', 9000)
    """
    out: dict[str, list[TunnelEnd]] = {m: [] for m in machines.names}
    for i in placement.cross_links:
        lk = topo.links[i]
        mtu = topo.link_mtu(lk)
        for ep, other in ((lk.a, lk.b), (lk.b, lk.a)):
            here = machines.get(placement.machine_of[ep.node])
            there = machines.get(placement.machine_of[other.node])
            is_switch = topo.is_switch(ep.node)
            name = switch_intf_name(ep.node, ep.port) if is_switch else f"{ep.node}-{ep.port}"
            out[here.name].append(TunnelEnd(link=i, intf=name, node=ep.node, port=int(ep.port) if is_switch else None,
                                            local=here.tunnel_address, remote=there.tunnel_address, key=i + 1,
                                            mtu=mtu, rate_mbps=lk.rate_mbps, kind=machines.tunnel))
    return out


def tunnel_commands(end: TunnelEnd) -> list[str]:
    """The ``ip`` commands (without ``ip``) that make ``end`` in the root namespace.

    >>> e = TunnelEnd(3, "rail0-eth2", "rail0", 2, "10.0.0.1", "10.0.0.2", 4, 9000, 100.0, "gretap")
    >>> tunnel_commands(e)
    ['link add rail0-eth2 type gretap local 10.0.0.1 remote 10.0.0.2 ttl 64 key 4', 'link set rail0-eth2 mtu 9000']
    >>> import dataclasses
    >>> tunnel_commands(dataclasses.replace(e, kind="vxlan"))[0]
    'link add rail0-eth2 type vxlan id 4 local 10.0.0.1 remote 10.0.0.2 dstport 4789 ttl 64 nolearning'
    """
    if end.kind == "gretap":
        add = f"link add {end.intf} type gretap local {end.local} remote {end.remote} ttl 64 key {end.key}"
    else:
        add = (f"link add {end.intf} type vxlan id {end.key} local {end.local} remote {end.remote} "
               f"dstport {VXLAN_PORT} ttl 64 nolearning")
    return [add, f"link set {end.intf} mtu {end.mtu}"]


def check_underlay_mtu(machine: str, device: str, underlay_mtu: int, link_mtu: int, kind: str = "vxlan") -> None:
    """Refuse a tunnel that would carry a link's frames in pieces, or not at all.

    >>> check_underlay_mtu("m0", "eth0", 1500, 9000)
    Traceback (most recent call last):
    ...
    controller.errors.EmulationError: machine m0: its tunnels leave through eth0 (MTU 1500), which cannot carry the fabric's 9000-byte frames in VXLAN (9050 bytes): raise it (ip link set eth0 mtu 9050) or give the topology mtu: 1450
    """
    need = link_mtu + OVERHEAD[kind]
    if underlay_mtu < need:
        raise EmulationError(f"machine {machine}: its tunnels leave through {device} (MTU {underlay_mtu}), which "
                             f"cannot carry the fabric's {link_mtu}-byte frames in {kind.upper()} ({need} bytes): "
                             f"raise it (ip link set {device} mtu {need}) or give the topology mtu: "
                             f"{underlay_mtu - OVERHEAD[kind]}")
