"""``mlfabric launch``: a user's job on an emulated fabric, one process per GPU, each rank in
its host with its rail's NIC; Open MPI's collectives through mpirun and the rsh agent, exact
on rail-only and on the fat-tree; each rail's traffic on its own NICs; the first failure
named and propagated; SIGTERM leaves nothing behind."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from controller.emulation import load_emulation_module
from controller.launch.mpirun import run_mpirun
from controller.launch.placement import place
from controller.topology import dump_topology, rail_fat_tree, rail_only

ROOT = Path(__file__).resolve().parents[2]
needs_mpi = pytest.mark.skipif(subprocess.run(["sh", "-c", "command -v mpirun"], capture_output=True).returncode != 0,
                               reason="Open MPI's mpirun is not installed (make setup installs openmpi-bin)")


def _launch(tmp_path: Path, topo, target: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    path = tmp_path / f"{topo.name}.yaml"
    dump_topology(topo, path)
    return subprocess.run([sys.executable, "-m", "controller.cli", "launch", "--target", target, *_split_args(args, path)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _split_args(args: tuple[str, ...], path: Path) -> list[str]:
    """The launcher's options, the topology file, then ``--`` and the command."""
    i = args.index("--")
    return [*args[:i], str(path), *args[i:]]


def _json_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        body = line.split("] ", 1)[-1]
        if body.startswith("{"):
            out.append(json.loads(body))
    return out


def test_every_rank_runs_in_its_host_with_its_rails_nic(tmp_path: Path, target_name: str) -> None:
    # /proc/net is the reading process's network namespace (/sys/class/net is the machine's)
    probe = ("import os, socket; s = socket.socket(); s.bind((os.environ['MLFABRIC_NIC_ADDR'], 0)); "
             "nics = [ln.split(':')[0].strip() for ln in open('/proc/net/dev').readlines()[2:]]; "
             "print(os.environ['RANK'], os.environ['WORLD_SIZE'], os.environ['LOCAL_RANK'], os.environ['MLFABRIC_RAIL'], "
             "os.environ['GLOO_SOCKET_IFNAME'], ','.join(sorted(n for n in nics if n != 'lo')))")
    topo = rail_only(2, 2, rate_mbps=None)
    done = _launch(tmp_path, topo, target_name, "--", sys.executable, "-c", probe)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = sorted(line.split("] ", 1)[1].split() for line in done.stdout.splitlines() if line.startswith("["))
    assert [r[:5] for r in rows] == [["0", "4", "0", "0", "s0-eth0"], ["1", "4", "1", "1", "s0-eth1"],
                                     ["2", "4", "0", "0", "s1-eth0"], ["3", "4", "1", "1", "s1-eth1"]]
    # each rank bound its rail's address and saw only its host's NICs: it ran inside its own host
    assert all(r[5] == f"{r[4].split('-')[0]}-eth0,{r[4].split('-')[0]}-eth1" for r in rows), rows
    assert "all 4 ranks exited 0" in done.stderr


@needs_mpi
@pytest.mark.parametrize("make", [lambda: rail_only(4, 4, rate_mbps=None), lambda: rail_fat_tree(4, 4, rate_mbps=None)],
                         ids=["rail-only", "fat-tree"])
def test_open_mpi_allreduce_and_alltoall_are_exact_over_16_ranks(tmp_path: Path, target_name: str, make) -> None:
    done = _launch(tmp_path, make(), target_name, "--mpi", "--", sys.executable, "-m", "workloads.mpi_collectives",
                   "--sizes-kb", "64", "--repetitions", "2")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    results = _json_lines(done.stdout)
    assert {(r["collective"], r["world"], r["exact"]) for r in results if "collective" in r} == {
        ("allreduce", 16, True), ("alltoall", 16, True)}
    ranks = next(r["ranks"] for r in results if "ranks" in r)
    assert [(rank, nic) for rank, _, nic, _ in ranks][:5] == [(0, "s0-eth0"), (1, "s0-eth1"), (2, "s0-eth2"),
                                                             (3, "s0-eth3"), (4, "s1-eth0")]


