"""Process mode in C: the native engine's own I/O thread on the switch's ports.

:class:`NativeIO` hands a :class:`~pybmv2.native.engine.NativeEngine` the sockets of the
switch's ports and starts its I/O thread (``csrc/rt_io.c``): frames are received in batches
(``recvmmsg``), run through ingress, held in per-port egress queues with a depth and a rate
(simple_switch's, with its enqueue and dequeue metadata), run through egress and sent
(``sendmmsg``) without Python. Frames for the CPU port and digests come back to Python
through a buffer and an eventfd, read by one Python thread that hands them to
``on_packet_in`` and ``on_digest``; :meth:`NativeIO.inject` takes packet-outs the other way.

The thread also runs the Python target's holding extensions on the switch's clock, as
:class:`~pybmv2.calendar.CalendarQueue` does on the Python engine: the calendar queue
(``calendar_slot``), port delays and port ingress delays; :meth:`NativeIO.holds` counts them.

The I/O thread holds the engine's lock while it runs packets, so a control-plane change
(each engine call that changes state takes the lock) lands between two rounds of at most
64 frames per port. A Read's pull of the counts takes no lock
(:meth:`NativeEngine.pull_begin`).
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pybmv2.calendar import HOLD_LINES, HoldCounts
from pybmv2.errors import PacketIOError
from pybmv2.native.engine import NativeEngine

__all__ = ["IOStats", "NativeIO", "OffloadCounts", "QueueCounts"]

log = logging.getLogger(__name__)

KIND_PACKET_IN = 0
KIND_DIGEST = 1
#: how long closing waits for the reader thread (it never blocks on the switch's locks)
JOIN_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class QueueCounts:
    enqueued: int
    dropped: int
    departed: int
    depth: int


@dataclass(frozen=True, slots=True)
class OffloadCounts:
    """Super-packets per port, received and sent whole; and those dropped on the way out."""

    rx_super: dict[int, int]
    tx_super: dict[int, int]
    dropped: int


@dataclass(frozen=True, slots=True)
class IOStats:
    """Per port: frames received, sent (as the wire counts them: a super-packet as its
    segments), dropped on receive (too long) and on send."""

    rx: dict[int, int]
    tx: dict[int, int]
    rx_dropped: dict[int, int]
    tx_dropped: dict[int, int]
    #: packet-ins and digests dropped because Python did not keep up
    up_dropped: int
    queues: dict[int, QueueCounts]


class NativeIO:
    """The I/O thread of one engine, attached to port sockets; :meth:`close` stops it.

    Parameters
    ----------
    engine:
        The engine whose packets this thread runs (it must outlive the thread).
    ports:
        Port number -> file descriptor of an AF_PACKET socket bound to its interface.
    start_ns:
        ``time.monotonic_ns()`` at the switch's start: the global timestamps count from it.
    cpu_port:
        Frames sent to it go to ``on_packet_in``; None: no CPU port.
    depth, rate_pps, port_rates:
        The egress queues' depth (packets) and rate (packets/s, None: unlimited), and the
        rates of single ports.
    calendar_slot:
        The PHV slot of the calendar queue's release time (µs on the switch's clock); a job
        whose release time is later than the clock's waits for it after ingress. None: off.
    port_delays, port_ingress_delays:
        Port -> µs by which that port's transmitted (received) frames are delayed.
    super_packets:
        The ports' sockets carry a ``virtio_net_hdr`` (the daemon's ports opened them so):
        super-packets go through the pipeline whole (``csrc/rt_offload.c``).
    busy_poll_us:
        After each frame received, the thread polls its ports this long without sleeping
        (0: it sleeps at once): lower latency per hop, at the CPU of the polling.
    """

    def __init__(self, engine: NativeEngine, ports: Mapping[int, int], *, start_ns: int,
                 cpu_port: int | None, on_packet_in: Callable[[int, bytes], None],
                 on_digest: Callable[[int, tuple[int, ...]], None], depth: int = 64,
                 rate_pps: float | None = None,
                 port_rates: Mapping[int, float] | None = None, calendar_slot: int | None = None,
                 port_delays: Mapping[int, int] | None = None,
                 port_ingress_delays: Mapping[int, int] | None = None, super_packets: bool = False,
                 busy_poll_us: int = 0) -> None:
        self.engine = engine
        self._lib, self._ctx = engine._lib, engine._ctx
        self.ports = dict(ports)
        self.super_packets = super_packets
        self._on_packet_in = on_packet_in
        self._on_digest = on_digest
        self._closed = False
        lib, ctx = self._lib, self._ctx
        rc = lib.nx_io_open(ctx, start_ns, -1 if cpu_port is None else cpu_port, depth,
                            rate_pps or 0.0)
        if rc < 0:
            raise PacketIOError(f"the native engine could not open its I/O (error {rc})")
        self._up_fd = lib.nx_io_up_fd(ctx)
        try:
            for num, fd in self.ports.items():
                if lib.nx_io_port(ctx, num, fd, int(super_packets)) < 0:
                    raise PacketIOError(f"the native engine cannot take port {num}"
                                        + (" with super-packets" if super_packets else ""))
            for num, rate in (port_rates or {}).items():
                self.set_queue(num, rate_pps=rate)
            if lib.nx_io_calendar(ctx, -1 if calendar_slot is None else calendar_slot) < 0:
                raise PacketIOError(f"the native engine cannot take calendar slot {calendar_slot}")
            tx, rx = dict(port_delays or {}), dict(port_ingress_delays or {})
            for num in sorted(set(tx) | set(rx)):
                if tx.get(num, 0) < 0 or rx.get(num, 0) < 0 or \
                        lib.nx_io_delay(ctx, num, tx.get(num, 0), rx.get(num, 0)) < 0:
                    raise PacketIOError(f"the native engine cannot delay port {num} by "
                                        f"{tx.get(num, 0)} / {rx.get(num, 0)} us")
            if busy_poll_us < 0 or lib.nx_io_busy_poll(ctx, busy_poll_us) < 0:
                raise PacketIOError(f"the native engine cannot busy-poll for {busy_poll_us} us")
            if lib.nx_io_start(ctx) < 0:
                raise PacketIOError("the native engine could not start its I/O thread")
        except BaseException:
            lib.nx_io_close(ctx)
            os.close(self._up_fd)
            raise
        self._reader = threading.Thread(target=self._read, name="native-io-up", daemon=True)
        self._reader.start()

    # -- control ----------------------------------------------------------------------------

    def inject(self, port: int, frame: bytes) -> None:
        """A frame entering on ``port`` (packet-outs enter on the CPU port)."""
        if self._closed:
            return
        if self._lib.nx_io_inject(self._ctx, port, frame, len(frame)) < 0:
            raise MemoryError("the native engine could not take an injected frame")

    def set_queue(self, port: int | None, *, depth: int | None = None,
                  rate_pps: float | None = None) -> None:
        """One port's egress queue (every port's when ``port`` is None): its depth in
        packets (None: unchanged) and rate in packets/s (None: unlimited)."""
        if depth is not None and depth < 1:
            raise ValueError(f"queue depth must be >= 1 packet, got {depth}")
        if rate_pps is not None and rate_pps <= 0:
            raise ValueError(f"queue rate must be > 0 packets/s, got {rate_pps}")
        rc = self._lib.nx_io_queue(self._ctx, -1 if port is None else port, depth or 0,
                                   rate_pps or 0.0)
        if rc < 0:
            raise ValueError(f"bad egress port {port}")

    def stats(self, queues: Sequence[int] = ()) -> IOStats:
        """The ports' counters and those of the queues of ``queues`` (port numbers)."""
        nums = list(self.ports)
        out = (ctypes.c_uint64 * (4 * len(nums) + 2 + 4 * len(queues)))()
        q = (ctypes.c_uint32 * max(len(queues), 1))(*queues)
        self._lib.nx_io_stats(self._ctx, out, q, len(queues))
        v = list(out)
        per = {k: {n: v[4 * i + k] for i, n in enumerate(nums)} for k in range(4)}
        at = 4 * len(nums) + 2
        qs = {p: QueueCounts(*v[at + 4 * i: at + 4 * i + 4]) for i, p in enumerate(queues)}
        return IOStats(per[0], per[1], per[2], per[3], v[4 * len(nums) + 1], qs)

    def offloads(self) -> OffloadCounts:
        """The super-packets each port received and sent whole, and those dropped because
        their output was not a TCP or UDP segment the kernel could cut."""
        nums = list(self.ports)
        out = (ctypes.c_uint64 * (2 * len(nums) + 1))()
        if self._closed or self._lib.nx_io_offloads(self._ctx, out) < 0:
            return OffloadCounts({}, {}, 0)
        v = list(out)
        return OffloadCounts({n: v[2 * i] for i, n in enumerate(nums)},
                             {n: v[2 * i + 1] for i, n in enumerate(nums)}, v[2 * len(nums)])

    def holds(self) -> dict[str, HoldCounts]:
        """The holding extensions' counts since the thread started, by
        :data:`~pybmv2.calendar.HOLD_LINES` name (calendar, port-delay, port-ingress-delay)."""
        out = (ctypes.c_uint64 * 12)()
        if self._closed or self._lib.nx_io_holds(self._ctx, out) < 0:
            return {name: HoldCounts() for name in HOLD_LINES}
        v = list(out)
        return {name: HoldCounts(held=v[4 * i], released=v[4 * i + 1], dropped=v[4 * i + 2],
                                 waiting=v[4 * i + 3]) for i, name in enumerate(HOLD_LINES)}

    def close(self) -> None:
        """Stop the thread; packets waiting in the queues and hold lines are dropped."""
        if self._closed:
            return
        self._closed = True
        self._lib.nx_io_stop(self._ctx)
        self._reader.join(JOIN_SECONDS)
        if self._reader.is_alive():  # never seen: the reader takes none of the switch's locks
            log.warning("the native I/O reader did not stop; its eventfd stays open")
            self._lib.nx_io_close(self._ctx)
            return
        self._lib.nx_io_close(self._ctx)
        os.close(self._up_fd)

    # -- packet-ins and digests ---------------------------------------------------------------

    def _read(self) -> None:
        ptr = ctypes.c_void_p()
        while True:
            try:
                os.read(self._up_fd, 8)
            except OSError:
                return
            if self._closed:
                return
            n = self._lib.nx_io_take(self._ctx, ctypes.byref(ptr))
            if n:
                self._dispatch(ctypes.string_at(ptr, n))

    def _dispatch(self, raw: bytes) -> None:
        at = 0
        while at + 16 <= len(raw):
            kind = int.from_bytes(raw[at:at + 4], "little")
            length = int.from_bytes(raw[at + 4:at + 8], "little")
            port = int.from_bytes(raw[at + 8:at + 16], "little")
            body = raw[at + 16:at + 16 + length]
            at += 16 + ((length + 7) & ~7)
            try:
                if kind == KIND_PACKET_IN:
                    self._on_packet_in(port, body)
                else:
                    for lid, values in self.engine.decode_digests(body):
                        self._on_digest(lid, values)
            except Exception:  # one bad record must not end packet-ins for good
                log.exception("delivering a native engine record failed")
