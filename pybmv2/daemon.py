"""Process mode: a switch attached to Linux interfaces, serving P4Runtime.

On the Python engine, the I/O thread waits on every port's socket and runs received frames
through ingress; the egress queues' worker runs egress and transmits. On the native engine
(``engine="native"``, or ``"auto"`` where it can run the program) the engine's own C thread
does all of that (:mod:`pybmv2.native.io`), the holding extensions (calendar queue, port
delays) included, and the Python loop stands by; each pipeline change stops it (what it held
is dropped) and starts one on the new program's engine, or hands the ports back to the
Python loop. Frames for the CPU port become P4Runtime packet-ins; packet-outs enter ingress
on the CPU port, as on simple_switch_grpc.
"""

from __future__ import annotations

import logging
import selectors
import threading
from dataclasses import dataclass, field
from pathlib import Path

from pybmv2.calendar import HOLD_LINES, CalendarQueue, HoldCounts, release_slot
from pybmv2.errors import PacketIOError, TargetError
from pybmv2.heap import settle_heap
from pybmv2.pcap import PcapWriter
from pybmv2.port_monitor import PortMonitor
from pybmv2.ports import Port, PortSpec, close_ports
from pybmv2.program import Program
from pybmv2.queues import DEFAULT_QUEUE_DEPTH, EgressQueues
from pybmv2.startup import StartupPhases
from pybmv2.switch import EgressJob, V1Switch

__all__ = ["ENGINES", "DaemonOptions", "SwitchDaemon", "python_only_features"]

#: the packet engines ``--engine`` chooses from
ENGINES = ("auto", "native", "python")

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
    #: the packet engine: ``auto`` (native where it can run the program), ``native``, ``python``
    engine: str = "auto"
    #: extension: ports carry virtio_net_hdr; the native engine forwards super-packets whole
    #: (pybmv2.offload); the Python engine cuts them into frames first
    super_packets: bool = False
    #: extension: the native engine's I/O thread polls this long (us) after each frame
    #: received before it sleeps (0: at once); the Python engine always sleeps
    busy_poll_us: int = 0


def python_only_features(options: DaemonOptions) -> list[str]:
    """The options given that only the Python engine implements (tracing, pcap).

    >>> python_only_features(DaemonOptions(log_console=True, port_delays={1: 5}))
    ['--log-console (packet tracing)']
    """
    wanted = [(options.log_console, "--log-console (packet tracing)"),
              (options.pcap_dir is not None, "--pcap")]
    return [name for on, name in wanted if on]


def _engine_mode(options: DaemonOptions) -> str:
    """The engine the switch runs: ``python`` when options need it (refused with native)."""
    if options.engine not in ENGINES:
        raise TargetError(f"unknown engine {options.engine!r}: choose one of {ENGINES}")
    needs = python_only_features(options)
    if options.engine == "python" or not needs:
        return options.engine
    if options.engine == "native":
        raise TargetError(f"{', '.join(needs)} need the Python engine: leave out --engine "
                          "native (or give --engine python)")
    log.info("engine auto: the Python engine runs the switch (%s need it)", ", ".join(needs))
    return "python"


