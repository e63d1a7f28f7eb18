"""In-network aggregation jobs: strict loading, resolution against a topology (one switch per
rail group), pure rule compilation, slot-pool allocation and epochs."""

from __future__ import annotations

import ipaddress
import json
from dataclasses import replace
from pathlib import Path

import pytest

from controller.aggregate import (
    AggregationError,
    PoolExhausted,
    allocate_pool,
    compile_aggregation,
    fresh_epoch,
    load_job,
    parse_job,
    resolve_job,
)
from controller.aggregate.compile import AGG_RESULT, AGG_WORKERS, SET_WORKER, TO_WORKER
from controller.errors import ConfigError
from controller.p4runtime.entities import Exact
from controller.topology import Endpoint, load_topology, rail_fat_tree, rail_only

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
JOB_FILE = REPO / "topologies/jobs/aggregate-rail-only-4x4.yaml"


def grid(servers: int = 4, rails: int = 4) -> list[dict]:
    return [{"rank": d * rails + r, "host": f"s{d}", "rail": r} for d in range(servers) for r in range(rails)]


def job(**over) -> dict:
    data = {"name": "agg", "job": 7, "slots": 64, "workers": grid()}
    data.update(over)
    return data


def test_the_shipped_job_resolves_on_its_topology() -> None:
    spec = load_job(JOB_FILE)
    resolved = resolve_job(spec, load_topology(REPO / "topologies/rail-only-4x4.yaml"))
    assert (spec.name, spec.job, spec.slots, len(spec.workers)) == ("aggregate-rail-only-4x4", 1, 64, 16)
    assert [(g.rail, g.switch, len(g.workers)) for g in resolved.groups] == [(r, f"rail{r}", 4) for r in range(4)]


