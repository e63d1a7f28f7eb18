"""The Checkmate experiment end to end at a tiny size: one command, one results folder."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from controller.emulation import load_emulation_module


def test_experiment_writes_replication_overhead_recovery(tmp_path: Path, target_name: str, capsys) -> None:
    experiment = load_emulation_module("checkmate_experiment")
    out = tmp_path / "run"
    code = experiment.main(["--servers", "2", "--rails", "2", "--iterations", "6", "--repetitions", "2",
                            "--hidden", "16", "--batch", "16", "--checkpoint-every", "2", "--compute-ms", "5",
                            "--target", target_name, "--out", str(out)])
    assert code == 0, capsys.readouterr().out[-3000:]
    rows = list(csv.DictReader((out / "iterations.csv").open()))
    assert {r["config"] for r in rows} == {"no checkpoint", "checkmate", "checkfreq k=2"}
    assert len(rows) == 3 * 2 * 6 and all(r["ok"] == "True" for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["replication"]["matched"] == summary["replication"]["iterations"] == 12
    assert summary["recovery"]["matches_uninterrupted_run"]
    assert summary["recovery"]["lost"]["checkmate"] <= 1
    assert summary["mirrored_bytes"]["frame_bytes_per_iteration"] >= summary["mirrored_bytes"]["model_bytes"]
    assert (out / "checkmate.png").stat().st_size > 10_000
    assert "paper (Checkmate, NSDI'26) vs this run" in (out / "table.txt").read_text()


def test_bad_input_is_rejected_before_anything_starts(tmp_path: Path, capsys) -> None:
    experiment = load_emulation_module("checkmate_experiment")
    assert experiment.main(["--servers", "1", "--out", str(tmp_path / "x")]) == 2
    assert "at least 2 servers" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
