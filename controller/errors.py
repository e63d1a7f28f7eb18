"""The exception hierarchy of the mlfabric control plane.

Every error raised by ``controller`` derives from :class:`MlfabricError`. Messages name the
offending value (a file, a key, a switch, a field), so that the CLI can print them as they
are, on one line.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigError",
    "EmulationError",
    "MlfabricError",
    "P4BuildError",
    "ReadinessTimeout",
    "ReconfigurationError",
    "ToolchainMissing",
]


class MlfabricError(Exception):
    """Base class of every mlfabric error."""


class ConfigError(MlfabricError):
    """A topology, schedule or parameter file is invalid.

    The message names the file, the key path and the offending value.
    """

    def __init__(self, file: str, key: str, value: Any, problem: str) -> None:
        self.file, self.key, self.value, self.problem = file, key, value, problem
        super().__init__(f"{file}: {key}: {problem}" + ("" if value is None else f" (got {_short(value)})"))


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: an error line never carries a whole file.

    >>> _short("x" * 100, limit=20)
    "'xxxxxxxxxxxxxxx... (102 characters)"
    """
    shown = repr(value)
    return shown if len(shown) <= limit else f"{shown[:limit - 4]}... ({len(shown)} characters)"


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
