"""Errors of the native engine: what it cannot compile, and what the C compiler refused."""

from __future__ import annotations

from pybmv2.errors import TargetError, UnsupportedJsonError

__all__ = ["NativeBuildError", "NativeUnsupported"]


class NativeUnsupported(UnsupportedJsonError):
    """The program uses a construct the native engine does not implement (yet).

    The message names the construct and where it appears; ``--engine auto`` logs it and
    runs the program on the Python engine instead.
    """


class NativeBuildError(TargetError):
    """The C compiler is missing or failed on the generated source (its output attached)."""
