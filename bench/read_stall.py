"""Forwarding and Writes while a big table is read: rail_switch with 65,536 routes.

A switch process forwards a paced probe stream (port 1 -> port 2, one frame every
``interval_s``, each carrying its sequence number) while a client reads all 65,536 entries
of ``ipv4_lpm`` with wildcard Reads; during other such Reads the same process writes one
entry at a time. The same probes and Writes are measured with no Read running first: the
figures are the latencies during the Reads over that idle baseline, from one run.
"""

from __future__ import annotations

import contextlib
import statistics
import struct
import threading
import time

import grpc
from p4.v1 import p4runtime_pb2

from bench.traffic import route_rules
from controller.p4build import pipeline_files
from controller.p4runtime.entities import TableRule, encode_rule, parse_match, update
from controller.p4runtime.schema import P4Schema
from packettest.frames import ethernet, ipv4, udp
from packettest.targets import ProcessTarget

ENTRIES = 65_536
_SEQ = struct.Struct("!Q")


def _probe(seq: int) -> bytes:
    return ethernet("00:00:00:00:0a:01", "00:00:00:00:00:01", 0x0800,
                    ipv4("10.255.0.1", f"10.{seq >> 8 & 255}.{seq & 255}.9", udp(1000, 80, _SEQ.pack(seq))))


class _Probes:
    """A paced stream of probes through the switch and the latency of each."""

    def __init__(self, target: ProcessTarget, interval_s: float) -> None:
        self.veth = target.veth
        self.interval_s = interval_s
        self.sent: dict[int, float] = {}
        self.latency_ms: dict[int, float] = {}
        self._stop = threading.Event()
        self._seq = 0

    def run(self, seconds: float | None = None, until: threading.Event | None = None) -> list[float]:
        """Probe for ``seconds`` or until ``until`` is set; the latencies (ms) of those probes."""
        first = self._seq
        receiver = threading.Thread(target=self._receive, daemon=True)
        self._stop.clear()
        receiver.start()
        start = time.perf_counter()
        next_at = start
        while True:
            now = time.perf_counter()
            if (seconds is not None and now - start >= seconds) or (until is not None and until.is_set()):
                break
            if now < next_at:
                time.sleep(next_at - now)
            self.sent[self._seq] = time.perf_counter()
            self.veth.send(1, _probe(self._seq))
            self._seq += 1
            next_at += self.interval_s
        time.sleep(0.5)  # the last probes' way through
        self._stop.set()
        receiver.join()
        last = self._seq
        return [self.latency_ms[s] for s in range(first, last) if s in self.latency_ms]

    def _receive(self) -> None:
        while not self._stop.is_set():
            frame = self.veth.receive(2, timeout=0.05)
            if frame is None:
                continue
            arrived = time.perf_counter()
            seq = _SEQ.unpack(frame[-_SEQ.size:])[0]
            if seq in self.sent:
                self.latency_ms[seq] = (arrived - self.sent[seq]) * 1e3


def _pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else float("nan")


def _one_entry_writes(client_stub, device_id: int, schema: P4Schema, until: threading.Event | None,
                      count: int, spacing_s: float, out: list[float]) -> None:
    """Modify one route (the table is full), ``count`` times or until ``until`` is set; the
    seconds each one-entry Write took go to ``out``."""
    table = schema.table("ipv4_lpm")
    name, match = parse_match(table, "hdr.ipv4.dst_addr", "10.0.0.0/24")
    for i in range(count):
        if until is not None and until.is_set():
            return
        entry = encode_rule(schema, TableRule(table.name, {name: match}, "RailIngress.set_nexthop",
                                              {"port": 2, "dmac": 2 + i % 2, "smac": 0xA02}))
        req = p4runtime_pb2.WriteRequest(device_id=device_id)
        req.election_id.low = 1
        req.updates.append(update("modify", entry))
        t0 = time.perf_counter()
        client_stub.Write(req, timeout=60)
        out.append(time.perf_counter() - t0)
        time.sleep(spacing_s)


def _touch_every_route(target: ProcessTarget, spray: list[bytes]) -> None:
    """One frame to every route, then wait until the switch has forwarded them (and throw
    them away): the next Read's pull of the engine's counts has every entry to take."""
    for frame in spray:
        target.veth.send(1, frame)
    target.veth.collect(quiet=0.3, limit=30.0)


