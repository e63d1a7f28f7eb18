"""The Checkmate experiment end to end at a tiny size: one command, one results folder."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from experiment_checks import assert_fidelity_reported

from controller.emulation import load_emulation_module


def test_experiment_writes_replication_overhead_tuning_recovery(tmp_path: Path, target_name: str, capsys) -> None:
    experiment = load_emulation_module("checkmate_experiment")
    out = tmp_path / "run"
    code = experiment.main(["--servers", "2", "--rails", "2", "--iterations", "6", "--repetitions", "2",
                            "--hidden", "16", "--batch", "16", "--checkpoint-every", "2", "--compute-ms", "5",
                            "--tune-rounds", "1", "--mirror-loss", "0.05", "--target", target_name, "--out", str(out)])
    assert code == 0, capsys.readouterr().out[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    tuned = {m: t["k"] for m, t in summary["tuning"].items()}
    assert set(tuned) == {"checkfreq", "gemini"} and all(len(t["rounds"]) == 1 for t in summary["tuning"].values())
    expected = {"no checkpoint", "checkmate", "sync k=2", "checkfreq k=2", "gemini k=2",
                f"checkfreq k={tuned['checkfreq']}", f"gemini k={tuned['gemini']}"}
    rows = list(csv.DictReader((out / "iterations.csv").open()))
    loss_run = "checkmate, 5% mirror loss"
    assert {r["config"] for r in rows} == expected | {loss_run}
    assert len(rows) == len(expected) * 2 * 6 + 6 and all(r["ok"] == "True" for r in rows)
    # the profile and the tuners' rounds ran on the fabric too, recorded apart
    tuning = list(csv.DictReader((out / "tuning.csv").open()))
    assert {r["config"] for r in tuning} >= {"no checkpoint", "sync k=1", "checkfreq k=1"}
    assert summary["profile"]["checkpoint_s"] > summary["profile"]["snapshot_s"] > 0
    assert_fidelity_reported(summary, (out / "table.txt").read_text())
    assert summary["replication"]["matched"] == summary["replication"]["iterations"] == 12
    # with mirror loss the shadow skips or resyncs, never holds a wrong replica
    assert summary["loss_replication"]["iterations"] == 6 and summary["loss_replication"]["wrong"] == 0
    assert summary["recovery"]["matches_uninterrupted_run"]
    assert summary["recovery"]["lost"]["checkmate"] <= 1
    # every baseline's latest checkpoint (the store's; Gemini's in the peer's memory) resumes the run exactly
    assert {m: r.get("identical") for m, r in summary["resumes"].items()} == {"sync": True, "checkfreq": True,
                                                                              "gemini": True}
    assert summary["mirrored_bytes"]["frame_bytes_per_iteration"] >= summary["mirrored_bytes"]["model_bytes"]
    assert (out / "checkmate.png").stat().st_size > 10_000 and (out / "frequency.png").stat().st_size > 10_000
    table = (out / "table.txt").read_text()
    assert "paper (Checkmate, NSDI'26) vs this run" in table and "checkpoint frequency within a 5% overhead" in table
    # the switches' CPU was measured over every block of iterations, and the engine named
    assert 0 <= summary["cpu"]["switch_max"] <= 1.5
    assert all(r["switch_cpu"] != "" for r in rows if r["iteration"] != "0")
    assert "switch CPU" in table and summary["engines"]


def test_bad_input_is_rejected_before_anything_starts(tmp_path: Path, capsys) -> None:
    experiment = load_emulation_module("checkmate_experiment")
    assert experiment.main(["--servers", "1", "--out", str(tmp_path / "x")]) == 2
    assert "at least 2 servers" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_sigterm_tears_down_and_keeps_what_finished(tmp_path: Path) -> None:
    """``kill`` (SIGTERM) unwinds the run as Ctrl-C does: no switch, veth or record left,
    and the iterations that finished are written, marked interrupted."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from controller.netstate import state_dir

    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "controller.cli", "experiment", "run", "checkmate",
                             "--servers", "2", "--rails", "1", "--iterations", "40", "--repetitions", "1",
                             "--hidden", "8", "--batch", "8", "--no-tuning", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:  # wait until a configuration has finished and the next one runs
        lines.append(line)
        if "rep 0 no checkpoint" in line:
            break
    time.sleep(1.0)
    # the links this run made, from its own records (not every link on the machine)
    made = [link for path in state_dir().glob(f"*-{proc.pid}-*.json")
            for link in json.loads(path.read_text())["links"]]
    assert made, "the running experiment recorded no links"
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    text = "".join(lines) + rest
    assert proc.returncode == 130, text[-2000:]
    assert "stopped by SIGTERM" in text
    assert "interrupted" in (out / "summary.json").read_text()
    assert (out / "iterations.csv").exists()
    leftovers = [p.name for p in state_dir().glob(f"*-{proc.pid}-*.json")]
    assert not leftovers, f"records left behind: {leftovers}"
    links = {line.split(":")[1].strip().split("@")[0]
             for line in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout.splitlines()}
    assert not links & set(made), f"links left behind: {sorted(links & set(made))}"
    assert not os.path.exists(f"/proc/{proc.pid}")
