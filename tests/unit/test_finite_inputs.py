"""Finite numbers only: every loader and every numeric command-line option refuses NaN, the
infinities and numbers too large for a float, with one line naming the value, before
anything starts."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.aggregate.job import parse_job as parse_aggregation_job
from controller.cli.main import build_parser
from controller.cli.reference import _passed_on, commands
from controller.errors import ConfigError
from controller.mirror.job import parse_job as parse_mirror_job
from controller.models.params import parse_cost_params
from controller.schedule.loader import parse_schedule
from controller.topology.loader import load_topology, parse_topology
from controller.topoopt.job import load_job as load_topoopt_job
from controller.topoopt.job import parse_job as parse_topoopt_job

REPO = Path(__file__).resolve().parents[2]
#: what a user (or a YAML file: .nan, .inf, -.inf, 1.0e+400) can type that is not a finite number
BAD = (math.nan, math.inf, -math.inf, 10 ** 400)
BAD_TEXT = ("nan", "inf", "-inf", "1e400")

LOADERS: dict[str, Callable[[Any, str], Any]] = {
    "topologies/rail-only-4x4.yaml": parse_topology,
    "topologies/rail-fat-tree-4x4.yaml": parse_topology,
    "topologies/optical-4x1x3.yaml": parse_topology,
    "topologies/jobs/topoopt-dlrm.yaml": parse_topoopt_job,
    "topologies/jobs/topoopt-transformer.yaml": parse_topoopt_job,
    "topologies/params/rail_only_costs.yaml": parse_cost_params,
    "topologies/jobs/digits-4x2.yaml": parse_mirror_job,
    "topologies/jobs/aggregate-rail-only-4x4.yaml": parse_aggregation_job,
    "topologies/schedules/opera-4x3.yaml": parse_schedule,
    "topologies/schedules/round-robin-4.yaml": parse_schedule,
}


def _number_paths(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every number in a parsed document, one per shape (list items alike)."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _number_paths(v, (*path, k))
    elif isinstance(doc, list) and doc:
        yield from _number_paths(doc[0], (*path, 0))
    elif isinstance(doc, int | float) and not isinstance(doc, bool):
        yield path


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


@pytest.mark.parametrize("name", sorted(LOADERS))
def test_every_number_of_every_input_file_refuses_nan_infinity_and_overflow(name: str) -> None:
    doc = yaml.safe_load((REPO / name).read_text())
    parse = LOADERS[name]
    parse(copy.deepcopy(doc), name)  # the committed file itself loads
    paths = list(_number_paths(doc))
    assert paths, f"{name} has numbers to check"
    for path in paths:
        for bad in BAD:
            changed = copy.deepcopy(doc)
            _set(changed, path, bad)
            with pytest.raises(ConfigError) as err:
                parse(changed, name)
            line = str(err.value)
            assert "\n" not in line and name in line, line


def test_yaml_spellings_of_nan_and_infinity_are_one_line_errors(tmp_path: Path) -> None:
    """The issue's cases: a link at ``rate_mbps: .nan`` that ``topology check`` called ok, a
    TopoOpt job with ``params_mb: .inf`` (an OverflowError) or ``compute_ms: .nan``."""
    topo = (REPO / "topologies/rail-only-4x4.yaml").read_text()
    for spelling in (".nan", ".inf", "-.inf", "1.0e+400"):
        doc = yaml.safe_load(topo)
        doc["links"][0]["rate_mbps"] = "@@"
        path = tmp_path / "t.yaml"
        path.write_text(yaml.safe_dump(doc).replace("'@@'", spelling))
        with pytest.raises(ConfigError, match=r"links\[0\]\.rate_mbps: expected a finite non-negative number"):
            load_topology(path)
    job = (REPO / "topologies/jobs/topoopt-transformer.yaml").read_text()
    for key in ("params_mb", "compute_ms"):
        path = tmp_path / "j.yaml"
        path.write_text("\n".join(f"{key}: .inf" if line.startswith(f"{key}:") else line for line in job.splitlines()))
        with pytest.raises(ConfigError, match=f"{key}: must be a finite number"):
            load_topoopt_job(path)


def _all_parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command line the project has: mlfabric's tree, what its experiments and
    ``fabric up`` take, the switch's and the workloads' own tools."""
    from pybmv2.cli import build_parser as switch_parser
    from workloads.checkmate.shadow import build_parser as shadow_parser
    from workloads.paced_udp import build_parser as paced_parser
    from workloads.tdtcp.cli import parser as tdtcp_parser
    from workloads.udp_probe import build_parser as probe_parser

    for name, parser in commands(build_parser()):
        yield name, parser
        for passed, build in _passed_on(name, parser):
            yield passed, build()
    for name, build in (("mlfabric-switch", switch_parser), ("workloads.checkmate.shadow", shadow_parser),
                        ("workloads.paced_udp", paced_parser), ("workloads.tdtcp", tdtcp_parser),
                        ("workloads.udp_probe", probe_parser)):
        yield from commands(build(), name)


