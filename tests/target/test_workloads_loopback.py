"""Worker processes on loopback addresses, driven through their pipes: no switch, no root.

2 servers x 2 rails = 4 workers on 127.0.<server+1>.<rail+1>; every operation must be
correct on every rank; a dead or hung worker must turn into ok=false on the others within
the timeout, never a hang.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from workloads.driver import WorkerGroup
from workloads.errors import CommandError, WorkerStartError
from workloads.loopback import free_base_port, loopback_config, subprocess_factory
from workloads.plan import Rank

TIMEOUT_S = 3.0
ROOT = Path(__file__).resolve().parents[2]


class Recording:
    """A subprocess factory that remembers the processes (to kill one of them)."""

    def __init__(self) -> None:
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self._factory = subprocess_factory()

    def __call__(self, rank: Rank, argv: list[str]) -> subprocess.Popen[bytes]:
        self.procs[rank.rank] = self._factory(rank, argv)
        return self.procs[rank.rank]


@pytest.fixture(scope="module")
def group() -> Iterator[WorkerGroup]:
    config = loopback_config(2, 2, timeout_s=TIMEOUT_S, mesh="full")
    with WorkerGroup(subprocess_factory(), config, op_timeout_s=30) as g:
        yield g
    assert set(g.returncodes.values()) == {0}


def ok(results: list[dict], op: str, n: int = 4) -> None:
    assert [r["rank"] for r in results] == list(range(n))
    bad = [(r["rank"], r["error"]) for r in results if not r["ok"]]
    assert not bad, bad
    assert all(r["op"] == op and r["error"] is None for r in results)


@pytest.mark.parametrize(("command", "phases", "used"), [
    ({"op": "allreduce", "bytes": 1 << 20}, {"reduce_scatter", "allgather"}, 1 << 20),
    ({"op": "allreduce", "bytes": 4003, "ring": "direct"}, {"reduce_scatter", "allgather"}, 4000),
    ({"op": "allreduce", "bytes": 8}, {"reduce_scatter", "allgather"}, 8),
    ({"op": "hier_allreduce", "bytes": (1 << 20) + 12},
     {"intra_reduce_scatter", "rail_allreduce", "intra_allgather"}, (1 << 20) + 12),
    ({"op": "alltoall", "bytes": 1 << 20}, {"alltoall"}, 1 << 20),
    ({"op": "hier_alltoall", "bytes": 1 << 20}, {"intra", "rail"}, 1 << 20),
    ({"op": "hier_alltoall", "bytes": 100}, {"intra", "rail"}, 96),
    ({"op": "alltoall", "bytes": 1 << 20, "schedule": "concurrent"}, {"alltoall"}, 1 << 20),
    ({"op": "hier_alltoall", "bytes": 1 << 20, "schedule": "concurrent"}, {"intra", "rail"}, 1 << 20),
])
def test_every_operation_is_correct(group: WorkerGroup, command: dict, phases: set, used: int) -> None:
    results = group.run({**command, "iter": 5})
    ok(results, command["op"])
    for r in results:
        assert set(r["phases"]) == phases and r["iter"] == 5 and r["bytes"] == used
        assert 0 <= sum(r["phases"].values()) <= r["seconds"] + 1e-3


def test_train_step(group: WorkerGroup) -> None:
    results = group.run({"op": "train_step", "bytes": 1 << 18, "iter": 1, "compute_s": 0.05,
                         "parallelism": {"tp_bytes": 1 << 16, "moe_bytes": 1 << 16, "moe_count": 2,
                                         "dp_allreduce": "rail_allreduce"}})
    ok(results, "train_step")
    for r in results:
        top = {k for k in r["phases"] if "/" not in k}
        assert top == {"compute", "tp_allreduce", "moe_alltoall", "dp_allreduce"}
        assert r["phases"]["compute"] >= 0.05
        assert r["seconds"] >= sum(r["phases"][k] for k in top) - 1e-3


def test_bad_commands_are_refused_before_sending(group: WorkerGroup) -> None:
    with pytest.raises(CommandError, match="op: must be one of"):
        group.run({"op": "broadcast"})
    with pytest.raises(CommandError, match="close"):
        group.run({"op": "quit"})
    ok(group.run({"op": "allreduce", "bytes": 64}), "allreduce")


def test_direct_alltoall_needs_a_full_mesh() -> None:
    config = loopback_config(2, 2, timeout_s=TIMEOUT_S)  # rail mesh: no (0,0)-(1,1) connection
    with WorkerGroup(subprocess_factory(), config, op_timeout_s=20) as g:
        results = g.run({"op": "alltoall", "bytes": 1024})
        assert not any(r["ok"] for r in results)
        assert all("cross-rail peers need mesh 'full'" in r["error"] for r in results)
        ok(g.run({"op": "hier_alltoall", "bytes": 1024}), "hier_alltoall")  # the mesh is intact


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP])
def test_a_dead_or_hung_worker_fails_the_others_within_the_timeout(sig: signal.Signals) -> None:
    factory = Recording()
    config = loopback_config(2, 2, timeout_s=TIMEOUT_S)
    with WorkerGroup(factory, config, op_timeout_s=20) as g:
        ok(g.run({"op": "hier_allreduce", "bytes": 1 << 16}), "hier_allreduce")
        victim = factory.procs[3]
        os.kill(victim.pid, sig)
        try:
            start = time.monotonic()
            results = g.run({"op": "allreduce", "bytes": 1 << 16}, timeout=TIMEOUT_S + 2.5)
            elapsed = time.monotonic() - start
            for r in results[:3]:
                assert not r["ok"] and r["error"], r
                assert "rank" in r["error"] and r.get("reported_by") is None
            assert not results[3]["ok"] and results[3]["reported_by"] == "driver"
            if sig == signal.SIGKILL:
                assert "exited with code -9" in results[3]["error"]
                assert elapsed < TIMEOUT_S  # a reset connection fails at once
            else:
                assert any("no progress for 3 s" in r["error"] for r in results[:3])
                assert "no result within" in results[3]["error"]
            # the survivors keep answering, with the cause of the breakage
            again = g.run({"op": "hier_alltoall", "bytes": 1024}, timeout=1.5)
            assert all("mesh unusable after an earlier error" in r["error"] for r in again[:3])
        finally:
            if sig == signal.SIGSTOP:
                os.kill(victim.pid, signal.SIGCONT)
    codes = g.returncodes
    assert codes[0] == codes[1] == codes[2] == 0


def test_odd_number_of_servers_with_pxn_on_a_rail_mesh(tmp_path: Path) -> None:
    # as the experiment runner does it: its own JSON file, the ranks, the interpreter
    layout = loopback_config(3, 2).layout
    path = tmp_path / "workers.json"
    path.write_text(json.dumps({"ranks": [r.__dict__ for r in layout.ranks], "servers": 3, "rails": 2,
                                "port": free_base_port(layout), "timeout_s": TIMEOUT_S}))
    with WorkerGroup(subprocess_factory(), path, list(layout.ranks), python=sys.executable,
                     op_timeout_s=20) as g:
        assert g.config_path == path
        step = g.run({"op": "train_step", "bytes": 3 << 14, "iter": 0, "compute_s": 0.01,
                      "parallelism": {"dp_allreduce": "allreduce", "moe_bytes": 3 << 14,
                                      "moe_alltoall": "hier_alltoall"}})
        ok(step, "train_step", 6)
        for ring in ("pxn", "aligned"):
            ok(g.run({"op": "allreduce", "bytes": 3 << 16, "ring": ring}), "allreduce", 6)
        ok(g.run({"op": "hier_allreduce", "bytes": 3 << 16}), "hier_allreduce", 6)
        ok(g.run({"op": "hier_alltoall", "bytes": 3 << 16}), "hier_alltoall", 6)
        # the direct ring's wrap-around hop (2, 1) -> (0, 0) crosses rails: all ranks refuse it
        direct = g.run({"op": "allreduce", "bytes": 1024, "ring": "direct"})
        assert all(not r["ok"] and "rank 5 (server 2, rail 1) would send to rank 0" in r["error"]
                   for r in direct)
        ok(g.run({"op": "allreduce", "bytes": 1024}), "allreduce", 6)  # the mesh is intact


def test_a_worker_that_cannot_start_is_named_with_its_stderr() -> None:
    config = loopback_config(1, 2, timeout_s=TIMEOUT_S)
    data = config.to_dict()
    data["ranks"][1]["ip"] = "192.0.2.1"  # TEST-NET-1: not an address of this machine
    start = time.monotonic()
    with pytest.raises(WorkerStartError) as err:
        WorkerGroup(subprocess_factory(), data).start()
    message = str(err.value)
    assert "rank 1 (server 0, rail 1, 192.0.2.1) exited with code 1" in message
    assert "cannot listen on 192.0.2.1" in message
    assert time.monotonic() - start < 10


def run_worker(config_path: Path, rank: int, stdin: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "workloads.worker", "--config", str(config_path),
                           "--rank", str(rank)], input=stdin, capture_output=True, text=True,
                          env=env, timeout=30)


def test_worker_protocol_by_hand(tmp_path: Path) -> None:
    config = loopback_config(1, 1, timeout_s=TIMEOUT_S).dump(tmp_path / "job.json")
    lines = ['{"op": "allreduce", "bytes": 400, "iter": 2}', "not json", '{"op": "alltoall", "x": 1}',
             '{"op": "hier_allreduce", "bytes": 40, "iter": 3, "seq": 8}', '{"op": "quit"}',
             '{"op": "allreduce"}']
    done = run_worker(config, 0, "\n".join(lines) + "\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "READY 0" and len(out) == 5  # nothing after quit
    results = [json.loads(line) for line in out[1:]]
    assert results[0]["ok"] and results[0]["iter"] == 2 and results[0]["bytes"] == 400
    assert not results[1]["ok"] and "not JSON" in results[1]["error"]
    assert not results[2]["ok"] and "unknown key 'x'" in results[2]["error"]
    assert results[3]["ok"] and results[3]["seq"] == 8


def test_worker_with_a_bad_configuration_exits_non_zero(tmp_path: Path) -> None:
    bad = tmp_path / "job.json"
    bad.write_text('{"servers": 1}')
    done = run_worker(bad, 0, "")
    assert done.returncode == 2 and "cannot start" in done.stderr and "ranks: missing" in done.stderr
    config = loopback_config(1, 1).dump(tmp_path / "ok.json")
    done = run_worker(config, 4, "")
    assert done.returncode == 2 and "--rank" in done.stderr
