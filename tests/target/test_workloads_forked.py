"""Workers forked per server (workloads.zygote, workloads.forked), on loopback addresses.

The same collectives as one process per worker (tests/target/test_workloads_loopback.py),
each server's workers the children of one zygote; a killed worker is reported as such, a
zygote told to stop stops its workers, and nothing is left running after the group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from workloads.driver import WorkerGroup
from workloads.forked import ForkingFactory
from workloads.loopback import loopback_config, subprocess_server_popen

TIMEOUT_S = 3.0


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.fixture
def forked() -> Iterator[tuple[WorkerGroup, ForkingFactory]]:
    config = loopback_config(2, 2, timeout_s=TIMEOUT_S, mesh="full")
    with ForkingFactory(config.layout.ranks, subprocess_server_popen()) as factory, \
            WorkerGroup(factory, config, op_timeout_s=30) as group:
        yield group, factory


def ok(results: list[dict], op: str) -> None:
    assert [r["rank"] for r in results] == [0, 1, 2, 3]
    bad = [(r["rank"], r["error"]) for r in results if not r["ok"]]
    assert not bad, bad


def test_forked_workers_run_every_collective_and_are_one_zygotes_children(forked) -> None:
    group, factory = forked
    for command in ({"op": "allreduce", "bytes": 1 << 20}, {"op": "hier_allreduce", "bytes": (1 << 20) + 12},
                    {"op": "alltoall", "bytes": 1 << 18}, {"op": "hier_alltoall", "bytes": 1 << 18}):
        ok(group.run({**command, "iter": 1}), command["op"])
    pids = group.pids()
    assert len(pids) == 4
    parents = {_ppid(pid) for pid in pids.values()}
    assert parents == {z.proc.pid for z in factory._zygotes.values()} and len(parents) == 2
    group.close()
    assert set(group.returncodes.values()) == {0}
    factory.close()
    assert all(z.proc.returncode == 0 for z in factory._zygotes.values())
    assert not any(_alive(pid) for pid in pids.values())


def test_a_killed_forked_worker_is_reported_and_fails_the_others(forked) -> None:
    group, _ = forked
    ok(group.run({"op": "hier_allreduce", "bytes": 1 << 16}), "hier_allreduce")
    os.kill(group.pids()["rank3"], signal.SIGKILL)
    start = time.monotonic()
    results = group.run({"op": "allreduce", "bytes": 1 << 16}, timeout=TIMEOUT_S + 2.5)
    assert time.monotonic() - start < TIMEOUT_S
    assert not any(r["ok"] for r in results)
    assert results[3]["reported_by"] == "driver" and "exited with code -9" in results[3]["error"]


def test_a_zygote_told_to_stop_stops_its_workers(forked) -> None:
    group, factory = forked
    pids = group.pids()
    zygote = factory._zygotes[1]
    zygote.proc.send_signal(signal.SIGTERM)
    assert zygote.proc.wait(timeout=10) == 0
    for rank in (2, 3):  # server 1's
        assert not _alive(pids[f"rank{rank}"])
        assert group.returncodes[rank] == -signal.SIGTERM


@pytest.mark.skipif(os.geteuid() != 0, reason="entering a network namespace needs root")
def test_one_zygote_forks_every_worker_into_its_servers_namespace(tmp_path: Path) -> None:
    """The emulation's way (mininet/fabric_workers.py): one zygote, each worker entering its
    server's network namespace; here both servers share one made for the test."""
    name = f"mlf-test-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        path = f"/run/netns/{name}"
        config = loopback_config(2, 2, timeout_s=TIMEOUT_S, mesh="full")
        with ForkingFactory(config.layout.ranks, netns_of=lambda server: path) as factory, \
                WorkerGroup(factory, config, op_timeout_s=30) as group:
            ok(group.run({"op": "hier_allreduce", "bytes": 1 << 16, "iter": 0}), "hier_allreduce")
            inode = os.stat(path).st_ino
            assert all(os.stat(f"/proc/{pid}/ns/net").st_ino == inode for pid in group.pids().values())
            assert os.stat("/proc/self/ns/net").st_ino != inode
            assert len(factory._zygotes) == 1
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
