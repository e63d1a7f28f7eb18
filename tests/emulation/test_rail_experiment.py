"""The rail-only experiment end to end at a tiny size: one command, one results folder."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from experiment_checks import assert_fidelity_reported

from controller.emulation import load_emulation_module


def test_a_machine_made_busy_prints_undecided_instead_of_a_finding(tmp_path: Path, target_name: str,
                                                                   capsys) -> None:
    """One busy loop per core, started and stopped by this test, holds the machine over its
    fidelity limit: every comparison is undecided, in the table, summary.json and the exit
    status the run was asked for (--require-decided)."""
    import os
    import subprocess
    import sys

    experiment = load_emulation_module("rail_experiment")
    out = tmp_path / "run"
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        code = experiment.main(["--gpus", "4", "--rails", "2", "--iterations", "2", "--allreduce-kb", "32",
                                "--alltoall-kb", "32", "--rate-mbps", "10", "--target", target_name,
                                "--out", str(out), "--require-decided"])
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    printed = capsys.readouterr().out
    assert code == 3, printed[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["rate_mbps"] == 10.0 and summary["config"]["gpus"] == 4, "the configuration as JSON"
    fidelity = summary["fidelity"]
    assert fidelity["all_decided"] is False
    assert {v["comparison"] for v in fidelity["verdicts"]} == {"allreduce", "alltoall"}
    for v in fidelity["verdicts"]:
        assert not v["decided"] and v["finding"] is None
        assert any(b["monitor"] == "machine CPU" for b in v["breaches"])
    table = (out / "table.txt").read_text()
    headlines = [line for line in table.splitlines() if "rail-only / fat-tree" in line or "rail-only (hier" in line]
    assert len(headlines) == 2
    assert all("undecided: the emulation, not the network (machine CPU" in line for line in headlines)
    assert not any(f"rail-only is {word}" in line for line in headlines for word in ("faster", "slower", "even"))
    assert "OVER A FIDELITY LIMIT: machine CPU" in printed


def test_bad_input_is_rejected_before_anything_starts(tmp_path: Path, capsys) -> None:
    experiment = load_emulation_module("rail_experiment")
    assert experiment.main(["--gpus", "10", "--rails", "4", "--out", str(tmp_path / "x")]) == 2
    assert "multiple of the rail count 4" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_sigterm_tears_down_and_keeps_the_rows_that_finished(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    from controller.netstate import state_dir

    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "controller.cli", "experiment", "run", "rail-only",
                             "--gpus", "4", "--rails", "2", "--iterations", "100", "--allreduce-kb", "32",
                             "--alltoall-kb", "32", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:  # interrupt once a few collectives have finished
        lines.append(line)
        if "iter 1 " in line:
            break
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    text = "".join(lines) + rest
    assert proc.returncode == 130, text[-2000:]
    assert "stopped by SIGTERM" in text and "Traceback" not in text
    rows = list(csv.DictReader((out / "iterations.csv").open()))
    assert len(rows) >= 2, "the collectives that finished are kept"
    assert "interrupted" in (out / "summary.json").read_text()
    assert not list(state_dir().glob(f"*-{proc.pid}-*.json")), "records left behind"


def test_runs_broken_on_purpose_are_too_few_runs_and_exit_3(tmp_path: Path, target_name: str, capsys) -> None:
    """--fail-rail kills a rail switch before the last of 2 iterations: each collective has one
    successful run per fabric, too few for an interval; no finding, exit 3 with
    --require-decided, whatever the machine's CPU did."""
    experiment = load_emulation_module("rail_experiment")
    out = tmp_path / "run"
    code = experiment.main(["--gpus", "4", "--rails", "2", "--iterations", "2", "--warmup", "1", "--allreduce-kb", "64",
                            "--alltoall-kb", "64", "--rate-mbps", "10", "--fail-rail", "1", "--worker-timeout", "3",
                            "--target", target_name, "--out", str(out), "--require-decided"])
    assert code == 3, capsys.readouterr().out[-2000:]
    fidelity = json.loads((out / "summary.json").read_text())["fidelity"]
    assert {v["outcome"] for v in fidelity["verdicts"]} == {"too few runs"}
    for v in fidelity["verdicts"]:
        assert v["finding"] is None and not v["decided"]
        assert any(r["ok"] == 1 and r["total"] == 2 for r in v["runs"])
    assert "undecided: too few runs" in (out / "table.txt").read_text()


