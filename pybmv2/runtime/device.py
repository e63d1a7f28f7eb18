"""The P4Runtime state of one device, free of gRPC I/O: PI's ``DeviceMgr`` for V1Switch.

:class:`DeviceManager` owns the committed :class:`~pybmv2.runtime.pipeline.Pipeline`, runs
SetForwardingPipelineConfig actions, Write batches and Reads against the switch, turns frames
the switch sends to its CPU port into PacketIn messages and digest samples into DigestList
messages. Stream messages for controllers leave through
:attr:`DeviceManager.on_stream_message`, which the gRPC service points at the primaries.

Locking. ``switch.lock`` is the data path's: a Write takes it for one update at a time, so
packets flow between the updates of a long batch. The device's batch lock is held for a
whole Write batch and pipeline change, and by a Read while it takes its snapshot: a Read
sees the state before or after a batch, never a mix. A table Read holds no lock while it
encodes its entries (:mod:`~pybmv2.runtime.table_reads`), so neither packets nor Writes wait
for a long Read beyond the copy of the tables' entry lists.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeAlias, TypeVar

import grpc
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2

from pybmv2.errors import TargetError
from pybmv2.runtime import (
    direct_meter_ops,
    extern_ops,
    profile_ops,
    read_chunks,
    reconcile,
    table_ops,
    table_reads,
)
from pybmv2.runtime.codec import encode_match_key
from pybmv2.runtime.errors import P4RuntimeError, batch_status, from_target_error
from pybmv2.runtime.idle_timeouts import SWEEP_INTERVAL_US
from pybmv2.runtime.packetio import packet_in_message, packet_out_frame
from pybmv2.runtime.pipeline import Pipeline, build_pipeline
from pybmv2.runtime.port_status import PortStatus
from pybmv2.runtime.values import EntryValue, entry_from_proto
from pybmv2.switch import DigestSample, V1Switch
from pybmv2.tables import TableEntry

__all__ = ["DeviceManager", "Frames"]

log = logging.getLogger(__name__)

Frames = list[tuple[int, bytes]]
SetAction = p4runtime_pb2.SetForwardingPipelineConfigRequest
GetType = p4runtime_pb2.GetForwardingPipelineConfigRequest
U = TypeVar("U")
#: a piece of a Read's response: a table snapshot to encode, or read already
ReadPart: TypeAlias = "table_reads.TableRead | table_reads.DirectRead | bytes | p4runtime_pb2.ReadResponse"
#: how often digest timeouts are checked while some digest has one
TICK_SECONDS = 0.01
#: how long a table Read's encoding gives the GIL away between two chunks of entries
READ_YIELD_SECONDS = 0.0001


def _unimplemented(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, message)


def _write_table_update(p: Pipeline, update: tuple[int, EntryValue]) -> None:
    table_ops.write_table_entry(p, update[0], update[1])


def no_pipeline() -> P4RuntimeError:
    """PI's ``no_pipeline_config_status``."""
    return P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                          "No forwarding pipeline config set for this device")


