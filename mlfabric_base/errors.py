"""The root of every mlfabric exception, and the one for bad input, shared by every layer.

Messages name the offending value (a file, a key, a field), so that a command prints them as
they are, on one line.
"""

from __future__ import annotations

from typing import Any

from mlfabric_base.numbers import nonfinite_fields

__all__ = ["ConfigError", "MlfabricError", "refuse_nonfinite"]


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


def refuse_nonfinite(source: str, config: Any) -> None:
    """Raise a ConfigError naming the first NaN or infinite float of a configuration
    (a dataclass; see :func:`mlfabric_base.numbers.nonfinite_fields`).

    >>> import dataclasses
    >>> @dataclasses.dataclass
    ... class C:
    ...     rate_mbps: float = float("nan")
    >>> refuse_nonfinite("<experiment>", C())
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: <experiment>: rate_mbps: must be a finite number (got nan)
    """
    for key, value in nonfinite_fields(config):
        raise ConfigError(source, key, value, "must be a finite number")
