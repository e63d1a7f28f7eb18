"""Conformance: every program, entry and packet of the corpus, compared byte for byte with
the outputs simple_switch_grpc produced (committed goldens recorded from BMv2).

Run on BMv2 itself with ``--target bmv2``; re-record with ``--record-golden`` (BMv2 only).
On the Python target every program runs on both engines: the Python one and, where it
supports the program, the native one (tests/target/test_native_differential.py asserts
which programs those are), each in this process and as an ``mlfabric-switch`` process on
veth pairs (as root), where the native engine's own I/O thread runs the ports.
"""

from __future__ import annotations

import json
import os
import queue
from pathlib import Path

import pytest
from conformance_cases import Program, Rule
from conformance_project import PROGRAMS
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
from controller.p4runtime.values import encode_int
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


def rule_entry(sw: PacketTarget, r: Rule) -> p4runtime_pb2.TableEntry:
    """A rule's table entry, with its member, group or one-shot action set."""
    entry = table_entry(sw, r)
    if r.member is not None:
        entry.action.action_profile_member_id = r.member
    elif r.group is not None:
        entry.action.action_profile_group_id = r.group
    elif r.oneshot:
        action_set = entry.action.action_profile_action_set
        for action, params, weight in r.oneshot:
            info = sw.schema.action(action)
            ap = action_set.action_profile_actions.add(weight=weight)
            ap.action.action_id = info.id
            for p in info.params:
                ap.action.params.add(param_id=p.id, value=encode_int(params[p.name], p.bitwidth))
    return entry


def install(sw: PacketTarget, program: Program) -> None:
    updates = [update("insert", action_profile_member(sw.schema, m.profile, m.id, m.action, m.params))
               for m in program.members]
    updates += [update("insert", action_profile_group(sw.schema, g.profile, g.id, g.members))
                for g in program.groups]
    for r in program.rules:
        updates.append(update("modify" if r.default else "insert", rule_entry(sw, r)))
    for group, replicas in program.multicast:
        updates.append(update("insert", multicast_group_entry(group, replicas)))
    for session, replicas in program.clone_sessions:
        updates.append(update("insert", clone_session_entry(session, replicas)))
    updates += [direct_meter_update(sw, r, rates) for r, rates in program.direct_meters]
    if updates:
        sw.client.write(updates)
    if program.after:
        sw.client.write([update(kind, rule_entry(sw, r)) for kind, r in program.after])


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


def native_skip_reason(target_name: str, json_path: Path) -> str | None:
    """Why the native engine cannot run this case here (None: it can)."""
    if target_name != "python":
        return "the native engine is an engine of the Python target"
    from pybmv2.native import native_support
    from pybmv2.native.build import compiler
    from pybmv2.program import Program as Loaded

    if compiler() is None:
        return "no C compiler"
    reason = native_support(Loaded.from_file(json_path))
    return f"the native engine does not support it: {reason}" if reason else None


def target_kind(target_name: str, mode: str) -> str:
    """The packettest target of a run: the Python target in this process or as a switch
    process on veths (root); BMv2 is always a process, and runs once."""
    if target_name != "python":
        if mode == "process":
            pytest.skip("BMv2 always runs as a process: its run is the in-process one's")
        return target_name
    if mode == "process" and os.geteuid() != 0:
        pytest.skip("a switch process on veths needs root")
    return "python-process" if mode == "process" else "python"


@pytest.mark.parametrize("mode", ["in-process", "process"])
@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("program", PROGRAMS + V1MODEL_PROGRAMS, ids=lambda p: p.name)
def test_program_matches_bmv2_golden(program: Program, engine: str, mode: str, target_name: str,
                                     record: bool) -> None:
    path = GOLDEN / f"{program.name}.json"
    golden = None if record else json.loads(path.read_text()) if path.exists() else None
    if golden is None and not record:
        pytest.fail(f"no golden outputs for {program.name}: record them with --target bmv2 --record-golden")
    artifact = pipeline_files(program.program, PROGRAM_DIRS[program.home])
    if engine == "native":
        reason = native_skip_reason(target_name, artifact.json)
        if reason is not None:
            pytest.skip(reason)
    kind = target_kind(target_name, mode)
    if record and mode == "process":
        pytest.skip("goldens are recorded once")
    with open_target(kind, artifact, engine=engine) as sw:
        observed = run_program(sw, program, golden)
        if kind == "python-process":  # the switch's log says which engine ran the ports
            assert ("the native engine runs the ports" in sw.log_text()) == (engine == "native")
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
