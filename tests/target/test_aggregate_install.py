"""``mlfabric aggregate``'s controller side on the selected target: a job's compiled entries
and multicast group install and read back equal; install, show and remove work through
P4Runtime against a switch (pools first fit, ids refused twice, the job's name kept in the
switch), and the installed job sums its workers' chunks and multicasts the result to each."""

from __future__ import annotations

import pytest
from p4.v1 import p4runtime_pb2
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.aggregate import (
    AggregationConflict,
    AggregationError,
    compile_aggregation,
    install_aggregation,
    parse_job,
    read_aggregation,
    remove_aggregation,
    resolve_job,
)
from controller.aggregate.compile import AGG_RESULT, AGG_WORKERS
from controller.p4build import pipeline_files
from controller.p4runtime.client import P4ClientError
from controller.p4runtime.entities import decode_rule, encode_rule, multicast_group_entry, update
from controller.topology import rail_only
from packettest import open_target
from workloads.aggregation.wire import AGG_UDP_PORT, LANES, Chunk, decode, encode

pytestmark = pytest.mark.target

#: three servers of one GPU: their rail-0 NICs on ports 1..3 of rail0 (device id 1)
TOPO = rail_only(3, 1)
#: the test's own controller has election id 1: install and remove take over with 2
ELECTION = 2


def spec(name: str = "agg", job: int = 7, slots: int = 16, hosts: tuple[int, ...] = (0, 1, 2)):
    return parse_job({"name": name, "job": job, "slots": slots,
                      "workers": [{"rank": i, "host": f"s{d}", "rail": 0} for i, d in enumerate(hosts)]})


def _groups(sw, mgid: int) -> list[tuple[int, int]]:
    ent = p4runtime_pb2.Entity()
    ent.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = mgid
    try:
        found = sw.client.read([ent])
    except P4ClientError as exc:  # PI answers NOT_FOUND for a group that is not there; nothing else is "none"
        if exc.code != "NOT_FOUND":
            raise
        return []
    return sorted((r.egress_port, r.instance) for e in found
                  for r in e.packet_replication_engine_entry.multicast_group_entry.replicas)


def _rules(sw) -> set:
    return {decode_rule(sw.schema, e) for t in (AGG_WORKERS, AGG_RESULT)
            for e in sw.client.read_table_entries(sw.schema.table(t).id)}


def test_compiled_entries_and_group_install_and_read_back(target_name: str) -> None:
    program = compile_aggregation(resolve_job(spec(), TOPO), pool_bases={"rail0": 32}, epoch=0x12345678)
    (state,) = program.switches
    with open_target(target_name, pipeline_files("rail_switch")) as sw:
        sw.client.write([update("insert", multicast_group_entry(state.mgid, state.replicas))]
                        + [update("insert", encode_rule(sw.schema, r)) for r in state.rules])
        assert _rules(sw) == set(state.rules)
        assert _groups(sw, state.mgid) == sorted(state.replicas) == [(1, 1), (2, 2), (3, 3)]


def _chunk_frame(d: int, values: tuple[int, ...], *, job: int = 7, slot: int = 0) -> bytes:
    """A chunk from server ``d``'s rail-0 NIC; every worker sends from one UDP port."""
    nic = TOPO.host(f"s{d}").rail_nic(0)
    lanes = values + (0,) * (LANES - len(values))
    return bytes(Ether(dst="02:5f:00:01:00:01", src=nic.mac) / IP(src=nic.address, dst="10.0.255.254", ttl=64)
                 / UDP(sport=40000, dport=AGG_UDP_PORT)
                 / encode(Chunk(job=job, slot=slot, offset=slot * LANES, values=lanes)))


