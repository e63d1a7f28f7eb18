"""A fat-tree leaf's uplink choice: ECMP hashing, or d-mod-k by destination server."""

from __future__ import annotations

import ipaddress
from collections import Counter

import pytest

from controller.errors import ConfigError
from controller.routing import compile_fabric
from controller.routing.rail_routes import ECMP_TABLE, LPM_TABLE
from controller.topology import rail_fat_tree
from controller.topology.loader import load_topology, topology_to_dict
from controller.topology.model import Topology
from workloads.plan import Layout, alltoall_plan


def _lookup(topo: Topology, rules: dict, switch: str, dst: str) -> int:
    """The egress port ``switch`` gives ``dst`` (longest prefix; only set_nexthop routes)."""
    best = None
    for r in rules[switch].rules:
        if r.table != LPM_TABLE:
            continue
        m = r.match["hdr.ipv4.dst_addr"]
        net = ipaddress.IPv4Network((m.value, m.prefix_len))
        if ipaddress.IPv4Address(dst) in net and (best is None or net.prefixlen > best[0].prefixlen):
            best = (net, r)
    assert best is not None and best[1].action == "RailIngress.set_nexthop", (switch, dst)
    return int(best[1].params["port"])


def test_dst_server_routes_every_remote_nic_through_uplink_server_mod_k() -> None:
    topo = rail_fat_tree(4, 4, spines=2, uplink_routing="dst-server")
    rules = compile_fabric(topo)
    leaf = "rail0"
    ups = sorted(p for p, peer in topo.switch_ports(leaf).items() if topo.is_switch(peer.node))
    assert not [r for r in rules[leaf].rules if r.table == ECMP_TABLE]
    for sw in rules.values():  # one entry per match: a switch refuses a second one
        keys = [(r.table, tuple(sorted((k, repr(v)) for k, v in r.match.items()))) for r in sw.rules]
        assert len(keys) == len(set(keys)), sw.switch
    for d, host in enumerate(topo.hosts):
        for nic in host.nics:
            if nic.rail != 0:
                assert _lookup(topo, rules, leaf, nic.address) == ups[d % 2]


def test_dst_server_spreads_every_pairwise_alltoall_round_evenly() -> None:
    topo = rail_fat_tree(4, 4, spines=2, uplink_routing="dst-server")
    rules = compile_fabric(topo)
    nics = [(d, nic) for d, h in enumerate(topo.hosts) for nic in sorted(h.nics, key=lambda n: n.rail or 0)]
    layout = Layout.grid(4, 4, lambda d, r: next(n.address for s, n in nics if s == d and n.rail == r))
    leaf_of = {n.address: f"rail{n.rail}" for _, n in nics}
    for name, transfers in alltoall_plan(layout, "direct").phases:
        load: Counter[tuple[str, int]] = Counter()
        for t in transfers:
            src, dst = layout[t.src], layout[t.dst]
            if src.server != dst.server and src.rail != dst.rail:  # through a spine
                load[(leaf_of[src.ip], _lookup(topo, rules, leaf_of[src.ip], dst.ip))] += 1
        assert not load or max(load.values()) <= 2, (name, load)  # 4 flows per leaf, 2 uplinks


def test_the_routing_is_kept_in_the_file_and_a_bad_one_is_refused(tmp_path) -> None:
    import yaml

    topo = rail_fat_tree(2, 2, uplink_routing="dst-server")
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(topology_to_dict(topo)))
    assert load_topology(path).params["uplink_routing"] == "dst-server"
    assert "uplink_routing" not in rail_fat_tree(2, 2).params
    with pytest.raises(ConfigError, match=r"uplink_routing: one of ecmp, flowlet, spray, dst-server \(got 'wild'\)"):
        rail_fat_tree(2, 2, uplink_routing="wild")
    doc = topology_to_dict(topo)
    doc["params"]["uplink_routing"] = "wild"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match="uplink_routing"):
        compile_fabric(load_topology(path))


@pytest.mark.parametrize(("routing", "action", "extra"), [
    ("ecmp", "RailIngress.set_ecmp_group", {}),
    ("spray", "RailIngress.set_spray_group", {}),
    ("flowlet", "RailIngress.set_flowlet_group", {"gap_us": 750}),
])
def test_each_load_balancing_picks_the_groups_member_its_own_way(routing: str, action: str, extra: dict) -> None:
    topo = rail_fat_tree(4, 2, spines=2, uplink_routing=routing, flowlet_gap_us=750)
    rules = compile_fabric(topo)
    leaf = rules["rail0"].rules
    groups = [r for r in leaf if r.table == LPM_TABLE and r.action != "RailIngress.set_nexthop"]
    assert groups and {r.action for r in groups} == {action}
    assert all(r.params == {"group": 1, "size": 2, **extra} for r in groups)
    members = sorted(int(r.match["meta.ecmp_member"].value) for r in leaf if r.table == ECMP_TABLE)
    assert members == [0, 1]  # the same members whatever picks them
    assert ("flowlet_gap_us" in topo.params) == (routing == "flowlet")


def test_a_flowlet_gap_that_is_not_whole_microseconds_is_refused() -> None:
    with pytest.raises(ConfigError, match="flowlet_gap_us"):
        rail_fat_tree(2, 2, uplink_routing="flowlet", flowlet_gap_us=-1)
    topo = rail_fat_tree(2, 2, uplink_routing="flowlet")
    bad = Topology(topo.name, topo.kind, topo.hosts, topo.switches, topo.links,
                   {**topo.params, "flowlet_gap_us": 0.5}, mtu=topo.mtu)
    with pytest.raises(ConfigError, match=r"params.flowlet_gap_us: microseconds"):
        compile_fabric(bad)
