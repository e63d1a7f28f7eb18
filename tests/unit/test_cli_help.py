"""``--help`` tells a new user what every option does and shows how each command is used."""

from __future__ import annotations

import argparse
import importlib.util

import pytest

from controller.cli import main
from controller.cli.help_text import examples_of, subparsers_of
from controller.cli.main import EXPERIMENT_MODULES, _experiment_parser, build_parser

pytestmark = pytest.mark.unit

needs_mininet = pytest.mark.skipif(importlib.util.find_spec("mininet") is None,
                                   reason="the experiment runners import Mininet (make setup installs it)")


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("mlfabric",)):
    yield path, parser
    for name, child in subparsers_of(parser).items():
        yield from _commands(child, (*path, name))


def _undocumented(parser: argparse.ArgumentParser) -> list[str]:
    return [a.option_strings[0] if a.option_strings else a.dest for a in parser._actions
            if not a.help and not isinstance(a, argparse._SubParsersAction)]


def test_every_option_and_argument_of_every_command_says_what_it_does() -> None:
    missing = {" ".join(path): names for path, p in _commands(build_parser()) if (names := _undocumented(p))}
    assert missing == {}


def test_every_command_shows_an_example_and_every_group_its_subcommands_examples() -> None:
    without = [" ".join(path) for path, p in _commands(build_parser()) if not examples_of(p)]
    assert without == []
    rules = dict((" ".join(path), p) for path, p in _commands(build_parser()))["mlfabric rules"]
    assert "mlfabric rules show rail0 ipv4_lpm" in rules.format_help()


def test_the_top_level_help_walks_a_new_user_through_a_running_fabric(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for step in ("mlfabric fabric up", "mlfabric host exec", "mlfabric rules show", "mlfabric counters"):
        assert step in out


@needs_mininet
@pytest.mark.parametrize("name", list(EXPERIMENT_MODULES))
def test_every_experiment_option_says_what_it_does(name: str) -> None:
    assert _undocumented(_experiment_parser(name)()) == []


@needs_mininet
def test_every_fabric_up_option_says_what_it_does() -> None:
    from controller.emulation import load_emulation_module

    assert _undocumented(load_emulation_module("fabric_up").build_parser()) == []


@needs_mininet
def test_experiment_run_help_lists_each_experiments_options(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["experiment", "run", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for name, option in (("rail-only", "--gpus"), ("checkmate", "--mirror-loss"), ("rotor", "--duty-cycles"),
                         ("tdtcp", "--day-ms"), ("topoopt", "--degrees")):
        section = out.split(f"\n{name} options:\n", 1)[1]
        assert option in section.split(" options:\n", 1)[0], name


@needs_mininet
@pytest.mark.parametrize("argv", [["fabric", "up", "--help"],
                                  ["fabric", "up", "topologies/rail-only-4x4.yaml", "--", "--help"],
                                  ["experiment", "run", "rail-only", "--", "--help"]])
def test_help_after_the_topology_or_experiment_is_the_runners_own(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: mlfabric {argv[0]} {argv[1]}")
    assert "--target" in out
