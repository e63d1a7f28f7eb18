"""Consistent reconfiguration of a running optical fabric under load (Python target, calendar
queues): a path moved to another circuit switch while a host streams over it loses nothing;
a rotating schedule replaced by another rules from the new epoch on; a switch that rejects
its part leaves every switch as it was."""

from __future__ import annotations

import pytest

from controller.emulation import load_emulation_module
from controller.errors import ReconfigurationError
from controller.install import pipeline_schema
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.entities import Range, TableRule, decode_rule, rule_key
from controller.reconfigure import prepare_rules
from controller.reconfigure.apply import reconfigure
from controller.schedule import one_shot, round_robin, slots, strobe_matching
from controller.topology import optical

# schedule changes under traffic (the two tests marked both_engines) run a second time on the Python engine
# in make test; the others are the controller's (commit, roll-back, CLI, signals) and engine-blind

fabric_net = load_emulation_module("fabric_net")
udp_probe_run = load_emulation_module("udp_probe_run")

#: 4 racks, 3 circuit switches, each pinned to one strobe day: every rack reaches every other
#: one directly. The new configuration permutes the days, so rack 0 -> rack 2 moves from
#: circuit switch 1 to circuit switch 0 while the old circuits are torn down
PINNED = one_shot([strobe_matching(4, d) for d in (0, 1, 2)], name="pinned")
PERMUTED = one_shot([strobe_matching(4, d) for d in (1, 2, 0)], name="permuted")
#: rotating schedules: the old one's days are twice as long
OLD = round_robin(4, slice_us=40_000, night_us=4_000, name="old")
NEW = round_robin(4, slice_us=20_000, night_us=2_000, name="new")
#: the ToRs send nothing in the first and last 3 ms of a day, so that a packet crosses its
#: circuit in its day despite latency and skew on a loaded 2-core machine
MARGIN_US = 3_000


def _fabric(target: str, schedule, uplinks: int, **options):
    if target != "python":
        pytest.skip("a packet that waits for the new configuration is held in a calendar queue (a Python-target "
                    "extension); BMv2 drops it (make bench measures what that costs)")
    return fabric_net.EmulatedFabric(optical(4, 1, uplinks=uplinks, rate_mbps=None), target="python", shape=False,
                                     publish=False, schedule=schedule, calendar_queues=True,
                                     switch_args=("--queue-depth", "4000"), **options)


def _entries(fab, name: str) -> list[TableRule]:
    sw = fab.live.switch(name)
    schema = pipeline_schema(sw.program)[0]
    with P4RuntimeClient(sw.grpc, device_id=sw.device_id, election_id=0).connect() as c:
        return [decode_rule(schema, e) for e in c.read_table_entries()]


def _crossed(fab, name: str, port: int) -> int:
    sw = fab.live.switch(name)
    schema = pipeline_schema(sw.program)[0]
    with P4RuntimeClient(sw.grpc, device_id=sw.device_id, election_id=0).connect() as c:
        return sum(e.data.packet_count for e in c.read_counter(schema.counter("port_rx").id, port))


def _clock(fab, name: str) -> TableRule:
    sw = fab.live.switch(name)
    schema = pipeline_schema(sw.program)[0]
    with P4RuntimeClient(sw.grpc, device_id=sw.device_id, election_id=0).connect() as c:
        table = "TorIngress.clock" if sw.role == "tor" else "OcsIngress.clock"
        return decode_rule(schema, c.read_default_entry(schema.table(table).id))


def _only_version_1_is_left(fab, names) -> None:
    for name in names:
        rules = _entries(fab, name)
        versions = {r.match["meta.version"].value for r in rules if "meta.version" in r.match}
        assert versions == {1}, f"{name} keeps versions {versions}"
        assert not [r for r in rules if r.table.endswith(("clock", "flip", "timeflow_flip"))], name


