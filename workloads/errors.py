"""The exception hierarchy of the host-side workloads.

Every error derives from :class:`WorkloadError`, itself an
:class:`mlfabric_base.errors.MlfabricError`, so that the CLI and the experiment runner handle
them like any other mlfabric error. Messages name the rank, its address and the operation,
on one line.
"""

from __future__ import annotations

from mlfabric_base.errors import ConfigError, MlfabricError

__all__ = [
    "CommandError",
    "ConfigError",
    "PeerClosed",
    "PeerTimeout",
    "PlanError",
    "ProtocolError",
    "TransportError",
    "VerificationError",
    "WorkerStartError",
    "WorkloadError",
]


class WorkloadError(MlfabricError):
    """Base class of every error of the workloads package."""


class PlanError(WorkloadError, ValueError):
    """A rank layout is inconsistent (missing or duplicated ranks, bad server or rail)."""


class CommandError(WorkloadError, ValueError):
    """A worker command is malformed: unknown op or key, wrong type or value."""


class TransportError(WorkloadError):
    """The TCP mesh failed: a connection could not be made, broke or carried bad data."""


class PeerTimeout(TransportError):
    """A peer made no progress (sent or accepted no byte) within the timeout."""


class PeerClosed(TransportError):
    """A peer closed or reset its connection (it died, or aborted after its own error)."""


class ProtocolError(TransportError):
    """A frame did not carry what was expected (wrong tag or length: ranks out of step)."""


class VerificationError(WorkloadError):
    """A collective returned a wrong result."""


class WorkerStartError(WorkloadError):
    """Some workers did not report READY in time; the message names them with their stderr."""
