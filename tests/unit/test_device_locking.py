"""The Python target's P4Runtime server lets packets and Writes through during long Writes and
Reads: a Write holds the switch's lock for one update at a time (BMv2 takes its table locks
per update), and a table Read holds no lock while it encodes its entries. A Read still sees
the state before or after a whole Write batch, never a mix of both."""

from __future__ import annotations

import threading
from pathlib import Path

from p4.v1 import p4runtime_pb2

from controller.p4runtime.entities import Exact, Lpm, TableRule, encode_rule
from controller.p4runtime.schema import P4Schema
from pybmv2.runtime import table_reads
from pybmv2.runtime.device import DeviceManager
from pybmv2.runtime.testing import load_config
from pybmv2.switch import V1Switch

BUILD = Path(__file__).parents[2] / "p4src" / "build"
N = 300
#: generous bounds for what must happen at once; reached only when the code under test hangs
STUCK = 30.0


class CountingLock:
    """An RLock that counts how often it is taken and calls ``after_release`` (if set)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.taken = 0
        self.after_release = None

    def __enter__(self) -> CountingLock:
        self._lock.acquire()
        self.taken += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
        if self.after_release is not None:
            self.after_release()

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


def _rule(k: int) -> TableRule:
    return TableRule("TorIngress.timeflow", {"meta.version": Exact(0), "meta.rack": Exact(k % 64),
                                             "meta.slot": Exact(k // 64), "meta.transit": Exact(0)},
                     "TorIngress.send", {"port": 3, "wait_slots": 0, "wait_us": 0})


def _batch(schema: P4Schema, kind: int, ks: range = range(N)) -> p4runtime_pb2.WriteRequest:
    req = p4runtime_pb2.WriteRequest(device_id=0)
    for k in ks:
        u = req.updates.add(type=kind)
        u.entity.table_entry.CopyFrom(encode_rule(schema, _rule(k)))
    return req


def _read_request(schema: P4Schema) -> p4runtime_pb2.ReadRequest:
    req = p4runtime_pb2.ReadRequest(device_id=0)
    req.entities.add().table_entry.table_id = schema.table("TorIngress.timeflow").id
    return req


def _in_thread(fn) -> tuple[threading.Thread, dict]:
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(result=fn()), daemon=True)
    thread.start()
    return thread, out


def test_a_long_batch_takes_the_lock_once_per_update() -> None:
    dev, schema, lock = _device()
    status = dev.write(_batch(schema, p4runtime_pb2.Update.INSERT))
    assert status.code == 0
    assert lock.taken >= N


def test_packets_and_a_write_go_on_while_a_read_is_paused_mid_encoding() -> None:
    dev, schema, _ = _device()
    n = 4 * table_reads.READ_CHUNK
    assert dev.write(_batch(schema, p4runtime_pb2.Update.INSERT, range(n))).code == 0
    paused, resume = threading.Event(), threading.Event()

    def hold_the_read() -> None:  # the first pause of the encoding waits for the test
        dev.read_hook = None
        paused.set()
        resume.wait(4 * STUCK)  # outlasts the joins below: only the test resumes it

    dev.read_hook = hold_the_read
    reader, read = _in_thread(lambda: dev.read(_read_request(schema)))
    try:
        assert paused.wait(STUCK), "the read never reached its encoding"
        # the read is half encoded: packets and a one-entry Write must not wait for it
        forwarder, _ = _in_thread(lambda: dev.switch.process(1, b"\x00" * 64))
        forwarder.join(STUCK)
        assert not forwarder.is_alive(), "a packet waited for the read"
        writer, wrote = _in_thread(lambda: dev.write(_batch(schema, p4runtime_pb2.Update.INSERT,
                                                            range(n, n + 1))))
        writer.join(STUCK)
        assert not writer.is_alive(), "a one-entry Write waited for the read"
        assert wrote["result"].code == 0
    finally:
        resume.set()
    reader.join(STUCK)
    response, error = read["result"]
    assert error is None
    assert len(response.entities) == n  # the state when the read began
    after, _ = dev.read(_read_request(schema))
    assert len(after.entities) == n + 1


def test_a_read_during_a_write_batch_sees_it_whole() -> None:
    dev, schema, lock = _device()
    started = threading.Event()
    reader: threading.Thread | None = None
    read: dict = {}

    def read_in_the_middle() -> None:  # after update N/2, the switch's lock released
        nonlocal reader, read
        if lock.taken != N // 2 or started.is_set():
            return
        started.set()
        reader, read = _in_thread(lambda: dev.read(_read_request(schema)))
        reader.join(1.0)  # a read that could see half a batch gets the chance to, now

    lock.after_release = read_in_the_middle
    assert dev.write(_batch(schema, p4runtime_pb2.Update.INSERT)).code == 0
    lock.after_release = None
    assert started.is_set() and reader is not None
    reader.join(STUCK)
    response, error = read["result"]
    assert error is None
    assert len(response.entities) == N  # not N // 2: the read saw the whole batch


def test_an_entry_deleted_during_the_encoding_is_still_read() -> None:
    dev, schema, _ = _device()
    dev.write(_batch(schema, p4runtime_pb2.Update.INSERT))
    table = dev.require_pipeline().table(schema.table("TorIngress.timeflow").id)[1]
    victim = list(table.entries())[-1]

    def delete_victim() -> None:  # a Write gets in while the read encodes
        dev.read_hook = None
        with dev.switch.lock:
            table.delete(victim.key, victim.priority)

    dev.read_hook = delete_victim
    response, error = dev.read(_read_request(schema))
    assert error is None and len(response.entities) == N
    assert not table.holds(victim)


def test_a_packet_goes_through_while_a_direct_counter_read_is_paused() -> None:
    switch = V1Switch(None)
    dev = DeviceManager(switch, 0)
    dev.set_pipeline(p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                     load_config(BUILD / "rail_switch.p4info.txtpb", BUILD / "rail_switch.json"))
    schema = P4Schema.from_file(BUILD / "rail_switch.p4info.txtpb")
    n = 4 * table_reads.READ_CHUNK
    req = p4runtime_pb2.WriteRequest(device_id=0)
    for k in range(n):
        rule = TableRule("RailIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(k << 8, 24)},
                         "RailIngress.set_nexthop", {"port": 2, "dmac": 2, "smac": 3})
        req.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry.CopyFrom(encode_rule(schema, rule))
    assert dev.write(req).code == 0
    paused, resume = threading.Event(), threading.Event()

    def hold_the_read() -> None:
        dev.read_hook = None
        paused.set()
        resume.wait(4 * STUCK)

    dev.read_hook = hold_the_read
    read_req = p4runtime_pb2.ReadRequest(device_id=0)
    read_req.entities.add().direct_counter_entry.table_entry.table_id = schema.table("ipv4_lpm").id
    reader, read = _in_thread(lambda: dev.read(read_req))
    try:
        assert paused.wait(STUCK), "the read never reached its encoding"
        forwarder, _ = _in_thread(lambda: switch.process(1, b"\x00" * 64))
        forwarder.join(STUCK)
        assert not forwarder.is_alive(), "a packet waited for the read"
    finally:
        resume.set()
    reader.join(STUCK)
    response, error = read["result"]
    assert error is None and len(response.entities) == n
