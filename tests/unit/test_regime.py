"""The regime every experiment prints: the real fabric it stands for, the time dilation, and
per quantity whether it was stretched with the links; the table and ``summary.json`` carry
it through the one experiment core."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.experiments.core import write_outcome
from controller.experiments.rail_only import ExperimentConfig, regime_of
from controller.experiments.regime import Emulated, RealFabric, dilation, from_probe, regime_rows


def _rows(emu: Emulated) -> dict[str, bool]:
    return {q.name: q.scaled for q in regime_rows(RealFabric(), emu)}


def test_dilation_is_the_real_rate_over_the_emulated_one() -> None:
    assert dilation(RealFabric(nic_gbps=400), from_probe(None, nic_mbps=100, mtu=9000)) == 4000
    assert dilation(RealFabric(nic_gbps=100), from_probe(None, nic_mbps=50, mtu=9000)) == 2000


def test_a_frame_is_scaled_when_both_sides_use_the_same_frame_size() -> None:
    assert _rows(from_probe(None, nic_mbps=100, mtu=9000))["frame"]
    assert not _rows(from_probe(None, nic_mbps=100, mtu=1500))["frame"]  # 6x shorter


def test_super_packets_bring_the_host_burst_near_a_real_tso_burst() -> None:
    assert not _rows(from_probe(None, nic_mbps=100, mtu=1500))["burst a host sends at once"]
    assert _rows(from_probe(None, nic_mbps=100, mtu=9000, super_frames=7))["burst a host sends at once"]


def test_latency_rows_appear_only_with_a_probe_and_use_its_links() -> None:
    without = _rows(from_probe(None, nic_mbps=100, mtu=9000))
    assert "per-hop latency" not in without and "frames in flight per round trip" not in without
    emu = from_probe({"rtt_ms": 0.4, "links": 4, "queue_packets": 100}, nic_mbps=100, mtu=9000)
    assert emu.hop_latency_us == pytest.approx(50.0) and emu.hops == 4
    # 50 us emulated per hop is 12.5 ns real at 4000x: far shorter than a real switch's 1 us
    assert not _rows(emu)["per-hop latency"]
    slow = from_probe({"rtt_ms": 32.0, "links": 4, "queue_packets": 100}, nic_mbps=100, mtu=9000)
    assert _rows(slow)["per-hop latency"]  # 4 ms emulated per hop is 1 us real


def test_a_slot_row_only_for_fabrics_with_one() -> None:
    assert "circuit slot" not in _rows(from_probe(None, nic_mbps=10, mtu=1500))
    rotor = regime_rows(RealFabric(), from_probe(None, nic_mbps=10, mtu=1500, slot_ms=32))
    slot = next(q for q in rotor if q.name == "circuit slot")
    assert slot.emulated == pytest.approx(32_000 / 40_000) and not slot.scaled


def test_rail_experiment_takes_the_fat_trees_longer_path_when_both_probed() -> None:
    cfg = ExperimentConfig()
    infos = {"rail-only": {"path": {"rtt_ms": 0.2, "links": 2, "queue_packets": 50}},
             "fat-tree": {"path": {"rtt_ms": 0.8, "links": 4, "queue_packets": 50}}}
    assert regime_of(cfg, infos).hops == 4
    assert regime_of(cfg, {"rail-only": infos["rail-only"], "fat-tree": {}}).hops == 2
    assert regime_of(cfg, {}).hop_latency_us is None


def test_write_outcome_puts_the_regime_in_the_table_and_the_summary(tmp_path: Path) -> None:
    emu = from_probe({"rtt_ms": 0.4, "links": 4, "queue_packets": 100}, nic_mbps=100, mtu=9000, super_frames=7)
    table = write_outcome(tmp_path, "a finding", {"x": 1}, [], regime=emu)
    assert "time stretched 4,000x" in table and "per-hop latency" in table
    assert (tmp_path / "table.txt").read_text().startswith("a finding\nregime:")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["regime"]["dilation"] == 4000
    assert {q["name"] for q in summary["regime"]["quantities"]} >= {"frame", "port buffer", "TCP minimum RTO"}
    write_outcome(tmp_path, "no regime", {}, [])
    assert json.loads((tmp_path / "summary.json").read_text())["regime"] is None