def test_install_show_and_remove_through_p4runtime(target_name: str) -> None:
    with open_target(target_name, pipeline_files("rail_switch")) as sw:
        addresses = {"rail0": sw.client.address}
        first = install_aggregation(TOPO, spec(), addresses=addresses, election_id=ELECTION, now_ms=5000)
        assert first.epoch == 5000 and first.switches[0].pool == (0, 16)
        assert _rules(sw) == set(first.switches[0].rules)
        assert _groups(sw, 0x4007) == [(1, 1), (2, 2), (3, 3)]

        # a second job takes the next free range; its epoch differs from the first's
        second = install_aggregation(TOPO, spec("pair", job=9, slots=8, hosts=(2, 0)), addresses=addresses,
                                     election_id=ELECTION, now_ms=5000)
        assert second.switches[0].pool == (16, 24) and second.epoch == 5001
        assert _groups(sw, 0x4009) == [(1, 2), (3, 1)]  # s2 has rank 0: rid 1 on port 3

        with pytest.raises(AggregationConflict, match=r"job id 7 is already installed on rail0 \(job 'agg'\)"):
            install_aggregation(TOPO, spec("other"), addresses=addresses, election_id=ELECTION)
        with pytest.raises(AggregationConflict, match="a job named 'pair' is already installed on rail0"):
            install_aggregation(TOPO, spec("pair", job=11), addresses=addresses, election_id=ELECTION)

        # the installed job sums its three workers' chunks and sends each worker the result
        for d in (0, 1):
            assert sw.send(1, _chunk_frame(d, (d + 1, -10 * (d + 1)))) == []  # one port: kept in order
        out = sw.send(1, _chunk_frame(2, (3, -30)), expect=3)
        assert sorted(p for p, _ in out) == [1, 2, 3]
        for port, frame in out:
            nic = TOPO.host(f"s{port - 1}").rail_nic(0)
            pkt = Ether(frame)
            assert (pkt.dst, pkt[IP].dst, pkt[UDP].dport) == (nic.mac, nic.address, 40000)
            result = decode(bytes(pkt[UDP].payload))
            assert result.is_result and result.values[:2] == (6, -60) and result.bitmap == 0b111

        (state,) = read_aggregation(TOPO, addresses=addresses)
        assert [(j.job, j.name, j.pool, j.epoch, j.group_size) for j in state.jobs] == [
            (7, "agg", (0, 16), 5000, 3), (9, "pair", (16, 24), 5001, 2)]
        assert [w.packets for w in state.jobs[0].workers] == [1, 1, 1]
        assert state.events["contributions"][0] == 3 and state.events["completions"][0] == 1
        (only,) = read_aggregation(TOPO, "pair", addresses=addresses)
        assert [j.job for j in only.jobs] == [9]

        gone = remove_aggregation(TOPO, "agg", addresses=addresses, election_id=ELECTION)
        assert (gone.job, gone.name, gone.switches, gone.deleted) == (7, "agg", ("rail0",), 7)
        assert _groups(sw, 0x4007) == [] and _rules(sw) == set(second.switches[0].rules)
        with pytest.raises(AggregationError, match="no aggregation job 'agg' is installed on rail0"):
            remove_aggregation(TOPO, "agg", addresses=addresses, election_id=ELECTION)
        assert remove_aggregation(TOPO, 9, addresses=addresses, election_id=ELECTION).deleted == 5
        assert _rules(sw) == set()

        # the freed slots are reused first fit
        again = install_aggregation(TOPO, spec(slots=24), addresses=addresses, election_id=ELECTION, now_ms=7)
        assert again.switches[0].pool == (0, 24) and again.epoch == 7


def test_a_switch_that_rejects_its_part_is_rolled_back(target_name: str) -> None:
    """Two workers with one address (a miswired topology): the switch refuses the second
    agg_workers entry, after the job's group and result entries went in; the install fails
    and leaves nothing of the job behind."""
    from dataclasses import replace

    twin = replace(TOPO.host("s1"), nics=(replace(TOPO.host("s1").nics[0], ip=TOPO.host("s0").nics[0].ip),))
    bad = replace(TOPO, hosts=tuple(twin if h.name == "s1" else h for h in TOPO.hosts))
    with open_target(target_name, pipeline_files("rail_switch")) as sw:
        addresses = {"rail0": sw.client.address}
        with pytest.raises(AggregationError, match=r"installing aggregation job 'agg' on rail0 failed \(.*\); rolled back on rail0$"):
            install_aggregation(bad, spec(), addresses=addresses, election_id=ELECTION, now_ms=1)
        assert _rules(sw) == set() and _groups(sw, 0x4007) == []


def test_a_shadow_gets_one_copy_of_every_sum_and_show_names_it(target_name: str) -> None:
    shadowed = parse_job({"name": "shadowed", "job": 5, "slots": 4,
                          "workers": [{"rank": 0, "host": "s0", "rail": 0}, {"rank": 1, "host": "s1", "rail": 0}],
                          "shadows": [{"host": "s2", "rail": 0}]})
    shadow_nic = TOPO.host("s2").rail_nic(0)
    with open_target(target_name, pipeline_files("rail_switch")) as sw:
        addresses = {"rail0": sw.client.address}
        install_aggregation(TOPO, shadowed, addresses=addresses, election_id=ELECTION, now_ms=11)
        assert _groups(sw, 0x4005) == [(1, 1), (2, 2), (3, 255)]
        assert sw.send(1, _chunk_frame(0, (1, 2), job=5)) == []
        out = dict(sw.send(1, _chunk_frame(1, (10, 20), job=5), expect=3))  # one port: kept in order
        assert sorted(out) == [1, 2, 3], "each worker and the shadow"
        copy = Ether(out[3])
        assert (copy.dst, copy[IP].dst) == (shadow_nic.mac, shadow_nic.address)
        assert decode(bytes(copy[UDP].payload)).values[:2] == (11, 22)
        (state,) = read_aggregation(TOPO, addresses=addresses)
        (job,) = state.jobs
        assert job.shadow == shadow_nic.address and job.group_size == 2, "the shadow never contributes"
