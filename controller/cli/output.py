"""Printing results: aligned text tables for people, JSON for scripts."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["add_json_flag", "emit", "format_table"]


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Rows of dicts as an aligned text table.

    >>> print(format_table([{"switch": "rail0", "entries": 4}, {"switch": "spine0", "entries": 12}]))
    switch  entries
    rail0   4
    spine0  12
    """
    if not rows:
        return "(none)"
    cols = list(columns or dict.fromkeys(k for r in rows for k in r))
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols).rstrip()]
    for r in rows:
        lines.append("  ".join(str(r.get(c, "")).ljust(widths[c]) for c in cols).rstrip())
    return "\n".join(lines)


def emit(data: Any, *, as_json: bool, text: str | None = None) -> None:
    """Print ``data`` as JSON, or ``text`` (default: a table of ``data``)."""
    if as_json:
        json.dump(data, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    elif text is not None:
        print(text)
    elif isinstance(data, list):
        print(format_table(data))
    else:
        print(data)


def add_json_flag(p: argparse.ArgumentParser) -> None:
    """``--json``: the command's result (or its error) as one JSON document on stdout."""
    p.add_argument("--json", action="store_true", help="machine-readable output: one JSON document on stdout")
