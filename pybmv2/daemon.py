"""Process mode: a switch attached to Linux interfaces, serving P4Runtime.

The I/O thread waits on every port's socket and runs received frames through ingress; the
egress queues' worker runs egress and transmits. Frames for the CPU port become P4Runtime
packet-ins; packet-outs enter ingress on the CPU port, as on simple_switch_grpc.
"""

from __future__ import annotations

import logging
import selectors
import threading
from dataclasses import dataclass, field
from pathlib import Path

from pybmv2.calendar import CalendarQueue, release_slot
from pybmv2.errors import PacketIOError
from pybmv2.pcap import PcapWriter
from pybmv2.ports import Port, PortSpec
from pybmv2.program import Program
from pybmv2.queues import DEFAULT_QUEUE_DEPTH, EgressQueues
from pybmv2.switch import EgressJob, V1Switch

__all__ = ["DaemonOptions", "SwitchDaemon"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonOptions:
    """What ``mlfabric-switch`` was asked to do (simple_switch_grpc's flags)."""

    ports: tuple[PortSpec, ...] = ()
    device_id: int = 0
    grpc_addr: str = "0.0.0.0:9559"
    cpu_port: int | None = None
    pcap_dir: Path | None = None
    json_path: Path | None = None
    queue_depth: int = DEFAULT_QUEUE_DEPTH
    queue_rate_pps: float | None = None
    port_rates: dict[int, float] = field(default_factory=dict)
    #: trace every packet's path in the log (``--log-console``, or ``-L trace|debug``)
    log_console: bool = False
    #: extension: hold a packet until the time in this metadata field (pybmv2.calendar)
    calendar_field: str | None = None
    #: extension: a fixed delay (us) on these ports' transmissions, a link's propagation
    port_delays: dict[int, int] = field(default_factory=dict)
    #: extension: a fixed delay (us) on what these ports receive (a host's side of a link)
    port_ingress_delays: dict[int, int] = field(default_factory=dict)
    #: extension: clone sessions truncate to their packet_length_bytes (BMv2 refuses those)
    clone_truncation: bool = False


class SwitchDaemon:
    """Owns the switch, its ports, queues and P4Runtime server; :meth:`close` releases all."""

    def __init__(self, options: DaemonOptions) -> None:
        from pybmv2.runtime.server import P4RuntimeServer

        self.options = options
        program = Program.from_file(options.json_path) if options.json_path else None
        self.switch = V1Switch(program, cpu_port=options.cpu_port)
        self.switch.pre.truncation = options.clone_truncation
        if options.log_console:
            trace_log = logging.getLogger("pybmv2.trace")
            self.switch.set_trace(trace_log.info)
        self.ports: dict[int, Port] = {}
        self._pcaps: dict[tuple[int, str], PcapWriter] = {}
        self._stop = threading.Event()
        self.queues = EgressQueues(self._egress, default_depth=options.queue_depth,
                                   default_rate_pps=options.queue_rate_pps)
        for port, rate in options.port_rates.items():
            self.queues.set_rate(port, rate)
        self.switch.queue_depth = self.queues.depth
        self.calendar: CalendarQueue[EgressJob] | None = (
            CalendarQueue(self._to_queue, self.switch.now_us) if options.calendar_field else None)
        self.delay_line: CalendarQueue[tuple[int, bytes]] | None = (
            CalendarQueue(lambda item: self._send(*item), self.switch.now_us) if options.port_delays else None)
        self.ingress_line: CalendarQueue[tuple[int, bytes]] | None = (
            CalendarQueue(lambda item: self.inject(*item), self.switch.now_us) if options.port_ingress_delays else None)
        self._calendar_program: object = None
        self._calendar_slot: int | None = None
        try:
            for spec in options.ports:
                if spec.number in self.ports:
                    raise PacketIOError(f"port {spec.number} given twice")
                self.ports[spec.number] = Port(spec)
                if options.pcap_dir is not None:
                    for direction in ("in", "out"):
                        path = options.pcap_dir / f"{spec.iface}_{direction}.pcap"
                        self._pcaps[(spec.number, direction)] = PcapWriter(path)
            self.server = P4RuntimeServer(self.switch, device_id=options.device_id, address=options.grpc_addr)
            self.server.packet_out_injector = self.inject
        except BaseException:
            self.close()
            raise

    # -- data path -------------------------------------------------------------------------

    def inject(self, port: int, frame: bytes) -> None:
        """A frame entering the switch on ``port`` (the CPU port for packet-outs)."""
        for job in self.switch.ingress(port, frame):
            self._enqueue(job)

    def _enqueue(self, job: EgressJob) -> None:
        if self.calendar is not None:
            program = self.switch.program
            if program is not self._calendar_program:  # a new pipeline: find its field
                assert self.options.calendar_field is not None
                self._calendar_program = program
                self._calendar_slot = release_slot(program, self.options.calendar_field)
            if self._calendar_slot is not None:
                release = job.state.values[self._calendar_slot]
                if release > self.switch.now_us():
                    self.calendar.hold(job, release)
                    return
        self._to_queue(job)

    def _to_queue(self, job: EgressJob) -> None:
        self.switch.mark_enqueued(job, self.queues.depth(job.port))
        if not self.queues.push(job):
            log.debug("egress queue of port %d full: dropped", job.port)

    def _egress(self, job: EgressJob, depth_after: int) -> None:
        frames, clones, recirc = self.switch.egress(job, depth_after)
        for clone in clones:
            self._enqueue(clone)
        for state in recirc:
            for again in self.switch.recirculate(state):
                self._enqueue(again)
        for port, frame in self.server.deliver_outputs(frames):
            self.transmit(port, frame)

    def transmit(self, port: int, frame: bytes) -> None:
        delay = self.options.port_delays.get(port)
        if delay and self.delay_line is not None:
            self.delay_line.hold((port, frame), self.switch.now_us() + delay)
            return
        self._send(port, frame)

    def _send(self, port: int, frame: bytes) -> None:
        out = self.ports.get(port)
        if out is None:
            log.debug("no interface on port %d: frame dropped", port)
            return
        pcap = self._pcaps.get((port, "out"))
        if pcap is not None:
            pcap.write(frame)
        try:
            out.send(frame)
        except PacketIOError as exc:
            log.warning("%s", exc)

    # -- lifecycle -------------------------------------------------------------------------

    def serve_forever(self) -> None:
        self.server.start()
        self.queues.start()
        if self.calendar is not None:
            self.calendar.start()
        if self.delay_line is not None:
            self.delay_line.start()
        if self.ingress_line is not None:
            self.ingress_line.start()
        log.info("switch up: device %d, P4Runtime on %s, ports %s", self.options.device_id,
                 self.server.address, {n: p.spec.iface for n, p in self.ports.items()})
        sel = selectors.DefaultSelector()
        for number, port in self.ports.items():
            sel.register(port, selectors.EVENT_READ, number)
        try:
            while not self._stop.is_set():
                for key, _ in sel.select(timeout=0.2):
                    number = key.data
                    port = self.ports[number]
                    pcap = self._pcaps.get((number, "in"))
                    for _ in range(64):  # drain a burst before waiting again
                        frame = port.receive()
                        if frame is None:
                            break
                        if pcap is not None:
                            pcap.write(frame)
                        delay = self.options.port_ingress_delays.get(number)
                        if delay and self.ingress_line is not None:
                            self.ingress_line.hold((number, frame), self.switch.now_us() + delay)
                        else:
                            self.inject(number, frame)
        finally:
            sel.close()

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._stop.set()
        server = getattr(self, "server", None)
        if server is not None:
            server.stop()
        if self.calendar is not None:
            self.calendar.stop()
        if self.delay_line is not None:
            self.delay_line.stop()
        if self.ingress_line is not None:
            self.ingress_line.stop()
        self.queues.stop()
        for port in self.ports.values():
            port.close()
        for pcap in self._pcaps.values():
            pcap.close()
