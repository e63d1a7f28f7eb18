"""Reach the emulation code in ``mininet/`` from the controller.

``mininet/`` is deliberately not a package (it must never shadow the real Mininet), so its
modules are loaded by putting that folder on ``sys.path`` here, once, on demand.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from controller.errors import EmulationError

__all__ = ["EMULATION_DIR", "load_emulation_module", "run_emulation_module"]

EMULATION_DIR = Path(__file__).resolve().parent.parent / "mininet"


def load_emulation_module(name: str) -> ModuleType:
    """Import ``mininet/<name>.py`` (which itself imports the real Mininet package)."""
    if not (EMULATION_DIR / f"{name}.py").exists():
        raise EmulationError(f"no emulation module {name!r} in {EMULATION_DIR}")
    path = str(EMULATION_DIR)
    if path not in sys.path:
        sys.path.append(path)
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise EmulationError(f"cannot load emulation module {name!r}: {exc} (is Debian's mininet installed? run make setup)") from exc


def run_emulation_module(name: str, argv: Sequence[str]) -> int:
    """Run ``main(argv)`` of an emulation module; it returns the exit status."""
    module = load_emulation_module(name)
    return int(module.main(list(argv)))
