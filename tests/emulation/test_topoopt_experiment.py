"""``mlfabric experiment run topoopt --quick``: both collectives complete with exact results on
the TopoOpt fabric and its fat-tree, and the all-to-all's bandwidth tax measured from the
servers' counters matches the route lengths the controller compiled."""

from __future__ import annotations

import json

from experiment_checks import assert_fidelity_reported

from controller.emulation import load_emulation_module
from controller.experiments.topoopt import TopoOptConfig, expected_tax, fabrics

topoopt_experiment = load_emulation_module("topoopt_experiment")


def test_the_quick_experiment_measures_the_compiled_tax(target_name: str, tmp_path) -> None:
    assert topoopt_experiment.main(["--quick", "--target", target_name, "--out", str(tmp_path)]) == 0
    for name in ("results.json", "runs.csv", "table.txt", "topoopt.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert_fidelity_reported(json.loads((tmp_path / "results.json").read_text()), (tmp_path / "table.txt").read_text())
    assert {(r["fabric"], r["op"]) for r in runs} == {(f, op) for f in ("topoopt", "rail-fat-tree")
                                                     for op in ("allreduce", "alltoall")}
    assert all(r["ok"] for r in runs), [r["error"] for r in runs if not r["ok"]]  # results checked by the workers
    topo, _ = fabrics(TopoOptConfig(servers=8, degrees=(2,)), 2)
    a2a = next(r for r in runs if r["fabric"] == "topoopt" and r["op"] == "alltoall")
    assert abs(a2a["tax"] - expected_tax(topo)) < 0.1, (a2a["tax"], expected_tax(topo))
    assert all(r["tax"] == 1.0 for r in runs if r["fabric"] == "rail-fat-tree")  # nobody relays
    # every run measured the switches' CPU, and the table says whether they bound the figures
    assert all(r["switch_cpu"] is not None and 0 <= r["machine_cpu"] <= 1 for r in runs)
    assert "switch CPU, rail-fat-tree" in (tmp_path / "table.txt").read_text()
