"""What ``--help`` shows beyond argparse's defaults.

- A command group (``mlfabric rules``, ``mlfabric schedule``, ...) lists its subcommands'
  examples, taken from their own epilogs, so that each example is written once.
- ``mlfabric experiment run --help`` lists every experiment's own options: they live in the
  experiment runners in ``mininet/`` and are loaded only when the help is asked for.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator

__all__ = ["ExperimentOptionsHelp", "add_group_examples", "examples_of", "subparsers_of"]


def subparsers_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of ``parser`` by name (empty for a leaf command)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def examples_of(parser: argparse.ArgumentParser) -> list[str]:
    """The example command lines in a parser's epilog (``example: ...`` / ``examples: ...``).

    >>> p = argparse.ArgumentParser(epilog="examples: mlfabric a\\n          mlfabric b")
    >>> examples_of(p)
    ['mlfabric a', 'mlfabric b']
    """
    out = []
    for line in (parser.epilog or "").splitlines():
        text = line.split(":", 1)[1] if line.lstrip().startswith(("example:", "examples:")) else line
        if text.strip().startswith("mlfabric "):
            out.append(text.strip())
    return out


def _walk_groups(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    children = subparsers_of(parser)
    if children:
        yield parser
        for child in children.values():
            yield from _walk_groups(child)


def add_group_examples(root: argparse.ArgumentParser, per_command: int = 1) -> None:
    """Give every command group without an epilog one made of its subcommands' examples.

    ``per_command`` examples are taken from each direct subcommand (or, for a nested
    group, from its own collected examples).
    """
    collected: dict[int, list[str]] = {}

    def examples(p: argparse.ArgumentParser) -> list[str]:
        if id(p) in collected:
            return collected[id(p)]
        children = subparsers_of(p)
        if not children:
            return examples_of(p)
        seen: set[int] = set()
        out: list[str] = []
        for child in children.values():
            if id(child) in seen:  # aliases share a parser
                continue
            seen.add(id(child))
            out.extend(examples(child)[:per_command])
        collected[id(p)] = out
        return out

    for group in _walk_groups(root):
        found = examples(group)
        if group.epilog or not found:
            continue
        group.epilog = "examples:\n" + "\n".join(f"  {e}" for e in found)
        group.formatter_class = argparse.RawDescriptionHelpFormatter


class ExperimentOptionsHelp(argparse.Action):
    """``-h/--help`` of ``experiment run``: its own help, then each experiment's options.

    ``parsers`` maps an experiment's name to a function returning its ArgumentParser; an
    experiment whose runner cannot be loaded (no Mininet) says why instead.
    """

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 parsers: dict[str, Callable[[], argparse.ArgumentParser]] | None = None,
                 help: str | None = "show this help, with every experiment's options, and exit") -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)
        self.parsers = parsers or {}

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        sections = [parser.format_help()]
        for name, build in self.parsers.items():
            try:
                sections.append(f"{name} options:\n{_options_only(build())}")
            except Exception as exc:
                sections.append(f"{name} options: not available here ({exc})\n")
        sys.stdout.write("\n".join(sections))
        parser.exit()


def _options_only(parser: argparse.ArgumentParser) -> str:
    """The option lines of a parser's help, without its usage and description."""
    formatter = parser._get_formatter()
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if not isinstance(a, argparse._HelpAction)]
        if actions:
            formatter.start_section(None)
            formatter.add_arguments(actions)
            formatter.end_section()
    return formatter.format_help()
