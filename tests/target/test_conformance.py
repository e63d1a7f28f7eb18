"""Conformance: every program, entry and packet of the corpus, compared byte for byte with
the outputs simple_switch_grpc produced (committed goldens recorded from BMv2).

Run on BMv2 itself with ``--target bmv2``; re-record with ``--record-golden`` (BMv2 only).
"""

from __future__ import annotations

import json
import queue
from pathlib import Path

import pytest
from conformance_cases import PROGRAMS, Program, Rule
from conformance_v1model import PROGRAMS as V1MODEL_PROGRAMS
from p4.v1 import p4runtime_pb2

from controller.p4build import PROGRAM_DIRS, pipeline_files
from controller.p4runtime.entities import (
    TableRule,
    action_profile_group,
    action_profile_member,
    clone_session_entry,
    encode_rule,
    multicast_group_entry,
    parse_match,
    update,
)
from packettest import PacketTarget, open_target

GOLDEN = Path(__file__).parent / "golden"


def table_entry(sw: PacketTarget, r: Rule) -> p4runtime_pb2.TableEntry:
    table = sw.schema.table(r.table)
    match = dict(parse_match(table, name, text) for name, text in r.match.items())
    return encode_rule(sw.schema, TableRule(table.name, match, r.action, r.params, r.priority, r.default))


def direct_meter_update(sw: PacketTarget, r: Rule, rates: tuple[int, int, int, int]) -> p4runtime_pb2.Update:
    cir, cburst, pir, pburst = rates
    entity = p4runtime_pb2.Entity()
    meter = entity.direct_meter_entry
    meter.table_entry.CopyFrom(table_entry(sw, r))
    meter.table_entry.ClearField("action")
    meter.config.cir, meter.config.cburst, meter.config.pir, meter.config.pburst = cir, cburst, pir, pburst
    return update("modify", entity)


def install(sw: PacketTarget, program: Program) -> None:
    updates = [update("insert", action_profile_member(sw.schema, m.profile, m.id, m.action, m.params))
               for m in program.members]
    updates += [update("insert", action_profile_group(sw.schema, g.profile, g.id, g.members))
                for g in program.groups]
    for r in program.rules:
        entry = table_entry(sw, r)
        if r.member is not None:
            entry.action.action_profile_member_id = r.member
        elif r.group is not None:
            entry.action.action_profile_group_id = r.group
        updates.append(update("modify" if r.default else "insert", entry))
    for group, replicas in program.multicast:
        updates.append(update("insert", multicast_group_entry(group, replicas)))
    for session, replicas in program.clone_sessions:
        updates.append(update("insert", clone_session_entry(session, replicas)))
    updates += [direct_meter_update(sw, r, rates) for r, rates in program.direct_meters]
    if updates:
        sw.client.write(updates)


def packet_ins(sw: PacketTarget, wait: float) -> list[dict]:
    out = []
    while True:
        try:
            msg = sw.client.packet_ins.get(timeout=wait)
        except queue.Empty:
            return out
        meta = {str(m.metadata_id): m.value.hex() for m in msg.metadata}
        out.append({"metadata": meta, "payload": msg.payload.hex()})
        wait = 0.05


def run_program(sw: PacketTarget, program: Program, golden: dict | None) -> dict:
    install(sw, program)
    observed: dict[str, dict] = {}
    for name, port, frame in program.packets:
        expected = golden["packets"][name] if golden else None
        n = len(expected["outputs"]) if expected else None
        outputs = sw.send(port, frame, expect=n)
        wait = 0.3 if expected is None else (1.0 if expected["packet_ins"] else 0.0)
        observed[name] = {
            "outputs": sorted([p, f.hex()] for p, f in outputs),
            "packet_ins": packet_ins(sw, wait) if wait else [],
        }
    return {"program": program.name, "packets": observed}


@pytest.fixture(scope="module")
def record(pytestconfig: pytest.Config, target_name: str) -> bool:
    wanted = bool(pytestconfig.getoption("--record-golden"))
    if wanted and target_name != "bmv2":
        pytest.fail("--record-golden records what BMv2 does: use it with --target bmv2")
    return wanted


@pytest.mark.parametrize("program", PROGRAMS + V1MODEL_PROGRAMS, ids=lambda p: p.name)
def test_program_matches_bmv2_golden(program: Program, target_name: str, record: bool) -> None:
    path = GOLDEN / f"{program.name}.json"
    golden = None if record else json.loads(path.read_text()) if path.exists() else None
    if golden is None and not record:
        pytest.fail(f"no golden outputs for {program.name}: record them with --target bmv2 --record-golden")
    artifact = pipeline_files(program.program, PROGRAM_DIRS[program.home])
    with open_target(target_name, artifact) as sw:
        observed = run_program(sw, program, golden)
    if record:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(observed, indent=1, sort_keys=True) + "\n")
        return
    assert golden is not None
    racy = set(program.phv_reuse) if target_name == "bmv2" else set()
    mismatches = [
        f"{name}: expected {golden['packets'][name]}\n   got {got}"
        for name, got in observed["packets"].items()
        if got != golden["packets"][name] and name not in racy
    ]
    assert not mismatches, f"{len(mismatches)} packet(s) differ from BMv2:\n" + "\n".join(mismatches)
