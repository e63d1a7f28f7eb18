"""Fabrics across machines, the pure parts: the machines file, placement, tunnels, the
machines' check and the monitors merged over machines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.cli.main import main as cli_main
from controller.cluster import (
    OVERHEAD,
    check_underlay_mtu,
    load_machines,
    machines_from_dict,
    machines_to_dict,
    place,
    tunnel_commands,
    tunnel_ends,
)
from controller.cluster.check import judge_machine, parse_probe
from controller.cluster.ssh import cluster_of, ssh_argv
from controller.errors import ConfigError, EmulationError
from controller.experiments.cpu_use import CpuUse, cpu_use_from_dict, merge_machines
from controller.experiments.link_rate import LinkUse
from controller.experiments.rail_only import ExperimentConfig, gpu_bytes_per_iteration
from controller.topology import load_topology
from controller.topology.generators import rail_fat_tree, rail_only

pytestmark = pytest.mark.unit


def machines(*cores: int, **top: object):
    return machines_from_dict({"machines": [{"name": f"m{i}", "ssh": f"root@10.9.0.{i + 1}", "cores": c}
                                            for i, c in enumerate(cores)], **top}, default_project="/p")


# -- the machines file -----------------------------------------------------------------------


def test_machines_file_loads_with_defaults_and_relative_paths(tmp_path: Path) -> None:
    f = tmp_path / "machines.yaml"
    (tmp_path / "cfg").write_text("Host *\n")
    f.write_text("ssh_config: cfg\ntunnel: gretap\nmachines:\n"
                 "  - {name: a, ssh: me@192.168.1.10, cores: 8, tunnel_address: 10.0.0.1, project: co}\n"
                 "  - {name: b, ssh: root@192.168.1.11, cores: 4}\n")
    ms = load_machines(f)
    a, b = ms.machines
    assert (a.user, a.address, a.tunnel_address, a.project) == ("me", "192.168.1.10", "10.0.0.1", str(tmp_path / "co"))
    assert b.tunnel_address == "192.168.1.11" and ms.cores == 12 and ms.tunnel == "gretap"
    assert ms.ssh_config == str(tmp_path / "cfg")
    again = machines_from_dict(machines_to_dict(ms))
    assert again.machines == ms.machines and again.tunnel == ms.tunnel


@pytest.mark.parametrize(("doc", "key", "words"), [
    ({"machines": [{"name": "a", "ssh": "root@10.0.0.1", "cores": 2, "gpus": 8}]}, "machines[0].gpus", "unknown key"),
    ({"machines": [{"name": "a", "ssh": "10.0.0.1", "cores": 2}]}, "machines[0].ssh", "USER@ADDRESS"),
    ({"machines": [{"name": "a", "ssh": "root@host.lab", "cores": 2}]}, "machines[0].ssh", "IPv4"),
    ({"machines": [{"name": "a", "ssh": "root@10.0.0.1", "cores": 0}]}, "machines[0].cores", "1..4096"),
    ({"machines": [{"name": "a", "ssh": "root@10.0.0.1", "cores": 2},
                   {"name": "a", "ssh": "root@10.0.0.2", "cores": 2}]}, "machines[1].name", "twice"),
    ({"machines": [{"name": "a", "ssh": "root@10.0.0.1", "cores": 2},
                   {"name": "b", "ssh": "root@10.0.0.1", "cores": 2}]}, "machines[1].ssh", "twice"),
    ({"machines": []}, "machines", "non-empty"),
    ({"machines": [{"name": "a", "ssh": "root@10.0.0.1", "cores": 2}], "tunnel": "gre"}, "tunnel", "vxlan"),
    ({"machines": [{"name": "A b", "ssh": "root@10.0.0.1", "cores": 2}]}, "machines[0].name", "lower-case"),
])
def test_a_bad_machines_file_is_one_error_naming_the_key(doc: dict, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        machines_from_dict(doc, source="m.yaml")
    assert err.value.key == key and words in str(err.value) and "m.yaml" in str(err.value)


def test_a_missing_ssh_config_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "m.yaml"
    f.write_text("ssh_config: nowhere\nmachines:\n  - {name: a, ssh: root@10.0.0.1, cores: 2}\n")
    with pytest.raises(ConfigError, match="no such file") as err:
        load_machines(f)
    assert err.value.key == "ssh_config"


def test_the_cli_refuses_a_bad_machines_file_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "m.yaml"
    f.write_text("machines:\n  - {name: a, ssh: root@10.0.0.1, cores: two}\n")
    assert cli_main(["cluster", "plan", "topologies/rail-only-4x4.yaml", str(f)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "machines[0].cores" in err and "two" in err


# -- placement -------------------------------------------------------------------------------


def test_rail_only_splits_servers_in_blocks_and_rails_evenly() -> None:
    topo = rail_only(4, 4)
    p = place(topo, machines(2, 2))
    assert [p.machine_of[f"s{i}"] for i in range(4)] == ["m0", "m0", "m1", "m1"]
    rails = [p.machine_of[f"rail{r}"] for r in range(4)]
    assert rails.count("m0") == rails.count("m1") == 2
    # each rail switch has two NICs on each machine: half of every rail's bytes cross
    assert len(p.cross_links) == 8 and p.cross_share == pytest.approx(0.5)


def test_cores_weigh_the_blocks() -> None:
    p = place(rail_only(6, 2), machines(4, 2))
    assert [p.machine_of[f"s{i}"] for i in range(6)] == ["m0"] * 4 + ["m1"] * 2


def test_one_machine_crosses_nothing_and_more_machines_than_nodes_is_refused() -> None:
    p = place(rail_fat_tree(4, 4), machines(2))
    assert set(p.machine_of.values()) == {"m0"} and not p.cross_links and p.cross_share == 0
    with pytest.raises(ConfigError, match="more machines than"):
        place(rail_only(2, 1), machines(*[1] * 5))


def test_switches_stay_within_their_machines_quota() -> None:
    topo = rail_fat_tree(4, 4)
    p = place(topo, machines(2, 2, 2))
    per = {m: sum(1 for s in topo.switches if p.machine_of[s.name] == m) for m in ("m0", "m1", "m2")}
    assert max(per.values()) <= 2 and sum(per.values()) == 6


def test_a_rack_stays_with_its_tor() -> None:
    topo = load_topology("topologies/optical-4x1x3.yaml")
    p = place(topo, machines(2, 2))
    for h in topo.hosts:
        (tor,) = {lk.other(h.name).node for lk in topo.links_of(h.name)}
        assert p.machine_of[tor] == p.machine_of[h.name]


def test_cross_bytes_follow_the_model() -> None:
    topo = rail_only(4, 4)
    small, big = place(topo, machines(2, 2), gpu_bytes=1.0), place(topo, machines(2, 2), gpu_bytes=10.0)
    assert sum(big.cross_bytes.values()) == pytest.approx(10 * sum(small.cross_bytes.values()))
    assert gpu_bytes_per_iteration(ExperimentConfig(collectives=("alltoall",))) == pytest.approx(
        (8 << 20) * 12 / 16)


# -- tunnels ---------------------------------------------------------------------------------


def test_each_crossing_link_has_two_ends_sharing_a_key() -> None:
    topo = rail_fat_tree(4, 4)
    ms = machines(2, 2)
    p = place(topo, ms)
    ends = tunnel_ends(topo, p, ms)
    by_link: dict[int, list] = {}
    for e in [*ends["m0"], *ends["m1"]]:
        by_link.setdefault(e.link, []).append(e)
    assert sorted(by_link) == sorted(p.cross_links)
    for pair in by_link.values():
        a, b = pair
        assert a.key == b.key and (a.local, a.remote) == (b.remote, b.local) and a.mtu == b.mtu == 9000
    keys = [pair[0].key for pair in by_link.values()]
    assert len(set(keys)) == len(keys)
    host_end = next(e for e in ends["m0"] + ends["m1"] if e.port is None)
    assert host_end.intf == f"{host_end.node}-{topo.links[host_end.link].end(host_end.node).port}"


def test_tunnel_commands_and_the_underlay_mtu() -> None:
    e = tunnel_ends(rail_only(4, 4), place(rail_only(4, 4), machines(1, 1)), machines(1, 1))["m1"][0]
    add, mtu = tunnel_commands(e)
    assert add.startswith(f"link add {e.intf} type vxlan id {e.key} local 10.9.0.2 remote 10.9.0.1")
    assert mtu == f"link set {e.intf} mtu 9000"
    check_underlay_mtu("m0", "eth0", 9000 + OVERHEAD["vxlan"], 9000)
    with pytest.raises(EmulationError, match=r"eth0 \(MTU 9049\).*9050"):
        check_underlay_mtu("m0", "eth0", 9049, 9000)


# -- the check, SSH, the live topology's cluster -----------------------------------------------


def test_judge_machine_names_what_is_missing() -> None:
    m = machines(2).machines[0]
    facts = parse_probe("root=1000\ncores=1\nmininet=\nproject=\nvenv=\nbmv2=\npipelines=\ntunnel=\n"
                        "mtu 10.9.0.2=:\n")
    c = judge_machine(m, facts, pipelines_here="abc", tunnel="vxlan")
    text = " | ".join(c.problems)
    for words in ("not root", "no Mininet", "no project checkout", "VXLAN", "no route to 10.9.0.2"):
        assert words in text
    assert "pipelines" not in text, "no checkout: its pipelines are not a problem of their own"
    stale = judge_machine(m, {**facts, "project": "abc1234", "venv": "1", "pipelines": "old"}, pipelines_here="abc",
                          tunnel="vxlan")
    assert any("pipelines (manifest old) differ" in p for p in stale.problems)
    assert "has 1 cores, the file says 2" in c.notes and not c.ok
    ok = judge_machine(m, {"root": "0", "cores": "2", "mininet": "2.3.0", "project": "x", "venv": "1",
                           "bmv2": "1.15", "pipelines": "abc", "tunnel": "1", "mtu 10.9.0.2": "eth0:9100"},
                       pipelines_here="abc", tunnel="vxlan")
    assert ok.ok and not ok.notes
    assert "SSH to root@10.9.0.1 failed: refused" in judge_machine(m, {}, pipelines_here="abc", tunnel="vxlan",
                                                                   ssh_error="refused").problems[0]


def test_ssh_argv_is_the_cluster_editions_with_the_files_config() -> None:
    ms = machines(1, ssh_config="/c")
    argv = ssh_argv(ms.machines[0], ms, ["echo", "a b"])
    assert argv[:6] == ["ssh", "-q", "-o", "BatchMode=yes", "-o", "ForwardAgent=yes"]
    assert argv[6:8] == ["-F", "/c"] and argv[-2:] == ["root@10.9.0.1", "echo 'a b'"]


def test_cluster_of_a_live_topology() -> None:
    ms = machines(1, 1)
    got = cluster_of({"cluster": {**machines_to_dict(ms), "machine_of": {"s0": "m1"}}}, "live.yaml")
    assert got is not None and got[0].machines == ms.machines and got[1] == {"s0": "m1"}
    assert cluster_of({}, "live.yaml") is None
    with pytest.raises(ConfigError, match=r"params\.cluster"):
        cluster_of({"cluster": {"machines": []}}, "live.yaml")


# -- the monitors over machines ----------------------------------------------------------------


def test_an_interval_is_the_busiest_machines_and_links_are_judged_together() -> None:
    m0 = CpuUse({"rail0": 0.2}, 0.40, 2, LinkUse("s0-eth0", 0.99, "s0-eth0", 1.0, 3, 10, 2.0))
    m1 = CpuUse({"rail1": 0.3}, 0.71, 2, LinkUse("s2-eth1", 0.93, "s3-eth0", 0.98, 1, 10, 5.0))
    use, busiest = merge_machines({"m0": m0, "m1": m1})
    assert busiest == "m1" and use.machine == 0.71 and set(use.switches) == {"rail0", "rail1"}
    assert use.links is not None and (use.links.slowest, use.links.carried) == ("s2-eth1", 0.93)
    assert (use.links.backlogged, use.links.links, use.links.sched_delay_ms) == (4, 20, 5.0)
    import dataclasses
    assert cpu_use_from_dict(json.loads(json.dumps(dataclasses.asdict(m1)))) == m1


def test_cluster_plan_prints_the_placement(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "m.yaml"
    f.write_text("machines:\n  - {name: a, ssh: root@10.0.0.1, cores: 2}\n  - {name: b, ssh: root@10.0.0.2, cores: 2}\n")
    assert cli_main(["cluster", "plan", "topologies/rail-fat-tree-4x4.yaml", str(f), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["machine"]: r["hosts"] for r in doc["machines"]} == {"a": 2, "b": 2}
    assert doc["crossing"][0]["between"] == "a - b" and doc["cross_links"] == 12


def test_a_unit_larger_than_a_machine_is_split_into_its_hosts() -> None:
    p = place(rail_only(2, 1), machines(2, 2))  # one switch under both hosts
    assert p.machine_of["s0"] != p.machine_of["s1"] and len(p.cross_links) == 1


def test_crossing_bytes_measured_against_the_plan() -> None:
    from controller.cluster.placement import crossing_info

    p = place(rail_only(4, 4), machines(2, 2), gpu_bytes=2**20)
    planned = sum(p.cross_bytes.values())
    c = crossing_info(int(planned * 8 * 0.5), 8, p)
    assert c["measured_over_plan"] == 0.5 and c["plan_mib_per_iteration"] == round(planned / 2**20, 1)


def test_any_placement_is_scored_by_the_same_model() -> None:
    from controller.cluster.placement import evaluate

    topo, ms = rail_only(4, 4), machines(2, 2)
    ours = place(topo, ms)
    assert evaluate(topo, ms, ours.machine_of) == ours
    everything_on_one = evaluate(topo, ms, {n: "m0" for n in ours.machine_of})
    assert not everything_on_one.cross_links and everything_on_one.cross_share == 0
    with pytest.raises(ConfigError, match="nodes have no machine"):
        evaluate(topo, ms, {"s0": "m0"})


def test_the_cluster_editions_placers_score_no_better_here() -> None:
    pytest.importorskip("mininet.net", reason="Debian's mininet is not importable (make setup installs it)")
    from controller.cluster.placement import evaluate
    from controller.emulation import load_emulation_module

    placers = load_emulation_module("cluster_placers")
    for topo in (rail_fat_tree(4, 4), load_topology("topologies/optical-4x1x3.yaml")):
        for ms in (machines(2, 2), machines(2, 2, 2)):
            ours = place(topo, ms)
            for name in placers.PLACERS:
                theirs = evaluate(topo, ms, placers.edition_placement(name, topo, ms))
                assert ours.cross_share <= theirs.cross_share + 1e-9, (topo.name, len(ms.machines), name)
