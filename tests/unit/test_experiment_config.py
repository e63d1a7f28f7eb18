"""The rail-only experiment's configuration checks, fabrics, costs and aggregation."""

from __future__ import annotations

import pytest

from controller.errors import ConfigError
from controller.experiments.rail_only import (
    ExperimentConfig,
    comparison,
    emulated_bill,
    fabrics_for,
    model_times,
    summarize,
)
from controller.models.params import load_cost_params
from controller.topology import rail_fat_tree


@pytest.mark.parametrize(("changes", "key"), [
    ({"gpus": 15, "rails": 4}, "gpus"),
    ({"gpus": 4, "rails": 4}, "gpus"),
    ({"rails": 0}, "rails"),
    ({"allreduce_bytes": 1000}, "allreduce_bytes"),
    ({"fail_rail": 9}, "fail_rail"),
    ({"target": "tofino"}, "target"),
    ({"iterations": 0}, "iterations"),
    ({"alltoall_schedule": "ring"}, "alltoall_schedule"),
    ({"tcp_rto_min_ms": -1}, "tcp_rto_min_ms"),
    ({"warmup": -1}, "warmup"),
    ({"fabrics": ("fat-tree",)}, "fabrics"),
    ({"fabrics": ()}, "fabrics"),
    ({"fabrics": ("rail-only", "rail-only")}, "fabrics"),
    ({"collectives": ("allgather",)}, "collectives"),
    ({"collectives": ()}, "collectives"),
])
def test_bad_input_is_rejected_before_anything_starts(changes: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        ExperimentConfig(**changes).validate()
    assert info.value.key == key


def test_rail_only_alone_runs_the_collectives_chosen() -> None:
    """A scale check: rail-only alone, its collectives judged against their model."""
    from mlfabric_emulation.rail_experiment import _commands

    cfg = ExperimentConfig(gpus=16, rails=4, fabrics=("rail-only",), collectives=("hier-allreduce",)).validate()
    assert list(fabrics_for(cfg)) == ["rail-only"]
    assert [c["op"] for c in _commands(cfg, "rail-only", 0)] == ["hier_allreduce"]
    every = ExperimentConfig(gpus=16, rails=4).validate()
    assert [c["op"] for c in _commands(every, "rail-only", 0)] == [
        "allreduce", "hier_allreduce", "hier_alltoall", "train_step"]


def test_a_topology_that_is_not_rail_only_is_rejected() -> None:
    cfg = ExperimentConfig(gpus=8, rails=4).validate()
    with pytest.raises(ConfigError, match="needs a rail-only topology"):
        fabrics_for(cfg, rail_fat_tree(2, 4))


def test_both_fabrics_have_the_same_servers_and_gpus() -> None:
    topos = fabrics_for(ExperimentConfig(gpus=16, rails=4).validate())
    ro, ft = topos["rail-only"], topos["fat-tree"]
    assert [h.name for h in ro.hosts] == [h.name for h in ft.hosts]
    assert [n.address for h in ro.hosts for n in h.nics] == [n.address for h in ft.hosts for n in h.nics]
    assert len(ro.switches) == 4 and len(ft.switches) == 6


def test_rail_only_costs_less_than_its_fat_tree() -> None:
    topos = fabrics_for(ExperimentConfig(gpus=16, rails=4).validate())
    prices = load_cost_params().costs
    ro, ft = (emulated_bill(topos[f], prices) for f in ("rail-only", "fat-tree"))
    assert ro["switches"] < ft["switches"] and ro["switch_links"] == 0 and ft["switch_links"] == 8
    assert ro["cost_usd"] < ft["cost_usd"] and ro["power_w"] < ft["power_w"]


def test_model_times_follow_the_bandwidth() -> None:
    slow = model_times(ExperimentConfig(rate_mbps=10).validate())
    fast = model_times(ExperimentConfig(rate_mbps=20).validate())
    for op in slow:
        assert slow[op] == pytest.approx(2 * fast[op])
    assert slow["hier_alltoall"] > slow["alltoall"]


def test_summary_and_ratios() -> None:
    rows = [{"fabric": f, "op": op, "iter": i, "ok": ok, "seconds": s}
            for f, op, i, ok, s in [("rail-only", "allreduce", 0, True, 1.0), ("rail-only", "allreduce", 1, False, 9.0),
                                    ("fat-tree", "allreduce", 0, True, 1.0), ("rail-only", "hier_alltoall", 0, True, 1.1),
                                    ("fat-tree", "alltoall", 0, True, 1.0)]]
    summary = summarize(rows)
    ro = next(s for s in summary if s["fabric"] == "rail-only" and s["op"] == "allreduce")
    assert ro["ok"] == 1 and ro["failed"] == 1 and ro["median_s"] == 1.0
    assert comparison(summary) == {"allreduce_ratio": 1.0, "alltoall_ratio": pytest.approx(1.1)}
