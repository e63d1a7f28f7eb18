"""Idle timeouts on a flow cache (``tests/p4programs/flow_cache.p4``), as ``simple_switch_grpc``
1.15.5 has them (:mod:`pybmv2.runtime.idle_timeouts` says what that is).

The golden (recorded from BMv2 with ``--record-golden``) holds what a controller sees in real
time: which writes PI accepts and refuses, the entries read back, every entry an
IdleTimeoutNotification names once the entries go idle, and ``time_since_last_hit`` once
they all expired (each at its timeout). The rest runs on the Python target with the switch's
clock set by the test, on both engines: which sweep reports what, the 100 ms batching, the
every-other-sweep repetition, a hit that keeps an entry alive, a MODIFY that restarts it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conformance_cases import probe
from google.protobuf import json_format
from p4.v1 import p4runtime_pb2

from controller.p4build import PROGRAM_DIRS, pipeline_files
from controller.p4runtime.client import P4ClientError
from packettest import open_target

GOLDEN = Path(__file__).parent / "golden" / "flow_cache_idle.json"
SECOND_NS = 1_000_000_000


def _entry(sw, table: str, value: bytes, ttl_ns: int, *, meta: int = 0, priority: int = 0,
           mask: bytes | None = None, port: int = 2) -> p4runtime_pb2.TableEntry:
    schema = sw.schema
    tid = schema.table(table).id
    e = p4runtime_pb2.TableEntry(table_id=tid, idle_timeout_ns=ttl_ns, controller_metadata=meta,
                                 priority=priority)
    m = e.match.add(field_id=1)
    if mask is None:
        m.exact.value = value
    else:
        m.ternary.value, m.ternary.mask = value, mask
    action = "E.seen" if table == "E.egress_flows" else "I.fwd"
    e.action.action.action_id = schema.action(action).id
    e.action.action.params.add(param_id=1, value=port.to_bytes(4 if table == "E.egress_flows" else 2, "big"))
    return e


def _update(kind: int, entry: p4runtime_pb2.TableEntry) -> p4runtime_pb2.Update:
    u = p4runtime_pb2.Update(type=kind)
    u.entity.table_entry.CopyFrom(entry)
    return u


def _write(sw, kind: int, entry: p4runtime_pb2.TableEntry) -> str:
    try:
        sw.client.write([_update(kind, entry)])
        return "ok"
    except P4ClientError as exc:
        return str(exc)


def _read(sw, table: str, *, since: bool) -> list[dict]:
    ent = p4runtime_pb2.Entity()
    ent.table_entry.table_id = sw.schema.table(table).id
    if since:
        ent.table_entry.time_since_last_hit.SetInParent()
    return [json_format.MessageToDict(e, preserving_proto_field_name=True) for e in sw.client.read([ent])]


def _cache(sw) -> dict[str, str]:
    """The flow cache's entries, and what PI says to those it refuses."""
    insert = p4runtime_pb2.Update.INSERT
    return {
        "a timeout on a table without support_timeout": _write(sw, insert, _entry(sw, "I.ports", b"\x05", SECOND_NS)),
        "a negative timeout": _write(sw, insert, _entry(sw, "I.flows", b"\x06", -5)),
        "1 s, controller metadata 7": _write(sw, insert, _entry(sw, "I.flows", b"\x01", SECOND_NS, meta=7)),
        "2.5 s": _write(sw, insert, _entry(sw, "I.flows", b"\x02", 5 * SECOND_NS // 2)),
        "none": _write(sw, insert, _entry(sw, "I.flows", b"\x03", 0)),
        "1 ms": _write(sw, insert, _entry(sw, "I.flows", b"\x04", 1_000_000)),
        "0.5 ms (under BMv2's millisecond: never idle)": _write(sw, insert, _entry(sw, "I.flows", b"\x07", 500_000)),
        "egress, ternary, priority 10, 1 s": _write(
            sw, insert, _entry(sw, "E.egress_flows", b"\x00\x00\x00\x09", SECOND_NS, meta=3, priority=10,
                               mask=b"\xff\xff\xff\xff")),
        "a timeout on the default entry": _write(sw, p4runtime_pb2.Update.MODIFY, p4runtime_pb2.TableEntry(
            table_id=sw.schema.table("I.flows").id, is_default_action=True, idle_timeout_ns=SECOND_NS)),
    }


def _notified(sw, seconds: float) -> list[dict]:
    """Every entry the notifications name within ``seconds``, once each, sorted."""
    seen: dict[str, dict] = {}
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        note = sw.client.idle_timeout(min(left, 0.2))
        if note is None:
            continue
        assert note.timestamp > 0
        for e in note.table_entry:
            assert not e.HasField("action"), "PI names entries without their action"
            d = json_format.MessageToDict(e, preserving_proto_field_name=True)
            seen[json.dumps(d, sort_keys=True)] = d
    return [seen[k] for k in sorted(seen)]


@pytest.mark.parametrize("mode", ["in-process", "process"])
def test_a_flow_cache_ages_as_on_bmv2(target_name: str, switch_engine: str | None, mode: str,
                                      pytestconfig: pytest.Config) -> None:
    record = bool(pytestconfig.getoption("--record-golden"))
    if record and target_name != "bmv2":
        pytest.fail("--record-golden records what BMv2 does: use it with --target bmv2")
    if target_name == "bmv2" and mode == "in-process":
        pytest.skip("BMv2 runs as a process only")
    kind = target_name if target_name == "bmv2" else ("python" if mode == "in-process" else "python-process")
    with open_target(kind, pipeline_files("flow_cache", PROGRAM_DIRS[1]),
                     engine=switch_engine or "python") as sw:
        writes = _cache(sw)
        read_back = _read(sw, "I.flows", since=False) + _read(sw, "E.egress_flows", since=False)
        try:
            _read(sw, "I.ports", since=True)
            refused = ""
        except P4ClientError as exc:
            refused = str(exc)
        # no traffic: every entry with a timeout of 1 ms or more is idle within 2.5 s, and a sweep
        # (every second) reports it by 3.5 s, PI's 100 ms buffer by 3.6 s; 4.5 s leaves a busy
        # machine most of a second
        notified = _notified(sw, 4.5)
        expired = _read(sw, "I.flows", since=True) + _read(sw, "E.egress_flows", since=True)
        pinned = _read(sw, "I.pinned", since=True)  # const entries: PI leaves time_since_last_hit out
        # every MODIFY restarts the timeout, one that keeps it too (PI sets it on each)
        restart = _write(sw, p4runtime_pb2.Update.MODIFY, _entry(sw, "I.flows", b"\x01", 3 * SECOND_NS, meta=8))
        keep = _write(sw, p4runtime_pb2.Update.MODIFY, _entry(sw, "I.flows", b"\x02", 5 * SECOND_NS // 2, port=3))
        after = {e["table_entry"]["match"][0]["exact"]["value"]: e["table_entry"]
                 for e in _read(sw, "I.flows", since=True)}
    assert restart == keep == "ok"
    assert int(after["AQ=="]["time_since_last_hit"].get("elapsed_ns", 0)) < 500_000_000, after["AQ=="]
    assert int(after["Ag=="]["time_since_last_hit"].get("elapsed_ns", 0)) < 500_000_000, after["Ag=="]
    got = {"writes": writes, "read_back": read_back, "time_since_last_hit_refused": refused,
           "notified": notified, "read_after_expiry": expired, "const_entries": pinned}
    if record:
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        return
    assert got == json.loads(GOLDEN.read_text())


class _Clock:
    def __init__(self) -> None:
        self.us = 10_000_000

    def __call__(self) -> int:
        return self.us


@pytest.fixture(params=["python", "native"])
def clocked(request: pytest.FixtureRequest):
    """The flow cache on the in-process Python target (each engine), on a clock the test sets,
    with every IdleTimeoutNotification the device sends also kept in ``sent``."""
    with open_target("python", pipeline_files("flow_cache", PROGRAM_DIRS[1]), engine=request.param) as sw:
        clock = _Clock()
        sw.switch.clock = clock
        device = sw.server.device
        device.restart_sweeps()  # sweeps at +1 s, +2 s, ... on this clock, whichever thread runs them
        sent: list[p4runtime_pb2.IdleTimeoutNotification] = []
        emit = device._emit

        def keep(msg: p4runtime_pb2.StreamMessageResponse) -> None:
            if msg.HasField("idle_timeout_notification"):
                sent.append(msg.idle_timeout_notification)
            emit(msg)

        device._emit = keep
        yield sw, clock, sent


def _at(sw, clock: _Clock, sent: list, seconds: float) -> p4runtime_pb2.IdleTimeoutNotification | None:
    """Set the clock to ``seconds`` after its start and run what is due: the notification it
    sent (None: none). The device's own thread runs the same sweeps on the same clock."""
    before = len(sent)
    clock.us = 10_000_000 + round(seconds * 1e6)
    sw.server.device.idle_tick()
    assert len(sent) - before <= 1
    return sent[-1] if len(sent) > before else None


def _values(note: p4runtime_pb2.IdleTimeoutNotification | None) -> list[bytes]:
    return [] if note is None else sorted(e.match[0].exact.value or e.match[0].ternary.value
                                          for e in note.table_entry)


def test_sweeps_report_idle_entries_every_other_second_in_one_batch(clocked) -> None:
    sw, clock, sent = clocked
    insert = p4runtime_pb2.Update.INSERT
    sw.client.write([_update(insert, _entry(sw, "I.flows", b"\x01", SECOND_NS, meta=7)),
                     _update(insert, _entry(sw, "I.flows", b"\x02", 2 * SECOND_NS)),
                     _update(insert, _entry(sw, "E.egress_flows", b"\x00\x00\x00\x09", SECOND_NS, priority=5,
                                            mask=b"\xff\xff\xff\xff"))])
    clock.us += 400_000
    sw.send(1, probe(a32=2, b32=9))  # 0.4 s: entry 2 and the egress entry are hit (ingress time)
    assert _at(sw, clock, sent, 1.0) is None, "1 s: entry 1 idle 1.0 s is reported, after PI's 100 ms"
    note = _at(sw, clock, sent, 1.1)
    assert _values(note) == [b"\x01"]
    assert sw.client.idle_timeout(5.0) == note, "on the primary's stream"
    (e,) = note.table_entry
    assert (e.controller_metadata, e.idle_timeout_ns, e.HasField("action")) == (7, SECOND_NS, False)
    # 2 s: the egress entry is idle 1.6 s; entry 1, reported by the last sweep, is left out
    assert _values(_at(sw, clock, sent, 2.1)) == [b"\x09"]  # canonical: no leading zeros
    # 3 s: entry 1 again (not in the last sweep's report), entry 2 (idle 2.6 s); egress left out
    assert _values(_at(sw, clock, sent, 3.1)) == [b"\x01", b"\x02"]
    # the switch removes nothing
    assert len(_read(sw, "I.flows", since=False)) == 2


def test_time_since_last_hit_hits_and_a_modify_that_restarts_the_timeout(clocked) -> None:
    sw, clock, _ = clocked
    insert, modify = p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.MODIFY
    sw.client.write([_update(insert, _entry(sw, "I.flows", b"\x01", 2 * SECOND_NS))])

    def since() -> int:
        (e,) = _read(sw, "I.flows", since=True)
        return int(e["table_entry"]["time_since_last_hit"].get("elapsed_ns", 0))

    clock.us += 345_678
    assert since() == 345_000_000, "BMv2 counts whole milliseconds"
    sw.send(1, probe(a32=1))
    clock.us += 20_000
    assert since() == 20_000_000, "a hit restarts it"
    clock.us += 5_000_000
    assert since() == 2 * SECOND_NS, "at most the timeout"
    sw.client.write([_update(modify, _entry(sw, "I.flows", b"\x01", 2 * SECOND_NS, port=3))])
    clock.us += 4_000
    assert since() == 4_000_000, "a MODIFY that keeps the timeout restarts it (PI sets it on every MODIFY)"
    sw.client.write([_update(modify, _entry(sw, "I.flows", b"\x01", 3 * SECOND_NS))])
    clock.us += 7_000
    assert since() == 7_000_000, "so does one that changes it"
