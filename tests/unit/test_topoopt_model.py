"""The TopoOpt model at the paper's scale (pure)."""

from __future__ import annotations

import dataclasses

import pytest

from controller.errors import ConfigError
from controller.models.topoopt import COST_RATIO, WORKLOADS, Workload, iteration, mean_route_length
from controller.models.topoopt_report import model_rows


def test_a_pure_all_reduce_job_gains_exactly_the_cost_ratio_when_nothing_hides_the_network() -> None:
    r = iteration(Workload("ar", 0.0, 1000.0, 0.0), n=128, d=4)
    assert r["speedup_vs_fat_tree"] == pytest.approx(COST_RATIO) and r["tax"] == 1.0
    assert r["topoopt_ms"] == pytest.approx(r["ideal_ms"])  # d mutable rings = the ideal switch


def test_all_to_all_pays_the_route_length_and_compute_dilutes_every_gain() -> None:
    a2a = Workload("a2a", 0.0, 0.0, 100.0)
    r = iteration(a2a, n=128, d=4)
    assert r["tax"] == pytest.approx(mean_route_length(128, 4))
    assert r["speedup_vs_fat_tree"] == pytest.approx(COST_RATIO / r["route_length"])
    # at d = 4 a route is longer (4.7 circuits) than the cost ratio: pure all-to-all loses to
    # the fat-tree of similar cost, and compute pulls the ratio towards 1
    slow = iteration(dataclasses.replace(a2a, compute_ms=500.0), n=128, d=4)
    assert r["speedup_vs_fat_tree"] < slow["speedup_vs_fat_tree"] < 1.0
    assert mean_route_length(128, 8) < mean_route_length(128, 4)
    for row in model_rows():
        assert row["speedup_vs_fat_tree"] <= COST_RATIO + 1e-9


def test_bad_parameters_are_named() -> None:
    with pytest.raises(ConfigError, match="overlap"):
        iteration(WORKLOADS[0], n=128, d=4, overlap=1.0)