def test_a_run_sized_to_be_decided_reaches_its_finding_and_writes_table_plot_and_csv(
        tmp_path: Path, target_name: str, capsys) -> None:
    """The same ring all-reduce on both fabrics, bandwidth-bound at 10 Mbit/s, 5 iterations:
    enough runs, an interval narrow enough to say even. Whether the machine held is the
    machine's (another job's load makes it undecided, as it should): the figures reach the
    finding either way, and nothing but the emulation's monitors can stand in its way. The
    results folder holds every collective's row, the CPU each used, the table and the plot."""
    experiment = load_emulation_module("rail_experiment")
    out = tmp_path / "run"
    # 256 KiB: every collective's CPU interval is tens of ms, so that /proc's 10 ms ticks (up to
    # two of error per process over an interval) cannot push a share past the bounds below
    code = experiment.main(["--gpus", "4", "--rails", "2", "--iterations", "5", "--warmup", "1", "--allreduce-kb", "256",
                            "--alltoall-kb", "256", "--rate-mbps", "10", "--target", target_name, "--out", str(out)])
    assert code == 0, capsys.readouterr().out[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    (allreduce,) = [v for v in summary["fidelity"]["verdicts"] if v["comparison"] == "allreduce"]
    assert allreduce["figures_say"] == "rail-only is even", allreduce
    assert set(allreduce["outcomes"]) <= {"decided", "the emulation ran out of room"}, allreduce
    assert allreduce["decided"] == (allreduce["outcomes"] == ["decided"])
    rows = list(csv.DictReader((out / "iterations.csv").open()))
    assert {r["fabric"] for r in rows} == {"rail-only", "fat-tree"}
    assert all(r["ok"] == "True" for r in rows)
    # every collective was measured: a switch's share of one core and the machine's share (a tiny
    # run may use less than a clock tick of switch CPU, so 0 is a valid share; the unit tests
    # check that CPU burned is CPU read)
    assert all(0.0 <= float(r["switch_cpu"]) <= 1.5 and 0.0 <= float(r["machine_cpu"]) <= 1.0 for r in rows)
    assert set(summary["cpu"]) == {"rail-only", "fat-tree"} and 0 <= summary["cpu"]["fat-tree"]["switch_max"] <= 1.5
    expected = {"bmv2"} if target_name == "bmv2" else {"native", "python"}
    assert set(summary["runs"]["rail-only"]["engines"].values()) <= expected
    table = (out / "table.txt").read_text()
    assert "switch CPU, fat-tree" in table and "allreduce rail-only / fat-tree" in table
    assert 0.5 < summary["ratios"]["allreduce_ratio"] < 2.0
    assert (out / "collectives.png").stat().st_size > 10_000
    assert_fidelity_reported(summary, table)
    page = (out / "index.html").read_text()  # the run's own page, with its plot inside
    assert "comparisons decided" in page and "data:image/png;base64," in page and "iterations.csv" in page


def test_each_load_balancing_is_a_fat_tree_of_its_own_and_spraying_evens_the_uplinks(
        tmp_path: Path, target_name: str, capsys) -> None:
    """--load-balancing ecmp spray: rail-only against two fat-trees, each compared with it;
    spraying sends each packet to the next uplink, so the busiest uplink carries about its
    fair share of the all-to-all's bytes (round robin per packet)."""
    experiment = load_emulation_module("rail_experiment")
    out = tmp_path / "run"
    args = ["--gpus", "8", "--rails", "2", "--iterations", "2", "--warmup", "1", "--allreduce-kb", "256",
            "--alltoall-kb", "256", "--rate-mbps", "20", "--load-balancing", "ecmp", "spray", "--target", target_name,
            "--out", str(out)]
    if target_name == "bmv2":
        args += ["--super-frames", "0"]
    code = experiment.main(args)
    assert code == 0, capsys.readouterr().out[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["runs"]) == {"rail-only", "fat-tree-ecmp", "fat-tree-spray"}
    assert {v["comparison"] for v in summary["fidelity"]["verdicts"]} == {
        "allreduce vs fat-tree-ecmp", "alltoall vs fat-tree-ecmp", "allreduce vs fat-tree-spray",
        "alltoall vs fat-tree-spray"}
    assert {"alltoall_ratio_ecmp", "alltoall_ratio_spray"} <= set(summary["ratios"])
    rows = list(csv.DictReader((out / "iterations.csv").open()))
    spray = [float(r["uplink_imbalance"]) for r in rows if r["fabric"] == "fat-tree-spray" and r["op"] == "alltoall"]
    assert spray and max(spray) <= 1.15, spray
    table = (out / "table.txt").read_text()
    assert "busiest spine uplink during the all-to-alls, fat-tree-spray" in table
    assert "reorderings detected" in table
