"""The rotor experiment's pure side: the plan, the expectations walked from the ToRs'
time-flow entries, the per-run analysis by path, aggregation and the tables."""

from __future__ import annotations

import dataclasses
import math

import pytest

from controller.errors import ConfigError
from controller.experiments.rotor import (
    Point,
    RotorConfig,
    capacity,
    expected_delivered,
    light_load,
    pattern_pairs,
    plan,
    schedule_of,
)
from controller.experiments.rotor_analysis import (
    aggregate,
    allreduce_expectation,
    analyze_run,
    expectations,
    mean_sd,
    summarize_allreduce,
)
from controller.experiments.rotor_report import REFERENCES, report
from controller.schedule import round_robin

SCHED = round_robin(4, slice_us=32_000, night_us=3_200)
DUTY = 32 / 35.2


def _point(**kw) -> Point:
    base = {"sweep": "patterns", "slice_us": 32_000, "night_us": 3_200, "pattern": "hot-pair",
            "routing": "direct", "calendar": "hold"}
    return Point(**{**base, **kw})


# -- plan -------------------------------------------------------------------------------------


def test_default_plan_sweeps_patterns_slices_and_duty_cycles() -> None:
    points = plan(RotorConfig())
    assert len(points) == len(set(points)) == 19
    shapes = {p.shape for p in points}
    assert shapes == {(32_000, 3_200), (16_000, 1_600), (64_000, 6_400), (32_000, 8_000), (32_000, 16_000),
                      (32_000, 32_000)}
    ref = [p for p in points if p.sweep == "patterns"]
    assert {(p.pattern, p.routing, p.calendar) for p in ref} == {
        (pat, r, "hold") for pat in ("hot-pair", "permutation", "all-to-all") for r in ("direct", "vlb")
    } | {(pat, "direct", "drop") for pat in ("hot-pair", "permutation", "all-to-all")}
    assert all(p.pattern == "hot-pair" for p in points if p.sweep != "patterns")
    assert sorted(round(p.duty, 3) for p in points if p.sweep == "duty" and p.routing == "direct") == [0.5, 0.667, 0.8]


def test_bmv2_plan_has_no_calendar_queues_and_no_duplicates() -> None:
    points = plan(RotorConfig(target="bmv2"))
    assert {p.calendar for p in points} == {"drop"}
    assert len(points) == len(set(points)) == 16  # the direct/drop duplicates are gone


def test_the_reference_shape_is_not_measured_twice() -> None:
    points = plan(RotorConfig(slices_ms=(32.0,), nights_ms=(3.2,), patterns=("hot-pair",)))
    assert {p.sweep for p in points} == {"patterns"}
    assert len(points) == 3


@pytest.mark.parametrize(("change", "key"), [
    ({"racks": 3}, "racks"),
    ({"target": "tofino"}, "target"),
    ({"levels": (0.5, 0.25)}, "levels"),
    ({"levels": (0.5, 1.5)}, "levels"),
    ({"patterns": ("hot-pair", "incast")}, "patterns"),
    ({"slices_ms": (0.5,)}, "slices_ms"),
    ({"allreduce_bytes": 1000}, "allreduce_bytes"),
    ({"nights_ms": ()}, "nights_ms"),
])
def test_bad_configuration_names_the_key(change: dict, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        RotorConfig(**change).validate()
    assert err.value.key == key


def test_a_slot_grid_too_fine_to_install_is_rejected_up_front() -> None:
    with pytest.raises(ConfigError, match="slots per cycle"):
        RotorConfig(slices_ms=(32.001,), night_fraction=0.1).validate()


def test_line_rate_in_datagrams() -> None:
    assert RotorConfig(rate_mbps=3.0, payload_bytes=1200).line_pps == pytest.approx(3e6 / 8 / 1242)


def test_patterns() -> None:
    assert pattern_pairs("permutation", 5) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]
    assert len(pattern_pairs("all-to-all", 5)) == 20
    with pytest.raises(ConfigError):
        pattern_pairs("incast", 4)


# -- expectations -----------------------------------------------------------------------------


def test_capacity_is_rotornets_argument_for_four_racks() -> None:
    cap = {(p, r): capacity(p, r, "hold", SCHED) for p in ("hot-pair", "permutation", "all-to-all")
           for r in ("direct", "vlb")}
    assert cap[("hot-pair", "direct")] == pytest.approx(DUTY / 3)
    assert cap[("permutation", "direct")] == pytest.approx(DUTY / 3)
    assert cap[("all-to-all", "direct")] == pytest.approx(DUTY)  # uniform: every day is busy
    assert cap[("hot-pair", "vlb")] == pytest.approx(DUTY)  # the idle intermediates carry it
    # every source sending: (2N-3)/(N-1) circuits per packet, whatever the pattern
    assert cap[("permutation", "vlb")] == cap[("all-to-all", "vlb")] == pytest.approx(DUTY * 3 / 5)


