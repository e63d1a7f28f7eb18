"""In-network aggregation end to end: workers all-reduce through the rail switches of a real
emulated fabric (aggregation job installed by the controller, results exact, checked by
every worker), with loss at the workers' NICs recovered, and the experiment's report."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from experiment_checks import assert_fidelity_reported

from controller.emulation import load_emulation_module
from controller.experiments.aggregation_report import nic_bytes_model
from workloads.aggregation.wire import FRAME_BYTES


def _run(tmp_path: Path, capsys, *args: str) -> tuple[list[dict], dict, str]:
    experiment = load_emulation_module("aggregation_experiment")
    out = tmp_path / "run"
    code = experiment.main([*args, "--warmup", "0", "--out", str(out)])
    assert code == 0, capsys.readouterr().out[-3000:]
    rows = list(csv.DictReader((out / "iterations.csv").open()))
    return rows, json.loads((out / "summary.json").read_text()), (out / "table.txt").read_text()


def test_eight_workers_on_one_switch_sum_exactly_and_recover_from_loss(tmp_path: Path, target_name: str,
                                                                       capsys) -> None:
    rows, summary, table = _run(tmp_path, capsys, "--gpus", "8", "--rails", "1", "--sizes-kb", "64",
                                "--repetitions", "2", "--rate-mbps", "2", "--loss-every", "10",
                                "--fabrics", "rail-only", "--target", target_name)
    assert rows and all(r["ok"] == "True" for r in rows), "every worker checked its sum exactly"
    assert {r["op"] for r in rows} == {"allreduce", "hier_allreduce", "innet_allreduce", "innet_allreduce_lossy"}
    assert summary["runs"]["rail-only"]["aggregation"] == {"rail0": {"pool": [0, 64], "workers": 8}}
    for r in rows:
        agg = json.loads(r["aggregation"]) if r["aggregation"] else {}
        if r["op"].startswith("innet"):
            # a slow switch (BMv2, the Python engine) may time chunks out and resend them: the
            # switch answers those from the set, the worker takes each chunk's sum once
            assert agg["packets_received"] == 8 * (64 * 1024 // 256 + 1), "every chunk and the exponent round, once"
            first_sends = (agg["packets_sent"] - agg["retransmitted"]) / 8
            assert first_sends * FRAME_BYTES == nic_bytes_model("innet_allreduce", 64 << 10, 8, 1)
            assert float(r["busiest_nic_bytes"]) >= first_sends * FRAME_BYTES
        if r["op"] == "innet_allreduce":
            assert agg["lost"] == 0
        if r["op"] == "innet_allreduce_lossy":
            assert agg["lost"] > 0 and agg["retransmitted"] > 0, "lost both ways, recovered by retransmission"
            assert agg["answered_duplicates"] > 0, "lost results came back from the completed set"
    assert_fidelity_reported(summary, table)
    assert "in-network, lossy" in table
    assert summary["runs"]["rail-only"]["shadow"] == {"calls": 4, "identical": 4}, \
        "Checkmate's shadow rebuilt every sum bit for bit, the lossy runs' too"
    assert {r["shadow"] for r in rows if r["op"].startswith("innet")} == {"bit-identical"}


def test_sixteen_workers_aggregate_per_rail_on_rail_only_and_the_fat_tree(tmp_path: Path, target_name: str,
                                                                          capsys) -> None:
    rows, summary, table = _run(tmp_path, capsys, "--gpus", "16", "--rails", "4", "--sizes-kb", "128",
                                "--repetitions", "1", "--rate-mbps", "2", "--loss-every", "0",
                                "--target", target_name)
    assert rows and all(r["ok"] == "True" for r in rows), "every worker checked its sum exactly"
    assert {(r["fabric"], r["op"]) for r in rows} == {(f, op) for f in ("rail-only", "fat-tree")
                                                      for op in ("allreduce", "hier_allreduce", "innet_allreduce")}
    for fabric in ("rail-only", "fat-tree"):  # the rail switches; the fat-tree's leaves (named alike)
        assert summary["runs"][fabric]["aggregation"] == {f"rail{r}": {"pool": [0, 64], "workers": 4}
                                                          for r in range(4)}
    by = {(r["fabric"], r["op"]): r for r in rows}
    for fabric in ("rail-only", "fat-tree"):
        agg = json.loads(by[fabric, "innet_allreduce"]["aggregation"])
        assert agg["packets_received"] == 16 * (128 * 1024 // 4 // 256 + 1), "each GPU's shard, once"
        first_sends = (agg["packets_sent"] - agg["retransmitted"]) / 16 * FRAME_BYTES
        assert first_sends == nic_bytes_model("innet_allreduce", 128 << 10, 4, 4)
        assert first_sends < nic_bytes_model("hier_allreduce", 128 << 10, 4, 4), "the switch sums: the shard goes once"
        assert float(by[fabric, "innet_allreduce"]["busiest_nic_bytes"]) < \
            float(by[fabric, "allreduce"]["busiest_nic_bytes"])
    assert_fidelity_reported(summary, table)
    assert (tmp_path / "run" / "aggregation.png").stat().st_size > 10_000
    for fabric in ("rail-only", "fat-tree"):
        assert summary["runs"][fabric]["shadow"] == {"calls": 1, "identical": 1}, "the shadow, one sum per rail switch"


def test_bad_input_is_rejected_before_anything_starts(tmp_path: Path, capsys) -> None:
    experiment = load_emulation_module("aggregation_experiment")
    assert experiment.main(["--slots", "2000", "--out", str(tmp_path / "x")]) == 2
    assert "slots" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
