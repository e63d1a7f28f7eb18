"""Fabric generators: rail-only, rail-optimized fat-tree, and TopoOpt direct-connect.

Addressing (rail fabrics): NIC r of server d is ``10.r.0.0 + offset + d`` in the rail's
``10.r.0.0/16`` with ``offset`` a power of two >= 256, so that the servers behind one leaf
form an aligned prefix and upper tiers hold one route per leaf. MACs are locally
administered: ``02:00:00:rr:dd:dd`` for NICs, ``02:5f:ss:ss:pp:pp`` for switch ports.
"""

from __future__ import annotations

import ipaddress
import math

from controller.errors import ConfigError
from controller.topology.model import JUMBO_MTU, Endpoint, Host, Link, Nic, Switch, Topology
from controller.topology.totient import diameter, ring_strides, totient_candidates
from controller.topology.validate import MAX_PORT
from controller.topoopt.wiring import Wiring, stride_perm

__all__ = [
    "UPLINK_ROUTINGS",
    "host_address",
    "leaf_block",
    "rail_fat_tree",
    "rail_only",
    "switch_mac",
    "topoopt",
]

DEFAULT_PROGRAM = "rail_switch"
#: how a switch spreads traffic over equal paths (a fat-tree leaf over its uplinks, a spine
#: over parallel links): per flow by a hash of the 5-tuple (ecmp), per flowlet (a flow moves
#: when it pauses longer than the gap: LetFlow), per packet round robin (spray, as adaptive
#: routing and packet-spraying fabrics do), or by the destination server mod k (dst-server)
UPLINK_ROUTINGS = ("ecmp", "flowlet", "spray", "dst-server")
#: a flowlet ends when its flow pauses longer than this (µs, the switches' clock): a few
#: 9,000-byte frames at the emulation's 100 Mbit/s (0.72 ms each), longer than the queueing
#: difference between two uplinks that stay below a few frames
FLOWLET_GAP_US = 2000


def _bad(key: str, value: object, problem: str) -> ConfigError:
    return ConfigError("<generator>", key, value, problem)


def leaf_block(servers: int, radix: int | None) -> int:
    """Servers per leaf of a rail: all of them (one switch) or radix/2 (a two-tier Clos)."""
    if radix is None or servers <= min(radix, MAX_PORT):
        return servers
    if radix < 4 or radix & (radix - 1):
        raise _bad("radix", radix, "a per-rail Clos needs a power-of-two radix >= 4")
    return radix // 2


def _offset(block: int) -> int:
    return max(256, 1 << max(0, math.ceil(math.log2(max(block, 1)))))


def host_address(rail: int, server: int, block: int = 1) -> str:
    """IPv4 address of NIC ``rail`` of ``server``.

    >>> host_address(1, 0), host_address(1, 300)
    ('10.1.1.0', '10.1.2.44')
    """
    base = int(ipaddress.IPv4Address(f"10.{rail}.0.0"))
    return str(ipaddress.IPv4Address(base + _offset(block) + server))


def switch_mac(device_id: int, port: int) -> str:
    return f"02:5f:{device_id >> 8 & 255:02x}:{device_id & 255:02x}:{port >> 8 & 255:02x}:{port & 255:02x}"


def _nic_mac(rail: int, server: int) -> str:
    return f"02:00:00:{rail & 255:02x}:{server >> 8 & 255:02x}:{server & 255:02x}"


def _check_sizes(servers: int, gpus: int) -> None:
    if servers < 1:
        raise _bad("servers", servers, "need at least one server (HB domain)")
    if gpus < 1:
        raise _bad("gpus", gpus, "need at least one GPU per server")
    if gpus > 255:
        raise _bad("gpus", gpus, "at most 255 GPUs (rails) per server")


def _servers(servers: int, gpus: int, block: int) -> list[Host]:
    hosts = []
    for d in range(servers):
        nics = tuple(Nic(f"eth{r}", f"{host_address(r, d, block)}/16", _nic_mac(r, d), r) for r in range(gpus))
        hosts.append(Host(f"s{d}", nics, gpus))
    return hosts


def _rail_tier(r: int, servers: int, block: int, rate: float | None, program: str,
               next_id: int) -> tuple[list[Switch], list[Link], int, list[tuple[str, int]]]:
    """Leaves of rail ``r`` with their servers; returns the leaves' free uplink ports."""
    switches: list[Switch] = []
    links: list[Link] = []
    uplinks: list[tuple[str, int]] = []
    n_leaves = math.ceil(servers / block)
    for leaf in range(n_leaves):
        name = f"rail{r}" if n_leaves == 1 else f"rail{r}-leaf{leaf}"
        role = "rail" if n_leaves == 1 else "leaf"
        switches.append(Switch(name, role, program, next_id, None, r))  # type: ignore[arg-type]
        next_id += 1
        members = range(leaf * block, min(servers, (leaf + 1) * block))
        for i, d in enumerate(members):
            links.append(Link(Endpoint(f"s{d}", f"eth{r}"), Endpoint(name, i + 1), rate))
        uplinks.append((name, block + 1))
    return switches, links, next_id, uplinks


