"""A small rail-only fabric in Mininet: collectives across every GPU, checked by the workers,
and a rail switch failure that fails the affected collective cleanly instead of hanging."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path

import pytest

from controller.emulation import load_emulation_module
from controller.topology import rail_only
from workloads.driver import WorkerGroup
from workloads.plan import Rank

# every test here runs on both engines through the switch_engine fixture (forwarding under every GPU's
# collectives), so make test's second pass on the Python engine leaves the module out


@pytest.fixture
def fabric(target_name: str, switch_engine: str | None, tmp_path: Path):
    """The fabric, on each of the Python target's packet engines in turn."""
    fabric_net = load_emulation_module("fabric_net")
    topo = rail_only(2, 2, rate_mbps=20)
    logs = tmp_path / "logs"
    with fabric_net.EmulatedFabric(topo, target=target_name, publish=False, engine=switch_engine,
                                   log_dir=logs) as fab:
        if switch_engine is not None:  # every switch's log says which engine ran its ports
            native = {p.stem: "the native engine runs the ports" in p.read_text()
                      for p in logs.glob("*.log")}
            assert native == {s.name: switch_engine == "native" for s in topo.switches}, native
        yield fab, topo


def _group(fab, topo, tmp_path: Path, timeout_s: float) -> WorkerGroup:
    ranks = [Rank(d * 2 + n.rail, d, n.rail, n.address) for d, h in enumerate(topo.hosts) for n in h.nics]
    config = {"ranks": [dataclasses.asdict(r) for r in ranks],
              "servers": 2, "rails": 2, "port": 7300, "timeout_s": timeout_s}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(config))

    def popen(rank: Rank, argv: list[str]) -> subprocess.Popen:
        return fab.host(topo.hosts[rank.server].name).popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    return WorkerGroup(popen, path, ranks)


def test_ring_allreduce_across_every_gpu_is_correct(fabric, tmp_path: Path) -> None:
    fab, topo = fabric
    with _group(fab, topo, tmp_path, timeout_s=20) as group:
        for op in ("allreduce", "hier_allreduce", "hier_alltoall"):
            results = group.run({"op": op, "bytes": 64 * 1024, "iter": 0}, timeout=60)
            assert [r["ok"] for r in results] == [True] * 4, results
            assert all(r["seconds"] > 0 for r in results)


def test_a_rail_switch_failure_fails_its_collective_without_hanging(fabric, tmp_path: Path) -> None:
    fab, topo = fabric
    with _group(fab, topo, tmp_path, timeout_s=3) as group:
        assert all(r["ok"] for r in group.run({"op": "allreduce", "bytes": 16 * 1024, "iter": 0}, timeout=30))
        fab.switch_process("rail1").stop()
        t0 = time.monotonic()
        results = group.run({"op": "allreduce", "bytes": 16 * 1024, "iter": 1}, timeout=30)
        elapsed = time.monotonic() - t0
    assert not any(r["ok"] for r in results)
    assert all(r["error"] for r in results)
    assert elapsed < 20, f"the failure took {elapsed:.1f} s to surface"
