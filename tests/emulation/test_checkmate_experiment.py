"""The Checkmate experiment end to end at a tiny size: one command, one results folder."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from experiment_checks import assert_fidelity_reported

from controller.emulation import load_emulation_module


def test_experiment_writes_replication_overhead_recovery(tmp_path: Path, target_name: str, capsys) -> None:
    experiment = load_emulation_module("checkmate_experiment")
    out = tmp_path / "run"
    code = experiment.main(["--servers", "2", "--rails", "2", "--iterations", "6", "--repetitions", "2",
                            "--hidden", "16", "--batch", "16", "--checkpoint-every", "2", "--compute-ms", "5",
                            "--target", target_name, "--out", str(out)])
    assert code == 0, capsys.readouterr().out[-3000:]
    rows = list(csv.DictReader((out / "iterations.csv").open()))
    assert {r["config"] for r in rows} == {"no checkpoint", "checkmate", "sync k=2", "checkfreq k=2"}
    assert len(rows) == 4 * 2 * 6 and all(r["ok"] == "True" for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert_fidelity_reported(summary, (out / "table.txt").read_text())
    assert summary["replication"]["matched"] == summary["replication"]["iterations"] == 12
    assert summary["recovery"]["matches_uninterrupted_run"]
    assert summary["recovery"]["lost"]["checkmate"] <= 1
    assert summary["mirrored_bytes"]["frame_bytes_per_iteration"] >= summary["mirrored_bytes"]["model_bytes"]
    assert (out / "checkmate.png").stat().st_size > 10_000
    assert "paper (Checkmate, NSDI'26) vs this run" in (out / "table.txt").read_text()
    # the switches' CPU was measured over every block of iterations, and the engine named
    assert 0 <= summary["cpu"]["switch_max"] <= 1.5 and all(r["switch_cpu"] != "" for r in rows)
    assert "switch CPU" in (out / "table.txt").read_text() and summary["engines"]


def test_bad_input_is_rejected_before_anything_starts(tmp_path: Path, capsys) -> None:
    experiment = load_emulation_module("checkmate_experiment")
    assert experiment.main(["--servers", "1", "--out", str(tmp_path / "x")]) == 2
    assert "at least 2 servers" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_sigterm_tears_down_and_keeps_what_finished(tmp_path: Path) -> None:
    """``kill`` (SIGTERM) unwinds the run as Ctrl-C does: no switch, veth or record left,
    and the iterations that finished are written, marked interrupted."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from controller.netstate import state_dir

    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "controller.cli", "experiment", "run", "checkmate",
                             "--servers", "2", "--rails", "1", "--iterations", "200", "--repetitions", "1",
                             "--hidden", "8", "--batch", "8", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:  # wait until a configuration has finished and the next one runs
        lines.append(line)
        if "rep 0 no checkpoint" in line:
            break
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    text = "".join(lines) + rest
    assert proc.returncode == 130, text[-2000:]
    assert "stopped by SIGTERM" in text
    assert "interrupted" in (out / "summary.json").read_text()
    assert (out / "iterations.csv").exists()
    leftovers = [p.name for p in state_dir().glob(f"*-{proc.pid}-*.json")]
    assert not leftovers, f"records left behind: {leftovers}"
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "s0-eth0" not in links and "rail0-eth" not in links
    assert not os.path.exists(f"/proc/{proc.pid}")
