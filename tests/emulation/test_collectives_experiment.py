"""The collectives experiment end to end at small sizes: Open MPI (default and forced) and
the project's collectives on rail-only and the fat-tree, one results folder."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest
from experiment_checks import assert_fidelity_reported

from controller.emulation import load_emulation_module

needs_mpi = pytest.mark.skipif(subprocess.run(["sh", "-c", "command -v mpirun"], capture_output=True).returncode != 0,
                               reason="Open MPI's mpirun is not installed (make setup installs openmpi-bin)")


@needs_mpi
def test_experiment_compares_open_mpi_with_the_project_on_both_fabrics(tmp_path: Path, target_name: str,
                                                                       capsys) -> None:
    experiment = load_emulation_module("collectives_experiment")
    out = tmp_path / "run"
    code = experiment.main(["--gpus", "8", "--rails", "2", "--sizes-kb", "64", "256", "--repetitions", "2",
                            "--rate-mbps", "10", "--target", target_name, "--out", str(out)])
    assert code == 0, capsys.readouterr().out[-3000:]
    rows = list(csv.DictReader((out / "iterations.csv").open()))
    assert rows and all(r["ok"] == "True" for r in rows), "every result exact, every run finished"
    series = {(r["fabric"], r["collective"], r["library"], r["algorithm"]) for r in rows}
    # 8 ranks: coll/tuned picks rabenseifner for these allreduces, linear_sync and linear for the all-to-alls
    assert ("rail-only", "allreduce", "open-mpi", "rabenseifner (default)") in series
    assert ("fat-tree", "allreduce", "open-mpi", "ring (forced)") in series
    assert ("rail-only", "alltoall", "open-mpi", "pairwise (forced)") in series
    assert ("fat-tree", "alltoall", "mlfabric", "direct") in series
    assert ("rail-only", "alltoall", "mlfabric", "direct") not in series, "rail-only has no path between rails"
    assert all(r["machine_cpu"] not in ("", None) for r in rows), "every interval was measured"
    assert len({r["block"] for r in rows if r["library"] == "open-mpi"}) == 2 * 2 * 2 * 2
    summary = json.loads((out / "summary.json").read_text())
    table = (out / "table.txt").read_text()
    assert_fidelity_reported(summary, table)
    ring = next(s for s in summary["summary"] if s["fabric"] == "rail-only" and s["algorithm"] == "ring (forced)"
                and s["bytes"] == 256 * 1024)
    assert ring["model_s"] and 0.5 < ring["median_s"] / ring["model_s"] < 3, "Open MPI's ring runs at the NICs' rate"
    assert summary["runs"]["fat-tree"]["open-mpi forced"]["mca"]["coll_tuned_allreduce_algorithm"] == "4"
    assert (out / "collectives.png").stat().st_size > 10_000
    assert list(out.glob("open-mpi-*.log")), "Open MPI's own output is kept"


def test_bad_input_is_rejected_before_anything_starts(tmp_path: Path, capsys) -> None:
    experiment = load_emulation_module("collectives_experiment")
    assert experiment.main(["--sizes-kb", "0", "--out", str(tmp_path / "x")]) == 2
    assert "sizes_kb" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
