"""Prepare Mininet hosts for traffic through a software P4 switch."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["prepare_host", "set_static_arp"]


def prepare_host(host) -> None:
    """Turn off checksum/segmentation offloads and IPv6 noise on every host interface.

    A frame leaving a veth with checksum offload carries no valid TCP/UDP checksum; a
    software switch forwards it as it is and the receiver drops it. IPv6 router and
    neighbour solicitations would only add noise to experiments.
    """
    host.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
    for intf in host.intfList():
        if intf.name == "lo":
            continue
        host.cmd(f"ethtool -K {intf.name} tx off rx off tso off gso off gro off lro off 2>/dev/null")


def set_static_arp(host, entries: Iterable[tuple[str, str, str]]) -> None:
    """Install permanent neighbours: (ip, mac, interface) for each entry."""
    for ip, mac, intf in entries:
        host.cmd(f"ip neigh replace {ip} lladdr {mac} dev {intf} nud permanent")