#: option types that take any text (names, paths, addresses, choices)
_TEXT_TYPES = (None, str, Path)


def test_every_numeric_option_of_every_command_refuses_nan_infinity_and_overflow() -> None:
    checked = 0
    for name, parser in _all_parsers():
        for action in parser._actions:
            kind = action.type
            if kind in _TEXT_TYPES or action.choices is not None or isinstance(kind, argparse.FileType):
                continue
            assert kind is not float, f"{name} {action.option_strings}: a plain float takes nan and inf"
            assert callable(kind)
            for text in BAD_TEXT:
                with pytest.raises((argparse.ArgumentTypeError, ValueError)):
                    kind(text)
            checked += 1
    assert checked > 60  # every experiment's rates, sizes and durations, the tools' too


def test_compound_options_refuse_a_non_finite_part() -> None:
    from mlfabric_base.numbers import finite_floats
    from pybmv2.cli import _port_rate

    for bad in ("16,nan", "inf"):
        with pytest.raises(argparse.ArgumentTypeError):
            finite_floats(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="finite number > 0"):
        _port_rate("1:nan")
    tdtcp = dict(_all_parsers())["mlfabric experiment run tdtcp"]
    for bad in ("nan/500", "inf/500"):
        with pytest.raises(SystemExit):
            tdtcp.parse_args(["--fast", bad])


def _configs() -> Iterator[Any]:
    from controller.experiments.checkmate import CheckmateConfig
    from controller.experiments.collectives import CollectivesConfig
    from controller.experiments.rail_only import ExperimentConfig
    from controller.experiments.rotor import RotorConfig

    yield from (ExperimentConfig(), CollectivesConfig(), CheckmateConfig(), RotorConfig())


@pytest.mark.parametrize("config", list(_configs()), ids=lambda c: type(c).__name__)
def test_every_experiment_configuration_refuses_a_non_finite_float(config: Any) -> None:
    config.validate()
    floats = [f.name for f in dataclasses.fields(config) if isinstance(getattr(config, f.name), float)]
    assert floats
    for field in floats:
        with pytest.raises(ConfigError, match=f"{field}: must be a finite number"):
            dataclasses.replace(config, **{field: math.nan}).validate()


def test_configurations_checked_at_construction_refuse_a_non_finite_float() -> None:
    from controller.experiments.tdtcp import TdtcpConfig
    from controller.experiments.topoopt import TopoOptConfig
    from workloads.loopback import loopback_config

    with pytest.raises(ConfigError, match="day_ms: must be a finite number"):
        TdtcpConfig(day_ms=math.inf)
    with pytest.raises(ConfigError, match="rate_mbps: must be a finite number"):
        TopoOptConfig(rate_mbps=math.nan)
    with pytest.raises(ConfigError, match="timeout_s: must be a finite number"):
        loopback_config(1, 2, timeout_s=math.nan, port=20000)
