"""The Python target's P4Runtime server lets packets through during long writes and reads: it
holds the switch's lock for one update, or one chunk of a read, at a time (BMv2 takes its
table locks per update), instead of for a whole batch."""

from __future__ import annotations

import threading
from pathlib import Path

from p4.v1 import p4runtime_pb2

from controller.p4runtime.entities import Exact, TableRule, encode_rule
from controller.p4runtime.schema import P4Schema
from pybmv2.runtime import table_ops
from pybmv2.runtime.device import DeviceManager
from pybmv2.runtime.testing import load_config
from pybmv2.switch import V1Switch

BUILD = Path(__file__).parents[2] / "p4src" / "build"
N = 300


class CountingLock:
    """An RLock that counts how often it is taken."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.taken = 0

    def __enter__(self) -> CountingLock:
        self._lock.acquire()
        self.taken += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def acquire(self, *a: object, **k: object) -> bool:
        self.taken += 1
        return self._lock.acquire()

    def release(self) -> None:
        self._lock.release()


def _device() -> tuple[DeviceManager, P4Schema, CountingLock]:
    switch = V1Switch(None)
    dev = DeviceManager(switch, 0)
    dev.set_pipeline(p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                     load_config(BUILD / "tor_switch.p4info.txtpb", BUILD / "tor_switch.json"))
    lock = CountingLock()
    switch.lock = lock  # type: ignore[assignment]
    return dev, P4Schema.from_file(BUILD / "tor_switch.p4info.txtpb"), lock


def _batch(schema: P4Schema, kind: int) -> p4runtime_pb2.WriteRequest:
    req = p4runtime_pb2.WriteRequest(device_id=0)
    for k in range(N):
        rule = TableRule("TorIngress.timeflow", {"meta.version": Exact(0), "meta.rack": Exact(k % 64),
                                                 "meta.slot": Exact(k // 64), "meta.transit": Exact(0)},
                         "TorIngress.send", {"port": 3, "wait_slots": 0, "wait_us": 0})
        u = req.updates.add(type=kind)
        u.entity.table_entry.CopyFrom(encode_rule(schema, rule))
    return req


def test_a_long_batch_takes_the_lock_once_per_update() -> None:
    dev, schema, lock = _device()
    status = dev.write(_batch(schema, p4runtime_pb2.Update.INSERT))
    assert status.code == 0
    assert lock.taken >= N


def test_a_long_read_releases_the_lock_between_chunks() -> None:
    dev, schema, lock = _device()
    dev.write(_batch(schema, p4runtime_pb2.Update.INSERT))
    lock.taken = 0
    req = p4runtime_pb2.ReadRequest(device_id=0)
    req.entities.add().table_entry.table_id = schema.table("TorIngress.timeflow").id
    response, error = dev.read(req)
    assert error is None and len(response.entities) == N
    assert lock.taken >= N // table_ops.READ_CHUNK


def test_an_entry_deleted_between_chunks_is_not_read() -> None:
    dev, schema, lock = _device()
    dev.write(_batch(schema, p4runtime_pb2.Update.INSERT))
    table = dev.require_pipeline().table(schema.table("TorIngress.timeflow").id)[1]
    victim = list(table.entries())[-1]
    original = lock.__enter__

    def enter_and_delete() -> CountingLock:  # the third hold of the lock: a writer got in first
        got = original()
        if lock.taken == 3 and table.holds(victim):
            table.delete(victim.key, victim.priority)
        return got

    lock.__enter__ = enter_and_delete  # type: ignore[method-assign]
    lock.taken = 0
    req = p4runtime_pb2.ReadRequest(device_id=0)
    req.entities.add().table_entry.table_id = schema.table("TorIngress.timeflow").id
    response, error = dev.read(req)
    assert error is None and len(response.entities) == N - 1
