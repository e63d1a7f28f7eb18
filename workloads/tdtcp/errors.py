"""The errors of the TDTCP transport, in the workloads hierarchy.

Malformed segments and ICMP messages raise :class:`WireFormatError` (a
:class:`~workloads.errors.ProtocolError` and a :class:`ValueError`); a transfer that makes no
progress raises :class:`~workloads.errors.PeerTimeout`; bad options raise
:class:`~controller.errors.ConfigError` naming the option and its value; a listener that
cannot open its raw socket raises :class:`ListenerError`. Messages are one line.
"""

from __future__ import annotations

from workloads.errors import ConfigError, PeerTimeout, ProtocolError, WorkloadError

__all__ = ["ConfigError", "ListenerError", "PeerTimeout", "WireFormatError"]


class WireFormatError(ProtocolError, ValueError):
    """A datagram is not a well-formed TDTCP segment or TDN notification; the message says why."""


class ListenerError(WorkloadError):
    """The TDN notification listener could not open or read its raw ICMP socket."""
