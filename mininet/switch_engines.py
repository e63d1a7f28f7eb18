"""Which packet engine each switch of a running fabric uses, read from its log: ``native``,
``python`` or, for BMv2, ``bmv2``. The Python target logs the engine that runs its ports
each time a pipeline is loaded (``pybmv2.daemon``); the last such line wins.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path

__all__ = ["NATIVE_LINE", "engine_from_log", "engines_text", "fabric_engines"]

#: what ``mlfabric-switch`` logs when the native engine takes the ports
NATIVE_LINE = "the native engine runs the ports"
#: what it logs when the Python engine runs a loaded program (with the reason)
PYTHON_LINES = ("running the program on the Python engine", "the Python engine runs the switch")


def engine_from_log(text: str) -> str | None:
    """The engine named by the last engine line of a switch log (None: no such line yet).

    >>> engine_from_log("x\\nINFO the native engine runs the ports\\n")
    'native'
    >>> engine_from_log("engine auto: the Python engine runs the switch (--pcap need it)\\n")
    'python'
    """
    found = None
    for line in text.splitlines():
        if NATIVE_LINE in line:
            found = "native"
        elif any(p in line for p in PYTHON_LINES):
            found = "python"
    return found


def fabric_engines(target: str, log_dir: Path | None, switches: list[str]) -> dict[str, str]:
    """Each switch's engine; a Python-target switch without an engine line in its log ran
    the Python engine (a stock pipeline push logs nothing else)."""
    if target != "python":
        return dict.fromkeys(switches, target)
    out = {}
    for name in switches:
        path = log_dir / f"{name}.log" if log_dir is not None else None
        text = path.read_text(errors="replace") if path is not None and path.exists() else ""
        out[name] = engine_from_log(text) or ("python" if path is not None else "unknown")
    return out


def engines_text(engines: Mapping[str, str]) -> str:
    """``native engine`` when all agree, else the counts, e.g. ``native 3, python 1``.

    >>> engines_text({"a": "native", "b": "native"}), engines_text({"a": "native", "b": "python"})
    ('native engine', 'native 1, python 1')
    """
    counts = Counter(engines.values())
    if len(counts) == 1:
        return f"{next(iter(counts))} engine"
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