def read_stall(kind: str, entries: int = ENTRIES, reads: int = 3, interval_s: float = 0.001,
               engine: str | None = None, counters: bool = False,
               touch_all: bool = False) -> dict[str, float]:
    """Probe latency and one-entry Write time, idle and during wildcard Reads of ``entries``
    (``reads`` Reads with probes, as many with Writes); ``engine`` is the Python target's
    packet engine (``python`` or ``native``; None: the switch's default, ``auto``),
    ``counters`` asks the Read for each entry's direct counter too, and ``touch_all`` sends
    a frame to every route before each Read with probes (on the native engine, the Read
    then pulls every entry's counts from the engine first)."""
    with contextlib.ExitStack() as stack:
        target = stack.enter_context(ProcessTarget(kind, pipeline_files("rail_switch"), (1, 2),
                                                   engine=engine))
        target.client.timeout = 300
        schema = target.schema
        target.client.write_rules(schema, "insert", route_rules(schema, entries), batch_size=2000)
        device_id = target.client.device_id
        stub = target.client.stub
        # the Read's responses are kept as bytes: parsing them here would stall this process
        channel = stack.enter_context(grpc.insecure_channel(
            target.client.address, options=[("grpc.max_receive_message_length", 1 << 28)]))
        read = channel.unary_stream("/p4.v1.P4Runtime/Read",
                                    request_serializer=p4runtime_pb2.ReadRequest.SerializeToString,
                                    response_deserializer=lambda data: data)
        request = p4runtime_pb2.ReadRequest(device_id=device_id)
        wanted = request.entities.add().table_entry
        wanted.table_id = schema.table("ipv4_lpm").id
        if counters:
            wanted.counter_data.SetInParent()
        probes = _Probes(target, interval_s)
        spray = [_probe(1 << 62 | i) for i in range(entries)] if touch_all else []
        probes.run(seconds=0.3)  # warm-up
        idle = probes.run(seconds=2.0)
        idle_writes: list[float] = []
        _one_entry_writes(stub, device_id, schema, None, 20, 0.02, idle_writes)
        during: list[float] = []
        touched: list[int] = []  # entries with a count, per Read (with counters)
        busy_writes: list[float] = []
        read_s: list[float] = []
        # probes during some Reads, one-entry Writes during others: a Write's own Python work
        # would delay the probes beside it
        for i in range(2 * reads):
            done = threading.Event()
            got: list[bytes] = []

            def reader(done: threading.Event = done, got: list[bytes] = got) -> None:
                t0 = time.perf_counter()
                with contextlib.suppress(grpc.RpcError):  # a short read is reported below
                    got.extend(read(request, timeout=300))
                read_s.append(time.perf_counter() - t0)
                done.set()

            if i % 2 == 0 and touch_all:
                _touch_every_route(target, spray)
            thread = threading.Thread(target=reader, daemon=True)
            thread.start()
            if i % 2 == 0:
                during += probes.run(until=done)
            else:
                _one_entry_writes(stub, device_id, schema, done, 10_000, 0.02, busy_writes)
            thread.join()
            read_entities = p4runtime_pb2.ReadResponse.FromString(b"".join(got)).entities if got else []
            n = len(read_entities)
            if n < entries:
                raise RuntimeError(f"{kind}: a wildcard Read returned {n} of {entries} entries")
            if counters:
                touched.append(sum(1 for e in read_entities if e.table_entry.counter_data.packet_count))
    lost = sum(1 for s in probes.sent if s not in probes.latency_ms)
    return {
        "idle_p50_ms": _pct(idle, 50), "idle_p99_ms": _pct(idle, 99),
        "read_p50_ms": _pct(during, 50), "read_p99_ms": _pct(during, 99), "read_max_ms": max(during),
        "added_p50_ms": _pct(during, 50) - _pct(idle, 50), "added_p99_ms": _pct(during, 99) - _pct(idle, 99),
        "probes_during_reads": len(during), "probes_lost": lost,
        "read_s_median": statistics.median(read_s),
        "write_idle_ms_median": 1e3 * statistics.median(idle_writes),
        "write_during_read_ms_median": 1e3 * statistics.median(busy_writes),
        "write_during_read_ms_max": 1e3 * max(busy_writes),
        "writes_during_reads": len(busy_writes),
        "entries_counted_max": max(touched, default=0),
    }
