"""Prepare Mininet hosts for traffic through a software P4 switch.

Every function returns shell commands rather than running them, so that a host's whole
configuration goes to its shell in one round trip (:func:`run_batch`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["chunks", "ip_batched", "prepare_commands", "prepare_host", "rto_min_commands", "run_batch",
           "run_parallel", "set_static_arp", "static_arp_commands"]


def prepare_commands(intfs: Iterable[str], *, frame_skbs: bool = False, super_frames: int = 0) -> list[str]:
    """Turn off checksum/segmentation offloads and IPv6 noise on the given interfaces.

    A frame leaving a veth with checksum offload carries no valid TCP/UDP checksum; a
    software switch forwards it as it is and the receiver drops it. IPv6 router and
    neighbour solicitations would only add noise to experiments. TCP keeps its congestion
    window across idle gaps, so that a collective's later steps do not restart slow start.

    With ``frame_skbs``, TCP also builds one-segment packets (``gso_max_segs 1``). With
    segmentation offload off, TCP still hands the qdisc GSO packets of up to 64 kB (Linux
    segments them after the qdisc), and htb charges one as a whole: at 5 Mbit/s with jumbo
    frames a link then sends 7 frames (60 kB) at once and idles for 97 ms, so a 200 ms busy
    stretch reads as low as 73% of the rate. One frame per packet shapes frames as a NIC
    does, at some CPU per byte.

    With ``super_frames`` (the switches run ``--super-packets``), the offloads stay on and
    TCP builds segments of ``super_frames`` frames (``tcp_min_tso_segs``, capped by the
    interfaces' ``gso_max_segs``): each crosses the veths and the switches whole, its
    checksum filled by nobody until a device needs it, and the kernel cuts it into frames
    only where one cannot take it (a host's TSO as NICs do it, at the emulation's time scale).

    >>> prepare_commands(["h0-eth0"], super_frames=7)[-3:]
    ['ethtool -K h0-eth0 tx on rx on tso on gso on gro on 2>/dev/null', 'ip link set dev h0-eth0 gso_max_segs 7', 'sysctl -qw net.ipv4.tcp_min_tso_segs=7']
    """
    cmds = ["sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1",
            # collectives reuse connections after idle gaps: keep their windows (as DC hosts do)
            "sysctl -qw net.ipv4.tcp_slow_start_after_idle=0"]
    intfs = [i for i in intfs if i != "lo"]
    if super_frames:
        cmds += [f"ethtool -K {i} tx on rx on tso on gso on gro on 2>/dev/null" for i in intfs]
        cmds += [f"ip link set dev {i} gso_max_segs {super_frames}" for i in intfs]
        return [*cmds, f"sysctl -qw net.ipv4.tcp_min_tso_segs={super_frames}"]
    cmds += [f"ethtool -K {i} tx off rx off tso off gso off gro off lro off 2>/dev/null" for i in intfs]
    if frame_skbs:
        cmds += [f"ip link set dev {i} gso_max_segs 1" for i in intfs]
    return cmds


def static_arp_commands(entries: Iterable[tuple[str, str, str]]) -> list[str]:
    """Permanent neighbours: (ip, mac, interface) for each entry."""
    return [f"ip neigh replace {ip} lladdr {mac} dev {intf} nud permanent" for ip, mac, intf in entries]


def rto_min_commands(routes: list[dict], ms: float, congestion: str = "") -> list[str]:
    """Give every unicast route of ``ip -j route show table all`` (the main table and the
    per-NIC tables of source routing) a minimum retransmission timeout of ``ms``: the
    per-route ``rto_min`` that every kernel has (the per-namespace ``net.ipv4.tcp_rto_min_us``
    needs 6.11; Debian bookworm runs 6.1). Local and broadcast routes are left alone. With
    ``congestion``, every connection on the route runs that congestion control unless its
    socket chose another (``congctl``): a namespace inherits the machine's default (BBR on
    some machines) and may not change it, and a library's sockets (Open MPI's) set none.

    >>> rto_min_commands([{"dst": "10.0.0.0/16", "dev": "s0-eth0", "protocol": "kernel", "scope": "link",
    ...                    "prefsrc": "10.0.1.0", "flags": ["linkdown"]}], 1000)
    ['ip route change 10.0.0.0/16 dev s0-eth0 proto kernel scope link src 10.0.1.0 rto_min 1000ms']
    >>> rto_min_commands([{"dst": "default", "gateway": "10.0.0.1", "dev": "eth0", "metric": 5}], 250.5)
    ['ip route change default via 10.0.0.1 dev eth0 metric 5 rto_min 250ms']
    >>> rto_min_commands([{"type": "local", "dst": "10.0.1.0", "dev": "eth0", "table": "local"},
    ...                   {"dst": "default", "dev": "eth1", "table": "101"}], 1000)
    ['ip route change default dev eth1 table 101 rto_min 1000ms']
    >>> rto_min_commands([{"dst": "default", "dev": "eth1"}], 1000, "cubic")
    ['ip route change default dev eth1 rto_min 1000ms congctl cubic']
    """
    cmds = []
    for r in routes:
        if r.get("type", "unicast") != "unicast":
            continue
        parts = ["ip route change", str(r["dst"])]
        for key, word in (("gateway", "via"), ("dev", "dev"), ("protocol", "proto"), ("scope", "scope"),
                          ("prefsrc", "src"), ("metric", "metric"), ("table", "table")):
            if key in r:
                parts += [word, str(r[key])]
        cmds.append(" ".join(parts) + f" rto_min {int(ms)}ms" + (f" congctl {congestion}" if congestion else ""))
    return cmds


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


#: a shell command that ``ip -batch`` can take: ``ip`` with words only (no redirection,
#: no pipe, no second command)
_PLAIN_IP = re.compile(r"ip [^;&|<>$`'\"\\]+")


def ip_batched(cmds: Sequence[str], path: Path) -> list[str]:
    """``cmds`` with each run of plain ``ip`` commands replaced by one ``ip -force -batch``
    of a file written at ``path`` (a suffix per run): one process, not one per command (a
    host of a 1,024-GPU rail-only fabric holds over a thousand static neighbours).
    ``-force`` keeps going after a failed line, as ``;`` does.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> ip_batched(["sysctl -qw a=1", "ip link set x up", "ip neigh replace 1.2.3.4 lladdr 0:1 dev x",
    ...             "ethtool -K x tx off 2>/dev/null", "ip route show"], d / "h0")  # doctest: +ELLIPSIS
    ['sysctl -qw a=1', 'ip -force -batch .../h0.0 2>&1', 'ethtool -K x tx off 2>/dev/null', 'ip -force -batch .../h0.1 2>&1']
    >>> (d / "h0.0").read_text()
    'link set x up\\nneigh replace 1.2.3.4 lladdr 0:1 dev x\\n'
    """
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            file = path.with_name(f"{path.name}.{sum(c.startswith('ip -force -batch ') for c in out)}")
            file.write_text("\n".join(run) + "\n")
            out.append(f"ip -force -batch {file} 2>&1")
            run.clear()

    for cmd in cmds:
        if _PLAIN_IP.fullmatch(cmd):
            run.append(cmd[3:])
        else:
            flush()
            out.append(cmd)
    flush()
    return out


def run_parallel(work: Sequence[tuple[object, Sequence[str]]]) -> list[str]:
    """Run each node's commands in its shell, all nodes at once (each shell is its own
    process; Mininet's ``cmd`` would wait for one before starting the next), as few round
    trips per node as its terminal allows. Returns each node's output, in ``work``'s order."""
    lines = [chunks(list(cmds)) for _, cmds in work]
    outputs = [""] * len(work)
    for step in range(max((len(x) for x in lines), default=0)):
        busy = [i for i, x in enumerate(lines) if step < len(x)]
        for i in busy:
            work[i][0].sendCmd(lines[i][step])  # type: ignore[attr-defined]
        for i in busy:
            outputs[i] += work[i][0].waitOutput()  # type: ignore[attr-defined]
    return outputs


def prepare_host(host) -> None:
    run_batch(host, prepare_commands(i.name for i in host.intfList()))


def set_static_arp(host, entries: Iterable[tuple[str, str, str]]) -> None:
    run_batch(host, static_arp_commands(entries))
