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

from controller.errors import ConfigError
from controller.p4runtime.entities import TableRule
from controller.topology.model import Topology
from controller.topoopt.wiring import Hop, Wiring, stride_perm

__all__ = ["ACCOUNTING_TABLE", "HostRoute", "accounting_commands", "circuit_rules", "compile_host_routes",
           "host_commands", "walk", "wiring_of"]

#: the nftables table in which every TopoOpt server counts the bytes it originates and those
#: it forwards for others (chains ``originated`` and ``forwarded``)
ACCOUNTING_TABLE = "mlfabric_acct"


HostRoute = Hop


def wiring_of(topo: Topology) -> Wiring:
    """The circuits of TopoOpt fabric ``topo`` (``params.circuits``, or its strides)."""
    if topo.kind != "topoopt":
        raise ConfigError(topo.name, "kind", topo.kind, "host-based routes are for TopoOpt fabrics")
    n = len(topo.hosts)
    circuits = topo.params.get("circuits")
    if circuits is None:
        strides = list(topo.params.get("strides") or [])  # type: ignore[call-overload]
        if not strides:
            raise ConfigError(topo.name, "params", None, "a TopoOpt fabric needs params.circuits or params.strides")
        return Wiring(n, tuple(stride_perm(n, st) for st in strides))
    if not isinstance(circuits, list) or any(not isinstance(p, list) for p in circuits):
        raise ConfigError(topo.name, "params.circuits", circuits, "a list of permutations (lists of servers or null)")
    try:
        return Wiring(n, tuple(tuple(p) for p in circuits), tuple(topo.params.get("labels") or ()))  # type: ignore[arg-type]
    except ConfigError as exc:
        raise ConfigError(topo.name, f"params.{exc.key}", exc.value, exc.problem) from None


def compile_host_routes(topo: Topology) -> dict[int, list[HostRoute]]:
    """Every server's next hop towards every other server.

    >>> from controller.topology import topoopt
    >>> routes = compile_host_routes(topoopt(8, 2))
    >>> [(r.destination, r.nic, r.next_hop, r.hops) for r in routes[0][:4]]
    [(1, 0, 1, 1), (2, 0, 1, 2), (3, 1, 3, 1), (4, 0, 1, 2)]
    """
    wiring = wiring_of(topo)
    try:
        return wiring.routes()
    except ConfigError:
        raise ConfigError(topo.name, "params.circuits", None, "do not connect every pair of servers") from None


def walk(routes: dict[int, list[HostRoute]], src: int, dst: int) -> list[int]:
    """The servers a packet visits from ``src`` to ``dst`` following the routes."""
    table = {s: {r.destination: r for r in rs} for s, rs in routes.items()}
    path = [src]
    while path[-1] != dst:
        if len(path) > len(routes):
            raise ConfigError("<routes>", f"{src}->{dst}", path, "routing loop")
        path.append(table[path[-1]][dst].next_hop)
    return path


def circuit_rules(topo: Topology, ocs: str) -> list[TableRule]:
    """The pinned circuits of circuit switch ``ocs{i}`` (TopoOpt's one-shot configuration):
    server ``s``'s transmit fiber on port ``s + 1`` goes to the port of ``perms[i][s]``
    (``s + delta_i`` on a ring).

    >>> from controller.topology import topoopt
    >>> [(r.match["standard_metadata.ingress_port"].value, r.params["port"])
    ...  for r in circuit_rules(topoopt(8, 2), "ocs1")][:3]
    [(1, 4), (2, 5), (3, 6)]
    """
    from controller.schedule.generators import one_shot
    from controller.schedule.ocs_rules import circuit_switch_rules

    sw = topo.switch(ocs)
    if sw.program != "circuit_switch":
        raise ConfigError(topo.name, f"switch {ocs}", sw.program, "a TopoOpt fabric's circuit switches run circuit_switch")
    n = len(topo.hosts)
    i = int(ocs.removeprefix("ocs"))
    port_of = {peer.node: port for port, peer in topo.switch_ports(ocs).items()}
    ports = [port_of[f"s{s}"] for s in range(n)]
    return circuit_switch_rules(one_shot([wiring_of(topo).perms[i]], name=topo.name), 0, ports=ports)


def host_commands(topo: Topology) -> dict[str, list[str]]:
    """The kernel set-up of every server for host-based forwarding (pure: ``ip`` and
    ``sysctl`` commands per host): forward packets, do not drop asymmetric ones (a reply
    takes other circuits than its request), and for every address of every other server a
    /32 route through the first hop's NIC, with that hop's MAC pinned (circuits are one-way,
    so ARP cannot be answered back over them).

    >>> from controller.topology import topoopt
    >>> cmds = host_commands(topoopt(8, 2))["s0"]
    >>> [c for c in cmds if "10.100.0.3/32" in c]
    ['ip route replace 10.100.0.3/32 via 10.100.0.2 dev s0-eth0 onlink']
    """
    routes = compile_host_routes(topo)
    n = len(topo.hosts)
    out: dict[str, list[str]] = {}
    for s in range(n):
        host = topo.host(f"s{s}")
        cmds = ["sysctl -qw net.ipv4.ip_forward=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0"]
        cmds += [f"sysctl -qw net.ipv4.conf.{host.name}-{nic.name}.rp_filter=0" for nic in host.nics]
        hops = set()
        for r in routes[s]:
            nic = f"eth{r.nic}"
            via = topo.host(f"s{r.next_hop}").nic(nic)
            hops.add((via.address, via.mac, f"{host.name}-{nic}"))
            for addr in topo.host(f"s{r.destination}").nics:
                cmds.append(f"ip route replace {addr.address}/32 via {via.address} dev {host.name}-{nic} onlink")
        cmds += [f"ip neigh replace {ip} lladdr {mac} dev {dev} nud permanent" for ip, mac, dev in sorted(hops)]
        out[host.name] = cmds
    return out


def accounting_commands() -> list[str]:
    """nftables counters of the IP bytes a server originates (its output hook, loopback
    excepted) and forwards for others (its forward hook), for the TopoOpt experiment's tax
    on every fabric it compares. Unlike the kernel's packet counts
    (``ForwDatagrams``, a NIC's packets) they stay exact when TCP's segments travel as
    super-packets: a counter adds each packet's length, however many frames it stands for.

    >>> accounting_commands()[0]
    'nft add table ip mlfabric_acct'
    """
    t = ACCOUNTING_TABLE
    return [f"nft add table ip {t}",
            f"nft 'add chain ip {t} originated {{ type filter hook output priority 0 ; }}'",
            f"nft 'add rule ip {t} originated oifname != \"lo\" counter'",
            f"nft 'add chain ip {t} forwarded {{ type filter hook forward priority 0 ; }}'",
            f"nft add rule ip {t} forwarded counter"]
