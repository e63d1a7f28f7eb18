"""The rotor experiment end to end at a tiny size (--quick: one repetition, the hot pair at
the reference shape and one other night, two load levels, one small all-reduce): one
command, one results folder, and figures that follow the schedule."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from experiment_checks import assert_fidelity_reported

from controller.emulation import load_emulation_module

# the rotor experiment runs on the default engine only: calendar queues are tested on both engines by
# test_optical_fabric (test_calendar_queues_hold_packets_until_their_slot, parametrized over them)


def test_quick_run_writes_table_plots_and_data(tmp_path: Path, target_name: str, capsys) -> None:
    experiment = load_emulation_module("rotor_experiment")
    out = tmp_path / "run"
    code = experiment.main(["--quick", "--target", target_name, "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text[-3000:]
    assert "[1/" in text and "throughput" in text  # progress lines
    results = json.loads((out / "results.json").read_text())
    assert_fidelity_reported(results, (out / "table.txt").read_text())
    points = {(p["sweep"], p["night_ms"], p["routing"], p["calendar"]): p for p in results["points"]}
    ref_direct = points[("patterns", 3.2, "direct", "hold" if target_name == "python" else "drop")]
    # the hot pair's circuit is up one day in three: about 0.30 of the link gets through
    assert 0.15 < ref_direct["throughput"] < 0.5, ref_direct
    if target_name == "python":
        vlb = points[("patterns", 3.2, "vlb", "hold")]
        assert vlb["throughput"] > ref_direct["throughput"] + 0.2, (vlb, ref_direct)  # the idle intermediates
        assert ref_direct["probe_delivered"] > 0.8  # light load waits in the calendar queue
        drop = points[("patterns", 3.2, "direct", "drop")]
        assert drop["probe_delivered"] < 0.5  # stock BMv2's behaviour: only day 0 passes
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert len(rows) == 2 * len(results["runs"])  # two load levels per run
    assert (out / "rotor.png").stat().st_size > 10_000 and (out / "rotor-load.png").stat().st_size > 10_000
    table = (out / "table.txt").read_text()
    assert "±" in table and "Ring all-reduce" in table and "TritonNetworking/rotornet" in table
    assert results["allreduce"], "the all-reduce ran"
    # every fabric's switches logged in the run folder which engine ran their ports
    switches = {f"tor{r}" for r in range(results["config"]["racks"])} | {"ocs0"}
    assert results["engines"] and all(set(e) == switches for e in results["engines"].values()), results["engines"]
    assert all(list((out / "logs").glob(f"{name}/tor0.log")) for name in results["engines"])
    # the switches' CPU over every run and all-reduce, and the verdict in the table
    measured = [*results["runs"], *(a for a in results["allreduce"] if a["ok"])]  # a mesh that never connected: not
    assert measured and all(r["switch_cpu"] is not None for r in measured)
    assert 0 <= results["cpu"]["switch_max"] <= 1.5 and "switch CPU: " in table


def test_bad_input_is_rejected_before_anything_starts(tmp_path: Path, capsys) -> None:
    experiment = load_emulation_module("rotor_experiment")
    assert experiment.main(["--racks", "3", "--out", str(tmp_path / "x")]) == 2
    assert "racks" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
