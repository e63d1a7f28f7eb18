"""Checkmate job files: strict loading, resolution against a topology, pure rule compilation."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.errors import ConfigError
from controller.mirror import compile_mirror, load_job, parse_job, resolve_job
from controller.mirror.compile import MIRROR_REWRITE, MIRROR_SELECT
from controller.p4runtime.entities import Exact, Ternary
from controller.topology import load_topology, rail_only

REPO = Path(__file__).resolve().parents[2]


def job(**over):
    data = {"name": "j", "session": 3, "shadow": "s4", "ring": "pxn", "port": 7000,
            "workers": [{"rank": d * 2 + r, "host": f"s{d}", "rail": r} for d in range(4) for r in range(2)]}
    data.update(over)
    return data


def test_the_shipped_job_compiles_against_its_topology() -> None:
    spec = load_job(REPO / "topologies/jobs/digits-4x2.yaml")
    program = compile_mirror(resolve_job(spec, load_topology(REPO / "topologies/rail-only-5x2.yaml")))
    assert [lg.switch for lg in program.legs] == ["rail0", "rail1"]
    assert spec.world == 8


@pytest.mark.parametrize(("over", "key", "text"), [
    ({"colour": 1}, "colour", "unknown key"),
    ({"session": 32}, "session", "0..31"),
    ({"session": True}, "session", "integer"),
    ({"ring": "spiral"}, "ring", "pxn"),
    ({"workers": [{"rank": 0, "host": "s0", "rail": 0}]}, "workers", "at least 2"),
    ({"workers": [{"rank": 0, "host": "s0", "rail": 0}, {"rank": 2, "host": "s1", "rail": 0}]}, "workers", "0..1"),
    ({"workers": [{"rank": 0, "host": "s0"}]}, "workers[0].rail", "missing"),
    ({"port": 65530}, "port", "exceeds"),
])
def test_bad_job_files_name_the_key(over, key: str, text: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_job(job(**over), "job.yaml")
    assert err.value.key == key and text in str(err.value)
    assert str(err.value).startswith("job.yaml: ")


def test_unknown_worker_host_is_named() -> None:
    bad = job()
    bad["workers"][3]["host"] = "s9"
    with pytest.raises(ConfigError, match=r"workers\[3\].host: unknown worker host.*'s9'"):
        resolve_job(parse_job(bad), rail_only(5, 2))


def test_shadow_not_attached_is_named() -> None:
    topo = rail_only(5, 2)
    # a shadow with a NIC on rail 0 only: the rail-1 leg cannot reach it
    from dataclasses import replace
    s4 = topo.host("s4")
    hosts = tuple(replace(h, nics=h.nics[:1]) if h.name == "s4" else h for h in topo.hosts)
    links = tuple(lk for lk in topo.links if not (lk.a.node == "s4" and lk.a.port == "eth1")
                  and not (lk.b.node == "s4" and lk.b.port == "eth1"))
    assert s4.nics[1].name == "eth1"
    cut = replace(topo, hosts=hosts, links=links)
    with pytest.raises(ConfigError, match="shadow not attached to switch rail1"):
        compile_mirror(resolve_job(parse_job(job()), cut))


def test_shadow_must_not_be_a_worker() -> None:
    with pytest.raises(ConfigError, match="must not be one of the job's workers"):
        resolve_job(parse_job(job(shadow="s0")), rail_only(5, 2))


def test_compiled_entries_select_the_tagged_legs_and_rewrite_to_the_shadow() -> None:
    topo = rail_only(5, 2)
    program = compile_mirror(resolve_job(parse_job(job()), topo))
    assert len(program.switches) == 2
    for sw in program.switches:
        assert sw.clone_session == 103
        selects = [r for r in sw.rules if r.table == MIRROR_SELECT]
        rewrites = [r for r in sw.rules if r.table == MIRROR_REWRITE]
        assert len(selects) == 1 and len(rewrites) == 1
        sel = selects[0]
        assert sel.match["hdr.ipv4.diffserv"] == Ternary(0x80 | 3 << 2, 0xFC)
        assert sel.params == {"session": 103}
        (port, _instance), = sw.replicas
        assert rewrites[0].match["standard_metadata.egress_port"] == Exact(port)
        # the replica is the switch port cabled to the shadow
        assert topo.switch_ports(sw.switch)[port].node == "s4"
    primary = program.legs[0]
    assert (primary.leg.sender, primary.leg.receiver) == (6, 0)
    assert primary.dst_port == 7000 + 8 + 0


def test_two_jobs_on_one_fabric_differ_only_by_session() -> None:
    topo = rail_only(6, 1)
    a = compile_mirror(resolve_job(parse_job(job(session=1, shadow="s2", workers=[
        {"rank": 0, "host": "s0", "rail": 0}, {"rank": 1, "host": "s1", "rail": 0}])), topo))
    b = compile_mirror(resolve_job(parse_job(job(session=2, shadow="s5", workers=[
        {"rank": 0, "host": "s3", "rail": 0}, {"rank": 1, "host": "s4", "rail": 0}])), topo))
    keys_a = {(r.table, tuple(sorted(r.match.items(), key=str))) for s in a.switches for r in s.rules}
    keys_b = {(r.table, tuple(sorted(r.match.items(), key=str))) for s in b.switches for r in s.rules}
    assert not keys_a & keys_b
    assert {s.clone_session for s in a.switches} != {s.clone_session for s in b.switches}


def test_the_same_job_compiles_on_the_rail_optimized_fat_tree() -> None:
    """The mirror stage is in rail_switch, which the fat-tree's leaves run too: the copies
    are taken at the sender's leaf, where the shadow's NIC of that rail is cabled."""
    from controller.topology import rail_fat_tree

    topo = rail_fat_tree(5, 2, spines=2)
    program = compile_mirror(resolve_job(parse_job(job()), topo))
    leaves = {s.name for s in topo.switches if s.role != "spine"}
    assert {lg.switch for lg in program.legs} <= leaves
    for lg in program.legs:
        assert topo.switch_ports(lg.switch)[lg.shadow_port].node == "s4"
