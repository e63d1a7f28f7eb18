"""Fabrics across several machines: the machines file, placement and tunnels (all pure)."""

from controller.cluster.machines import (
    Machine,
    Machines,
    load_machines,
    machines_from_dict,
    machines_to_dict,
)
from controller.cluster.placement import Placement, link_bytes, nic_bytes, place
from controller.cluster.tunnels import (
    KINDS,
    OVERHEAD,
    TunnelEnd,
    check_underlay_mtu,
    tunnel_commands,
    tunnel_ends,
)

__all__ = [
    "KINDS",
    "OVERHEAD",
    "Machine",
    "Machines",
    "Placement",
    "TunnelEnd",
    "check_underlay_mtu",
    "link_bytes",
    "load_machines",
    "machines_from_dict",
    "machines_to_dict",
    "nic_bytes",
    "place",
    "tunnel_commands",
    "tunnel_ends",
]
