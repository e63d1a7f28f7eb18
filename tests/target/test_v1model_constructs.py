"""v1model behaviour the BMv2 goldens cannot show: where BMv2 aborts, the header storage the
Python target reuses between packets as BMv2's PHV pool does, and a P4Info table that the
BMv2 JSON lacks. What the switch does, it does on both of the Python target's engines."""

from __future__ import annotations

import logging

import pytest
from conformance_cases import probe
from conformance_v1model import mpls, tcp_packet, udp_packet

from controller.p4build import PROGRAM_DIRS, pipeline_files
from controller.p4runtime.client import P4ClientError
from controller.p4runtime.entities import Exact, TableRule, encode_rule, update
from packettest import open_target
from pybmv2 import Program, V1Switch
from pybmv2.native.build import compiler
from pybmv2.native.switch import NativeSwitch

ENGINES = ("python", "native")


def switch(name: str, engine: str = "python") -> V1Switch:
    program = Program.from_file(pipeline_files(name, PROGRAM_DIRS[1]).json)
    if engine == "python":
        return V1Switch(program)
    if compiler() is None:
        pytest.skip("the native engine needs a C compiler")
    return NativeSwitch(program, engine="native")


@pytest.mark.parametrize("engine", ENGINES)
def test_stack_index_out_of_bounds_drops_the_packet_and_says_why(
        engine: str, caplog: pytest.LogCaptureFixture) -> None:
    # BMv2 throws std::out_of_range and dies; the Python target drops the one packet
    sw = switch("stack_index", engine)
    with caplog.at_level(logging.ERROR):
        assert sw.process(1, probe(1, 1, 7) + mpls(1, 2)) == []
        assert sw.process(1, probe(2, 0xfe, 1) + mpls(1, 2)) == []  # an assignment's target
    assert "index 7 out of bounds of header stack 'mpls' (size 4): packet dropped in " \
        "ingress" in caplog.text
    assert "index 254 out of bounds of header stack 'mpls'" in caplog.text
    ((port, _),) = sw.process(1, probe(1, 1, 0) + mpls(1, 2))
    assert port == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_a_fresh_switch_reads_zeros_and_a_used_one_reads_the_last_packet(engine: str) -> None:
    fresh, used = switch("stale_headers", engine), switch("stale_headers", engine)
    used.process(1, tcp_packet("10.0.0.1", 1111, 2222))
    udp = udp_packet("10.0.0.1", 53, 5353)
    ((_, cold),) = fresh.process(1, udp)
    ((_, warm),) = used.process(1, udp)
    report = slice(14, 18)  # report.tcp_src, report.tcp_dst
    assert cold[report] == bytes(4)
    assert warm[report] == bytes.fromhex("045708ae")  # 1111, 2222


def test_a_p4info_table_p4c_left_out_of_the_json_loads_and_refuses_access(target_name: str) -> None:
    # nested_switch.p4's table `dead` sits behind a constant-false condition
    with open_target(target_name, pipeline_files("nested_switch", PROGRAM_DIRS[1])) as sw:
        dead = sw.schema.table("I.dead")
        rule = TableRule(dead.name, {"hdr.probe.op": Exact(1)}, "I.c1")
        with pytest.raises(P4ClientError, match="UNKNOWN"):
            sw.client.write([update("insert", encode_rule(sw.schema, rule))])
        with pytest.raises(P4ClientError, match="UNKNOWN"):
            sw.client.read_table_entries(dead.id)
        ((port, _),) = sw.send(1, probe(7), expect=1)
        assert port == 2


@pytest.mark.parametrize("engine", ENGINES)
def test_a_parser_value_set_matches_its_members(engine: str) -> None:
    # empty, as BMv2's under P4Runtime (see value_set.p4); a member makes its case match
    sw = switch("value_set", engine)
    frame = b"\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x01\x12\x34" + probe(2)[14:]
    assert [port for port, _ in sw.process(1, frame)] == [3]
    assert sw.program is not None
    sw.program.parser.value_sets["P.tunnel_types"].add(0x1234)
    ((port, out),) = sw.process(1, frame)
    assert port == 2 and out[-16:-12] == bytes.fromhex("00007777")  # probe.r1
    sw.program.parser.value_sets["P.tunnel_types"].clear()
    assert [port for port, _ in sw.process(1, frame)] == [3]