@pytest.mark.both_engines
def test_a_path_moved_to_another_circuit_switch_under_load_loses_nothing(target_name: str) -> None:
    done = {}
    with _fabric(target_name, PINNED, uplinks=3) as fab:
        def change() -> None:
            done["r"] = reconfigure(fab.live, PERMUTED)

        start = _crossed(fab, "ocs1", 1), _crossed(fab, "ocs0", 1)
        sent, got = udp_probe_run.probe(fab, "h0_0", "h2_0", "10.200.2.1", seconds=2.0, gap=0.001, idle=1.5,
                                        during=change, during_at=0.8)
        old_path, new_path = _crossed(fab, "ocs1", 1) - start[0], _crossed(fab, "ocs0", 1) - start[1]
        _only_version_1_is_left(fab, ("tor0", "ocs0", "ocs1"))
    r = done["r"]
    assert r.version == 1 and len(r.switches) == 7 and not r.late, r
    assert {n for n, _ in got} == set(range(len(sent))), f"lost {len(sent) - len(got)} of {len(sent)} packets"
    # rack 0 -> 2 crossed circuit switch 1 until the flip, then circuit switch 0
    assert old_path > 300 and new_path > 300 and old_path + new_path == len(sent), (old_path, new_path, len(sent))


@pytest.mark.both_engines
def test_a_rotating_schedule_replaced_under_load_leaves_exactly_the_new_one(target_name: str) -> None:
    """What each switch holds afterwards is the new schedule compiled under version 1, and
    its clock runs the new cycle (that a clocked fabric forwards as its entries say is
    test_optical_fabric's)."""
    done = {}
    with _fabric(target_name, OLD, uplinks=1, margin_us=MARGIN_US) as fab:
        def change() -> None:
            done["r"] = reconfigure(fab.live, NEW, margin_us=MARGIN_US)

        sent, got = udp_probe_run.probe(fab, "h0_0", "h1_0", "10.200.1.1", seconds=2.0, gap=0.004, idle=2.0,
                                        during=change, during_at=0.8)
        held = {name: _entries(fab, name) for name in ("tor0", "ocs0")}
        clocks = {name: _clock(fab, name) for name in ("tor0", "ocs0")}
    r = done["r"]
    assert r.version == 1 and r.finished_ms is not None and r.collected_ms is not None and not r.late
    assert len(got) > 0.8 * len(sent), "traffic kept flowing"
    for name, rules in held.items():
        sw = fab.live.switch(name)
        want = prepare_rules(fab.live, sw, NEW, circuit=0 if sw.role == "ocs" else -1, version=1, margin_us=MARGIN_US)
        want_keys = {rule_key(w) for w in want if w.table != "TorIngress.timeflow_flip"}
        have_keys = {rule_key(h) for h in rules if "meta.version" in h.match}
        assert have_keys == want_keys, f"{name}: {len(have_keys ^ want_keys)} entries differ from the new schedule's"
        assert clocks[name].params["version"] == 1
        assert clocks[name].params["cycle_us"] == slots(NEW, MARGIN_US).cycle_us


def test_a_switch_that_rejects_its_commit_rolls_every_switch_back(target_name: str) -> None:
    with _fabric(target_name, PINNED, uplinks=3) as fab:
        tor2 = fab.live.switch("tor2")
        schema = pipeline_schema(tor2.program)[0]
        # tor2's flip table (4 entries) is full of entries for instants long past: harmless for
        # traffic, but its commit cannot be inserted
        stray = [TableRule("TorIngress.flip", {"standard_metadata.ingress_global_timestamp": Range(k, k)},
                           "NoAction", {}, priority=1) for k in range(1, 5)]
        with P4RuntimeClient(tor2.grpc, device_id=tor2.device_id, election_id=0).connect() as c:
            c.write_rules(schema, "insert", stray)
        before = {s.name: _entries(fab, s.name) for s in fab.live.switches if s.name != "tor2"}
        with pytest.raises(ReconfigurationError, match=r"tor2 rejected its part.*rolled back on all 7 switches"):
            reconfigure(fab.live, PERMUTED)
        after = {s.name: _entries(fab, s.name) for s in fab.live.switches}
        start = _crossed(fab, "ocs1", 1), _crossed(fab, "ocs0", 1)
        sent, got = udp_probe_run.probe(fab, "h0_0", "h2_0", "10.200.2.1", seconds=0.5, idle=1.0)
        old_path, new_path = _crossed(fab, "ocs1", 1) - start[0], _crossed(fab, "ocs0", 1) - start[1]
    for name, rules in before.items():
        assert sorted(map(repr, after[name])) == sorted(map(repr, rules)), f"{name} was not rolled back"
    assert not [r for r in after["tor2"] if r.table == "TorIngress.flip"]
    assert len(got) == len(sent), "the old configuration still carries the traffic"
    assert (old_path, new_path) == (len(sent), 0), "on its old path, circuit switch 1"


