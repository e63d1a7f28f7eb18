"""Rank placement and environment for `mlfabric launch` on every fabric kind, the mpirun
command line, and the rsh agent's parsing (controller/launch/)."""

from __future__ import annotations

import pytest

from controller.errors import ConfigError
from controller.launch.mpi import hostfile, mpirun_argv
from controller.launch.placement import environment, place
from controller.launch.rsh import parse
from controller.topology import optical, rail_fat_tree, rail_only, topoopt


@pytest.mark.parametrize("make", [lambda: rail_only(4, 4), lambda: rail_fat_tree(4, 4)])
def test_one_rank_per_gpu_each_on_its_rail(make) -> None:
    topo = make()
    p = place(topo)  # GPUs and rails: one rank per GPU by default
    assert p.world == 16 and [r.rank for r in p.ranks] == list(range(16))
    for r in p.ranks:
        host = topo.host(r.host)
        assert r.gpu == r.local_rank == r.rail and host.rail_nic(r.rail).name == r.nic
        assert r.address == host.rail_nic(r.rail).address and r.subnet == f"10.{r.rail}.0.0/16"
        env = environment(p, r)
        assert env["RANK"] == str(r.rank) and env["WORLD_SIZE"] == "16" and env["LOCAL_WORLD_SIZE"] == "4"
        assert env["GLOO_SOCKET_IFNAME"] == env["MLFABRIC_NIC"] == f"{r.host}-{r.nic}"
        assert env["MASTER_ADDR"] == p.ranks[0].address and env["MASTER_PORT"] == "29500"
    assert [r.host for r in p.ranks[:5]] == ["s0"] * 4 + ["s1"]


def test_rail_order_keeps_consecutive_ranks_on_one_rail() -> None:
    p = place(rail_only(4, 2), order="rail")
    assert [(r.host, r.rail) for r in p.ranks[:5]] == [("s0", 0), ("s1", 0), ("s2", 0), ("s3", 0), ("s0", 1)]
    assert [r.node_rank for r in p.ranks[:4]] == [0, 1, 2, 3]


def test_hosts_without_rails_take_ranks_per_host_on_their_nics() -> None:
    topo = topoopt(9, 3)
    with pytest.raises(ConfigError, match="no GPUs or rails: use --ranks-per-host"):
        place(topo, gpus=True)
    p = place(topo, ranks_per_host=2, hosts=["s0", "s5"])
    assert [(r.rank, r.host, r.local_rank, r.nic, r.rail) for r in p.ranks] == [
        (0, "s0", 0, "eth0", None), (1, "s0", 1, "eth1", None), (2, "s5", 0, "eth0", None), (3, "s5", 1, "eth1", None)]
    assert "MLFABRIC_RAIL" not in environment(p, p.ranks[0])
    assert place(optical(4, 1)).world == 4  # one per host by default


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"hosts": ["s0", "s9"]}, "--hosts: not hosts of"),
    ({"hosts": ["s0", "s0"]}, "a host named twice"),
    ({"order": "random"}, "--rank-order: one of server, rail"),
    ({"master_port": 70000}, "--master-port"),
    ({"gpus": True, "ranks_per_host": 2}, "not both"),
])
def test_bad_placements_are_refused_by_name(kwargs, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        place(rail_only(2, 2), **kwargs)


def test_mpirun_runs_each_rank_in_its_own_context_with_its_rail() -> None:
    p = place(rail_only(2, 2))
    argv = mpirun_argv(p, ["python3", "job.py"], agent="/tmp/agent", hostfile_path="/tmp/hosts")
    contexts = " ".join(argv).split(" : ")
    assert len(contexts) == 4
    for r, ctx in zip(p.ranks, contexts, strict=True):
        assert f"-np 1 -host {r.host}:2 -x OMPI_MCA_btl_tcp_if_include={r.subnet}" in ctx
        assert f"-x OMPI_MCA_btl_vader_backing_directory=/dev/shm/{r.host}" in ctx  # a segment folder per host
        assert f"-x MLFABRIC_RAIL={r.rail}" in ctx and ctx.endswith("python3 job.py")
    assert "--mca" in argv and "plm_rsh_agent" in argv and "/tmp/agent" in argv
    assert hostfile(p) == "s0 slots=2\ns1 slots=2\n"


def test_the_rsh_agent_takes_ssh_style_calls() -> None:
    assert parse(["s3", "orted", "-mca", "x", "1"]) == ("s3", "orted -mca x 1")
    assert parse(["-x", "-o", "StrictHostKeyChecking=no", "s1", "true"]) == ("s1", "true")
    with pytest.raises(SystemExit, match="expected HOST COMMAND"):
        parse(["s1"])
