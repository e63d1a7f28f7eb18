"""The Checkmate host side with no switch: workers on loopback addresses tag their mirrored
legs, and a shadow capturing on ``lo`` sees exactly those segments (loopback delivers every
packet to a packet socket, as a mirror port would). The replica must be bit-identical."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workloads.checkmate.model import ModelSpec
from workloads.checkmate.optim import OptimizerSpec
from workloads.checkmate.training import TrainingConfig
from workloads.driver import WorkerGroup
from workloads.loopback import loopback_config, subprocess_factory

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="capturing on lo needs root (AF_PACKET)")
ROOT = Path(__file__).resolve().parents[2]


def _shadow(tmp_path: Path, config, training: TrainingConfig) -> tuple[subprocess.Popen, Path]:
    layout = config.layout
    data = {"training": training.to_dict(), "ranks": config.to_dict()["ranks"], "servers": layout.servers,
            "rails": layout.rails, "interfaces": ["lo"], "state_server": f"{layout[0].ip}:{training.state_port}",
            "checkpoint_dir": str(tmp_path), "checkpoint_every": 1}
    (tmp_path / "shadow.json").write_text(json.dumps(data))
    report = tmp_path / "events.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "workloads.checkmate.shadow", "--config",
                             str(tmp_path / "shadow.json"), "--report", str(report)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == b"READY", proc.stderr.read() if proc.stderr else line
    return proc, report


def _events(report: Path) -> list[dict]:
    return [json.loads(line) for line in report.read_text().splitlines() if line.strip()]


def test_loopback_replica_is_bit_identical(tmp_path: Path) -> None:
    config = loopback_config(3, 2, timeout_s=10, mesh="rail")
    world = config.layout.world
    training = TrainingConfig(model=ModelSpec(hidden=16, seed=4, batch=24),
                              optimizer=OptimizerSpec(kind="adam", lr=0.01), session=6,
                              mirror_port=config.port + world, state_port=config.port + 2 * world)
    shadow, report = _shadow(tmp_path, config, training)
    workers = {}
    try:
        with WorkerGroup(subprocess_factory(), config, op_timeout_s=30) as group:
            for it in range(12):
                results = group.run({"op": "ckpt_train", "iter": it, "training": training.to_dict()})
                assert all(r["ok"] for r in results), results
                assert len({r["digest"] for r in results}) == 1
                workers[it] = results[0]["digest"]
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not any(
                    e["event"] == "applied" and e["iteration"] == 11 for e in _events(report)):
                time.sleep(0.05)
    finally:
        shadow.terminate()
        shadow.wait(timeout=10)
    applied = {e["iteration"]: e["digest"] for e in _events(report) if e["event"] == "applied"}
    assert applied == workers
    assert shadow.returncode == 0, shadow.stderr.read().decode()[-2000:] if shadow.stderr else ""
