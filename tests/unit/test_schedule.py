"""Schedules of optical fabrics: generators, strict files, the slot grid and time-flow tables."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from controller.errors import ConfigError
from controller.schedule import (
    CircuitPlan,
    dump_schedule,
    load_schedule,
    one_shot,
    opera,
    parse_schedule,
    round_robin,
    schedule_to_dict,
    slots,
    timeflow,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("racks", range(2, 17))
def test_round_robin_connects_every_pair_once_per_cycle(racks: int) -> None:
    s = round_robin(racks, slice_us=1000, night_us=100)
    for a in range(racks):
        for b in range(racks):
            if a != b:
                assert len(s.connected(a, b)) == 1
    assert s.cycle_us == (racks - 1) * 1100


@pytest.mark.parametrize(("racks", "uplinks"), [(4, 1), (5, 2), (8, 2), (8, 3), (9, 4)])
def test_opera_spreads_the_days_and_staggers_the_nights(racks: int, uplinks: int) -> None:
    s = opera(racks, uplinks=uplinks, slice_us=900, night_us=100)
    days = sorted(m for c in s.circuits for m in c.slices)
    assert days == sorted(round_robin(racks, slice_us=900, night_us=100).circuits[0].slices)
    grid = slots(s)
    # at any slot, at most one circuit switch is dark
    assert all(sum(m is None for m in row) <= 1 for row in grid.active)


def test_at_walks_days_and_nights() -> None:
    s = round_robin(3, slice_us=10, night_us=5)
    seen = [s.at(0, t).index for t in range(0, 30)]
    assert seen == [0] * 10 + [None] * 5 + [1] * 10 + [None] * 5


@pytest.mark.parametrize(("slices", "text"), [
    ([[1, 1, 0]], "not a matching"),
    ([[0, 2, 1]], "connected to itself"),
    ([[1, 0]], "each of the 3 racks"),
    ([[1, 2, 7]], "racks 0..2"),
])
def test_bad_matchings_are_named(slices, text: str) -> None:
    doc = {"name": "x", "kind": "custom", "racks": 3, "slice_us": 10, "night_us": 1,
           "circuits": [{"slices": slices}]}
    with pytest.raises(ConfigError, match=text):
        parse_schedule(doc, "s.yaml")


@pytest.mark.parametrize(("change", "key"), [
    ({"colour": 1}, "colour"), ({"racks": "4"}, "racks"), ({"kind": "rotor"}, "kind"),
    ({"night_us": -1}, "night_us"), ({"circuits": [{"slices": [[1, 0]], "phase": 2}]}, "circuits[0]"),
])
def test_strict_loader_names_the_key(change, key: str) -> None:
    doc = {"name": "x", "kind": "custom", "racks": 2, "slice_us": 10, "night_us": 1,
           "circuits": [{"slices": [[1, 0]]}], **change}
    with pytest.raises(ConfigError) as err:
        parse_schedule(doc, "s.yaml")
    assert err.value.key == key


def test_files_round_trip_and_the_shipped_ones_load(tmp_path: Path) -> None:
    s = opera(6, uplinks=2, slice_us=900, night_us=100)
    dump_schedule(s, tmp_path / "s.yaml")
    assert schedule_to_dict(load_schedule(tmp_path / "s.yaml")) == schedule_to_dict(s)
    for path in (REPO / "topologies" / "schedules").glob("*.yaml"):
        load_schedule(path)
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_schedule(tmp_path / "bin.yaml")


@pytest.mark.parametrize("make", [
    lambda: round_robin(5, slice_us=900, night_us=100),
    lambda: opera(6, uplinks=2, slice_us=900, night_us=100),
])
def test_direct_entries_wait_for_the_first_circuit_to_the_destination(make) -> None:
    s = make()
    grid = slots(s)
    entries = timeflow(s, "direct")
    assert len(entries) == 2 * s.racks * (s.racks - 1) * grid.count
    for e in entries:
        assert e.via == e.dst and e.send >= e.arrival
        assert grid.active[e.send % grid.count][e.uplink][e.tor] == e.dst
        for earlier in range(e.arrival, e.send):  # nothing sooner would have done
            assert all(m is None or m[e.tor] != e.dst for m in grid.active[earlier % grid.count])


def test_vlb_takes_the_first_circuit_and_transit_goes_direct() -> None:
    s = round_robin(5, slice_us=900, night_us=100)
    grid = slots(s)
    entries = timeflow(s, "vlb")
    first = [e for e in entries if not e.transit]
    assert max(e.wait_slots for e in first) <= 1  # at worst, the night
    for e in first:
        assert grid.active[e.send % grid.count][e.uplink][e.tor] == e.via
    assert all(e.via == e.dst for e in entries if e.transit)


def test_one_shot_is_pinned_and_an_unreachable_pair_is_named_unless_pinned() -> None:
    s = one_shot([(1, 0, 3, 2)])
    assert s.at(0, 123456).index == 0 and s.duty_cycle == 1.0 and slots(s).count == 1
    # a pinned topology connects some racks directly; the others get no entry
    assert {(e.tor, e.dst) for e in timeflow(s)} == {(0, 1), (1, 0), (2, 3), (3, 2)}
    assert {(e.tor, e.dst, e.via) for e in timeflow(s, "vlb")} == {(0, 1, 1), (1, 0, 0), (2, 3, 3), (3, 2, 2)}
    rotating = round_robin(4, slice_us=900, night_us=100)
    broken = dataclasses.replace(rotating, circuits=(CircuitPlan(((1, 0, 3, 2),)),))
    with pytest.raises(ConfigError, match="no circuit ever connects rack 0 to rack 2"):
        timeflow(broken)


def test_circuit_switch_rules_cover_every_day_and_circuit() -> None:
    from controller.p4runtime.entities import Range
    from controller.schedule.ocs_rules import CIRCUIT, SLICE_OF_PHASE, circuit_switch_rules

    s = round_robin(4, slice_us=900, night_us=100)
    rules = circuit_switch_rules(s, 0, ports=[5, 6, 7, 8])
    windows = [r.match["meta.phase_us"] for r in rules if r.table == SLICE_OF_PHASE]
    assert windows == [Range(0, 899), Range(1000, 1899), Range(2000, 2899)]
    circuits = {(r.match["meta.slice"].value, r.match["standard_metadata.ingress_port"].value): r.params["port"]
                for r in rules if r.table == CIRCUIT}
    assert len(circuits) == 3 * 4 and circuits[(0, 5)] == 6 and circuits[(2, 5)] == 8
    with pytest.raises(ConfigError, match="one distinct port"):
        circuit_switch_rules(s, 0, ports=[1, 1, 2, 3])


def test_tor_rules_carry_the_time_flow_of_their_rack() -> None:
    from controller.schedule.tor_rules import tor_schedule_rules, tor_static_rules
    from controller.topology import optical

    topo = optical(4, 2, uplinks=1)
    s = round_robin(4, slice_us=900, night_us=100)
    grid = slots(s)
    rules = tor_schedule_rules(topo, s, "tor2", started_at_us=10_000, epoch_us=2_500)
    clock = [r for r in rules if r.is_default]
    assert clock[0].params == {"version": 0, "offset_us": 7_500 % grid.cycle_us, "cycle_us": grid.cycle_us, "hold": 0}
    flows = [r for r in rules if r.table == "TorIngress.timeflow"]
    assert len(flows) == 3 * grid.count * 2
    assert {r.params["port"] for r in flows} == {3}  # hosts on 1..2, the uplink on 3
    mine = {(e.dst, e.arrival, int(e.transit)): e.wait_slots for e in timeflow(s) if e.tor == 2}
    assert {(r.match["meta.rack"].value, r.match["meta.slot"].value, r.match["meta.transit"].value):
            r.params["wait_slots"] for r in flows} == mine
    static = tor_static_rules(topo, "tor2")
    assert sum(r.table == "TorIngress.rack_of" for r in static) == 3
    assert sum(r.table == "TorIngress.ipv4_lpm" for r in static) == 2


def test_shipped_optical_topology_compiles_and_a_wrong_program_is_named() -> None:
    import dataclasses

    from controller.routing import compile_fabric
    from controller.topology import load_topology

    topo = load_topology(REPO / "topologies" / "optical-4x1.yaml")
    rules = compile_fabric(topo)
    assert rules["tor0"].rules and not rules["ocs0"].rules
    bad = dataclasses.replace(topo, switches=tuple(
        dataclasses.replace(s, program="rail_switch") if s.name == "tor1" else s for s in topo.switches))
    with pytest.raises(ConfigError, match="switch tor1: an optical fabric's tor runs tor_switch"):
        compile_fabric(bad)
