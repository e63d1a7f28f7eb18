"""Fidelity verdicts: a comparison is decided only when every interval it rests on held."""

from __future__ import annotations

import json

from controller.experiments.cpu_use import CpuUse, cpu_row
from controller.experiments.fidelity import (
    UNDECIDED,
    FidelityLimits,
    Runs,
    judge,
    undecided_note,
    verdicts_json,
)
from controller.experiments.link_rate import LinkUse, QueueSample, link_use

#: two configurations with every run successful: only the monitors decide here
RUNS = (Runs("a", 3, 3), Runs("b", 3, 3))


def _row(machine: float, switch: float, name: str = "rail0") -> dict:
    return cpu_row(CpuUse({name: switch, "other": switch / 2}, machine, 2))


def test_a_comparison_within_the_limits_is_decided_and_says_its_finding() -> None:
    v = judge("allreduce", "rail-only is even", [_row(0.4, 0.3), _row(0.59, 0.84)], runs=RUNS)
    assert v.decided and v.text() == "rail-only is even" and v.intervals == 2 and v.failed == 0


def test_one_busy_interval_makes_the_comparison_undecided_and_names_the_monitor() -> None:
    v = judge("alltoall", "rail-only is faster", [_row(0.4, 0.3), _row(0.97, 0.3), _row(0.7, 0.9, "leaf1")], runs=RUNS)
    assert not v.decided and v.failed == 2
    assert v.text().startswith(UNDECIDED)
    assert "machine CPU 97% > 60%" in v.text() and "switch CPU leaf1 90% of a core > 85%" in v.text()
    assert "in 2 of 3 intervals" in v.text()


def test_no_measured_interval_decides_nothing() -> None:
    v = judge("alltoall", "rail-only is faster", [{"machine_cpu": None}, {}], runs=RUNS)
    assert not v.decided and "no interval was measured" in v.text()


def test_limits_are_configurable_and_summary_json_is_machine_readable() -> None:
    limits = FidelityLimits(machine=0.99, switch=0.99)
    verdicts = [judge("a", "even", [_row(0.97, 0.9)], limits, runs=RUNS), judge("b", "faster", [_row(0.97, 0.9)], runs=RUNS)]
    data = json.loads(json.dumps(verdicts_json(verdicts, limits)))
    assert data["limits"] == {"machine_cpu": 0.99, "switch_cpu": 0.99, "link_carried": 0.9,
                              "link_overshoot": 1.05} and data["all_decided"] is False
    assert [v["decided"] for v in data["verdicts"]] == [True, False]
    assert data["verdicts"][1]["finding"] is None and data["verdicts"][1]["figures_say"] == "faster"
    assert {b["monitor"] for b in data["verdicts"][1]["breaches"]} == {"machine CPU", "switch CPU"}
    assert undecided_note(verdicts) == "\nundecided (b): the emulation ran out of room"


def _links(carried: float | None, overshoot: float | None) -> dict:
    row = _row(0.3, 0.2)
    row.update(cpu_row(CpuUse({}, 0.3, 2, LinkUse("h0-eth0" if carried else None, carried, "rail0-eth1",
                                                    overshoot, int(carried is not None), 8))))
    return row


def test_a_backlogged_link_short_of_its_rate_makes_the_comparison_undecided_and_the_worst_is_the_lowest() -> None:
    v = judge("alltoall", "rail-only is faster", [_links(0.99, 1.0), _links(0.85, 1.0), _links(0.6, 1.0)], runs=RUNS)
    assert not v.decided and v.failed == 2
    assert [b.monitor for b in v.worst] == ["link rate"] and v.worst[0].measured == 0.6
    assert "link rate h0-eth0 carried 60% of its rate while busy < 90%" in v.text()


def test_a_link_sending_over_its_rate_is_a_breach_and_links_not_judged_are_not() -> None:
    assert judge("a", "even", [_links(None, 1.04), _links(0.95, 0.5)], runs=RUNS).decided
    v = judge("a", "even", [_links(None, 1.3), _links(None, 1.1)], runs=RUNS)
    assert not v.decided and v.worst[0].monitor == "link overshoot" and v.worst[0].measured == 1.3


def test_link_use_judges_only_long_busy_stretches_and_only_links_busy_long_enough() -> None:
    # 10 Mbit/s: 62,500 B per 50 ms. Queued full for 0.3 s (6 periods), sending its rate
    full = [QueueSample(0.05 * i, 62_500 * i, 9, 200_000) for i in range(7)]
    assert link_use({"a": full}, {"a": 1e7}).carried == 1.0
    # a day's burst released at once, sent in a few ms, then idle (on-off traffic): not judged
    burst = [QueueSample(0.05 * i, 50_000 * (i > 0), 3 * (i == 0), 50_000 * (i == 0)) for i in range(7)]
    assert link_use({"a": burst}, {"a": 1e7}).carried is None
    # full for 0.15 s only: three periods, too short a stretch to judge
    assert link_use({"a": full[:4]}, {"a": 1e7}, min_backlogged_s=0.1).carried is None
    # a queue that stays full drained at 6 Mbit/s
    slow = [QueueSample(0.05 * i, 37_500 * i, 9, 300_000) for i in range(7)]
    assert link_use({"a": slow}, {"a": 1e7}).carried == 0.6
    # a link without a configured rate, or one sample, is not a link the monitor knows
    assert link_use({"a": full, "b": full[:1]}, {"b": 1e7}).links == 0