def test_the_cli_reads_the_fabric_back_reconfigures_it_and_names_bad_input(target_name: str, tmp_path) -> None:
    """``mlfabric schedule show`` (live), ``mlfabric reconfigure`` and a refused reconfiguration."""
    import json
    import subprocess
    import sys

    from controller.schedule import dump_schedule, opera
    from controller.topology import dump_topology

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "controller.cli", *args, "--topology", str(topo_file)],
                              capture_output=True, text=True, timeout=120)

    permuted, wrong = tmp_path / "permuted.yaml", tmp_path / "five-racks.yaml"
    dump_schedule(PERMUTED, permuted)
    dump_schedule(opera(5, uplinks=3, slice_us=10_000, night_us=1_000), wrong)
    with _fabric(target_name, PINNED, uplinks=3) as fab:
        topo_file = tmp_path / "live.yaml"
        dump_topology(fab.live, topo_file)
        before = json.loads(cli("schedule", "show", "--json").stdout)
        moved = cli("reconfigure", str(permuted), "--json")
        after = json.loads(cli("schedule", "show", "--json").stdout)
        text = cli("schedule", "show")
        refused = cli("reconfigure", str(wrong))
        still = json.loads(cli("schedule", "show", "--json").stdout)

    def matchings(shown: dict) -> list[list[list[int]]]:
        return [v["matchings"]["0"] for v in shown["circuit_switches"]]

    pairs = [[[src, dst] for src, dst in enumerate(strobe_matching(4, d))] for d in (0, 1, 2)]
    assert matchings(before) == pairs and {v["version"] for v in before["circuit_switches"]} == {0}
    assert moved.returncode == 0, moved.stderr
    result = json.loads(moved.stdout)
    assert result["version"] == 1 and len(result["switches"]) == 7 and result["late"] == []
    assert matchings(after) == [pairs[1], pairs[2], pairs[0]]
    assert {v["version"] for v in after["circuit_switches"]} == {1}
    assert "0->2 1->3 2->0 3->1" in text.stdout and "pinned" in text.stdout
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert "racks: the fabric 'optical-4x1x3' has 4 racks (got 5)" in refused.stderr
    assert matchings(still) == matchings(after), "a refused reconfiguration changes nothing"


def test_sigterm_after_the_commit_exits_cleanly_and_the_next_run_finishes_the_flip(target_name: str,
                                                                                  tmp_path) -> None:
    """SIGTERM unwinds ``mlfabric reconfigure`` as Ctrl-C does (exit 130, one line). Stopped after
    its commit, the flip still happens at the cut, and the next reconfiguration finishes it."""
    import json
    import signal
    import subprocess
    import sys
    import time

    from controller.schedule import dump_schedule
    from controller.topology import dump_topology

    permuted = tmp_path / "permuted.yaml"
    dump_schedule(PERMUTED, permuted)
    with _fabric(target_name, PINNED, uplinks=3) as fab:
        live = tmp_path / "live.yaml"
        dump_topology(fab.live, live)
        proc = subprocess.Popen([sys.executable, "-m", "controller.cli", "reconfigure", str(permuted), "--topology",
                                 str(live), "--lead-us", "3000000"], stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        while "committed on" not in (line := proc.stderr.readline()):
            assert line, "reconfigure ended before its commit"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130 and "mlfabric: interrupted" in err, err
        time.sleep(3.5)  # past the cut and the new epoch
        again = subprocess.run([sys.executable, "-m", "controller.cli", "reconfigure", str(permuted), "--topology",
                                str(live), "--json"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["version"] == 0, "the interrupted run's version 1 was finished and is replaced"
