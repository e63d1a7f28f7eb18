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
