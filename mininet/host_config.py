"""Prepare Mininet hosts for traffic through a software P4 switch.

Every function returns shell commands rather than running them, so that a host's whole
configuration goes to its shell in one round trip (:func:`run_batch`).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["chunks", "prepare_commands", "prepare_host", "run_batch", "set_static_arp", "static_arp_commands"]


def prepare_commands(intfs: Iterable[str]) -> list[str]:
    """Turn off checksum/segmentation offloads and IPv6 noise on the given interfaces.

    A frame leaving a veth with checksum offload carries no valid TCP/UDP checksum; a
    software switch forwards it as it is and the receiver drops it. IPv6 router and
    neighbour solicitations would only add noise to experiments. TCP keeps its congestion
    window across idle gaps, so that a collective's later steps do not restart slow start.
    """
    cmds = ["sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1",
            # collectives reuse connections after idle gaps: keep their windows (as DC hosts do)
            "sysctl -qw net.ipv4.tcp_slow_start_after_idle=0"]
    cmds += [f"ethtool -K {i} tx off rx off tso off gso off gro off lro off 2>/dev/null" for i in intfs if i != "lo"]
    return cmds


def static_arp_commands(entries: Iterable[tuple[str, str, str]]) -> list[str]:
    """Permanent neighbours: (ip, mac, interface) for each entry."""
    return [f"ip neigh replace {ip} lladdr {mac} dev {intf} nud permanent" for ip, mac, intf in entries]


#: a Mininet host's shell reads from a terminal, whose line discipline truncates a line
#: at 4,095 characters: longer batches are sent a chunk of lines at a time
MAX_LINE = 3000


def chunks(cmds: list[str], limit: int = MAX_LINE) -> list[str]:
    """``cmds`` joined with ``; `` into lines no longer than ``limit`` (a longer command
    goes alone).

    >>> chunks(["a" * 5, "b" * 5, "c" * 5], limit=12)
    ['aaaaa; bbbbb', 'ccccc']
    """
    out: list[str] = []
    for cmd in cmds:
        if out and len(out[-1]) + 2 + len(cmd) <= limit:
            out[-1] += "; " + cmd
        else:
            out.append(cmd)
    return out


def run_batch(host, cmds: list[str]) -> str:
    """Run commands in the host's shell, as few round trips as its terminal allows; ``;``
    keeps going after a failure."""
    return "".join(host.cmd(line) for line in chunks(cmds))


def prepare_host(host) -> None:
    run_batch(host, prepare_commands(i.name for i in host.intfList()))


def set_static_arp(host, entries: Iterable[tuple[str, str, str]]) -> None:
    run_batch(host, static_arp_commands(entries))