def test_vlb_tends_to_half_for_many_racks() -> None:
    big = round_robin(16, slice_us=1000, night_us=0)
    assert capacity("permutation", "vlb", "hold", big) == pytest.approx(15 / 29)


def test_without_calendar_queues_only_packets_that_arrive_in_their_day_pass() -> None:
    assert capacity("hot-pair", "direct", "drop", SCHED) == pytest.approx(DUTY / 3, abs=0.01)
    assert capacity("all-to-all", "direct", "drop", SCHED) == pytest.approx(DUTY / 3, abs=0.01)
    # with four racks a two-hop path never has both circuits up in the same day
    assert capacity("hot-pair", "vlb", "drop", SCHED) == pytest.approx(DUTY / 3, abs=0.01)


def test_light_load_waits_follow_the_schedule() -> None:
    held = light_load(SCHED, "direct", "hold", 0, 1)
    assert held.delivered == 1.0 and held.circuit_hops == 1.0
    cycle_ms = 3 * 35.2
    assert max(held.delays_us) / 1000 == pytest.approx(cycle_ms - 32, abs=3.3)  # just after the day ends
    assert held.percentile(0) == 0.0  # a packet arriving in day 0 leaves at once
    dropped = light_load(SCHED, "direct", "drop", 0, 1)
    assert dropped.delivered == pytest.approx(DUTY / 3, abs=0.01)
    assert set(dropped.delays_us) == {0.0}


def test_vlb_crosses_more_circuits_but_waits_as_long_with_four_racks() -> None:
    direct = light_load(SCHED, "direct", "hold", 0, 1)
    vlb = light_load(SCHED, "vlb", "hold", 0, 1)
    assert vlb.circuit_hops == pytest.approx(5 / 3)
    # day 1 via rack 2 arrives a day earlier, day 2 via rack 3 a day later: the same mean
    assert sum(vlb.delays_us) == pytest.approx(sum(direct.delays_us))
    assert vlb.delays_us != direct.delays_us


def test_expected_delivered() -> None:
    assert [expected_delivered(lv, 0.3, "hold") for lv in (0.1, 0.3, 1.0)] == [0.1, 0.3, 0.3]
    assert [expected_delivered(lv, 0.3, "drop") for lv in (0.1, 1.0)] == pytest.approx([0.03, 0.3])


def test_expectations_of_a_point() -> None:
    cfg = RotorConfig()
    e = expectations(_point(), cfg)
    assert e["throughput"] == pytest.approx(DUTY / 3)
    assert e["per_level"] == pytest.approx([0.1, 0.25, DUTY / 3, DUTY / 3, DUTY / 3])
    # 30% of arrivals leave at once, the rest wait uniformly up to the cycle minus the day
    assert e["delay_p50_ms"] == pytest.approx(20.8, abs=0.5) and e["delay_p99_ms"] == pytest.approx(72.3, abs=0.5)
    bmv2 = expectations(_point(calendar="drop"), dataclasses.replace(cfg, target="bmv2"))
    assert bmv2["probe_delivered"] == pytest.approx(DUTY / 3, abs=0.01)
    assert bmv2["per_level"][-1] == pytest.approx(DUTY / 3, abs=0.01) and bmv2["delay_p99_ms"] == 0.0


# -- analysis ---------------------------------------------------------------------------------


def _rows(level: int, n: int, ttl: int, *, src: int = 0, start_seq: int = 0, delay: float = 0.01) -> list[list[float]]:
    return [[src, start_seq + i, level, 10.0 + i, 10.0 + i + delay, ttl] for i in range(n)]


def test_analysis_counts_on_path_and_detours_per_level() -> None:
    rows = _rows(0, 10, 62) + _rows(1, 30, 62, start_seq=10) + _rows(1, 20, 61, start_seq=40)
    rows += rows[:5]  # duplicates count once
    r = analyze_run(_point(), [0.1, 1.0], {0: [10, 100]}, rows)
    assert r["sent"] == [10, 100]
    assert r["on_path"] == pytest.approx([0.1, 0.3])
    assert r["detour"] == pytest.approx([0.0, 0.2])
    assert r["throughput"] == pytest.approx(0.3)
    assert r["probe_delivered"] == 1.0
    assert r["delay_p50_ms"] == pytest.approx(10.0)
    assert r["detour_share_top"] == pytest.approx(0.4)


