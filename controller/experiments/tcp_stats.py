"""What the hosts' TCP stacks went through during a run: segments sent, retransmitted, and
retransmission timeouts, from ``/proc/net/snmp`` and ``/proc/net/netstat`` of each host's
network namespace (the counters ``nstat`` shows). Pure: the experiment reads the text.

A collective that waits out a retransmission timeout (at least 200 ms on Linux) takes far
longer than its bytes need; these counters tell that cost apart from the links' rates.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

__all__ = ["TcpStats", "parse_proc_net", "read_command"]

#: the shell command whose output :func:`parse_proc_net` reads, in a host's namespace
read_command = "cat /proc/net/snmp /proc/net/netstat"


def parse_proc_net(text: str) -> dict[str, int]:
    """``{"Tcp.OutSegs": n, "TcpExt.TCPTimeouts": n, ...}`` from the header/value line pairs
    of ``/proc/net/snmp`` and ``/proc/net/netstat``.

    >>> parse_proc_net("Tcp: RtoMin OutSegs\\nTcp: 200 17\\nTcpExt: TCPTimeouts\\nTcpExt: 3\\n")
    {'Tcp.RtoMin': 200, 'Tcp.OutSegs': 17, 'TcpExt.TCPTimeouts': 3}
    """
    out: dict[str, int] = {}
    lines = [line.split() for line in text.splitlines() if ":" in line]
    for head, values in itertools.pairwise(lines):
        if head[0] != values[0] or not values[1:] or not values[1].lstrip("-").isdigit():
            continue
        prefix = head[0].rstrip(":")
        for name, value in zip(head[1:], values[1:], strict=False):
            out[f"{prefix}.{name}"] = int(value)
    return out


@dataclass(frozen=True, slots=True)
class TcpStats:
    """Summed over a fabric's hosts since their namespaces were made."""

    segments: int
    retransmitted: int
    timeouts: int
    loss_probes: int
    #: reorderings the senders detected (SACK, timestamps, Reno dupacks; ``TCP*Reorder``)
    reordered: int = 0
    #: retransmissions the receivers reported as spurious (D-SACK): reordering taken for loss
    spurious: int = 0

    @classmethod
    def total(cls, hosts: Iterable[Mapping[str, int]]) -> TcpStats:
        rows = list(hosts)

        def summed(*keys: str) -> int:
            return sum(h.get(key, 0) for h in rows for key in keys)
        return cls(summed("Tcp.OutSegs"), summed("Tcp.RetransSegs"), summed("TcpExt.TCPTimeouts"),
                   summed("TcpExt.TCPLossProbes"),
                   summed("TcpExt.TCPSACKReorder", "TcpExt.TCPTSReorder", "TcpExt.TCPRenoReorder"),
                   summed("TcpExt.TCPDSACKRecv"))

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def text(self) -> str:
        """One line, e.g. ``46,100 segments sent, 0.21% retransmitted, 172 retransmission
        timeouts, 224 tail-loss probes``."""
        share = self.retransmitted / self.segments if self.segments else 0.0
        return (f"{self.segments:,} segments sent, {share:.2%} retransmitted, {self.timeouts:,} "
                f"retransmission timeouts, {self.loss_probes:,} tail-loss probes, {self.reordered:,} reorderings "
                f"detected, {self.spurious:,} spurious retransmissions (D-SACK)")
