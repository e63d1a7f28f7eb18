"""TDTCP's host side: a reliable byte stream over UDP with one congestion state per TDN.

A reconfigurable network cycles through time-division networks (TDNs) with their own rate
and delay; the ToR announces each change with an ICMP type 7 message. TDTCP (Chen et al.,
SIGCOMM 2022) keeps congestion state per TDN and switches to the matching one on the
announcement; mode ``single`` keeps one shared state (the baseline).

Pure parts: the segment format (:mod:`~workloads.tdtcp.wire`), RTT estimation
(:mod:`~workloads.tdtcp.rtt`), per-TDN congestion control (:mod:`~workloads.tdtcp.congestion`),
the sender's scoreboard (:mod:`~workloads.tdtcp.scoreboard`), the receiver's reassembly
(:mod:`~workloads.tdtcp.reassembly`), the notification format (:mod:`~workloads.tdtcp.icmp`),
loss injection (:mod:`~workloads.tdtcp.loss`) and the statistics (:mod:`~workloads.tdtcp.stats`).
Thin I/O around them: :class:`Sender`, :class:`Receiver`, :class:`TdnListener` and the
command line, ``python -m workloads.tdtcp`` (:mod:`~workloads.tdtcp.cli`).
"""

from workloads.tdtcp.config import PORT, ReceiverConfig, SenderConfig
from workloads.tdtcp.congestion import (
    CaState,
    CongestionConfig,
    CongestionControl,
    Credits,
    TdnState,
)
from workloads.tdtcp.errors import ListenerError, WireFormatError
from workloads.tdtcp.icmp import TdnNotification, build_notification, parse_notification
from workloads.tdtcp.loss import LossPlan
from workloads.tdtcp.notify import TdnListener
from workloads.tdtcp.receiver import Receiver
from workloads.tdtcp.sender import Sender

__all__ = [
    "PORT",
    "CaState",
    "CongestionConfig",
    "CongestionControl",
    "Credits",
    "ListenerError",
    "LossPlan",
    "Receiver",
    "ReceiverConfig",
    "Sender",
    "SenderConfig",
    "TdnListener",
    "TdnNotification",
    "TdnState",
    "WireFormatError",
    "build_notification",
    "parse_notification",
]
