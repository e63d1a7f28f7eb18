"""The CLI reference (``docs/cli.md``), generated from the argparse tree: every command's help
(usage, options, examples), the options each experiment and ``fabric up`` take after their
name, in one Markdown page. ``make docs`` writes it; a test fails when it is stale.

Run: ``python -m controller.cli.reference [OUT]`` (default ``docs/cli.md``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from controller.cli.help_text import ExperimentOptionsHelp

__all__ = ["WIDTH", "commands", "reference_markdown"]

#: the column width help is wrapped to (fixed, so that the page does not depend on the terminal)
WIDTH = 100
_DEFAULT_OUT = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


@contextlib.contextmanager
def _columns(width: int) -> Iterator[None]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def commands(parser: argparse.ArgumentParser, path: str = "mlfabric") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command under ``parser``, depth first, with its full name.

    >>> p = argparse.ArgumentParser(prog="x")
    >>> s = p.add_subparsers()
    >>> a = s.add_parser("a").add_subparsers()
    >>> _ = a.add_parser("b")
    >>> [name for name, _ in commands(p, "x")]
    ['x', 'x a', 'x a b']
    """
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, f"{path} {name}")


def _passed_on(name: str, parser: argparse.ArgumentParser) -> list[tuple[str, Callable[[], argparse.ArgumentParser]]]:
    """The parsers a command hands its arguments to: each experiment's, ``fabric up``'s."""
    out: list[tuple[str, Callable[[], argparse.ArgumentParser]]] = []
    for action in parser._actions:
        if isinstance(action, ExperimentOptionsHelp):
            out += [(f"{name} {exp}", build) for exp, build in action.parsers.items()]
    if name == "mlfabric fabric up":
        from controller.emulation import load_emulation_module

        out.append((name + " TOPOLOGY", lambda: load_emulation_module("fabric_up").build_parser()))
    return out


def _anchor(name: str) -> str:
    return name.lower().replace(" ", "-")


def reference_markdown(parser: argparse.ArgumentParser) -> str:
    """The whole page."""
    sections: list[tuple[str, str]] = []
    with _columns(WIDTH):
        for name, sub in commands(parser):
            sections.append((name, sub.format_help()))
            for passed, build in _passed_on(name, sub):
                sections.append((passed, build().format_help()))
    lines = ["# CLI reference", "",
             "Generated from the argparse tree by `make docs` (`python -m controller.cli.reference`); "
             "`tests/unit/test_docs.py` fails when it is stale. Every command also answers `--help`.", ""]
    lines += [f"- [`{name}`](#{_anchor(name)})" for name, _ in sections]
    for name, text in sections:
        lines += ["", f"## {name}", "", "```", text.rstrip(), "```"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from controller.cli.main import build_parser

    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else _DEFAULT_OUT
    out.write_text(reference_markdown(build_parser()))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