class SwitchDaemon:
    """Owns the switch, its ports, queues and P4Runtime server; :meth:`close` releases all.

    ``startup`` (the process's :class:`~pybmv2.startup.StartupPhases`) gets the phases of
    the start-up up to the first pipeline committed, which the device then logs.
    """

    def __init__(self, options: DaemonOptions, *, startup: StartupPhases | None = None) -> None:
        from pybmv2.native.io import NativeIO
        from pybmv2.native.switch import NativeSwitch
        from pybmv2.runtime.server import P4RuntimeServer

        if startup is not None:
            startup.lap("P4Runtime server and native engine imports")
        self.startup = startup
        self.options = options
        program = Program.from_file(options.json_path) if options.json_path else None
        mode = _engine_mode(options)
        self.switch: V1Switch = (V1Switch(None, cpu_port=options.cpu_port) if mode == "python"
                                 else NativeSwitch(None, cpu_port=options.cpu_port, engine=mode))
        self.switch.startup = startup
        if mode == "python":
            self._busy_poll_ignored()
        if program is not None:
            self.switch.load(program)
        self.switch.pre.truncation = options.clone_truncation
        #: the native engine's I/O thread while it runs the ports, else None
        self.native_io: NativeIO | None = None
        self._serving = False
        if options.log_console:
            trace_log = logging.getLogger("pybmv2.trace")
            self.switch.set_trace(trace_log.info)
        self.ports: dict[int, Port] = {}
        self._pcaps: dict[tuple[int, str], PcapWriter] = {}
        self._stop = threading.Event()
        #: set when the native engine's I/O thread gives the ports back (or the switch stops):
        #: the Python loop sleeps on it meanwhile instead of waking to check
        self._ports_back = threading.Event()
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
                self.ports[spec.number] = Port(spec, super_packets=options.super_packets)
                if options.pcap_dir is not None:
                    for direction in ("in", "out"):
                        path = options.pcap_dir / f"{spec.iface}_{direction}.pcap"
                        self._pcaps[(spec.number, direction)] = PcapWriter(path)
            self.server = P4RuntimeServer(self.switch, device_id=options.device_id, address=options.grpc_addr)
            self.server.device.after_commit = settle_heap
            self.server.packet_out_injector = self.inject
            #: each port's interface up or down, for PI's watch ports
            self.port_monitor = PortMonitor({n: p.spec.iface for n, p in self.ports.items()},
                                            self.server.device.set_port_status)
            if isinstance(self.switch, NativeSwitch):
                self.switch.before_engine_change = self._stop_native_io
                self.switch.after_engine_change = self._start_native_io
        except BaseException:
            self.close()
            raise

    # -- data path -------------------------------------------------------------------------

    @property
    def engine_name(self) -> str:
        """The engine running the ports now: ``native`` or ``python``."""
        return "native" if self.native_io is not None else "python"

    def inject(self, port: int, frame: bytes) -> None:
        """A frame entering the switch on ``port`` (the CPU port for packet-outs)."""
        with self.switch.lock:  # a pipeline change hands the ports over under this lock
            nio = self.native_io
            if nio is not None:
                nio.inject(port, frame)
                return
            jobs = self.switch.ingress(port, frame)
        for job in jobs:
            self._enqueue(job)

    def _busy_poll_ignored(self) -> None:
        if self.options.busy_poll_us:
            log.warning("--busy-poll-us %d ignored: the Python engine runs the ports, and it sleeps until a "
                        "frame comes", self.options.busy_poll_us)

    def _start_native_io(self) -> None:
        """Give the ports to the native engine's I/O thread (when it runs the program)."""
        from pybmv2.native.io import NativeIO
        from pybmv2.native.switch import NativeSwitch

        sw = self.switch
        if not self._serving:
            return
        if not isinstance(sw, NativeSwitch) or sw.native is None:
            if sw.program is not None:
                self._busy_poll_ignored()
            return
        opts = self.options
        slot = (release_slot(sw.native.program, opts.calendar_field)
                if opts.calendar_field is not None else None)
        self.native_io = NativeIO(
            sw.native, {n: p.fileno() for n, p in self.ports.items()}, start_ns=sw._start_ns,
            cpu_port=opts.cpu_port, on_packet_in=self._packet_in, on_digest=sw.deliver_digest,
            depth=opts.queue_depth, rate_pps=opts.queue_rate_pps, port_rates=opts.port_rates,
            calendar_slot=slot, port_delays=opts.port_delays,
            port_ingress_delays=opts.port_ingress_delays, super_packets=opts.super_packets,
            busy_poll_us=opts.busy_poll_us)
        if sw.startup is not None:
            sw.startup.lap("native: I/O thread start")
        log.info("the native engine runs the ports")

    def hold_counts(self) -> dict[str, HoldCounts]:
        """What the holding extensions (:data:`~pybmv2.calendar.HOLD_LINES`) of the engine
        running the ports did: the Python engine's since the start, the native engine's since
        its I/O thread took the ports (the last pipeline change)."""
        with self.switch.lock:
            if self.native_io is not None:
                return self.native_io.holds()
        lines = (self.calendar, self.delay_line, self.ingress_line)
        return {name: line.counts() if line is not None else HoldCounts()
                for name, line in zip(HOLD_LINES, lines, strict=True)}

    def _stop_native_io(self) -> None:
        nio, self.native_io = self.native_io, None
        if nio is not None:
            nio.close()
        self._ports_back.set()

    def _packet_in(self, port: int, frame: bytes) -> None:
        for out_port, out in self.server.deliver_outputs([(port, frame)]):
            self._send(out_port, out)

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
        self.port_monitor.start()
        if self.startup is not None:
            self.startup.lap("switch, ports and P4Runtime server up")
        with self.switch.lock:
            self._serving = True
            self._start_native_io()
            if self.switch.program is not None and self.switch.startup is not None:
                line = self.switch.startup.finish()  # the program came with the command line
                if line is not None:
                    log.info("%s", line)
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
                if self.native_io is not None:  # the native engine's thread has the ports
                    self._ports_back.wait()
                    self._ports_back.clear()
                    continue
                for key, _ in sel.select(timeout=0.05):
                    number = key.data
                    port = self.ports[number]
                    pcap = self._pcaps.get((number, "in"))
                    for _ in range(64):  # drain a burst before waiting again
                        # under the switch's lock, as the native engine's I/O thread takes the
                        # ports (a pipeline change): once it has them, this loop reads none
                        with self.switch.lock:
                            frame = port.receive() if self.native_io is None else None
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
        self._ports_back.set()

    def close(self) -> None:
        self._stop.set()
        self._ports_back.set()
        monitor = getattr(self, "port_monitor", None)
        if monitor is not None:
            monitor.stop()
        server = getattr(self, "server", None)
        if server is not None:
            server.stop()
        with self.switch.lock:
            self._serving = False
            self._stop_native_io()
        if self.calendar is not None:
            self.calendar.stop()
        if self.delay_line is not None:
            self.delay_line.stop()
        if self.ingress_line is not None:
            self.ingress_line.stop()
        self.queues.stop()
        close_ports(self.ports.values())
        for pcap in self._pcaps.values():
            pcap.close()
