"""Process mode on both engines: ``mlfabric-switch`` on veth pairs, driven over P4Runtime.

Each test runs once per engine (``--engine python`` and ``--engine native``): the switch
forwards between veths, counts what it forwarded where P4Runtime reads it, takes counter
writes, turns packet-outs into frames and CPU-port frames into packet-ins, and paces an
egress queue to its rate. The native runs assert from the switch's log that the native
engine's own I/O thread ran the ports.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import grpc
import pytest
from conformance_project import RAIL_MIRROR, tcp_frame
from p4.v1 import p4runtime_pb2
from test_conformance import table_entry

from controller.p4build import pipeline_files
from controller.p4runtime.client import P4ClientError
from controller.p4runtime.entities import update
from packettest import open_target

ENGINES = ["python", "native"]
ROUTES = [r for r in RAIL_MIRROR.rules if r.table == "RailIngress.ipv4_lpm"]
NATIVE_PORTS = "the native engine runs the ports"


@pytest.fixture
def process_mode(target_name: str) -> None:
    if target_name != "python":
        pytest.skip("process mode of the Python target")
    if os.geteuid() != 0:
        pytest.skip("veth pairs need root")


def _route_counts(sw) -> dict[bytes, tuple[int, int]]:
    table = sw.schema.table("ipv4_lpm").id
    return {c.table_entry.match[0].lpm.value: (c.data.packet_count, c.data.byte_count)
            for c in sw.client.read_direct_counters(table)}


def _check_engine(sw, engine: str) -> None:
    assert (NATIVE_PORTS in sw.log_text()) == (engine == "native"), sw.log_text()


@pytest.mark.usefixtures("process_mode")
@pytest.mark.parametrize("engine", ENGINES)
def test_forwards_and_counts_what_p4runtime_reads(engine: str) -> None:
    frame = tcp_frame(0)
    with open_target("python-process", pipeline_files("rail_switch"), ports=(1, 2, 3),
                     engine=engine) as sw:
        sw.client.write([update("insert", table_entry(sw, r)) for r in ROUTES])
        for _ in range(5):
            out = sw.send(1, frame, expect=1)
            assert [p for p, _ in out] == [2]
        counts = _route_counts(sw)
        assert counts[bytes([10, 0, 1, 0])] == (5, 5 * len(frame))
        # a counter write replaces what was counted; counting goes on from it
        (entry,) = [c.table_entry for c in sw.client.read_direct_counters(sw.schema.table("ipv4_lpm").id)
                    if c.table_entry.match[0].lpm.value == bytes([10, 0, 1, 0])]
        u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
        u.entity.direct_counter_entry.table_entry.CopyFrom(entry)
        u.entity.direct_counter_entry.data.packet_count = 100
        u.entity.direct_counter_entry.data.byte_count = 1000
        sw.client.write([u])
        sw.send(1, frame, expect=1)
        assert _route_counts(sw)[bytes([10, 0, 1, 0])] == (101, 1000 + len(frame))
        # an entry deleted and added again forwards where the new one says
        sw.client.write([update("delete", table_entry(sw, r)) for r in ROUTES])
        assert sw.send(1, frame) == []
        sw.client.write([update("insert", table_entry(sw, r)) for r in ROUTES])
        assert [p for p, _ in sw.send(1, frame, expect=1)] == [2]
        _check_engine(sw, engine)


@pytest.mark.usefixtures("process_mode")
@pytest.mark.parametrize("engine", ENGINES)
def test_packet_out_and_packet_in(engine: str) -> None:
    from conformance_cases import Rule

    frame = tcp_frame(0)
    to_cpu = Rule("RailIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": "10.0.1.0/24"},
                  "RailIngress.send_to_cpu")
    with open_target("python-process", pipeline_files("rail_switch"), ports=(1, 2, 3),
                     engine=engine) as sw:
        sw.client.write([update("insert", table_entry(sw, to_cpu))])
        assert sw.send(3, frame) == []
        pin = sw.client.packet_ins.get(timeout=5)
        assert pin.payload == frame
        assert {m.metadata_id: m.value for m in pin.metadata}[1] == b"\x03"  # ingress port (canonical bytes)
        sw.veth.drain()
        sw.client.packet_out(frame, [(1, b"\x00\x02")])  # egress_port = 2
        assert sw.veth.collect(expect=1) == [(2, frame)]
        _check_engine(sw, engine)


@pytest.mark.usefixtures("process_mode")
@pytest.mark.parametrize("engine", ENGINES)
def test_egress_queue_paces_to_its_rate(engine: str) -> None:
    """--queue-rate 40: ten frames leave no faster than 40 per second (a lower bound the
    pacing guarantees, whatever the machine's load)."""
    frame = tcp_frame(0)
    with open_target("python-process", pipeline_files("rail_switch"), ports=(1, 2, 3),
                     engine=engine, extra_args=("--queue-rate", "40")) as sw:
        sw.client.write([update("insert", table_entry(sw, r)) for r in ROUTES])
        sw.veth.drain()
        for _ in range(10):
            sw.veth.send(1, frame)
        t0 = time.monotonic()
        got = sw.veth.collect(expect=10, limit=5.0, quiet=1.0)
        assert len(got) == 10
        assert time.monotonic() - t0 >= 9 / 40 * 0.9
        _check_engine(sw, engine)


@pytest.mark.usefixtures("process_mode")
@pytest.mark.parametrize("engine", ENGINES)
def test_a_backlog_leaves_at_the_queue_rate(engine: str) -> None:
    """--queue-rate 2000: a backlog of 200 frames leaves in 199 gaps of 0.5 ms, not more
    than 6% slower. Each departure counted from the I/O thread's late wake-up (ppoll's
    50 us timer slack) instead of the line's timetable took 10-20% off the rate."""
    frame = tcp_frame(0)
    with open_target("python-process", pipeline_files("rail_switch"), ports=(1, 2, 3), engine=engine,
                     extra_args=("--queue-rate", "2000", "--queue-depth", "256")) as sw:
        sw.client.write([update("insert", table_entry(sw, r)) for r in ROUTES])
        sw.veth.drain()
        for _ in range(200):
            sw.veth.send(1, frame)
        times = []
        while len(times) < 200 and sw.veth.receive(2, 2.0) is not None:
            times.append(time.monotonic())
        assert len(times) == 200
        assert times[-1] - times[0] <= 199 / 2000 * 1.06, times[-1] - times[0]
        _check_engine(sw, engine)


def test_native_refuses_what_needs_the_python_engine() -> None:
    from pybmv2.cli import main

    assert main(["--no-p4", "--engine", "native", "--log-console"]) == 1


def test_unloadable_program_is_invalid_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    """--engine native without a C compiler: the pipeline is refused as INVALID_ARGUMENT."""
    monkeypatch.setenv("CC", "no-such-compiler-here")
    with pytest.raises(P4ClientError) as err, \
            open_target("python", pipeline_files("rail_switch"), engine="native"):
        pass
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT.name


@pytest.mark.usefixtures("process_mode")
@pytest.mark.parametrize("engine", ENGINES)
def test_tagged_frame_leaves_with_its_tag(engine: str) -> None:
    """The kernel moves a received frame's 802.1Q tag into PACKET_AUXDATA; both engines put
    it back, so a circuit passes a tagged frame unchanged (the test's ports restore too)."""
    from conformance_project import OCS_PINNED
    from test_conformance import install

    import pybmv2.ports

    if not hasattr(pybmv2.ports, "restore_vlan_tag"):
        pytest.skip("this tree's ports do not restore 802.1Q tags (pybmv2/ports.py)")
    tagged = (bytes.fromhex("020000000002020000000001") + b"\x81\x00\x00\x05\x08\x00"
              + bytes(range(46)))
    with open_target("python-process", pipeline_files("circuit_switch"), engine=engine) as sw:
        install(sw, OCS_PINNED)
        assert sw.send(1, tagged, expect=1) == [(2, tagged)]
        _check_engine(sw, engine)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.usefixtures("process_mode")
@pytest.mark.parametrize("engine", ENGINES)
def test_an_interface_deleted_under_the_switch_costs_nothing(engine: str) -> None:
    """Mininet deletes links before it stops switches: a switch whose port's interface went
    away keeps forwarding on the others and does not spin on the socket's error (the native
    I/O thread did, at 100% of a core, until it took the error)."""
    frame = tcp_frame(0)
    with open_target("python-process", pipeline_files("rail_switch"), ports=(1, 2, 3),
                     engine=engine) as sw:
        sw.client.write([update("insert", table_entry(sw, r)) for r in ROUTES])
        sw.veth.remove(3)
        pid = sw.process.proc.pid
        before = _cpu_seconds(pid)
        time.sleep(1.0)  # a measurement window, not a synchronisation
        assert _cpu_seconds(pid) - before < 0.3
        assert [p for p, _ in sw.send(1, frame, expect=1)] == [2]
        _check_engine(sw, engine)


@pytest.mark.usefixtures("process_mode")
@pytest.mark.parametrize("engine", ENGINES)
def test_busy_polling_forwards_and_sleeps_again_after_its_window(engine: str) -> None:
    """--busy-poll-us: the native I/O thread polls for that long after a frame, then sleeps
    as before (an idle switch costs nothing); the Python engine says it ignores it."""
    frame = tcp_frame(0)
    with open_target("python-process", pipeline_files("rail_switch"), ports=(1, 2), engine=engine,
                     extra_args=("--busy-poll-us", "50000")) as sw:
        sw.client.write([update("insert", table_entry(sw, r)) for r in ROUTES])
        for _ in range(3):
            assert [p for p, _ in sw.send(1, frame, expect=1)] == [2]
        time.sleep(0.2)  # past the 50 ms window
        pid = sw.process.proc.pid
        before = _cpu_seconds(pid)
        time.sleep(1.0)  # a measurement window, not a synchronisation
        assert _cpu_seconds(pid) - before < 0.3
        _check_engine(sw, engine)
        assert ("--busy-poll-us 50000 ignored" in sw.log_text()) == (engine == "python")