def _tx_bytes(fab, topo) -> dict[str, int]:
    """Bytes every host NIC has sent, from the host's own /proc/net/dev."""
    out = {}
    for h in topo.hosts:
        for line in fab.host(h.name).cmd("cat /proc/net/dev").splitlines()[2:]:
            name, _, fields = line.partition(":")
            if name.strip().startswith(f"{h.name}-"):
                out[name.strip()] = int(fields.split()[8])
    return out


@needs_mpi
def test_each_rails_ranks_send_on_their_rails_nics(tmp_path: Path, target_name: str) -> None:
    """Ranks reducing within their rail (MPI_Comm_split by rail) send through their own NIC:
    every rail NIC of every server carries at least its rank's share of a 256 KiB ring."""
    import io

    fabric_net = load_emulation_module("fabric_net")
    topo = rail_only(4, 2, rate_mbps=None)
    placement = place(topo)
    out = io.StringIO()
    with fabric_net.EmulatedFabric(topo, target=target_name, shape=False, publish=False,
                                   log_dir=tmp_path / "logs") as fab:
        pids = {h: int(p) for h, p in fab.live.params["host_pids"].items()}
        before = _tx_bytes(fab, topo)
        result = run_mpirun(placement, [sys.executable, "-m", "workloads.mpi_collectives", "--per-rail",
                                        "--collectives", "allreduce", "--sizes-kb", "256", "--repetitions", "2"],
                            pids, launch_id=uuid.uuid4().hex, out=out)
        after = _tx_bytes(fab, topo)
    assert result.exit_code == 0, out.getvalue()[-3000:]
    assert all(r["exact"] for r in _json_lines(out.getvalue()) if "collective" in r)
    sent = {k: after[k] - before[k] for k in after}
    # 3 timed-or-warm-up all-reduces of 256 KiB among 4 ranks: a ring sends 2 x 3/4 of it each time
    share = 3 * 2 * 0.75 * 256 * 1024
    assert all(v >= 0.9 * share for v in sent.values()), sent


def test_a_failing_rank_is_named_and_stops_the_job(tmp_path: Path, target_name: str) -> None:
    topo = rail_only(2, 2, rate_mbps=None)
    job = "import os, sys, time; r = os.environ['RANK']; sys.exit(3) if r == '2' else time.sleep(60)"
    t0 = time.monotonic()
    done = _launch(tmp_path, topo, target_name, "--", sys.executable, "-c", job)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "rank 2 (on s1, s1-eth0) failed with exit code 3; the other ranks were stopped" in done.stderr
    assert time.monotonic() - t0 < 40, "the other ranks were stopped, not waited for"


@needs_mpi
def test_a_crashed_mpi_rank_is_named(tmp_path: Path, target_name: str) -> None:
    done = _launch(tmp_path, rail_only(2, 2, rate_mbps=None), target_name, "--mpi", "--", sys.executable, "-m",
                   "workloads.mpi_collectives", "--fail-rank", "1", timeout=120)
    assert done.returncode == 3, (done.stdout + done.stderr)[-2000:]
    assert "rank 1 (on s0, s0-eth1) failed with exit code 3" in done.stderr


