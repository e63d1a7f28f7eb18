"""A TopoOpt direct-connect fabric in Mininet: circuit switches pinned to the TotientPerms
strides (one-way circuits), the servers forwarding by the routes the controller compiled.
Every server reaches every other, each way, over the compiled number of circuits."""

from __future__ import annotations

import re

from controller.emulation import load_emulation_module
from controller.routing.topoopt_routes import compile_host_routes
from controller.topology import topoopt

fabric_net = load_emulation_module("fabric_net")


def test_every_server_reaches_every_other_through_host_forwarding(target_name: str) -> None:
    topo = topoopt(8, 2, rate_mbps=None)  # strides 1 and 3, diameter 2
    routes = {s: {r.destination: r.hops for r in rs} for s, rs in compile_host_routes(topo).items()}
    with fabric_net.EmulatedFabric(topo, target=target_name, shape=False, publish=False) as fab:
        failed, ttls = [], {}
        for s in range(8):
            targets = " ".join(topo.host(f"s{t}").nics[0].address for t in range(8) if t != s)
            out = fab.host(f"s{s}").cmd(f"for a in {targets}; do ping -c1 -W2 -n $a | grep -o 'from [0-9.]*: icmp_seq=1 ttl=[0-9]*' "
                                        f"|| echo FAIL $a; done")
            failed += [f"s{s}->{line.split()[1]}" for line in out.splitlines() if line.startswith("FAIL")]
            for m in re.finditer(r"from 10\.100\.0\.(\d+): icmp_seq=1 ttl=(\d+)", out):
                ttls[(s, int(m.group(1)) - 1)] = int(m.group(2))
    assert not failed, f"unreachable: {failed}"
    assert len(ttls) == 8 * 7
    # each relaying server decrements the reply's TTL once: 64 minus the reply's relays
    for (s, t), ttl in ttls.items():
        assert 64 - ttl == routes[t][s] - 1, (s, t, ttl, routes[t][s])


def _tx_bytes(fab, topo) -> dict[tuple[int, int], int]:
    """Bytes each server's NIC ``eth{i}`` transmitted: ``{(server, nic): bytes}``."""
    out = {}
    for h in topo.hosts:
        for line in fab.host(h.name).cmd("cat /proc/net/dev").splitlines():
            name, sep, rest = line.partition(":")
            if sep and name.strip().startswith(f"{h.name}-eth"):
                out[int(h.name[1:]), int(name.strip().rsplit("eth", 1)[1])] = int(rest.split()[8])
    return out


def test_a_co_optimized_fabric_carries_a_mixed_iteration_and_its_all_reduce_uses_every_ring(target_name: str,
                                                                                           tmp_path) -> None:
    import dataclasses
    import json
    import subprocess
    import sys

    from controller.experiments.topoopt import step_spec
    from controller.topology import topoopt_wired
    from controller.topoopt.demand import demand
    from controller.topoopt.finder import matchings, rings_over_groups
    from controller.topoopt.job import Job, Strategy
    from controller.topoopt.wiring import Wiring
    from workloads.driver import WorkerGroup
    from workloads.plan import Rank

    # 4 pipelines of 2 stages on 8 servers: each stage's 4 replicas all-reduce over two rings
    # of their own (strides 1 and 3), the stages exchange activations over matched circuits
    job = Job(name="mixed-8", model="transformer", servers=8, compute_ms=10, params_mb=0.8, activation_mb=0.02,
              strategy=Strategy(stages=2, placement=tuple(range(8))))
    dem = demand(job, job.strategy)
    circuits = rings_over_groups(dem, 2) + matchings(dem, 1)
    wiring = Wiring(8, tuple(p for p, _ in circuits), tuple(lbl for _, lbl in circuits))
    topo = topoopt_wired(wiring, rate_mbps=None, name="mixed-8")
    step = step_spec(job, job.strategy, wiring)
    assert [len(g["rings"]) for g in step["groups"]] == [2, 2] and wiring.labels[-1] == "mp"
    ranks = [Rank(rank=s, server=s, rail=0, ip=topo.host(f"s{s}").nics[0].address) for s in range(8)]
    config = {"ranks": [dataclasses.asdict(r) for r in ranks], "servers": 8, "rails": 1, "port": 7300,
              "timeout_s": 60.0, "start_timeout_s": 30.0, "mesh": "full"}
    path = tmp_path / "workers.json"
    path.write_text(json.dumps(config))
    with fabric_net.EmulatedFabric(topo, target=target_name, shape=False, publish=False) as fab:
        def popen(rank: Rank, argv: list[str]) -> subprocess.Popen:
            return fab.host(f"s{rank.server}").popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                      stderr=subprocess.PIPE)

        with WorkerGroup(popen, path, ranks, python=sys.executable) as group:
            results = group.run({"op": "job_step", "step": step}, timeout=120)
            assert all(r["ok"] for r in results), [r["error"] for r in results if not r["ok"]]  # checked exactly
            allreduce_only = {**step, "mp": [], "compute_s": 0}
            before = _tx_bytes(fab, topo)
            results = group.run({"op": "job_step", "step": allreduce_only}, timeout=120)
            assert all(r["ok"] for r in results), [r["error"] for r in results if not r["ok"]]
            after = _tx_bytes(fab, topo)
    # every ring of every group sent its share over its own circuits: each member's NIC of that ring
    for g in step["groups"]:
        m = len(g["rings"][0])
        for order, share in zip(g["rings"], g["shares"], strict=True):
            nic = next(i for i, perm in enumerate(topo.params["circuits"])
                       if all(perm[a] == b for a, b in zip(order, order[1:] + order[:1], strict=True)))
            for s in order:
                sent = after[s, nic] - before[s, nic]
                assert sent >= 0.9 * 2 * (m - 1) / m * g["bytes"] * share, (s, nic, sent, share)