def rail_only(servers: int, gpus: int, *, radix: int | None = None, rate_mbps: float | None = 100.0,
              program: str = DEFAULT_PROGRAM, name: str | None = None, mtu: int = JUMBO_MTU) -> Topology:
    """D servers (HB domains) of R GPUs; GPU r of every server on rail r; no spine.

    A rail is one switch, or a two-tier Clos of radix-``radix`` switches local to the rail
    when it has more servers than one switch has ports.

    >>> t = rail_only(4, 4)
    >>> len(t.switches), len(t.links), [s.name for s in t.switches]
    (4, 16, ['rail0', 'rail1', 'rail2', 'rail3'])
    """
    _check_sizes(servers, gpus)
    block = leaf_block(servers, radix)
    if radix is None and servers > MAX_PORT:
        raise _bad("servers", servers, f"more servers than one switch has ports ({MAX_PORT}): give a radix")
    hosts = _servers(servers, gpus, block)
    switches: list[Switch] = []
    links: list[Link] = []
    next_id = 1
    for r in range(gpus):
        leaves, leaf_links, next_id, uplinks = _rail_tier(r, servers, block, rate_mbps, program, next_id)
        switches += leaves
        links += leaf_links
        if len(leaves) > 1:
            assert radix is not None
            n_spines = max(1, (len(leaves) * (radix // 2)) // radix)
            for s in range(n_spines):
                spine = Switch(f"rail{r}-spine{s}", "spine", program, next_id, None, r)
                next_id += 1
                switches.append(spine)
            _wire_spines(leaves, [sw for sw in switches if sw.role == "spine" and sw.rail == r], radix // 2, rate_mbps, links, uplinks)
    params: dict[str, object] = {"rails": gpus, "servers": servers, "radix": radix, "block": block,
                                 "rate_mbps": rate_mbps}
    return Topology(name or f"rail-only-{servers}x{gpus}", "rail-only", tuple(hosts), tuple(switches), tuple(links), params,
                    mtu=mtu)


def _wire_spines(leaves: list[Switch], spines: list[Switch], up_ports: int, rate: float | None,
                 links: list[Link], uplinks: list[tuple[str, int]]) -> None:
    """Spread each leaf's ``up_ports`` uplinks round-robin over ``spines``."""
    spine_port = {s.name: 1 for s in spines}
    first_up = dict(uplinks)
    for leaf in leaves:
        for u in range(up_ports):
            spine = spines[u % len(spines)]
            links.append(Link(Endpoint(leaf.name, first_up[leaf.name] + u),
                              Endpoint(spine.name, spine_port[spine.name]), rate))
            spine_port[spine.name] += 1
            if spine_port[spine.name] > MAX_PORT:
                raise _bad("radix", up_ports * 2, f"spine {spine.name} would need more than {MAX_PORT} ports")


def rail_fat_tree(servers: int, gpus: int, *, spines: int = 2, uplinks_per_leaf: int | None = None,
                  oversubscription: float = 1.0, radix: int | None = None,
                  rate_mbps: float | None = 100.0, program: str = DEFAULT_PROGRAM,
                  name: str | None = None, mtu: int = JUMBO_MTU, uplink_routing: str = "ecmp",
                  flowlet_gap_us: int = FLOWLET_GAP_US) -> Topology:
    """The Rail-only paper's baseline: the same per-rail leaves plus a spine across all rails.

    Each leaf has ``uplinks_per_leaf`` uplinks (default: one per spine) spread over the
    spines; with ``oversubscription`` o > 1 the uplinks run at 1/o of the bandwidth the
    leaf's servers can offer. ``uplink_routing`` (:data:`UPLINK_ROUTINGS`) says how a leaf
    picks the uplink of a packet: ``ecmp`` hashes its 5-tuple (flows can collide on one
    uplink); ``flowlet`` re-hashes a flow when it pauses longer than ``flowlet_gap_us``;
    ``spray`` sends each packet to the next uplink in turn; ``dst-server`` takes uplink
    ``s mod k`` for destination server ``s`` (d-mod-k), which spreads every pairwise
    all-to-all round evenly.

    >>> t = rail_fat_tree(4, 4, spines=2)
    >>> sorted({s.role for s in t.switches}), len(t.links)
    (['rail', 'spine'], 24)
    """
    _check_sizes(servers, gpus)
    if spines < 1:
        raise _bad("spines", spines, "a fat-tree needs at least one spine")
    if oversubscription < 1:
        raise _bad("oversubscription", oversubscription, "must be >= 1 (1 = full bisection)")
    if uplink_routing not in UPLINK_ROUTINGS:
        raise _bad("uplink_routing", uplink_routing, f"one of {', '.join(UPLINK_ROUTINGS)}")
    if not 0 <= flowlet_gap_us < 1 << 48:
        raise _bad("flowlet_gap_us", flowlet_gap_us, "microseconds, 0 or more")
    block = leaf_block(servers, radix)
    hosts = _servers(servers, gpus, block)
    switches: list[Switch] = []
    links: list[Link] = []
    all_uplinks: list[tuple[str, int]] = []
    leaves: list[Switch] = []
    next_id = 1
    for r in range(gpus):
        rail_leaves, leaf_links, next_id, uplinks = _rail_tier(r, servers, block, rate_mbps, program, next_id)
        leaves += rail_leaves
        links += leaf_links
        all_uplinks += uplinks
    spine_switches = []
    for s in range(spines):
        spine_switches.append(Switch(f"spine{s}", "spine", program, next_id, None, None))
        next_id += 1
    switches = leaves + spine_switches
    ups = uplinks_per_leaf or spines
    up_rate = None
    if rate_mbps is not None:
        up_rate = rate_mbps * min(block, servers) / (ups * oversubscription)
    _wire_spines(leaves, spine_switches, ups, up_rate, links, all_uplinks)
    params: dict[str, object] = {"rails": gpus, "servers": servers, "radix": radix, "block": block, "spines": spines,
              "oversubscription": oversubscription, "rate_mbps": rate_mbps}
    if uplink_routing != "ecmp":  # the default stays out of the file, as before
        params["uplink_routing"] = uplink_routing
    if uplink_routing == "flowlet":
        params["flowlet_gap_us"] = flowlet_gap_us
    return Topology(name or f"rail-fat-tree-{servers}x{gpus}", "rail-fat-tree", tuple(hosts),
                    tuple(switches), tuple(links), params, mtu=mtu)


def topoopt(n: int, d: int, *, rate_mbps: float | None = 100.0, program: str = "circuit_switch",
            name: str | None = None, mtu: int = JUMBO_MTU) -> Topology:
    """n servers of degree d, each NIC i wired through OCS i to the ring of stride delta_i.

    >>> t = topoopt(8, 2)
    >>> t.params["strides"], t.params["diameter"], t.params["circuits"][1][:3]
    ([1, 3], 2, [3, 4, 5])
    """
    if n < 3:
        raise _bad("--servers", n, "a TopoOpt fabric needs at least 3 servers")
    if d < 1:
        raise _bad("--degree", d, "must be >= 1")
    usable = len(totient_candidates(n))
    if d > usable:
        need = next(m for m in range(n + 1, 100 * d + 10) if len(totient_candidates(m)) >= d)
        raise _bad("--degree", d, f"needs at least {need} servers: {n} servers have {usable} distinct ring "
                                  f"strides (coprime with {n}, up to {n // 2})")
    strides = ring_strides(n, d)
    wiring = Wiring(n, tuple(stride_perm(n, st) for st in strides), tuple(f"ring {st}" for st in strides))
    return topoopt_wired(wiring, rate_mbps=rate_mbps, program=program, name=name or f"topoopt-{n}x{d}", mtu=mtu,
                         params={"strides": strides, "diameter": diameter(n, strides)})


def topoopt_wired(wiring: Wiring, *, rate_mbps: float | None = 100.0, program: str = "circuit_switch",
                  name: str | None = None, mtu: int = JUMBO_MTU, params: dict[str, object] | None = None) -> Topology:
    """A TopoOpt fabric of any wiring (TopologyFinder's): NIC i of server s patched through
    OCS i to server ``wiring.perms[i][s]`` (none where that is None).

    >>> from controller.topoopt.wiring import Wiring
    >>> t = topoopt_wired(Wiring(4, ((1, 0, 3, 2), (2, 3, 0, 1)), ("mp", "mp")), name="pairs")
    >>> t.params["labels"], t.params["longest_route"]
    (['mp', 'mp'], 2)
    """
    n, d = wiring.n, wiring.degree
    if not wiring.connected:
        raise _bad("circuits", wiring.labels, "do not connect every pair of servers")
    hosts = []
    for s in range(n):
        nics = tuple(Nic(f"eth{i}", f"10.{100 + i}.{(s + 1) >> 8}.{(s + 1) & 255}/16", _nic_mac(100 + i, s))
                     for i in range(d))
        hosts.append(Host(f"s{s}", nics, 0))
    switches = [Switch(f"ocs{i}", "ocs", program, i + 1, None, None) for i in range(d)]
    links = [Link(Endpoint(f"s{s}", f"eth{i}"), Endpoint(f"ocs{i}", s + 1), rate_mbps)
             for i in range(d) for s in range(n)]
    longest = max(wiring.distance(s, t) for s in range(n) for t in range(n))
    strides = [p[0] for p in wiring.perms if p[0] is not None and p == stride_perm(n, p[0])]
    if len(strides) == d:  # rings over every server only: TotientPerms
        params = {"strides": strides, **(params or {})}
    out: dict[str, object] = {"servers": n, "degree": d, **(params or {}), "rate_mbps": rate_mbps,
                              "circuits": [list(p) for p in wiring.perms], "labels": list(wiring.labels),
                              "longest_route": longest}
    return Topology(name or f"topoopt-{n}x{d}", "topoopt", tuple(hosts), tuple(switches), tuple(links), out, mtu=mtu)