@pytest.mark.parametrize("mpi", [False, pytest.param(True, marks=needs_mpi)], ids=["plain", "mpi"])
def test_sigterm_stops_every_rank_and_takes_the_fabric_down(tmp_path: Path, target_name: str, mpi: bool) -> None:
    from controller.netstate import state_dir

    path = tmp_path / "t.yaml"
    dump_topology(rail_only(2, 2, rate_mbps=None), path)
    marker = f"mlfabric-test-{uuid.uuid4().hex[:8]}"
    job = f"import time; print('up', flush=True); time.sleep(120)  # {marker}"
    if mpi:
        job = f"from mpi4py import MPI; import time; print('up', flush=True); time.sleep(120)  # {marker}"
    proc = subprocess.Popen([sys.executable, "-m", "controller.cli", "launch", "--target", target_name,
                             *(["--mpi"] if mpi else []), str(path), "--", sys.executable, "-c", job],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + 90
    for line in proc.stdout:
        seen.append(line)
        if sum("up" in ln for ln in seen if ln.startswith("[")) >= 4 or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    text = "".join(seen) + rest
    assert proc.returncode == 130, text[-2000:]
    assert "stopped by SIGTERM" in text
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert not left, f"ranks left running: {left}"
    # the fabric it brought up is gone: its run's records (links, namespaces, switches) were removed
    assert not list(state_dir().glob(f"*-{proc.pid}-*.json"))
    assert not os.path.exists(f"/proc/{proc.pid}")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="torch is not installed in this environment (not a default dependency: "
                           ".venv/bin/pip install torch==2.13.0 adds it)")
def test_a_torch_ddp_step_runs_over_the_fabric_with_gloo(tmp_path: Path, target_name: str) -> None:
    done = _launch(tmp_path, rail_only(2, 2, rate_mbps=None), target_name, "--torch", "--",
                   sys.executable, "-m", "workloads.torch_ddp_step", timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    rows = _json_lines(done.stdout)
    assert len(rows) == 4 and all(r["grad_is_mean"] and r["params_identical"] for r in rows), rows
    assert sorted(r["nic"] for r in rows) == ["s0-eth0", "s0-eth1", "s1-eth0", "s1-eth1"]


def _listener_pid(address: str) -> int:
    port = address.rpartition(":")[2]
    out = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True).stdout
    return int(out.split("pid=")[1].split(",")[0])


def test_a_rank_whose_rail_goes_down_is_stopped_and_a_job_on_it_refused(tmp_path: Path, target_name: str) -> None:
    """On a running fabric: killing rail 1's switch stops a running job naming the rail and
    its ranks; a job launched on it afterwards is refused before any rank starts."""
    from fabric_process import wait_until_published

    from controller.topology import load_topology

    env = {**os.environ, "MLFABRIC_STATE_DIR": str(tmp_path)}
    path = tmp_path / "t.yaml"
    dump_topology(rail_only(2, 2, rate_mbps=None), path)
    fabric = subprocess.Popen([sys.executable, "-m", "controller.cli", "fabric", "up", str(path), "--target",
                               target_name], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env)
    try:
        wait_until_published(fabric, tmp_path / "current-fabric.yaml")
        live = load_topology(tmp_path / "current-fabric.yaml")
        rail1 = next(s for s in live.switches if s.rail == 1)
        job = subprocess.Popen([sys.executable, "-m", "controller.cli", "launch", "--", sys.executable, "-c",
                                "import time; print('up', flush=True); time.sleep(120)"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env)
        assert job.stdout is not None
        seen = []
        for line in job.stdout:
            seen.append(line)
            if sum("up" in ln for ln in seen if ln.startswith("[")) >= 4:
                break
        t0 = time.monotonic()
        os.kill(_listener_pid(str(rail1.grpc)), signal.SIGKILL)
        rest, _ = job.communicate(timeout=60)
        text = "".join(seen) + rest
        assert job.returncode != 0, text[-2000:]
        assert f"rail 1 is down (switch {rail1.name} does not answer at {rail1.grpc}): ranks 1, 3 use it" in text
        assert "stopping the job" in text and time.monotonic() - t0 < 20, "stopped, not left to hang"
        refused = subprocess.run([sys.executable, "-m", "controller.cli", "launch", "--", "true"],
                                 capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
        assert refused.returncode != 0
        assert "rail 1 is down" in refused.stderr and "the job was not started" in refused.stderr
    finally:
        fabric.send_signal(signal.SIGTERM)
        fabric.communicate(timeout=60)
