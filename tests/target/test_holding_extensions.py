"""The Python target's holding extensions on both packet engines: the calendar queue
(``--calendar-queue``), port delays (``--port-delay``) and port ingress delays
(``--port-ingress-delay``), run by a switch in process over real veths.

The program (tests/p4programs/hold_stamps.p4) writes the switch's timestamps into every
frame, and the test reads the same clock (``switch.now_us()``), so each check holds
whatever the machine's load: nothing is let go before its time, held packets leave in
release order and first come first among equal release times (the Python engine's
CalendarQueue is the reference: a heap of (release time, arrival)), and the engine counts
exactly what it held.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from controller.netstate import NetRecord
from controller.p4build import PROGRAM_DIRS, pipeline_files
from controller.readiness import free_tcp_port
from packettest.veth import VethPorts
from pybmv2.daemon import DaemonOptions, SwitchDaemon
from pybmv2.ports import PortSpec

ENGINES = ["python", "native"]
ART = pipeline_files("hold_stamps", PROGRAM_DIRS[1])
ETHER_STAMP = 0x88B6
NO_RELEASE, NEW_BASE = 1, 2
#: how long a test waits for frames that must come (a limit, never a measurement)
LIMIT_S = 30.0


@pytest.fixture(autouse=True)
def _root(target_name: str) -> None:
    if target_name != "python":
        pytest.skip("the holding extensions are the Python target's")
    if os.geteuid() != 0:
        pytest.skip("veth pairs need root")


@dataclass(frozen=True, slots=True)
class Stamp:
    """The stamp header of a frame the switch sent (hold_stamps.p4)."""

    seq: int
    flags: int
    out_port: int
    offset_us: int
    release_us: int
    ingress_us: int
    enq_us: int
    egress_us: int


def stamp_frame(seq: int, *, offset_us: int = 0, flags: int = 0, out_port: int = 2) -> bytes:
    eth = bytes.fromhex("020000000002020000000001") + ETHER_STAMP.to_bytes(2, "big")
    stamp = (seq.to_bytes(2, "big") + bytes([flags, out_port]) + offset_us.to_bytes(6, "big")
             + bytes(24))
    return eth + stamp + bytes(range(16))


def read_stamp(frame: bytes) -> Stamp:
    b = frame[14:]
    f48 = [int.from_bytes(b[4 + 6 * i:10 + 6 * i], "big") for i in range(5)]
    return Stamp(int.from_bytes(b[:2], "big"), b[2], b[3], *f48)


@contextlib.contextmanager
def running(engine: str, **extensions: object) -> Iterator[tuple[SwitchDaemon, VethPorts]]:
    """A switch on ``engine`` with hold_stamps loaded on ports 1-3 (veths), serving."""
    with NetRecord("holding-test") as record:
        veth = VethPorts((1, 2, 3), record, prefix=f"hx{os.getpid() % 10000}")
        daemon: SwitchDaemon | None = None
        thread: threading.Thread | None = None
        try:
            options = DaemonOptions(
                ports=tuple(PortSpec(n, iface) for n, iface in veth.switch_ifaces.items()),
                grpc_addr=f"127.0.0.1:{free_tcp_port()}", json_path=ART.json, engine=engine,
                **extensions)  # type: ignore[arg-type]
            daemon = SwitchDaemon(options)
            thread = threading.Thread(target=daemon.serve_forever, name="switch", daemon=True)
            thread.start()
            deadline = time.monotonic() + LIMIT_S
            while daemon.engine_name != engine:  # the native engine takes the ports at start
                assert time.monotonic() < deadline, f"the {engine} engine never took the ports"
                time.sleep(0.01)
            yield daemon, veth
        finally:
            if daemon is not None:
                daemon.stop()
                if thread is not None:
                    thread.join(LIMIT_S)
                daemon.close()
            veth.close()


@contextlib.contextmanager
def poking(veth: VethPorts, port: int = 3) -> Iterator[None]:
    """Frames into ``port`` every few ms, for port 4 (no interface: dropped), while the test
    waits: they wake the engine again and again, so a packet let go early would show."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(0.005):
            veth.send(port, stamp_frame(0xFFFF, flags=NO_RELEASE, out_port=4))

    thread = threading.Thread(target=run, name="poke", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(LIMIT_S)


def receive(daemon: SwitchDaemon, veth: VethPorts, port: int, n: int) -> list[tuple[Stamp, int]]:
    """``n`` frames from ``port``, each with the switch's clock read just after it came."""
    out = []
    deadline = time.monotonic() + LIMIT_S
    while len(out) < n:
        frame = veth.receive(port, max(deadline - time.monotonic(), 0.0))
        assert frame is not None, f"{len(out)} of {n} frames came out of port {port}"
        out.append((read_stamp(frame), daemon.switch.now_us()))
    return out


#: (offset from the base in µs, or None: no release time) of each stamp sent, in order; the
#: first sets the base. Offset 0 is the base itself: a time already past, never held.
CALENDAR = [600_000, 400_000, 800_000, 400_000, 0, 600_000, None, 400_000, 800_000, 600_000,
            None, 400_000]


@pytest.mark.parametrize("engine", ENGINES)
def test_calendar_queue_holds_until_the_release_time_in_release_order(engine: str) -> None:
    with running(engine, calendar_field="release_us") as (daemon, veth):
        for seq, offset in enumerate(CALENDAR):
            flags = (NEW_BASE if seq == 0 else 0) | (NO_RELEASE if offset is None else 0)
            veth.send(1, stamp_frame(seq, offset_us=offset or 0, flags=flags))
        veth.send(1, stamp_frame(len(CALENDAR), flags=NO_RELEASE))  # its ingress time closes the last
        with poking(veth):
            got = [s for s, _ in receive(daemon, veth, 2, len(CALENDAR) + 1)]
        counts = daemon.hold_counts()["calendar"]
        assert daemon.engine_name == engine
    by_seq = {s.seq: s for s in got}
    assert sorted(by_seq) == list(range(len(CALENDAR) + 1))
    for s in got:  # nothing enters its egress queue, or egress, before its release time
        assert s.enq_us >= s.release_us and s.egress_us >= s.release_us, s
    # Held for certain: a release time after the next stamp's ingress (which came after this
    # one was held or not); possibly held: after its own ingress. A time past is never held.
    timed = [q for q in range(len(CALENDAR)) if CALENDAR[q] is not None]
    certain = [q for q in timed if by_seq[q].release_us > by_seq[q + 1].ingress_us]
    possible = [q for q in timed if by_seq[q].release_us > by_seq[q].ingress_us]
    assert CALENDAR.index(0) not in possible
    assert len(certain) >= 2, "the stamps were not held together: nothing to order"
    assert [s.seq for s in got if s.seq in certain] == \
        sorted(certain, key=lambda q: (by_seq[q].release_us, q))
    assert len(certain) <= counts.held <= len(possible), (counts, certain, possible)
    assert (counts.released, counts.waiting, counts.dropped) == (counts.held, 0, 0)


@pytest.mark.parametrize("engine", ENGINES)
def test_port_delay_holds_what_the_port_transmits_and_only_that(engine: str) -> None:
    delay = 150_000
    with running(engine, port_delays={2: delay}) as (daemon, veth):
        for seq in range(10):
            veth.send(1, stamp_frame(seq, flags=NO_RELEASE, out_port=2 if seq % 5 else 3))
        with poking(veth, port=1):
            delayed = receive(daemon, veth, 2, 8)
        at_once = receive(daemon, veth, 3, 2)
        counts = daemon.hold_counts()["port-delay"]
        assert daemon.engine_name == engine
    assert [s.seq for s, _ in delayed] == [q for q in range(10) if q % 5]  # in the order sent
    for s, came in delayed:  # on the wire no earlier than the delay after its egress
        assert came >= s.egress_us + delay, (s, came)
    assert sorted(s.seq for s, _ in at_once) == [0, 5]
    assert (counts.held, counts.released, counts.waiting, counts.dropped) == (8, 8, 0, 0)


@pytest.mark.parametrize("engine", ENGINES)
def test_port_ingress_delay_holds_what_the_port_receives_and_only_that(engine: str) -> None:
    delay = 150_000
    with running(engine, port_ingress_delays={1: delay}) as (daemon, veth):
        sent = {}
        for seq in range(10):
            port = 1 if seq % 5 else 3
            sent[seq] = daemon.switch.now_us()
            veth.send(port, stamp_frame(seq, flags=NO_RELEASE, out_port=2))
        with poking(veth):
            got = [s for s, _ in receive(daemon, veth, 2, 10)]
        counts = daemon.hold_counts()["port-ingress-delay"]
        assert daemon.engine_name == engine
    delayed = [s for s in got if s.seq % 5]
    assert [s.seq for s in delayed] == [q for q in range(10) if q % 5]  # in the order sent
    for s in delayed:  # entered ingress no earlier than the delay after it was sent
        assert s.ingress_us >= sent[s.seq] + delay, (s, sent[s.seq])
    assert sorted(s.seq for s in got if s.seq % 5 == 0) == [0, 5]
    assert (counts.held, counts.released, counts.waiting, counts.dropped) == (8, 8, 0, 0)
