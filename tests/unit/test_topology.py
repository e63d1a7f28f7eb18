"""Topology loading, validation errors, generators and TotientPerms."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import yaml

from controller.errors import ConfigError
from controller.topology import (
    check_topology,
    dump_topology,
    load_topology,
    parse_topology,
    rail_fat_tree,
    rail_only,
    topoopt,
)
from controller.topology.loader import topology_to_dict
from controller.topology.totient import (
    coin_change_route,
    diameter,
    ring_strides,
    totient_candidates,
)


def doc(**changes) -> dict:
    d = topology_to_dict(rail_only(2, 2))
    d.update(changes)
    return d


def test_round_trip(tmp_path: Path) -> None:
    topo = rail_fat_tree(4, 2, spines=2)
    dump_topology(topo, tmp_path / "t.yaml")
    again = load_topology(tmp_path / "t.yaml")
    assert topology_to_dict(again) == topology_to_dict(topo)


@pytest.mark.parametrize(("mutate", "key", "problem"), [
    (lambda d: d.update(colour="red"), "colour", "unknown key"),
    (lambda d: d["hosts"][1]["nics"][0].update(speed=10), "hosts[1].nics[0].speed", "unknown key"),
    (lambda d: d["switches"][0].update(device_id="one"), "switches[0].device_id", "expected an integer"),
    (lambda d: d["switches"][0].update(role="router"), "switches[0].role", "unknown role"),
    (lambda d: d["links"][0].update(a="s0"), "links[0].a", "expected NODE:PORT"),
    (lambda d: d["links"][0].update(rate_mbps=-5), "links[0].rate_mbps", "non-negative"),
    (lambda d: d["hosts"][0].pop("nics"), "hosts[0].nics", "required key is missing"),
    (lambda d: d.update(mtu=20000), "mtu", "an MTU must be in 576..9216 bytes"),
    (lambda d: d.update(mtu="jumbo"), "mtu", "expected an integer"),
    (lambda d: d["links"][0].update(mtu=100), "links[0].mtu", "an MTU must be in 576..9216 bytes"),
])
def test_strict_loading_names_file_key_and_value(mutate, key: str, problem: str) -> None:
    d = doc()
    mutate(d)
    with pytest.raises(ConfigError) as info:
        parse_topology(d, "fabric.yaml")
    assert info.value.file == "fabric.yaml"
    assert info.value.key == key
    assert problem in str(info.value)


def _errors(d: dict) -> list[str]:
    return [str(e) for e in check_topology(parse_topology(d, "f.yaml"), "f.yaml")]


def test_check_finds_dangling_links_and_reused_ports() -> None:
    d = doc()
    d["links"].append({"a": "s9:eth0", "b": "rail0:7"})
    d["links"].append({"a": "s0:eth0", "b": "rail0:8"})
    errors = _errors(d)
    assert any("links[4].a" in e and "dangling" in e and "'s9:eth0'" in e for e in errors)
    assert any("links[5].a" in e and "port already used by links[0]" in e for e in errors)


def test_check_finds_duplicates() -> None:
    d = doc()
    d["hosts"][1]["nics"][0]["ip"] = d["hosts"][0]["nics"][0]["ip"]
    d["switches"][1]["device_id"] = d["switches"][0]["device_id"]
    errors = _errors(d)
    assert any("hosts[1].nics[0].ip" in e and "already used by s0:eth0" in e for e in errors)
    assert any("switches[1].device_id" in e for e in errors)


def test_check_finds_a_rail_wired_to_the_wrong_gpu() -> None:
    d = doc()
    d["links"][0]["b"], d["links"][2]["b"] = d["links"][2]["b"], d["links"][0]["b"]
    errors = _errors(d)
    assert any("GPU 0 of s0 is wired to rail1" in e for e in errors)


def test_rail_only_rejects_a_spine_across_rails() -> None:
    d = topology_to_dict(rail_fat_tree(2, 2))
    d["kind"] = "rail-only"
    assert any("serves no rail" in e for e in _errors(d))


def test_generated_fabrics_are_valid() -> None:
    for topo in (rail_only(4, 4), rail_only(64, 8, radix=16), rail_fat_tree(8, 4, spines=4), topoopt(16, 3)):
        assert check_topology(topo) == [], topo.name


def test_per_rail_clos_switch_counts() -> None:
    topo = rail_only(64, 8, radix=16)  # 8 leaves of 8 servers per rail, 4 rail-local spines
    roles = [s.role for s in topo.switches]
    assert roles.count("leaf") == 64 and roles.count("spine") == 32
    assert all(s.rail is not None for s in topo.switches)


def test_generator_errors_name_the_value() -> None:
    with pytest.raises(ConfigError, match="servers"):
        rail_only(0, 4)
    with pytest.raises(ConfigError, match="power-of-two radix"):
        rail_only(100, 4, radix=48)


@pytest.mark.parametrize("n", [5, 12, 16, 97, 100])
def test_totient_strides_each_make_one_ring(n: int) -> None:
    for s in ring_strides(n, 4):
        assert math.gcd(s, n) == 1
    assert totient_candidates(n)[0] == 1


@pytest.mark.parametrize(("n", "d"), [(16, 2), (64, 4), (128, 8)])
def test_routes_are_shortest_and_correct(n: int, d: int) -> None:
    strides = ring_strides(n, d)
    dia = diameter(n, strides)
    for dst in range(1, n):
        route = coin_change_route(n, strides, 0, dst)
        assert sum(route) % n == dst
        assert len(route) <= dia
        assert all(abs(hop) in strides for hop in route)


def test_diameter_shrinks_with_degree() -> None:
    assert diameter(256, ring_strides(256, 8)) < diameter(256, ring_strides(256, 2))


def test_topology_files_in_the_repo_are_valid() -> None:
    for path in sorted(Path(__file__).parents[2].joinpath("topologies").glob("*.yaml")):
        assert check_topology(load_topology(path), str(path)) == [], path
        yaml.safe_load(path.read_text())


@pytest.mark.parametrize(("n", "d"), [(8, 2), (16, 3), (64, 4), (128, 8)])
def test_topoopt_host_routes_reach_every_server_within_the_path_length(n: int, d: int) -> None:
    from controller.routing.topoopt_routes import compile_host_routes, walk

    topo = topoopt(n, d)
    routes = compile_host_routes(topo)
    strides = topo.params["strides"]
    for src in range(0, n, max(1, n // 8)):
        for r in routes[src]:
            path = walk(routes, src, r.destination)
            assert len(path) - 1 == r.hops
            # every hop follows one of the circuits: a forward stride
            assert all((b - a) % n in strides for a, b in itertools.pairwise(path))


def test_topoopt_options_it_cannot_honour_are_refused_by_their_own_name() -> None:
    with pytest.raises(ConfigError, match=r"--degree: needs at least 41 servers: 4 servers have 1 distinct"):
        topoopt(4, 20)
    with pytest.raises(ConfigError, match="--servers"):
        topoopt(2, 1)
    with pytest.raises(ConfigError, match="--degree"):
        topoopt(8, 0)
    assert len(topoopt(41, 20).switches) == 20  # the smallest fabric that has 20 strides


def test_check_rejects_a_program_p4src_does_not_hold_and_an_unknown_kind() -> None:
    import dataclasses

    topo = topoopt(8, 2)
    bad = dataclasses.replace(topo, kind="mesh",
                              switches=tuple(dataclasses.replace(s, program="ocs_switch") for s in topo.switches))
    problems = [str(e) for e in check_topology(bad, "t.yaml")]
    assert any("kind: is not a kind of fabric mlfabric knows" in p and "'mesh'" in p for p in problems)
    assert sum("switches[" in p and "is no program in p4src/" in p and "'ocs_switch'" in p for p in problems) == 2
    assert check_topology(topo) == []


def test_a_topoopt_fabric_is_drawn_as_its_circuits(tmp_path) -> None:
    from controller.topology.draw import draw_topology

    out = draw_topology(topoopt(16, 3), tmp_path / "t.png")
    assert out.stat().st_size > 10_000


def test_a_topoopt_fabric_compiles_to_pinned_strides_and_host_routes() -> None:
    from controller.routing import compile_fabric
    from controller.routing.topoopt_routes import host_commands

    topo = topoopt(8, 2)
    rules = compile_fabric(topo)
    circuits = {(r.match["standard_metadata.ingress_port"].value, r.params["port"]) for r in rules["ocs1"].rules}
    assert circuits == {(s + 1, (s + 3) % 8 + 1) for s in range(8)}  # stride 3, one-way
    cmds = host_commands(topo)
    assert all(c.count("ip route replace") == 0 or "onlink" in c for c in cmds["s3"])
    assert sum("ip route replace" in c for c in cmds["s3"]) == 7 * 2  # every address of every other server


def test_the_topoopt_experiment_plans_four_fabrics_at_their_rates_and_refuses_bad_degrees() -> None:
    from controller.experiments.topoopt import TopoOptConfig, expected_tax, plan

    assert expected_tax(topoopt(8, 2)) == 2.0  # one-way strides 1, 3: 1,2,1,2,3,2,3 circuits
    assert expected_tax(topoopt(16, 4)) < expected_tax(topoopt(16, 2))  # more strides, shorter routes
    cfg = TopoOptConfig(degrees=(3,), rate_mbps=5.0)
    planned = plan(cfg, cfg.load_jobs()[1], 3)
    rates = {v.fabric: {lk.rate_mbps for lk in v.topology.links if not v.topology.is_switch(lk.a.node)}
             for v in planned.variants}
    assert rates == {"topoopt": {5.0}, "totient": {5.0}, "fat-tree-cost": {round(15 / 3.2, 4)}, "fat-tree-bw": {15.0}}
    assert planned.variants[1].topology.params["strides"] == [1, 3, 7]  # TotientPerms only
    with pytest.raises(ConfigError, match="--degrees"):
        TopoOptConfig(servers=8, degrees=(3,))


def test_check_finds_a_fabric_in_pieces() -> None:
    import dataclasses

    topo = rail_only(2, 2)
    cut = dataclasses.replace(topo, links=tuple(lk for lk in topo.links if "rail1" not in (lk.a.node, lk.b.node)))
    problems = [str(e) for e in check_topology(cut, "t.yaml")]
    assert any("the fabric is in 2 pieces: these nodes reach no other" in p and "rail1" in p for p in problems)
    assert check_topology(topo) == []


def test_the_mtu_is_the_fabrics_with_per_link_exceptions_and_survives_a_round_trip() -> None:
    from controller.topology.loader import topology_to_dict
    from controller.topology.model import ETHERNET_MTU, JUMBO_MTU

    d = doc()  # from the generator: jumbo
    d.pop("mtu")
    assert parse_topology(d, "f.yaml").mtu == ETHERNET_MTU, "a file that names no MTU: Ethernet's"
    d["mtu"] = JUMBO_MTU
    d["links"][0]["mtu"] = 1500
    topo = parse_topology(d, "f.yaml")
    assert [topo.link_mtu(lk) for lk in topo.links[:2]] == [1500, JUMBO_MTU]
    assert parse_topology(topology_to_dict(topo), "again.yaml") == topo
    assert rail_only(2, 2).mtu == JUMBO_MTU and rail_only(2, 2, mtu=1500).mtu == 1500
