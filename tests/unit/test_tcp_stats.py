"""The hosts' TCP counters: parsed from /proc/net text, summed over hosts, printed."""

from __future__ import annotations

from pathlib import Path

from controller.experiments.tcp_stats import TcpStats, parse_proc_net

SNMP = """Ip: Forwarding DefaultTTL
Ip: 2 64
Tcp: RtoAlgorithm RtoMin OutSegs RetransSegs
Tcp: 1 200 1000 7
TcpExt: SyncookiesSent TCPTimeouts TCPLossProbes TCPSACKReorder TCPTSReorder TCPDSACKRecv
TcpExt: 0 2 5 2 1 1
"""


def test_counters_are_read_by_section_and_name() -> None:
    got = parse_proc_net(SNMP)
    assert got["Tcp.OutSegs"] == 1000 and got["Tcp.RetransSegs"] == 7
    assert got["TcpExt.TCPTimeouts"] == 2 and got["Ip.DefaultTTL"] == 64


def test_hosts_add_up_and_the_line_says_what_happened() -> None:
    stats = TcpStats.total([parse_proc_net(SNMP), parse_proc_net(SNMP)])
    assert stats == TcpStats(segments=2000, retransmitted=14, timeouts=4, loss_probes=10, reordered=6, spurious=2)
    assert stats.text() == ("2,000 segments sent, 0.70% retransmitted, 4 retransmission timeouts, 10 tail-loss probes, "
                            "6 reorderings detected, 2 spurious retransmissions (D-SACK)")
    assert TcpStats(**{k: v for k, v in stats.as_dict().items() if k not in ("reordered", "spurious")}).reordered == 0
    assert TcpStats(**stats.as_dict()) == stats


def test_this_machines_own_counters_parse() -> None:
    text = Path("/proc/net/snmp").read_text() + Path("/proc/net/netstat").read_text()
    assert TcpStats.total([parse_proc_net(text)]).segments > 0
