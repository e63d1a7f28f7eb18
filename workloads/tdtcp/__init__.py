"""TDTCP's host side: a reliable byte stream over UDP with one congestion state per TDN.

A reconfigurable network cycles through time-division networks (TDNs) with their own rate
and delay; the ToR announces each change with an ICMP type 7 message. TDTCP (Chen et al.,
SIGCOMM 2022) keeps congestion state per TDN and switches to the matching one on the
announcement. Pure parts: the segment format (:mod:`~workloads.tdtcp.wire`), per-TDN
congestion control (:mod:`~workloads.tdtcp.congestion`), the sender's scoreboard
(:mod:`~workloads.tdtcp.scoreboard`) and the receiver's reassembly
(:mod:`~workloads.tdtcp.reassembly`). The I/O around them is thin.
"""

__all__: list[str] = []