class DeviceManager:
    """Pipeline config, Write, Read, packet I/O and digests of one P4Runtime device.

    Hooks (plain attributes, set by the server):

    - ``on_stream_message(msg)``: deliver a StreamMessageResponse (PacketIn, DigestList) to
      the primary controller(s);
    - ``packet_out_injector(port, frame)``: if set, PacketOut frames are handed to it (the
      process-mode I/O layer injects them on the CPU port itself); otherwise the switch
      processes them synchronously and
    - ``packet_out_sink(frames)`` receives the non-CPU frames the switch emitted.
    """

    def __init__(self, switch: V1Switch, device_id: int) -> None:
        self.switch = switch
        self.device_id = device_id
        self.on_stream_message: Callable[[p4runtime_pb2.StreamMessageResponse], None] | None \
            = None
        self.packet_out_injector: Callable[[int, bytes], None] | None = None
        self.packet_out_sink: Callable[[Frames], None] | None = None
        #: called once a pipeline is committed, holding no lock but the configuration's
        #: (the switch process settles its heap there: pybmv2.heap)
        self.after_commit: Callable[[], None] | None = None
        #: called between chunks of a table Read's encoding, with no lock held (tests use
        #: it to pause a Read there)
        self.read_hook: Callable[[], None] | None = None
        self._pipeline: Pipeline | None = None
        self._saved: Pipeline | None = None
        self._config_lock = threading.Lock()
        self._batch_lock = threading.Lock()
        self._stop = threading.Event()
        #: wakes the ticker: a pipeline committed, a digest configured, or the device stops
        self._wake = threading.Event()
        self._ticker: threading.Thread | None = None
        #: the switch clock (µs) of the next idle-timeout sweep (BMv2 sweeps every second)
        self._next_sweep_us: int | None = None
        self._idle_lock = threading.Lock()
        #: which ports are up: PI's watch ports follow it (the switch process's port
        #: monitor, or a test, sets it); a port never set is not the switch's, so down
        self.ports = PortStatus()

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread of digest timeouts and idle-timeout sweeps."""
        if self._ticker is None:
            self._stop.clear()
            self._ticker = threading.Thread(target=self._tick_loop, daemon=True,
                                            name=f"p4rt-digest-{self.device_id}")
            self._ticker.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
            self._ticker = None

    def _needs_ticks(self) -> bool:
        """Digest timeouts to enforce or idle-timeout tables to sweep: else the ticker
        sleeps until something changes (a switch forwarding traffic wakes no Python)."""
        p = self._pipeline
        return p is not None and (p.digests.needs_ticks() or any(t.support_timeout for t in p.tables.values()))

    def _tick_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(TICK_SECONDS if self._needs_ticks() else None)
            self._wake.clear()
            if self._stop.is_set():
                return
            p = self._pipeline
            if p is None:
                continue
            if p.digests.needs_ticks():
                for msg in p.digests.tick(time.monotonic_ns()):
                    self._emit(p4runtime_pb2.StreamMessageResponse(digest=msg))
            try:
                self.idle_tick()
            except Exception:  # a failed sweep must not stop digests: logged, retried next tick
                log.exception("idle-timeout sweep failed")

    def idle_tick(self) -> None:
        """Run the idle-timeout sweeps due on the switch's clock (every second, each at its
        own time, as BMv2's sweep loop catches up), then send what PI's 100 ms buffer holds
        when it is due. The device's thread calls it every 10 ms; a test that sets the
        switch's clock may call it itself."""
        p = self._pipeline
        if p is None or not any(t.support_timeout for t in p.tables.values()):
            return
        with self._idle_lock:
            now = self.switch.now_us()
            if self._next_sweep_us is None:
                self._next_sweep_us = now + SWEEP_INTERVAL_US
            if now >= self._next_sweep_us:
                with self.switch.lock:
                    self.switch.refresh()  # the native engine's hit times
                while now >= self._next_sweep_us:
                    # a chunk of entries at a time under the switch's lock, which forwarding
                    # takes between chunks (sleep(0): this thread gives up the interpreter)
                    steps = p.ageing.sweep_steps(p.tables, self._next_sweep_us)
                    more = True
                    while more:
                        with self.switch.lock:
                            more = next(steps, StopIteration) is not StopIteration
                        time.sleep(0)
                    self._next_sweep_us += SWEEP_INTERVAL_US
            due = p.ageing.take_due(now)
        if due:
            self._emit(p4runtime_pb2.StreamMessageResponse(
                idle_timeout_notification=self._idle_notification(p, due)))

    def restart_sweeps(self) -> None:
        """The next idle-timeout sweep one interval from now on the switch's clock (a test
        that sets the clock calls it after doing so)."""
        with self._idle_lock:
            self._next_sweep_us = self.switch.now_us() + SWEEP_INTERVAL_US

    @staticmethod
    def _idle_notification(p: Pipeline, reported: Sequence[tuple[str, TableEntry]]
                           ) -> p4runtime_pb2.IdleTimeoutNotification:
        """PI's IdleTimeoutNotification: each entry's table id, match, priority, controller
        metadata and idle_timeout_ns (no action), and the steady clock's time of sending."""
        ids = {tb.target_name: (tid, tb) for tid, tb in p.binding.tables.items()}
        msg = p4runtime_pb2.IdleTimeoutNotification()
        for name, entry in reported:
            if name not in ids:
                continue
            tid, tb = ids[name]
            out = msg.table_entry.add(table_id=tid)
            encode_match_key(tb, entry.key, entry.priority, out)
            out.controller_metadata = entry.metadata
            out.idle_timeout_ns = entry.ttl_ns
        msg.timestamp = time.monotonic_ns()
        return msg

    @property
    def pipeline(self) -> Pipeline | None:
        return self._pipeline

    def require_pipeline(self) -> Pipeline:
        p = self._pipeline
        if p is None:
            raise no_pipeline()
        return p

    # -- port status (PI's watch ports) ------------------------------------------------------

    def set_ports(self, ports: Iterable[int]) -> None:
        """The switch's ports, all up (a switch without interfaces behind its ports)."""
        for port in ports:
            self.set_port_status(port, True)

    def set_port_status(self, port: int, up: bool) -> None:
        """``port`` came up or went down: the group members watching it follow, in every
        action profile (PI's ``WatchPortEnforcer``; PI stops at the first profile that had
        already seen the status, a bug the target does not copy)."""
        with self._batch_lock, self.switch.lock:
            if not self.ports.set(port, up):
                return
            p = self._pipeline
            if p is not None:
                for manager in p.profiles.values():
                    manager.enforce_watch_ports(port)


    def set_pipeline(self, action: int, config: p4runtime_pb2.ForwardingPipelineConfig) -> None:
        """Run one SetForwardingPipelineConfig action; raise P4RuntimeError on failure."""
        if action == SetAction.UNSPECIFIED:
            raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT,
                                 "Invalid SetForwardingPipeline action")
        startup = self.switch.startup
        if startup is not None:
            startup.lap("controller: connect, arbitrate, send the pipeline")
        with self._config_lock:
            if action == SetAction.COMMIT:
                if self._saved is None:
                    raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                         "COMMIT without a config saved by VERIFY_AND_SAVE")
                try:
                    self._commit(self._saved)
                finally:
                    self._committed()
                return
            pipeline = build_pipeline(config, startup)
            pipeline.clock_us = self.switch.now_us
            for manager in pipeline.profiles.values():
                manager.ports = self.ports
            if action == SetAction.VERIFY:
                return
            if action == SetAction.VERIFY_AND_SAVE:
                self._saved = pipeline
            elif action == SetAction.VERIFY_AND_COMMIT:
                try:
                    self._commit(pipeline)
                finally:
                    self._committed()
            elif action == SetAction.RECONCILE_AND_COMMIT:
                try:  # committed even when some of the state could not be written again
                    self._reconcile(pipeline)
                finally:
                    self._committed()
            else:
                raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT,
                                     f"Invalid SetForwardingPipeline action {action}")

    def _committed(self) -> None:
        if self.after_commit is not None:
            self.after_commit()

    def _commit(self, pipeline: Pipeline) -> None:
        with self._batch_lock:
            self._commit_locked(pipeline)

    def _commit_locked(self, pipeline: Pipeline) -> None:
        with self.switch.lock:
            try:
                self.switch.load(pipeline.program)
            except TargetError as exc:  # e.g. --engine native and a program it cannot run
                raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT,
                                     f"the target cannot load this program: {exc}") from exc
            self.switch.on_digest = self._on_digest
            self._pipeline = pipeline
            self._next_sweep_us = None  # the new pipeline's sweeps start a second from its first tick
            self._saved = None
            self._wake.set()
            startup = self.switch.startup
            line = None
            if startup is not None:
                startup.lap("commit: the rest")
                line = startup.finish()
        log.info("device %d: committed pipeline with %d tables", self.device_id,
                 len(pipeline.index.tables))
        if line is not None:
            log.info("%s", line)

    def _reconcile(self, pipeline: Pipeline) -> None:
        """PI's RECONCILE_AND_COMMIT (:mod:`~pybmv2.runtime.reconcile`): the state read from
        the current pipeline is written to ``pipeline`` before it is committed.

        An error reading the state changes nothing. When some of it cannot be written the
        new pipeline is committed with the rest, and UNKNOWN "Error when reconciling config"
        raised, as PI answers; on BMv2, PI then leaves the old program in the data plane and
        the device unable to take another pipeline, which is not imitated. With no pipeline
        yet there is nothing to keep (simple_switch_grpc 1.15 crashes).
        """
        with self._batch_lock:
            saved: list[p4runtime_pb2.Entity] = []
            if self._pipeline is not None:
                request = reconcile.forwarding_state_request(self.device_id)
                parts, error = self._snapshot(self._pipeline, request)
                if error is not None:
                    raise error
                saved = list(p4runtime_pb2.ReadResponse.FromString(self._encode(parts)).entities)
            try:  # the new pipeline is not live yet: packets need not wait for the replay
                reconcile.replay(saved, lambda update: self._write_one(pipeline, update))
            finally:
                self._commit_locked(pipeline)

    def get_pipeline(self, response_type: int) -> p4runtime_pb2.ForwardingPipelineConfig:
        """PI's ``pipeline_config_get``; the cookie is always included when set."""
        full = self.require_pipeline().to_config()
        if response_type not in (GetType.ALL, GetType.COOKIE_ONLY, GetType.P4INFO_AND_COOKIE,
                                 GetType.DEVICE_CONFIG_AND_COOKIE):
            raise P4RuntimeError(
                grpc.StatusCode.INVALID_ARGUMENT,
                "Invalid response_type in GetForwardingPipelineConfigRequest")
        out = p4runtime_pb2.ForwardingPipelineConfig()
        if response_type in (GetType.ALL, GetType.P4INFO_AND_COOKIE):
            out.p4info.CopyFrom(full.p4info)
        if response_type in (GetType.ALL, GetType.DEVICE_CONFIG_AND_COOKIE):
            out.p4_device_config = full.p4_device_config
        if full.HasField("cookie"):
            out.cookie.CopyFrom(full.cookie)
        return out

    # -- Write ---------------------------------------------------------------------------

    def write(self, request: p4runtime_pb2.WriteRequest) -> status_pb2.Status:
        """Apply a batch; per-update results as PI (UNKNOWN + one p4.v1.Error each)."""
        return self._write_batch(request.atomicity, request.updates, self._write_one)

    def write_table_updates(self, atomicity: int,
                            updates: Sequence[tuple[int, EntryValue]]) -> status_pb2.Status:
        """:meth:`write` for a batch of table-entry updates already in plain-value form.

        ``updates`` holds ``(Update.type, entry)`` pairs, e.g. from
        :func:`pybmv2.runtime.wire.decode_write_request`; results are those :meth:`write`
        gives for the same request.
        """
        return self._write_batch(atomicity, updates, _write_table_update)

    def _write_batch(self, atomicity: int, updates: Iterable[U],
                     apply: Callable[[Pipeline, U], None]) -> status_pb2.Status:
        results: list[P4RuntimeError | None] = []
        append = results.append
        lock = self.switch.lock
        with self._batch_lock:  # a Read sees the state before or after the whole batch
            p = self.require_pipeline()
            if atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
                raise _unimplemented(
                    "Support for atomic write modes has not been implemented yet")
            # one update at a time under the switch's lock, as BMv2 takes its table locks
            # per update: packets keep flowing between the updates of a long batch instead
            # of waiting (with their ingress timestamps already taken) for the whole batch.
            # The native engine gets the batch's new entries together, before the answer.
            with self.switch.deferring_adds():
                for update in updates:
                    try:
                        with lock:
                            apply(p, update)
                        append(None)
                    except P4RuntimeError as exc:
                        append(exc)
                    except TargetError as exc:
                        append(from_target_error(exc))
        for i, r in enumerate(results):
            if r is not None:
                log.debug("device %d: update %d failed: %s", self.device_id, i, r)
        return batch_status(results)

    def _write_one(self, p: Pipeline, update: p4runtime_pb2.Update) -> None:
        entity = update.entity
        which = entity.WhichOneof("entity")
        kind = update.type
        if which == "table_entry":
            table_ops.write_table_entry(p, kind, entry_from_proto(entity.table_entry))
        elif which == "counter_entry":
            extern_ops.write_counter(p, kind, entity.counter_entry)
        elif which == "direct_counter_entry":
            table_ops.write_direct_counter(p, kind, entity.direct_counter_entry)
        elif which == "meter_entry":
            extern_ops.write_meter(p, kind, entity.meter_entry)
        elif which == "direct_meter_entry":
            direct_meter_ops.write_direct_meter(p, kind, entity.direct_meter_entry)
        elif which == "packet_replication_engine_entry":
            extern_ops.write_pre(p, self.switch, kind, entity.packet_replication_engine_entry)
        elif which == "digest_entry":
            p.digests.configure(kind, entity.digest_entry)
            self._wake.set()
        elif which == "action_profile_member":
            profile_ops.write_member(p, kind, entity.action_profile_member)
        elif which == "action_profile_group":
            profile_ops.write_group(p, kind, entity.action_profile_group)
        elif which == "register_entry":
            raise _unimplemented("Register writes are not supported yet")
        elif which == "value_set_entry":
            raise _unimplemented("ValueSet writes are not supported yet")
        elif which == "extern_entry":
            raise _unimplemented("No extern support yet")
        else:
            raise P4RuntimeError(grpc.StatusCode.UNKNOWN, "Incorrect entity type")

    # -- Read ----------------------------------------------------------------------------

    def read(self, request: p4runtime_pb2.ReadRequest
             ) -> tuple[p4runtime_pb2.ReadResponse, P4RuntimeError | None]:
        """:meth:`read_serialized`, parsed into a ReadResponse."""
        data, error = self.read_serialized(request)
        return p4runtime_pb2.ReadResponse.FromString(data), error

    def read_serialized(self, request: p4runtime_pb2.ReadRequest
                        ) -> tuple[bytes, P4RuntimeError | None]:
        """Read every entity, as the wire bytes of one ReadResponse; on the first error stop
        and return what was read before it, and the error (PI).

        The entities are taken under the batch lock (table entries as a snapshot) and the
        table entries encoded after it is released; raises P4RuntimeError without a
        pipeline.
        """
        frames, error = self.read_frames(request)
        return b"".join(frames), error

    def read_frames(self, request: p4runtime_pb2.ReadRequest
                    ) -> tuple[Iterator[bytes], P4RuntimeError | None]:
        """:meth:`read_serialized` as the framed entities of the ReadResponse, encoded as
        they are consumed (no lock held): the server groups them into responses of a size
        any client accepts (:mod:`~pybmv2.runtime.read_chunks`)."""
        with self._batch_lock:
            p = self.require_pipeline()
            parts, error = self._snapshot(p, request)
        return self._frames(parts), error

    def _snapshot(self, p: Pipeline, request: p4runtime_pb2.ReadRequest
                  ) -> tuple[list[ReadPart], P4RuntimeError | None]:
        """What a Read returns, up to the encoding of table entries; hold the batch lock."""
        self.switch.refresh()  # counters an engine keeps outside the Python objects
        parts: list[ReadPart] = []
        for entity in request.entities:
            try:
                if entity.WhichOneof("entity") == "table_entry":
                    parts += table_reads.snapshot(p, entity.table_entry)
                else:
                    response = p4runtime_pb2.ReadResponse()
                    with self.switch.lock:
                        direct = self._read_one(p, entity, response)
                    parts.append(response if direct is None else direct)
            except P4RuntimeError as exc:
                return parts, exc
            except TargetError as exc:
                return parts, from_target_error(exc)
        return parts, None

    def _encode(self, parts: list[ReadPart]) -> bytes:
        """The ReadResponse of a snapshot's parts (table entries encoded now)."""
        return b"".join(self._frames(parts))

    def _frames(self, parts: list[ReadPart]) -> Iterator[bytes]:
        """The framed entities of a snapshot's parts, table entries encoded as they go."""
        for part in parts:
            if isinstance(part, table_reads.TableRead):
                yield from table_reads.encode(part, self._read_pause)
            elif isinstance(part, table_reads.DirectRead):
                yield from table_reads.encode_direct(part, self._read_pause)
            else:
                data = part if isinstance(part, bytes) else part.SerializeToString()
                yield from read_chunks.entity_frames(data)

    def _read_pause(self) -> None:
        """Between chunks of a table Read's encoding: let the packet threads run.

        A sleep of :data:`READ_YIELD_SECONDS`, not ``sleep(0)``: that releases the GIL but
        mostly takes it back before a waiting thread wakes up, which then waits for the
        interpreter's switch interval (5 ms).
        """
        if self.read_hook is not None:
            self.read_hook()
        time.sleep(READ_YIELD_SECONDS)

    def _read_one(self, p: Pipeline, entity: p4runtime_pb2.Entity,
                  response: p4runtime_pb2.ReadResponse) -> table_reads.DirectRead | None:
        """Read a non-table entity into ``response``; a wildcard read of direct counters or
        meters is returned instead, to be encoded without the lock."""
        which = entity.WhichOneof("entity")
        if which == "counter_entry":
            extern_ops.read_counters(p, entity.counter_entry, response)
        elif which == "direct_counter_entry":
            return table_ops.read_direct_counters(p, entity.direct_counter_entry, response)
        elif which == "meter_entry":
            extern_ops.read_meters(p, entity.meter_entry, response)
        elif which == "direct_meter_entry":
            return direct_meter_ops.read_direct_meters(p, entity.direct_meter_entry, response)
        elif which == "packet_replication_engine_entry":
            extern_ops.read_pre(p, self.switch, entity.packet_replication_engine_entry,
                                response)
        elif which == "digest_entry":
            entry = p.digests.read_config(entity.digest_entry.digest_id)
            response.entities.add().digest_entry.CopyFrom(entry)
        elif which == "action_profile_member":
            profile_ops.read_members(p, entity.action_profile_member, response)
        elif which == "action_profile_group":
            profile_ops.read_groups(p, entity.action_profile_group, response)
        elif which == "register_entry":
            raise _unimplemented("Register reads are not supported yet")
        elif which == "value_set_entry":
            raise _unimplemented("ValueSet reads are not supported yet")
        else:
            raise P4RuntimeError(grpc.StatusCode.UNKNOWN, "Incorrect entity type")
        return None

    # -- packet I/O and digests ------------------------------------------------------------

    def packet_out(self, msg: p4runtime_pb2.PacketOut) -> None:
        """Inject a PacketOut on the CPU port; raise P4RuntimeError if it is malformed."""
        p = self.require_pipeline()
        frame = packet_out_frame(p.packet_out, msg)
        cpu_port = self.switch.cpu_port
        if cpu_port is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                 "the switch has no CPU port: PacketOut dropped")
        if self.packet_out_injector is not None:
            self.packet_out_injector(cpu_port, frame)
            return
        others = self.deliver_outputs(self.switch.process(cpu_port, frame))
        if others:
            if self.packet_out_sink is None:
                log.warning("device %d: no packet_out_sink; dropping %d frame(s) emitted "
                            "after a PacketOut", self.device_id, len(others))
            else:
                self.packet_out_sink(others)

    def deliver_outputs(self, frames: Iterable[tuple[int, bytes]]) -> Frames:
        """Turn frames on the CPU port into PacketIns; return the others, in order."""
        cpu_port = self.switch.cpu_port
        others: Frames = []
        for port, frame in frames:
            if cpu_port is None or port != cpu_port:
                others.append((port, frame))
                continue
            p = self._pipeline
            if p is None:
                log.debug("device %d: frame to the CPU port without a pipeline config: "
                          "dropped", self.device_id)
                continue
            msg = packet_in_message(p.packet_in, frame)
            if msg is None:
                log.warning("device %d: %d-byte frame to the CPU port is shorter than the "
                            "packet_in header: dropped", self.device_id, len(frame))
                continue
            self._emit(p4runtime_pb2.StreamMessageResponse(packet=msg))
        return others

    def digest_ack(self, ack: p4runtime_pb2.DigestListAck) -> None:
        p = self._pipeline
        if p is not None:
            p.digests.ack(ack.digest_id, ack.list_id)

    def _on_digest(self, sample: DigestSample) -> None:
        p = self._pipeline
        if p is None:
            return
        digest_id = p.binding.digest_for_learn_id(sample.learn_id)
        if digest_id is None:
            log.debug("device %d: learn list %d has no P4Info digest", self.device_id,
                      sample.learn_id)
            return
        for msg in p.digests.add(digest_id, sample.values, time.monotonic_ns()):
            self._emit(p4runtime_pb2.StreamMessageResponse(digest=msg))

    def _emit(self, msg: p4runtime_pb2.StreamMessageResponse) -> None:
        if self.on_stream_message is not None:
            self.on_stream_message(msg)
