"""Fidelity verdicts: a comparison is decided only when every interval it rests on held."""

from __future__ import annotations

import json

from controller.experiments.cpu_use import CpuUse, cpu_row
from controller.experiments.fidelity import (
    UNDECIDED,
    FidelityLimits,
    judge,
    undecided_note,
    verdicts_json,
)


def _row(machine: float, switch: float, name: str = "rail0") -> dict:
    return cpu_row(CpuUse({name: switch, "other": switch / 2}, machine, 2))


def test_a_comparison_within_the_limits_is_decided_and_says_its_finding() -> None:
    v = judge("allreduce", "rail-only is even", [_row(0.4, 0.3), _row(0.59, 0.84)])
    assert v.decided and v.text() == "rail-only is even" and v.intervals == 2 and v.failed == 0


def test_one_busy_interval_makes_the_comparison_undecided_and_names_the_monitor() -> None:
    v = judge("alltoall", "rail-only is faster", [_row(0.4, 0.3), _row(0.97, 0.3), _row(0.7, 0.9, "leaf1")])
    assert not v.decided and v.failed == 2
    assert v.text().startswith(UNDECIDED)
    assert "machine CPU 97% > 60%" in v.text() and "switch CPU leaf1 90% of a core > 85%" in v.text()
    assert "in 2 of 3 intervals" in v.text()


def test_no_measured_interval_decides_nothing() -> None:
    v = judge("alltoall", "rail-only is faster", [{"machine_cpu": None}, {}])
    assert not v.decided and "no interval was measured" in v.text()


def test_limits_are_configurable_and_summary_json_is_machine_readable() -> None:
    limits = FidelityLimits(machine=0.99, switch=0.99)
    verdicts = [judge("a", "even", [_row(0.97, 0.9)], limits), judge("b", "faster", [_row(0.97, 0.9)])]
    data = json.loads(json.dumps(verdicts_json(verdicts, limits)))
    assert data["limits"] == {"machine_cpu": 0.99, "switch_cpu": 0.99} and data["all_decided"] is False
    assert [v["decided"] for v in data["verdicts"]] == [True, False]
    assert data["verdicts"][1]["finding"] is None and data["verdicts"][1]["figures_say"] == "faster"
    assert {b["monitor"] for b in data["verdicts"][1]["breaches"]} == {"machine CPU", "switch CPU"}
    assert undecided_note(verdicts) == "\nundecided (b): the emulation ran out of room"