def test_vlb_two_circuits_are_on_its_path_three_are_not() -> None:
    rows = _rows(0, 5, 61) + _rows(0, 5, 60, start_seq=5)
    r = analyze_run(_point(routing="vlb"), [0.5], {0: [10]}, rows)
    assert r["probe_delivered"] == 0.5 and r["detour"] == pytest.approx([0.25])


def test_several_sources_share_the_normalisation() -> None:
    rows = _rows(0, 10, 62, src=0) + _rows(0, 5, 62, src=1)
    r = analyze_run(_point(pattern="permutation"), [1.0], {0: [10], 1: [10]}, rows)
    assert r["throughput"] == pytest.approx(0.75)  # 15 of 20 sent: per source, of its link


def test_nothing_received_gives_nan_delays_not_an_error() -> None:
    r = analyze_run(_point(), [0.1, 1.0], {0: [10, 100]}, [])
    assert r["throughput"] == 0.0 and math.isnan(r["delay_p50_ms"])


def test_mean_sd() -> None:
    assert mean_sd([0.3]) == (0.3, 0.0, 1)
    m, sd, n = mean_sd([0.2, 0.4, float("nan")])
    assert (m, n) == (pytest.approx(0.3), 2) and sd == pytest.approx(0.1414, abs=1e-3)


def test_aggregate_gives_mean_and_spread_per_point() -> None:
    cfg = RotorConfig(levels=(0.1, 1.0))
    p, q = _point(), _point(routing="vlb")
    runs = [analyze_run(p, cfg.levels, {0: [10, 100]}, _rows(0, 10, 62) + _rows(1, n, 62, start_seq=10))
            for n in (28, 30, 32)]
    rows = aggregate([p, q], runs, cfg)
    assert [r["point"] for r in rows] == [p.key()]  # q never ran
    (row,) = rows
    assert row["repetitions"] == 3
    assert row["throughput"] == pytest.approx(0.30) and row["throughput_sd"] == pytest.approx(0.02)
    assert row["expected"]["throughput"] == pytest.approx(DUTY / 3)
    assert row["on_path"] == pytest.approx([0.1, 0.3])


def test_allreduce_expectation_and_summary() -> None:
    cfg = RotorConfig()
    direct = allreduce_expectation(cfg, _point())
    vlb = allreduce_expectation(cfg, _point(routing="vlb"))
    assert vlb["capacity"] > direct["capacity"]  # the ring is a permutation
    assert direct["estimate_s"] == pytest.approx(direct["bandwidth_s"] + direct["wait_s"])
    assert direct["bandwidth_s"] > vlb["bandwidth_s"] > 0
    assert direct["note"] == ""
    drop = allreduce_expectation(cfg, _point(calendar="drop"))
    assert math.isnan(drop["estimate_s"]) and "cannot even connect" in drop["note"]
    summary = summarize_allreduce([{"routing": "direct", "ok": True, "seconds": 2.0},
                                   {"routing": "direct", "ok": False, "seconds": float("nan")}])
    assert summary[0]["ok"] == 1 and summary[0]["failed"] == 1 and summary[0]["mean_s"] == 2.0


# -- report -----------------------------------------------------------------------------------


def test_report_shows_spread_expectations_and_sources() -> None:
    cfg = RotorConfig(levels=(0.1, 1.0))
    p = _point()
    runs = [analyze_run(p, cfg.levels, {0: [10, 100]}, _rows(0, 10, 62) + _rows(1, 30, 62, start_seq=10))]
    rows = aggregate([p], runs, cfg)
    text = report(cfg, rows, summarize_allreduce([{"routing": "direct", "ok": True, "seconds": 2.0}]),
                  {"direct": allreduce_expectation(cfg, p)}, interrupted="stopped by SIGTERM")
    assert "0.30 ± 0.00" in text and "INTERRUPTED: stopped by SIGTERM" in text
    assert "Ring all-reduce of 384 KiB" in text
    assert "duty 0.5..0.91, 10 Mb/s links" in text  # the run's own rate, not a fixed one
    assert "TritonNetworking/rotornet" in text and "mpi-ncs/openoptics" in text
    assert {r["system"] for r in REFERENCES} == {"RotorNet (SIGCOMM'17)", "OpenOptics (NSDI'26)"}
    assert all(r["source"] for r in REFERENCES)


def test_schedule_of_a_point() -> None:
    s = schedule_of(_point(night_us=16_000), 5)
    assert (s.racks, s.slice_us, s.night_us, len(s.circuits[0].slices)) == (5, 32_000, 16_000, 4)
