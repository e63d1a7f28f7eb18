"""The native engine: the loaded BMv2 JSON compiled to C and run outside the GIL.

The generator (:mod:`~pybmv2.native.cprogram` and the modules it uses) is imported on first
use: a warm start takes a built engine from the cache without it.
"""

from __future__ import annotations

from typing import Any

from pybmv2.native.errors import NativeBuildError, NativeUnsupported
from pybmv2.native.manifest import NativeManifest

__all__ = ["NativeBuildError", "NativeManifest", "NativeUnsupported", "generate", "native_support"]


def __getattr__(name: str) -> Any:
    if name in ("generate", "native_support"):
        from pybmv2.native import cprogram

        return getattr(cprogram, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
