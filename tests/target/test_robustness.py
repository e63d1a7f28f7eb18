"""Bad input never crashes the Python target: random frames, malformed JSON, bad writes."""

from __future__ import annotations

import json
import random

import pytest

from controller.p4build import PROGRAM_DIRS, pipeline_files, programs_in
from controller.p4runtime.client import P4ClientError
from controller.p4runtime.entities import TableRule, encode_rule, parse_match, update
from packettest.frames import ethernet, ipv4, udp
from pybmv2.errors import JsonFormatError, UnsupportedJsonError
from pybmv2.program import Program
from pybmv2.switch import V1Switch

FRAMES_PER_PROGRAM = 100_000
PROJECT_PROGRAMS = [p.stem for p in programs_in(PROGRAM_DIRS[0])]


def _random_frames(rng: random.Random, n: int):
    """Random bytes, truncated real headers and wrong-length headers, in equal parts."""
    real = ethernet("00:00:00:00:0a:01", "00:00:00:00:00:01", 0x0800,
                    ipv4("10.0.0.1", "10.0.0.2", udp(1, 2, b"payload")))
    for i in range(n):
        kind = i % 3
        if kind == 0:
            yield rng.randbytes(rng.randrange(0, 128))
        elif kind == 1:
            yield real[: rng.randrange(0, len(real))]
        else:
            mutated = bytearray(real)
            for _ in range(rng.randrange(1, 6)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            yield bytes(mutated)


def _entries(name: str) -> list[TableRule]:
    """What a program needs installed to forward anything (the circuit switch is dark until
    a circuit is set up): pinned circuits between ports 1, 2 and 3."""
    if name != "circuit_switch":
        return []
    from controller.schedule import one_shot
    from controller.schedule.ocs_rules import circuit_switch_rules

    return circuit_switch_rules(one_shot([(1, 2, 0)]), 0)


def _switch(engine: str) -> V1Switch:
    if engine == "python":
        return V1Switch(None, cpu_port=510)
    from pybmv2.native.switch import NativeSwitch

    return NativeSwitch(None, cpu_port=510, engine=engine)


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("name", PROJECT_PROGRAMS)
def test_random_frames_never_crash_the_switch(name: str, engine: str) -> None:
    from controller.p4runtime.client import P4RuntimeClient
    from controller.p4runtime.schema import P4Schema, load_p4info
    from pybmv2.runtime.server import P4RuntimeServer

    art = pipeline_files(name)
    p4info = load_p4info(art.p4info)
    entries = [update("insert", encode_rule(P4Schema(p4info), r)) for r in _entries(name)]
    switch, fresh = _switch(engine), _switch(engine)
    switch.clock = fresh.clock = lambda: 0  # outputs may carry timestamps (circuit_switch's clock probe)
    with P4RuntimeServer(switch, device_id=1, address="127.0.0.1:0") as server, \
            P4RuntimeClient(server.address, device_id=1) as client, \
            P4RuntimeServer(fresh, device_id=1, address="127.0.0.1:0") as fresh_server, \
            P4RuntimeClient(fresh_server.address, device_id=1) as fresh_client:
        for c in (client, fresh_client):
            c.set_pipeline(p4info, art.json.read_bytes())
            if entries:
                c.write(entries)
        rng = random.Random(20261122)
        frames = [(rng.choice((1, 2, 3, 510)), f) for f in _random_frames(rng, FRAMES_PER_PROGRAM)]
        if engine == "python":
            for port, frame in frames:
                switch.process(port, frame)
        else:  # the native engine's batch API, a thousand frames at a time
            for at in range(0, len(frames), 1000):
                switch.process_batch(frames[at: at + 1000])  # type: ignore[attr-defined]
        # Still answering P4Runtime, and no bad frame left state behind: a fresh switch
        # gives the same outputs for the same new frames (the project's programs keep no
        # data-plane state that changes forwarding).
        assert len(client.read_table_entries()) == len(entries)
        probe = random.Random(7)
        outputs = []
        for frame in _random_frames(probe, 3000):
            port = probe.choice((1, 2, 3, 510))
            got = switch.process(port, frame)
            assert got == fresh.process(port, frame)
            outputs += got
        assert outputs, "the probe frames exercised no forwarding path"


def test_malformed_json_is_a_clear_error() -> None:
    with pytest.raises(JsonFormatError, match="not valid JSON"):
        Program.from_text("{ not json", source="broken.json")
    with pytest.raises(JsonFormatError, match="missing key 'header_types'"):
        Program.from_text("{}", source="empty.json")


def test_unsupported_constructs_are_named() -> None:
    doc = json.loads(pipeline_files("rail_switch").json.read_text())
    doc["pipelines"][0]["tables"][0]["type"] = "indirect_ws"
    with pytest.raises(UnsupportedJsonError, match="action profiles and selectors"):
        Program.from_json(doc)
    doc = json.loads(pipeline_files("rail_switch").json.read_text())
    doc["calculations"][0]["algo"] = "toeplitz"
    with pytest.raises(UnsupportedJsonError, match="toeplitz"):
        Program.from_json(doc)


def test_a_value_too_wide_for_its_field_is_invalid_argument(target_name: str) -> None:
    from packettest import open_target

    with open_target(target_name, pipeline_files("rail_switch")) as sw:
        table = sw.schema.table("ipv4_lpm")
        name, match = parse_match(table, "hdr.ipv4.dst_addr", "10.0.0.0/8")
        entry = encode_rule(sw.schema, TableRule(table.name, {name: match}, "set_nexthop",
                                                 {"port": 1, "dmac": 1, "smac": 1}))
        entry.action.action.params[0].value = b"\x7f\xff"  # 15 bits for a 9-bit port
        with pytest.raises(P4ClientError) as info:
            sw.client.write([update("insert", entry)])
        assert [e.code for e in info.value.errors] == ["INVALID_ARGUMENT"]
        assert sw.client.read_table_entries() == []
