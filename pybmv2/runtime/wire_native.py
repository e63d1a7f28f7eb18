"""The C build of the WriteRequest decoder (``wire_decoder.c``), compiled on first use.

:func:`decoder` is ``decode(data, EntryValue)`` from the compiled module, or None while it
is not built or cannot be (no C compiler, no Python headers: Debian's ``python3-dev``), in
which case :mod:`pybmv2.runtime.wire` decodes in Python, with the same results. The module is
built like the native engine (:mod:`pybmv2.native.build`: cached by content, under
``$MLFABRIC_NATIVE_CACHE``). :func:`start_building` builds it on a thread, so that a switch
process answers its first Writes in Python instead of waiting for the compiler.
``MLFABRIC_WIRE_DECODER=python`` keeps the Python decoder (the tests compare the two).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import sysconfig
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["decoder", "load", "start_building"]

log = logging.getLogger(__name__)

MODULE_NAME = "pybmv2_wire_decoder"
SOURCE = Path(__file__).with_name("wire_decoder.c")

Decode = Callable[[bytes, type], Any]

_lock = threading.Lock()
_decode: Decode | None = None
_tried = False


def _headers() -> str | None:
    include = sysconfig.get_paths().get("include")
    return include if include and Path(include, "Python.h").exists() else None


def load() -> Decode | None:
    """Build (unless cached) and load the C decoder; None if it cannot be (said once)."""
    global _decode, _tried
    with _lock:
        if _tried:
            return _decode
        _tried = True
        if os.environ.get("MLFABRIC_WIRE_DECODER") == "python":
            return None
        from pybmv2.native.build import build
        from pybmv2.native.errors import NativeBuildError

        include = _headers()
        if include is None:
            log.info("Writes are decoded in Python: no Python.h (Debian: apt-get install python3-dev)")
            return None
        try:
            path = build(SOURCE.read_text(), flags=(f"-I{include}",), what="the WriteRequest decoder")
            loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, str(path))
            spec = importlib.util.spec_from_file_location(MODULE_NAME, path, loader=loader)
            assert spec is not None
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
        except (NativeBuildError, ImportError, OSError) as exc:
            log.info("Writes are decoded in Python: the C decoder did not build: %s",
                     str(exc).splitlines()[0])
            return None
        _decode = module.decode
        return _decode


def decoder() -> Decode | None:
    """The C decoder if it is loaded, else None (never waits for a build)."""
    return _decode


def start_building() -> None:
    """Build and load the C decoder on a daemon thread."""
    threading.Thread(target=load, name="wire-decoder-build", daemon=True).start()
