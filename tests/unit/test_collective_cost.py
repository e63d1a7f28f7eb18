"""The main job's cost rows in ``make bench``: CPU per emulated GB from the experiment's own
rows, and which run counts as held (pure parts; the runs themselves are the bench's)."""

from __future__ import annotations

import os

import pytest

from bench.collective_cost import _held, alltoall_cost


def _r(fabric: str, op: str, seconds: float, machine: float, **extra: str) -> dict[str, str]:
    return {"fabric": fabric, "op": op, "ok": "True", "seconds": str(seconds), "machine_cpu": str(machine),
            "workers_cores": "1.0", "switches_cores": "0.2", "rest_cores": "0.3", **extra}


def test_the_alltoall_cost_is_busy_cpu_over_the_bytes_delivered_between_gpus() -> None:
    summary = {"config": {"gpus": 16, "alltoall_bytes": 2_000_000}}  # 15 x 2 MB = 0.03 GB delivered
    rows = [_r("fat-tree", "alltoall", 0.6, 0.5), _r("fat-tree", "alltoall", 0.6, 0.5),
            _r("fat-tree", "allreduce", 9.0, 0.9), _r("rail-only", "hier_alltoall", 0.3, 0.4)]
    cost = alltoall_cost(summary, rows)
    cores = os.cpu_count() or 1
    assert cost["fat-tree"]["machine_cpu_s_per_gb"] == pytest.approx(0.5 * cores * 0.6 / 0.03)
    assert cost["fat-tree"]["workers_cpu_s_per_gb"] == pytest.approx(1.0 * 0.6 / 0.03)
    assert cost["rail-only"]["rest_cpu_s_per_gb"] == pytest.approx(0.3 * 0.3 / 0.03)


def test_a_run_holds_only_when_no_collective_broke_a_limit_and_the_worst_breach_is_named() -> None:
    assert _held([_r("fat-tree", "alltoall", 1, 0.5)]) == (True, "")
    held, why = _held([_r("fat-tree", "alltoall", 1, 0.65), _r("fat-tree", "alltoall", 1, 0.9)])
    assert not held and why == "machine CPU 90% > 60%"
    held, why = _held([_r("fat-tree", "alltoall", 1, 0.5, link_carried="0.7", slowest_link="s0-eth1")])
    assert not held and "link rate s0-eth1 carried 70%" in why
