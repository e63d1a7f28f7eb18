"""The journal folded into what the dashboard shows: the fabric that runs, its schedule's
current slice (as the schedule counts it), an experiment's progress and verdicts; and the
experiment core writing those events."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.dashboard import journal
from controller.dashboard.switches import PortQueue, switch_rows
from controller.dashboard.view import FabricView, current_slice
from controller.experiments import core
from controller.experiments.fidelity import Runs, Verdict
from controller.schedule import round_robin


def test_the_current_slice_is_the_schedules_own_at_every_time() -> None:
    s = round_robin(5, slice_us=1000, night_us=150)
    plan = s.circuits[0]
    for t in range(0, 3 * s.cycle_us, 37):
        assert current_slice(len(plan.slices), s.slice_us, s.period_us, t, plan.offset_us) == s.at(0, t).index, t
    assert current_slice(4, 1000, 1100, -1) is None


def _ev(kind: str, t: float, pid: int = 1, **fields: object) -> dict[str, object]:
    return {"kind": kind, "t": t, "pid": pid, **fields}


def test_a_schedule_installed_while_its_fabric_comes_up_is_that_fabrics() -> None:
    v = FabricView()
    sched = {"name": "old", "slice_us": 1000, "period_us": 1100, "epoch_t": 10.0,
             "circuits": [{"slices": [[1, 0], [0, 1]], "offset_us": 0}]}
    v.apply(_ev("schedule", 9.0, **sched))
    v.apply(_ev("fabric-up", 9.5, topology={"name": "optical"}))
    now = v.snapshot(10.0 + 1150e-6)["schedule"]
    assert now["name"] == "old" and now["circuits"] == [{"slice": 1, "matching": [0, 1]}]
    v.apply(_ev("fabric-down", 11.0, name="optical"))
    assert v.snapshot(12.0)["schedule"] is None and v.snapshot(12.0)["fabric"] is None
    v.apply(_ev("schedule", 12.0, pid=2, **sched))  # another process's schedule
    v.apply(_ev("fabric-up", 13.0, topology={"name": "optical"}))
    assert v.snapshot(13.0)["schedule"] is None


def test_only_the_fabrics_own_process_takes_it_down_and_a_new_run_starts_afresh() -> None:
    v = FabricView()
    v.apply(_ev("fabric-up", 1.0, topology={"name": "a"}))
    v.apply(_ev("fabric-down", 2.0, pid=9, name="a"))  # another process's fabric went
    assert v.snapshot(3.0)["fabric"] == "a" and v.fabric_owner() == 1
    v.apply(_ev("run", 3.0, experiment="x", folder="f"))
    v.apply(_ev("verdict", 4.0, comparison="c", outcome="decided", decided=True, why="even"))
    v.apply(_ev("run", 5.0, experiment="y", folder="g"))
    snap = v.snapshot(6.0)
    assert snap["verdicts"] == [] and snap["run"]["experiment"] == "y" and snap["run"]["status"] == "running"
    seq = v.fabric_seq
    v.drop_fabric()
    assert v.fabric_seq == seq + 1 and v.snapshot(7.0)["fabric"] is None


def test_a_switchs_row_sums_its_ports_and_a_process_read_once_has_no_cpu() -> None:
    (row,) = switch_rows({"leaf0": {2: "leaf0-eth2", 1: "leaf0-eth1"}}, {}, {"leaf0": 3.0}, 1.0,
                         {"leaf0-eth1": PortQueue(100, 1, 2), "leaf0-eth2": PortQueue(50, 1, 0)}, {"leaf0-eth2": 3})
    assert row["cpu"] is None and row["backlog_bytes"] == 150 and row["drops"] == 5
    assert [p["port"] for p in row["ports"]] == [1, 2]


def test_the_experiment_core_journals_the_run_its_units_verdicts_and_end(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFABRIC_STATE_DIR", str(tmp_path / "state"))
    out = core.results_folder("demo", tmp_path / "out", lambda _: None)
    core.run_units(["a", "b"], lambda unit, work: unit, out, [], lambda _: None)
    ok = Verdict("allreduce", "even", 3, 0, runs=(Runs("a", 3, 3), Runs("b", 3, 3)), needed=2)
    core.write_outcome(out, "table", {}, [ok])
    assert core.finish(out, interrupted=None, failed=False, verdicts=[ok], require_decided=False) == 0
    events = journal.JournalReader().read()
    assert [e["kind"] for e in events] == ["run", "unit", "unit", "verdict", "run-end"]
    assert events[0]["folder"] == str(out.resolve()) and events[2]["name"] == "b" and events[2]["of"] == 2
    assert events[3]["decided"] is True and events[4]["status"] == "decided"
