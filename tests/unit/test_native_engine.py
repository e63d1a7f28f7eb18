"""The native engine's API, build cache and support checks, without a P4Runtime server."""

from __future__ import annotations

import copy
import json
import random

import pytest

from controller.p4build import PROGRAM_DIRS, pipeline_files
from pybmv2.calculations import ALGORITHMS
from pybmv2.errors import EntryExistsError, EntryNotFoundError, InvalidEntryError
from pybmv2.native import NativeBuildError, NativeUnsupported, native_support
from pybmv2.native.build import build, compiler
from pybmv2.native.engine import NativeEngine
from pybmv2.native.switch import NativeSwitch, engine_for
from pybmv2.pre import Replica
from pybmv2.program import Program
from pybmv2.tables import ActionCall

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler")


def _program(name: str, home: int = 1) -> Program:
    return Program.from_file(pipeline_files(name, PROGRAM_DIRS[home]).json)


@pytest.fixture(scope="module")
def matching() -> NativeEngine:
    return NativeEngine(_program("matching"))


def test_every_algorithm_matches_pybmv2(matching: NativeEngine) -> None:
    rng = random.Random(5)
    for name, algo in ALGORITHMS.items():
        for n in (0, 1, 2, 3, 7, 8, 9, 20, 64, 101):
            data = rng.randbytes(n)
            assert matching._lib.nx_algo(name.encode(), data, n) == algo(data), (name, n)


def test_entries_are_added_modified_and_deleted_with_their_errors(matching: NativeEngine) -> None:
    table = "I.t_exact"
    meta = matching.table(table)
    assert [k for k, *_ in meta.fields] == ["exact", "exact"]
    action = matching.program.table(table).action_ids[0]
    eid = matching.table_add(table, (0x000000000002, 1), 0, ActionCall(action, (3,)))
    assert matching.table_size(table) == 1
    with pytest.raises(EntryExistsError):
        matching.table_add(table, (0x000000000002, 1), 0, ActionCall(action, (4,)))
    matching.table_modify(table, eid, ActionCall(action, (4,)))
    assert matching.entry_counters(table, eid) == (0, 0)
    matching.entry_set_counters(table, eid, 5, 500)
    assert matching.entry_counters(table, eid, reset=True) == (5, 500)
    assert matching.entry_counters(table, eid) == (0, 0)
    matching.table_delete(table, eid)
    with pytest.raises(EntryNotFoundError):
        matching.table_delete(table, eid)
    assert matching.table_size(table) == 0


def test_deleted_entries_do_not_grow_a_hashed_table(matching: NativeEngine) -> None:
    table = "I.t_exact"
    action = matching.program.table(table).action_ids[0]
    for i in range(10):
        matching.table_add(table, (i, 1), 0, ActionCall(action, (1,)))
    for k in range(5000):  # churn: tombstones must not double the table again and again
        matching.table_delete(table, matching.table_add(table, (100 + k, 1), 0,
                                                        ActionCall(action, (1,))))
    tid = matching.table(table).tid
    assert matching._lib.nx_table_slots(matching._ctx, tid) <= 64
    for eid in range(10):
        matching.table_delete(table, eid)


def test_lpm_entries_are_keyed_by_prefix_length(matching: NativeEngine) -> None:
    table = next(m.name for m in matching.manifest.tables if m.mode == "lpm")
    action = matching.program.table(table).action_ids[0]
    call = ActionCall(action, (0,) * len(matching.manifest.action_args[action]))
    a = matching.table_add(table, ((0x0A000000, 8),), 0, call)
    b = matching.table_add(table, ((0x0A000000, 16),), 0, call)  # same value, longer prefix
    with pytest.raises(EntryExistsError):
        matching.table_add(table, ((0x0A000000, 8),), 0, call)
    with pytest.raises(InvalidEntryError):
        matching.table_add(table, ((0, 33),), 0, call)
    matching.table_delete(table, a)
    matching.table_delete(table, b)


def test_pre_counters_and_registers() -> None:
    engine = NativeEngine(_program("stateful"))
    try:
        engine.mgrp_set(7, [Replica(1, 1), Replica(2, 2)])
        engine.mgrp_delete(7)
        with pytest.raises(EntryNotFoundError):
            engine.mgrp_delete(7)
        with pytest.raises(InvalidEntryError):
            engine.session_set(1 << 15, [Replica(1, 0)])
        counter = next(iter(engine.manifest.counters))
        engine.counter_write(counter, 1, 3, 300)
        assert engine.counter_read(counter, 1) == (3, 300)
        with pytest.raises(InvalidEntryError):
            engine.counter_read(counter, 1 << 40)
        register, (_, width) = next(iter(engine.manifest.registers.items()))
        engine.register_write(register, 2, (1 << 200) - 1)  # masked to the register's width
        assert engine.register_read(register, 2) == (1 << width) - 1
        assert engine.register_take(register, 16) == []  # only the data plane's writes
    finally:
        engine.close()


def test_the_build_is_cached_by_content(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MLFABRIC_NATIVE_CACHE", str(tmp_path))
    src = "int nx_answer(void) { return 42; }\n"
    first = build(src)
    assert first.parent == tmp_path and first.exists()
    stamp = first.stat().st_mtime_ns
    assert build(src) == first and first.stat().st_mtime_ns == stamp
    assert build(src + "/* changed */\n") != first
    with pytest.raises(NativeBuildError, match="failed on the source of the native engine"):
        build("this is not C\n")
    monkeypatch.setenv("CC", "no-such-compiler-anywhere")
    with pytest.raises(NativeBuildError, match="no C compiler"):
        build(src + "/* other */\n")


def test_unsupported_constructs_are_named_and_auto_falls_back() -> None:
    doc = json.loads(pipeline_files("rail_switch").json.read_text())
    wide = copy.deepcopy(doc)
    wide["header_types"][-1]["fields"].append(["wide", 200, False])
    assert "200 bits" in (native_support(Program.from_json(wide)) or "")
    bad = copy.deepcopy(doc)
    bad["actions"][0]["primitives"].append({"op": "modify_field_rng_uniform", "parameters": [
        {"type": "field", "value": ["standard_metadata", "egress_spec"]},
        {"type": "hexstr", "value": "0x0"}, {"type": "hexstr", "value": "0x1"}]})
    program = Program.from_json(bad)
    reason = native_support(program)
    assert reason is not None and "modify_field_rng_uniform" in reason
    assert engine_for(program, "auto") == (None, reason)
    with pytest.raises(NativeUnsupported, match="modify_field_rng_uniform"):
        engine_for(program, "native")
    assert engine_for(program, "python")[0] is None
    sw = NativeSwitch(program, engine="auto")
    assert sw.engine_name == "python" and sw.fallback_reason == reason
    assert sw.process(1, bytes(14)) == []
    with pytest.raises(ValueError, match="unknown engine"):
        NativeSwitch(program, engine="fast")
