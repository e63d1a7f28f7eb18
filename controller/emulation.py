"""Reach the emulation code in ``mininet/`` from the controller.

``mininet/`` is deliberately not a package of that name (it must never shadow the real
Mininet): it is installed as the package ``mlfabric_emulation`` (setup.py's ``package_dir``
mapping), a namespace package without ``__init__.py``, so that a checkout's ``mininet/``
folder on the path is never a regular package called ``mininet``. Its modules are imported
on demand, because they import the real Mininet, which only the emulation needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from controller.errors import EmulationError

__all__ = ["EMULATION_DIR", "EMULATION_PACKAGE", "load_emulation_module", "run_emulation_module"]

EMULATION_DIR = Path(__file__).resolve().parent.parent / "mininet"
#: the package ``mininet/`` is installed as
EMULATION_PACKAGE = "mlfabric_emulation"


def load_emulation_module(name: str) -> ModuleType:
    """Import ``mlfabric_emulation.<name>`` (``mininet/<name>.py``, which itself imports
    the real Mininet package)."""
    if not (EMULATION_DIR / f"{name}.py").exists():
        raise EmulationError(f"no emulation module {name!r} in {EMULATION_DIR}")
    try:
        # the real Mininet first: it loads pkg_resources, which warns about a namespace
        # package imported before it (mlfabric_emulation has no __file__)
        importlib.import_module("mininet.net")
        return importlib.import_module(f"{EMULATION_PACKAGE}.{name}")
    except ImportError as exc:
        raise EmulationError(f"cannot load emulation module {name!r}: {exc} (is Debian's mininet installed? run make setup)") from exc


def run_emulation_module(name: str, argv: Sequence[str]) -> int:
    """Run ``main(argv)`` of an emulation module; it returns the exit status."""
    module = load_emulation_module(name)
    return int(module.main(list(argv)))
