"""The dashboard's server on counters the test writes: samples follow the counters, the
stream pushes them, unknown pages are 404, and the CLI refuses when no fabric runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from controller.dashboard.rates import link_rates
from controller.dashboard.server import Dashboard, read_counters
from controller.topology import rail_only

REPO = Path(__file__).resolve().parents[2]


def _write(root: Path, name: str, tx: int, rx: int) -> None:
    stats = root / name / "statistics"
    stats.mkdir(parents=True, exist_ok=True)
    (stats / "tx_bytes").write_text(f"{tx}\n")
    (stats / "rx_bytes").write_text(f"{rx}\n")


def test_counters_of_missing_or_broken_interfaces_are_left_out(tmp_path: Path) -> None:
    _write(tmp_path, "rail0-eth1", 10, 20)
    (tmp_path / "rail0-eth2" / "statistics").mkdir(parents=True)
    assert read_counters(["rail0-eth1", "rail0-eth2", "nope"], tmp_path) == {"rail0-eth1": (10, 20)}


def test_a_counter_that_went_backwards_reads_zero_and_time_must_pass() -> None:
    topo = rail_only(2, 1, rate_mbps=10)
    (r, _) = link_rates(topo, {"rail0-eth1": (500, 500), "rail0-eth2": (0, 0)},
                        {"rail0-eth1": (100, 100), "rail0-eth2": (0, 0)}, 1.0)
    assert r.tx_mbps == 0 and r.rx_mbps == 0 and r.utilisation == 0
    with pytest.raises(ValueError, match="seconds must be positive"):
        link_rates(topo, {}, {}, 0.0)


def test_samples_follow_the_counters_and_unknown_pages_are_404(tmp_path: Path) -> None:
    topo = rail_only(2, 1, rate_mbps=10)
    for name in ("rail0-eth1", "rail0-eth2"):
        _write(tmp_path, name, 0, 0)
    with Dashboard(topo, port=0, interval_s=0.1, counters_root=tmp_path) as board:
        deadline = time.monotonic() + 10
        while board.latest()["seq"] < 1 and time.monotonic() < deadline:  # the sampler has read the zeros
            time.sleep(0.02)
        _write(tmp_path, "rail0-eth1", 10**9, 0)  # far more than any interval's worth: the next sample sees it
        while True:
            sample = json.loads(urllib.request.urlopen(board.url + "api/sample", timeout=5).read())
            busy = [r for r in sample["links"] if r["tx_mbps"] > 0]
            if busy or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(board.url + "nope", timeout=5)
    assert [r["interface"] for r in busy] == ["rail0-eth1"] and busy[0]["utilisation"] > 1
    assert missing.value.code == 404


def test_the_cli_refuses_in_one_line_when_no_fabric_runs(tmp_path: Path) -> None:
    env = {**os.environ, "MLFABRIC_STATE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "controller.cli", "dashboard", "--port", "0"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "no emulated fabric is running" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
