"""The consistent reconfiguration's plan: what each switch gets in prepare and commit (pure)."""

from __future__ import annotations

import pytest

from controller.errors import ConfigError
from controller.p4runtime.entities import Exact, Range
from controller.reconfigure import END_OF_TIME, FlipTimes, commit_rules, flip_times, prepare_rules
from controller.schedule import one_shot, round_robin, slots, strobe_matching, timeflow
from controller.topology import optical

TS = "standard_metadata.ingress_global_timestamp"


def test_flip_times_put_the_circuit_flip_inside_the_guard() -> None:
    t = flip_times(5_000.0, lead_us=20_000, guard_us=3_000)
    assert (t.cut_us, t.ocs_flip_us, t.epoch_us, t.guard_us) == (25_000, 26_500, 28_000, 3_000)
    assert t.cut_us < t.ocs_flip_us < t.epoch_us
    with pytest.raises(ConfigError, match="guard_us"):
        flip_times(0, lead_us=1, guard_us=1)


def test_prepare_writes_only_the_new_version_and_the_flip_entries() -> None:
    topo = optical(4, 1, uplinks=1)
    s = round_robin(4, slice_us=900, night_us=100)
    tor = prepare_rules(topo, topo.switch("tor1"), s, circuit=-1, version=1)
    versioned = [r for r in tor if "meta.version" in r.match]
    assert versioned and all(r.match["meta.version"] == Exact(1) for r in versioned)
    flips = [r for r in tor if r.table == "TorIngress.timeflow_flip"]
    # one per (destination, transit): the entries of a packet arriving at the new epoch (slot 0)
    at_epoch = {(e.dst, int(e.transit)): e for e in timeflow(s) if e.tor == 1 and e.arrival == 0}
    assert {(r.match["meta.rack"].value, r.match["meta.transit"].value) for r in flips} == set(at_epoch)
    for r in flips:  # one more slot than the entry's own wait: a ToR without calendar queues drops it
        e = at_epoch[(r.match["meta.rack"].value, r.match["meta.transit"].value)]
        assert r.params["wait_slots"] == e.wait_slots + 1
        assert r.params["wait_us"] == e.wait_slots * slots(s).slot_us
    ocs = prepare_rules(topo, topo.switch("ocs0"), s, circuit=0, version=1)
    assert ocs and all(r.match["meta.version"] == Exact(1) for r in ocs)


def test_commit_switches_each_role_at_its_instant_on_its_own_clock() -> None:
    topo = optical(4, 1, uplinks=1)
    s = round_robin(4, slice_us=900, night_us=100)
    times = FlipTimes(cut_us=50_000, ocs_flip_us=51_000, epoch_us=52_000)
    started = 1_234.4  # the switch's clock read 0 then, on the controller's
    (ocs_clock,) = commit_rules(topo, topo.switch("ocs0"), s, circuit=0, version=1, started_at_us=started,
                                times=times)
    assert ocs_clock.match[TS] == Range(51_000 - 1_234, END_OF_TIME)
    assert ocs_clock.params["version"] == 1
    # the new schedule's phase is 0 at the new epoch: (local epoch + offset) is a whole cycle
    assert (52_000 - 1_234 + ocs_clock.params["offset_us"]) % ocs_clock.params["cycle_us"] == 0
    clock, before, between = commit_rules(topo, topo.switch("tor3"), s, circuit=-1, version=1,
                                          started_at_us=started, times=times, hold=True)
    assert clock.match[TS] == Range(52_000 - 1_234, END_OF_TIME) and clock.params["hold"] == 1
    assert before.match[TS] == Range(0, 50_000 - 1_234 - 1)
    assert before.params == {"cut_us": 50_000 - 1_234, "next_epoch_us": 52_000 - 1_234}
    assert between.match[TS] == Range(50_000 - 1_234, 52_000 - 1_234 - 1)
    # the ranges tile the switch's time: nothing uncovered, nothing twice
    assert before.match[TS].high + 1 == between.match[TS].low and between.match[TS].high + 1 == clock.match[TS].low


def test_a_flip_the_switch_has_already_passed_is_refused() -> None:
    topo = optical(3, 1, uplinks=1)
    with pytest.raises(ConfigError, match="not ahead"):
        commit_rules(topo, topo.switch("tor0"), one_shot([strobe_matching(3, 0)]), circuit=-1, version=0,
                     started_at_us=10_000, times=FlipTimes(9_000, 9_500, 10_000))


def test_a_one_shot_target_pins_the_circuit_switches() -> None:
    topo = optical(3, 1, uplinks=1)
    (clock,) = commit_rules(topo, topo.switch("ocs0"), one_shot([strobe_matching(3, 1)]), circuit=0, version=0,
                            started_at_us=0, times=FlipTimes(100, 200, 300))
    assert clock.action == "OcsIngress.pin" and clock.params == {"version": 0, "slice": 0}