@pytest.mark.parametrize(("over", "key", "value", "text"), [
    ({"colour": 1}, "colour", "1", "unknown key"),
    ({"job": 0}, "job", "0", "1..255"),
    ({"job": 256}, "job", "256", "1..255"),
    ({"job": True}, "job", "True", "integer"),
    ({"job": "7"}, "job", "'7'", "integer"),
    ({"slots": 0}, "slots", "0", "1..1024"),
    ({"slots": 2048}, "slots", "2048", "1..1024"),
    ({"name": ""}, "name", "''", "non-empty"),
    ({"name": "12"}, "name", "'12'", "not a number"),
    ({"name": ["a"]}, "name", "['a']", "string"),
    ({"workers": []}, "workers", "[]", "non-empty list"),
    ({"workers": "s0"}, "workers", "'s0'", "non-empty list"),
    ({"workers": [{"rank": 0, "host": "s0", "rail": 0, "gpu": 3}]}, "workers[0].gpu", "3", "unknown key"),
    ({"workers": [{"rank": 0, "host": "s0"}]}, "workers[0].rail", None, "missing"),
    ({"workers": [{"rank": -1, "host": "s0", "rail": 0}]}, "workers[0].rank", "-1", "0..65535"),
    ({"workers": [{"rank": 0, "host": "s0", "rail": 0}, {"rank": 0, "host": "s1", "rail": 0}]},
     "workers[1].rank", "0", "already given to workers[0]"),
    ({"workers": [{"rank": 0, "host": "s0", "rail": 0}, {"rank": 1, "host": "s0", "rail": 0}]},
     "workers[1]", "'s0 rail 0'", "one worker per NIC"),
    ({"workers": [{"rank": d, "host": f"s{d}", "rail": 2} for d in range(33)]},
     "workers", "'33 workers on rail 2'", "at most 32"),
])
def test_bad_job_files_name_the_key_and_the_value(over, key: str, value: str | None, text: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_job(job(**over), "agg.yaml")
    assert err.value.key == key and text in str(err.value)
    assert str(err.value).startswith("agg.yaml: ")
    if value is not None:
        assert str(err.value).endswith(f"(got {value})")


def test_missing_keys_and_a_bad_file_are_named(tmp_path: Path) -> None:
    data = job()
    del data["job"]
    with pytest.raises(ConfigError, match="job: required key is missing"):
        parse_job(data)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [x\n")
    with pytest.raises(ConfigError, match=f"^{bad}: "):
        load_job(bad)


def test_the_slots_default_to_64() -> None:
    data = job()
    del data["slots"]
    assert parse_job(data).slots == 64


def test_resolve_on_rail_only_groups_each_rail_on_its_switch_in_rank_order() -> None:
    topo = rail_only(4, 4)
    # ranks written out of order: a worker's index in its group follows its rank, not the file
    workers = list(reversed(grid()))
    resolved = resolve_job(parse_job(job(workers=workers)), topo)
    assert resolved.switch_names == ("rail0", "rail1", "rail2", "rail3")
    for g in resolved.groups:
        assert [w.rank for w in g.workers] == [d * 4 + g.rail for d in range(4)]
        assert [w.index for w in g.workers] == [0, 1, 2, 3]
        for w in g.workers:
            nic = topo.host(w.host).rail_nic(g.rail)
            assert (w.ip, w.mac, w.nic) == (nic.address, nic.mac, nic.name)
            assert topo.switch_ports(g.switch)[w.port] == Endpoint(w.host, nic.name)


def test_resolve_on_the_rail_optimized_fat_tree_puts_rail_r_on_leaf_r() -> None:
    topo = rail_fat_tree(4, 4, spines=2)
    resolved = resolve_job(parse_job(job()), topo)
    for g in resolved.groups:
        leaf = topo.switch(g.switch)
        assert leaf.role != "spine" and leaf.rail == g.rail
        assert {topo.switch_ports(g.switch)[w.port].node for w in g.workers} == {"s0", "s1", "s2", "s3"}


def test_a_rail_whose_workers_span_switches_is_refused() -> None:
    topo = rail_only(8, 1, radix=4)  # a per-rail Clos: two servers per leaf
    workers = [{"rank": d, "host": f"s{d}", "rail": 0} for d in range(4)]
    with pytest.raises(ConfigError) as err:
        resolve_job(parse_job(job(workers=workers)), topo)
    assert ("in-network aggregation needs the workers of rail 0 on one switch: "
            "s0 attaches to rail0-leaf0, s2 to rail0-leaf1") in str(err.value)


def test_two_rails_of_a_job_on_one_switch_are_refused() -> None:
    topo = rail_only(2, 2)
    # recable the rail-1 NICs to rail0's free ports 3 and 4
    links = tuple(replace(lk, b=Endpoint("rail0", 3 + int(lk.a.node[1:]))) if lk.a.port == "eth1" else lk
                  for lk in topo.links)
    wired = replace(topo, links=links)
    with pytest.raises(ConfigError, match="rails 0 and 1 both aggregate on switch rail0"):
        resolve_job(parse_job(job(workers=grid(2, 2))), wired)


def test_unknown_hosts_and_rails_are_named() -> None:
    bad = job(workers=grid(2, 2))
    bad["workers"][3]["host"] = "s9"
    with pytest.raises(ConfigError, match=r"workers\[3\]\.host: unknown worker host.*'s9'"):
        resolve_job(parse_job(bad), rail_only(2, 2))
    with pytest.raises(ConfigError, match=r"workers\[0\]\.rail: host s0 has no NIC on that rail \(got 5\)"):
        resolve_job(parse_job(job(workers=[{"rank": 0, "host": "s0", "rail": 5}])), rail_only(2, 2))


def test_compiled_rules_groups_and_rids() -> None:
    topo = rail_only(4, 4)
    resolved = resolve_job(parse_job(job(slots=32)), topo)
    bases = {"rail0": 0, "rail1": 64, "rail2": 96, "rail3": 992}
    program = compile_aggregation(resolved, pool_bases=bases, epoch=0xDEADBEEF)
    assert program.switch_names == ("rail0", "rail1", "rail2", "rail3") and program.epoch == 0xDEADBEEF
    for sw, g in zip(program.switches, resolved.groups, strict=True):
        assert (sw.switch, sw.rail, sw.mgid, sw.pool) == (g.switch, g.rail, 0x4007, (bases[g.switch], bases[g.switch] + 32))
        assert sw.replicas == tuple((w.port, w.index + 1) for w in g.workers)
        assert [r.table for r in sw.rules] == [AGG_WORKERS] * 4 + [AGG_RESULT] * 4
        for w, rule in zip(g.workers, sw.worker_rules, strict=True):
            assert rule.action == SET_WORKER
            assert rule.match == {"hdr.agg.job": Exact(7), "hdr.ipv4.src_addr": Exact(int(ipaddress.IPv4Address(w.ip)))}
            assert rule.params == {"worker_bit": 1 << w.index, "workers": 4, "pool_base": bases[g.switch],
                                   "pool_size": 32, "mgid": 0x4007, "epoch": 0xDEADBEEF}
        for w, rule in zip(g.workers, sw.result_rules, strict=True):
            assert rule.action == TO_WORKER
            assert rule.match == {"hdr.agg.job": Exact(7), "standard_metadata.egress_rid": Exact(w.index + 1)}
            assert rule.params == {"dmac": int(w.mac.replace(":", ""), 16), "addr": int(ipaddress.IPv4Address(w.ip))}


def test_compile_refuses_missing_or_overflowing_pools_and_bad_epochs() -> None:
    resolved = resolve_job(parse_job(job(workers=grid(2, 2))), rail_only(2, 2))
    with pytest.raises(AggregationError, match="no pool base given for switch rail1"):
        compile_aggregation(resolved, pool_bases={"rail0": 0}, epoch=1)
    with pytest.raises(AggregationError, match=r"pool \[1000, 1064\) on rail0 is outside"):
        compile_aggregation(resolved, pool_bases={"rail0": 1000, "rail1": 0}, epoch=1)
    for epoch in (0, 1 << 32):
        with pytest.raises(AggregationError, match=f"epoch {epoch} is not a non-zero 32-bit value"):
            compile_aggregation(resolved, pool_bases={"rail0": 0, "rail1": 0}, epoch=epoch)


@pytest.mark.parametrize(("used", "size", "base"), [
    ([], 64, 0),
    ([(0, 64)], 64, 64),
    ([(64, 64)], 64, 0),
    ([(64, 64)], 65, 128),
    ([(0, 64), (128, 64)], 64, 64),
    ([(128, 64), (0, 64)], 32, 64),
    ([(0, 100), (50, 100)], 10, 150),
    ([(0, 960)], 64, 960),
    ([(0, 0)], 1024, 0),
])
def test_allocate_pool_is_first_fit(used, size: int, base: int) -> None:
    assert allocate_pool(used, size) == base


def test_pool_exhaustion_names_the_switch_the_job_and_the_largest_free_range() -> None:
    with pytest.raises(PoolExhausted) as err:
        allocate_pool([(0, 64), (128, 896)], 128, switch="rail1", job="x")
    assert str(err.value) == "pool exhausted on rail1: job 'x' wants 128 slots, the largest free range is 64"
    with pytest.raises(PoolExhausted, match="the largest free range is 0"):
        allocate_pool([(0, 1024)], 1, switch="rail0", job="y")


def test_fresh_epochs_are_32_bit_non_zero_and_avoid_those_in_use() -> None:
    assert fresh_epoch(1_700_000_000_123) == 1_700_000_000_123 & 0xFFFFFFFF
    assert fresh_epoch(0) == 1 and fresh_epoch(1 << 32) == 1
    assert fresh_epoch(41, avoid=[41, 42]) == 43
    assert fresh_epoch(0xFFFFFFFF, avoid=[0xFFFFFFFF]) == 1


def test_the_plan_command_is_offline(capsys) -> None:
    from controller.cli.main import main

    assert main(["aggregate", "plan", str(JOB_FILE), "--topology", str(REPO / "topologies/rail-only-4x4.yaml"),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["id"] == 1 and len(out["workers"]) == 16
    assert {(w["switch"], w["rid"]) for w in out["workers"]} == {(f"rail{r}", i + 1) for r in range(4) for i in range(4)}


def test_a_shadow_per_rail_gets_one_more_copy_of_every_sum() -> None:
    from controller.aggregate.compile import SHADOW_RID, compile_aggregation
    from controller.aggregate.job import parse_job, resolve_job
    from controller.topology import rail_only

    workers = [{"rank": r, "host": f"s{r // 2}", "rail": r % 2} for r in range(4)]
    spec = parse_job({"name": "j", "job": 3, "workers": workers,
                      "shadows": [{"host": "s2", "rail": 0}, {"host": "s2", "rail": 1}]})
    program = compile_aggregation(resolve_job(spec, rail_only(3, 2)), pool_bases={"rail0": 0, "rail1": 0}, epoch=9)
    for sw in program.switches:
        assert sw.replicas[-1] == (3, SHADOW_RID), "s2 is on port 3 of each rail switch"
        assert len(sw.worker_rules) == 2, "the shadow never contributes"
        assert sw.worker_rules[0].params["workers"] == 2
        shadow_rule = sw.result_rules[-1]
        topo = rail_only(3, 2)
        assert shadow_rule.params["addr"] == int(ipaddress.IPv4Address(topo.host("s2").rail_nic(sw.rail).address))


@pytest.mark.parametrize(("shadows", "problem"), [
    ([{"host": "s0", "rail": 0}], "that NIC is a worker's"),
    ([{"host": "s2", "rail": 0}, {"host": "s2", "rail": 0}], "already has a shadow"),
    ([{"host": "s2", "rail": 5}], "no worker of the job is on that rail"),
    ([{"host": "s2", "rail": 0, "port": 1}], "unknown key"),
    ({"host": "s2"}, "expected a list"),
])
def test_bad_shadows_name_the_value(shadows, problem: str) -> None:
    from controller.aggregate.job import parse_job

    workers = [{"rank": r, "host": f"s{r}", "rail": 0} for r in range(2)]
    with pytest.raises(ConfigError, match=problem):
        parse_job({"name": "j", "job": 3, "workers": workers, "shadows": shadows})
