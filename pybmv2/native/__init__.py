"""The native engine: the loaded BMv2 JSON compiled to C and run outside the GIL."""

from pybmv2.native.cprogram import NativeManifest, generate, native_support
from pybmv2.native.errors import NativeBuildError, NativeUnsupported

__all__ = ["NativeBuildError", "NativeManifest", "NativeUnsupported", "generate", "native_support"]
