"""Host-based forwarding routes for a TopoOpt direct-connect fabric (pure functions).

In TopoOpt each server's NIC i is patched (through OCS i) into the ring of stride
delta_i: it transmits to server ``s + delta_i`` and receives from ``s - delta_i`` (a
patch-panel port has separate transmit and receive fibers). Servers without a direct
circuit reach each other over several such hops, forwarding in the hosts; the path is the
coin-change decomposition of the distance into strides (TopoOpt's artifact). Here each
server gets, for every other server, the first hop of that path: which NIC to send on and
which neighbour receives it. Only positive strides are usable when transmit is one-way.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from controller.errors import ConfigError
from controller.topology.model import Topology

__all__ = ["HostRoute", "compile_host_routes", "walk"]


@dataclass(frozen=True, slots=True)
class HostRoute:
    """On ``server``: traffic for ``destination`` leaves through NIC ``nic`` to ``next_hop``."""

    server: int
    destination: int
    nic: int
    next_hop: int
    hops: int  # length of the whole path


def _first_hops(n: int, strides: list[int]) -> dict[int, tuple[int, int]]:
    """distance -> (NIC index of the first stride, hop count), by BFS over forward strides."""
    first: dict[int, tuple[int, int]] = {0: (-1, 0)}
    q = deque([0])
    while q:
        u = q.popleft()
        for nic, s in enumerate(strides):
            v = (u + s) % n
            if v not in first:
                first[v] = (first[u][0] if u else nic, first[u][1] + 1)
                q.append(v)
    if len(first) < n:
        raise ConfigError("<topology>", "params.strides", strides, f"do not connect {n} servers with one-way circuits")
    return first


def compile_host_routes(topo: Topology) -> dict[int, list[HostRoute]]:
    """Every server's next hop towards every other server.

    >>> from controller.topology import topoopt
    >>> routes = compile_host_routes(topoopt(8, 2))
    >>> [(r.destination, r.nic, r.next_hop, r.hops) for r in routes[0][:4]]
    [(1, 0, 1, 1), (2, 0, 1, 2), (3, 1, 3, 1), (4, 0, 1, 2)]
    """
    if topo.kind != "topoopt":
        raise ConfigError(topo.name, "kind", topo.kind, "host-based routes are for TopoOpt fabrics")
    n = len(topo.hosts)
    strides = list(topo.params["strides"])  # type: ignore[call-overload]
    first = _first_hops(n, strides)
    routes: dict[int, list[HostRoute]] = {}
    for s in range(n):
        out = []
        for t in range(n):
            if t == s:
                continue
            nic, hops = first[(t - s) % n]
            out.append(HostRoute(s, t, nic, (s + strides[nic]) % n, hops))
        routes[s] = out
    return routes


def walk(routes: dict[int, list[HostRoute]], src: int, dst: int) -> list[int]:
    """The servers a packet visits from ``src`` to ``dst`` following the routes."""
    table = {s: {r.destination: r for r in rs} for s, rs in routes.items()}
    path = [src]
    while path[-1] != dst:
        if len(path) > len(routes):
            raise ConfigError("<routes>", f"{src}->{dst}", path, "routing loop")
        path.append(table[path[-1]][dst].next_hop)
    return path
