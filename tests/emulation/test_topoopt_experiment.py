"""``mlfabric experiment run topoopt --quick``: every job's iteration completes with exact
results on the co-optimized TopoOpt fabric, the TotientPerms one and both fat-trees; the
fat-trees relay nothing, the direct-connect fabrics do, and each comparison is judged."""

from __future__ import annotations

import json

from experiment_checks import assert_fidelity_reported

from controller.emulation import load_emulation_module
from controller.experiments.topoopt import FABRICS

topoopt_experiment = load_emulation_module("topoopt_experiment")


def test_the_quick_experiment_runs_every_job_on_its_four_fabrics(target_name: str, tmp_path) -> None:
    assert topoopt_experiment.main(["--quick", "--target", target_name, "--out", str(tmp_path)]) == 0
    for name in ("results.json", "runs.csv", "table.txt", "topoopt.png", "dlrm-8-topoopt-d2.png",
                 "transformer-8-topoopt-d2.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    data = json.loads((tmp_path / "results.json").read_text())
    table = (tmp_path / "table.txt").read_text()
    runs = [r for r in data["runs"] if r["kind"] == "iteration"]
    classes = [r for r in data["runs"] if r["kind"] == "class"]
    assert_fidelity_reported(data, table)
    # each fabric also ran each traffic class alone, for its tax; the fat-trees relay nothing
    assert {r["traffic_class"] for r in classes} == {"mp", "allreduce"}
    assert all(r["ok"] for r in classes) and all(r["tax"] == 1.0 for r in classes if r["fabric"].startswith("fat-tree"))
    assert all(r["ok"] for r in runs), [r["error"] for r in runs if not r["ok"]]  # results checked by the workers
    summary = {(e["job"], e["fabric"]): e for e in data["summary"]}
    assert set(summary) == {(j, f) for j in ("dlrm-8", "transformer-8") for f in FABRICS}
    ran = {(r["job"], r["fabric"]) for r in runs}
    for (job, fabric), e in summary.items():
        assert ((job, fabric) in ran) != e["same_as_topoopt"], (job, fabric)  # a kept TotientPerms runs once
    assert all(r["tax"] == 1.0 for r in runs if r["fabric"].startswith("fat-tree"))  # nobody relays
    assert all(r["tax"] > 1.0 for r in runs if r["fabric"] == "totient")  # servers forward for each other
    # the model predicts every measured iteration within a factor of 1.5 (TCP and start-up on
    # top) where routes are fixed; a fat-tree's ECMP places its flows by chance, so its time may
    # be longer than any model of a non-blocking switch says
    direct = [r for r in runs if r["fabric"] in ("topoopt", "totient")]
    assert direct and all(r["model_s"] <= r["seconds"] * 1.2 and r["seconds"] <= 1.5 * r["model_s"] for r in direct), \
        [(r["name"], r["seconds"], r["model_s"]) for r in direct]
    assert all(r["model_s"] <= r["seconds"] * 1.2 for r in runs)  # never faster than the model
    assert {r["job"] for r in data["rounds"]} == {"dlrm-8", "transformer-8"}
    assert len(data["fidelity"]["verdicts"]) == 2 * 3 and "alternation" in table
