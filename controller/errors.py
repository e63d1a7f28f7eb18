"""The exception hierarchy of the mlfabric control plane.

Every error raised by ``controller`` derives from :class:`MlfabricError`
(:mod:`mlfabric_base.errors`, shared with the workloads). Messages name the
offending value (a file, a key, a switch, a field), so that the CLI can print them as they
are, on one line.
"""

from __future__ import annotations

from mlfabric_base.errors import ConfigError, MlfabricError

__all__ = [
    "ConfigError",
    "EmulationError",
    "MlfabricError",
    "P4BuildError",
    "ReadinessTimeout",
    "ReconfigurationError",
    "ToolchainMissing",
]


class ToolchainMissing(MlfabricError):
    """A required external tool (p4c, simple_switch_grpc, Mininet) is not installed."""


class P4BuildError(MlfabricError):
    """Compiling a P4 program failed, or a compiled artifact is stale."""


class EmulationError(MlfabricError):
    """The emulated network could not be built, run or torn down."""


class ReadinessTimeout(MlfabricError):
    """Something did not become ready within its timeout (a switch, a host, a server)."""


class ReconfigurationError(MlfabricError):
    """A switch rejected its part of a reconfiguration; the message says what was rolled back."""
