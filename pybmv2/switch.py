"""The v1model architecture as simple_switch implements it.

:class:`V1Switch` runs one packet through parser, ingress, the packet replication engine,
egress and deparser, reproducing simple_switch's order of cloning, digests, resubmit,
multicast, drop and recirculation (``simple_switch.cpp``'s ingress and egress threads).
:meth:`V1Switch.process` does it synchronously; the process-mode runtime calls
:meth:`V1Switch.ingress` and :meth:`V1Switch.egress` separately so that egress queues with
a rate and a depth can sit in between.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pybmv2.errors import PacketError
from pybmv2.phv_pool import PhvPool
from pybmv2.pre import CloneSession, ReplicationEngine
from pybmv2.program import DROP_PORT, Program
from pybmv2.startup import StartupPhases
from pybmv2.state import INSTANCE_TYPE, PacketState

__all__ = ["DigestSample", "EgressJob", "V1Switch"]

log = logging.getLogger(__name__)

#: recirculate/resubmit loops are cut after this many passes (BMv2 has no bound)
MAX_PASSES = 32


@dataclass(slots=True)
class EgressJob:
    """A packet that left ingress (or the PRE) for one egress port."""

    port: int
    state: PacketState
    enq_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class DigestSample:
    learn_id: int
    name: str
    values: tuple[int, ...]


class _StdSlots:
    """Slot indices of the standard_metadata fields simple_switch reads and writes."""

    NAMES = (
        "ingress_port", "egress_spec", "egress_port", "instance_type", "packet_length",
        "enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth",
        "ingress_global_timestamp", "egress_global_timestamp", "mcast_grp", "egress_rid",
        "checksum_error", "parser_error",
    )

    def __init__(self, program: Program) -> None:
        layout = program.layout
        for name in self.NAMES:
            idx = layout.field("standard_metadata", name).index if layout.has_field(
                "standard_metadata", name) else None
            setattr(self, name, idx)
        self.queueing = all(
            getattr(self, n) is not None
            for n in ("enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth")
        )
        self.egress_spec_mask = (
            layout.field("standard_metadata", "egress_spec").mask
            if self.egress_spec is not None else 0x1FF
        )

    ingress_port: int | None
    egress_spec: int | None
    egress_port: int | None
    instance_type: int | None
    packet_length: int | None
    enq_timestamp: int | None
    enq_qdepth: int | None
    deq_timedelta: int | None
    deq_qdepth: int | None
    ingress_global_timestamp: int | None
    egress_global_timestamp: int | None
    mcast_grp: int | None
    egress_rid: int | None
    checksum_error: int | None
    parser_error: int | None


def _set(s: PacketState, slot: int | None, value: int) -> None:
    if slot is not None:
        s.values[slot] = value


def _get(s: PacketState, slot: int | None) -> int:
    return s.values[slot] if slot is not None else 0


class V1Switch:
    """A v1model switch running one compiled program.

    Parameters
    ----------
    program:
        The compiled program, or None for a switch with no pipeline yet (``--no-p4``).
    cpu_port:
        Packets sent to this port are packet-ins; packet-outs arrive on it.
    queue_depth:
        Reported to ``enq_qdepth``/``deq_qdepth`` by the process-mode queues.

    Examples
    --------
    >>> sw = V1Switch(None)
    >>> sw.process(1, b"\\x00" * 14)
    []
    """

    def __init__(self, program: Program | None, *, cpu_port: int | None = None) -> None:
        self.cpu_port = cpu_port
        self.drop_port = DROP_PORT
        self.pre = ReplicationEngine()
        self.lock = threading.RLock()
        self._start_ns = time.monotonic_ns()
        self.on_digest: Callable[[DigestSample], None] | None = None
        #: returns the current depth of an egress queue (process mode installs one)
        self.queue_depth: Callable[[int], int] = lambda port: 0
        #: the global timestamps' source (µs); tests of time-dependent programs set their own
        self.clock: Callable[[], int] | None = None
        self.program: Program | None = None
        self._std: _StdSlots | None = None
        self._trace: Callable[[str], None] | None = None
        #: the process's start-up phases until its first pipeline (process mode sets it)
        self.startup: StartupPhases | None = None
        if program is not None:
            self.load(program)

    def load(self, program: Program) -> None:
        """Swap in a new program; tables start empty and the PRE is cleared."""
        with self.lock:
            self.program = program
            self._std = _StdSlots(program)
            self.pre.clear()
            self._metadata_slots = program.layout.metadata_slots()
            self._pool = PhvPool(program.layout)
            self._zero_validity = program.layout.initial_validity()
            self._nstacks = program.layout.num_stacks
            program.ingress.set_trace(self._trace)
            program.egress.set_trace(self._trace)

    def deferring_adds(self) -> contextlib.AbstractContextManager[None]:
        """Where a batch of entries is written: the native engine's switch adds them to its
        engine together (pybmv2.native.switch); here, nothing to do."""
        return contextlib.nullcontext()

    def refresh(self) -> None:
        """Bring state an engine keeps elsewhere into the Python objects P4Runtime reads
        (nothing to do here; the native engine's switch pulls its counters)."""

    def set_trace(self, trace: Callable[[str], None] | None) -> None:
        """Trace every packet's path (BMv2's --log-console): ports, tables, conditions, drops."""
        self._trace = trace
        if self.program is not None:
            self.program.ingress.set_trace(trace)
            self.program.egress.set_trace(trace)

    def _log(self, msg: str) -> None:
        if self._trace is not None:
            self._trace(msg)

    def now_us(self) -> int:
        """Microseconds since the switch started, like BMv2's global timestamps (or what
        :attr:`clock` says, when a test controls time)."""
        if self.clock is not None:
            return self.clock()
        return (time.monotonic_ns() - self._start_ns) // 1000

    # -- ingress ---------------------------------------------------------------------------

    def _new_state(self, frame: bytes) -> PacketState:
        """A packet with a PHV from the pool: no valid header, metadata zeroed, and the
        fields of headers holding what an earlier packet left (BMv2's PHV reuse)."""
        return PacketState(self._pool.take(), self._zero_validity[:], self._nstacks, frame)

    def _clone(self, s: PacketState) -> PacketState:
        """BMv2's clone_with_phv: valid headers and metadata copied into a pooled PHV."""
        return s.copy(self._pool.take_copy(s.values, s.valid))

    def _release(self, s: PacketState) -> None:
        """The packet is gone (dropped, transmitted or replaced by its copies)."""
        self._pool.give(s.values)

    def _reset_metadata(self, s: PacketState) -> None:
        values = s.values
        for i in self._metadata_slots:
            values[i] = 0

    def _copy_field_list(self, dst: PacketState, src: PacketState, field_list: int) -> None:
        assert self.program is not None
        for i in self.program.field_lists.get(field_list, ()):
            dst.values[i] = src.values[i]

    def _parse(self, s: PacketState) -> None:
        prog = self.program
        assert prog is not None and self._std is not None
        prog.parser.parse(s)
        std = self._std
        _set(s, std.parser_error, s.error)
        bad = any(not c.verify(s) for c in prog.checksums if c.verify_enabled)
        s.checksum_error = bad
        _set(s, std.checksum_error, 1 if bad else 0)

    def ingress(self, port: int, frame: bytes) -> list[EgressJob]:
        """Run a received frame through parser and ingress; return what reaches egress."""
        with self.lock:
            if self.program is None:
                return []
            jobs: list[EgressJob] = []
            if self._trace is not None:  # formatting costs on every packet: only when tracing
                self._trace(f"Processing packet received on port {port} ({len(frame)} bytes)")
            s = self._new_state(frame)
            std = self._std
            assert std is not None
            _set(s, std.ingress_port, port)
            _set(s, std.packet_length, len(frame))
            _set(s, std.ingress_global_timestamp, self.now_us())
            return self._ingress_passes(s, port, jobs)

    def _ingress_passes(self, s: PacketState, port: int, jobs: list[EgressJob]) -> list[EgressJob]:
        for _ in range(MAX_PASSES):
            try:
                resubmitted = self._ingress_pass(s, port, jobs)
            except PacketError as exc:
                log.error("%s: packet dropped in ingress (BMv2 aborts here)", exc)
                self._release(s)
                return jobs
            if resubmitted is None:
                return jobs
            s = resubmitted
        log.warning("packet resubmitted more than %d times: dropped", MAX_PASSES)
        self._release(s)
        return jobs

    def _ingress_pass(self, s: PacketState, port: int, jobs: list[EgressJob]) -> PacketState | None:
        prog = self.program
        std = self._std
        assert prog is not None and std is not None
        frame = s.data
        ingress_size = s.pkt_len
        self._parse(s)
        prog.ingress.apply(s)
        s.exit = False
        egress_spec = _get(s, std.egress_spec)
        mgid = _get(s, std.mcast_grp)

        if s.clone_session:
            session, field_list = self._take_clone_request(s)
            if session is not None:
                copy = self._new_state(frame)
                _set(copy, std.ingress_port, port)
                self._parse(copy)
                self._reset_metadata(copy)
                self._copy_field_list(copy, s, field_list)
                _set(copy, std.instance_type, INSTANCE_TYPE["ingress_clone"])
                copy.pkt_len = ingress_size
                copy.truncate_len = session.packet_length_bytes
                self._replicate(copy, session.replicas, jobs, set_rid=len(session.replicas) > 1)
                self._release(copy)

        if s.learn_id:
            self._learn(s)

        if s.resubmit:
            field_list = s.resubmit
            again = self._new_state(frame)
            self._copy_field_list(again, s, field_list)
            _set(again, std.instance_type, INSTANCE_TYPE["resubmit"])
            _set(again, std.packet_length, ingress_size)
            again.pkt_len = ingress_size
            self._release(s)
            return again

        if mgid:
            _set(s, std.instance_type, INSTANCE_TYPE["replication"])
            replicas = self.pre.groups.get(mgid, ())
            self._replicate(s, replicas, jobs, set_rid=True)
            self._release(s)
            return None

        if egress_spec == self.drop_port:
            self._log("Dropping packet at the end of ingress")
            self._release(s)
            return None
        if self._trace is not None:
            self._trace(f"Egress port is {egress_spec}")
        _set(s, std.instance_type, INSTANCE_TYPE["normal"])
        jobs.append(EgressJob(egress_spec, s))
        return None

    def _take_clone_request(self, s: PacketState) -> tuple[CloneSession | None, int]:
        """Clear the packet's clone request; return its configured session (None when the
        session does not exist: simple_switch then clones nothing) and field list."""
        sid = s.clone_session & 0x7FFF  # RegisterAccess::MIRROR_SESSION_ID_MASK
        field_list = s.clone_field_list
        s.clone_session = s.clone_field_list = 0
        return self.pre.sessions.get(sid), field_list

    def _replicate(self, s: PacketState, replicas, jobs: list[EgressJob], *, set_rid: bool) -> None:
        std = self._std
        assert std is not None
        for rep in replicas:
            copy = self._clone(s)
            if set_rid:
                _set(copy, std.egress_rid, rep.rid)
            jobs.append(EgressJob(rep.egress_port, copy))

    def _learn(self, s: PacketState) -> None:
        assert self.program is not None
        ll = self.program.learn_lists.get(s.learn_id)
        s.learn_id = 0
        if ll is None or self.on_digest is None:
            return
        values = tuple(s.values[idx] for _, _, idx, _ in ll.fields)
        self.on_digest(DigestSample(ll.id, ll.name, values))

    # -- egress ----------------------------------------------------------------------------

    def mark_enqueued(self, job: EgressJob, depth: int) -> None:
        """Record enqueue metadata the way simple_switch's enqueue() does."""
        std = self._std
        if std is not None and std.queueing:
            job.enq_timestamp = self.now_us()
            _set(job.state, std.enq_timestamp, job.enq_timestamp)
            _set(job.state, std.enq_qdepth, depth)

    def egress(self, job: EgressJob, depth_after: int = 0) -> tuple[list[tuple[int, bytes]], list[EgressJob], list[PacketState]]:
        """Run one packet through egress and the deparser.

        Returns (frames to transmit, egress clones to enqueue, recirculated packets to feed
        back to ingress with :meth:`recirculate`).
        """
        with self.lock:
            prog = self.program
            std = self._std
            if prog is None or std is None:
                return [], [], []
            s = job.state
            try:
                return self._egress(prog, std, job, s, depth_after)
            except PacketError as exc:
                log.error("%s: packet dropped in egress (BMv2 aborts here)", exc)
                self._release(s)
                return [], [], []

    def _egress(self, prog: Program, std: _StdSlots, job: EgressJob, s: PacketState,
                depth_after: int) -> tuple[list[tuple[int, bytes]], list[EgressJob], list[PacketState]]:
        now = self.now_us()
        _set(s, std.egress_global_timestamp, now)
        if std.queueing:
            _set(s, std.deq_timedelta, now - job.enq_timestamp if job.enq_timestamp else 0)
            _set(s, std.deq_qdepth, depth_after)
        _set(s, std.egress_port, job.port)
        _set(s, std.egress_spec, (self.drop_port + 1) & std.egress_spec_mask)
        _set(s, std.packet_length, s.pkt_len)
        prog.egress.apply(s)
        clones: list[EgressJob] = []
        if s.clone_session:
            session, field_list = self._take_clone_request(s)
            if session is not None:
                copy = self._clone(s)
                self._reset_metadata(copy)
                self._copy_field_list(copy, s, field_list)
                _set(copy, std.instance_type, INSTANCE_TYPE["egress_clone"])
                copy.truncate_len = session.packet_length_bytes
                self._replicate(copy, session.replicas, clones, set_rid=len(session.replicas) > 1)
                self._release(copy)
        if _get(s, std.egress_spec) == self.drop_port:
            self._log("Dropping packet at the end of egress")
            self._release(s)
            return [], clones, []
        frame = self.deparse(s)
        if s.recirculate:
            self._log("Recirculating packet")
            again = self._new_state(frame)
            self._copy_field_list(again, s, s.recirculate)
            _set(again, std.instance_type, INSTANCE_TYPE["recirc"])
            _set(again, std.packet_length, len(frame))
            self._release(s)
            return [], clones, [again]
        if self._trace is not None:
            self._trace(f"Transmitting packet of size {len(frame)} out of port {job.port}")
        self._release(s)
        return [(job.port, frame)], clones, []

    def deparse(self, s: PacketState) -> bytes:
        prog = self.program
        assert prog is not None
        payload = s.payload
        for c in prog.checksums:
            if c.update_enabled:
                c.update(s, payload)
        frame = prog.deparser.emit(s, payload)
        if s.truncate_len and s.truncate_len < len(frame):
            frame = frame[: s.truncate_len]
        return frame

    def recirculate(self, s: PacketState) -> list[EgressJob]:
        """Feed a recirculated packet (from :meth:`egress`) back into ingress."""
        with self.lock:
            std = self._std
            assert std is not None
            return self._ingress_passes(s, _get(s, std.ingress_port), [])

    # -- the whole path, synchronously -------------------------------------------------------

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Run one frame through the whole switch; return every (port, frame) it emits.

        Frames for the CPU port are included; the P4Runtime layer turns them into
        packet-ins. Order follows simple_switch for a single packet.
        """
        out: list[tuple[int, bytes]] = []
        pending = self.ingress(port, frame)
        passes = 0
        while pending:
            job = pending.pop(0)
            frames, clones, recirc = self.egress(job, self.queue_depth(job.port))
            out.extend(frames)
            pending.extend(clones)
            for again in recirc:
                passes += 1
                if passes > MAX_PASSES:
                    log.warning("packet recirculated more than %d times: dropped", MAX_PASSES)
                    self._release(again)
                    continue
                pending.extend(self.recirculate(again))
        return out
