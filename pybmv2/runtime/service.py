"""The P4Runtime gRPC servicer: RPC plumbing around a DeviceManager and an Arbitration.

Request checks mirror PI's ``proto/server/pi_server.cpp``:

- Write and SetForwardingPipelineConfig: with no StreamChannel open for the (device, role)
  a request without election id is accepted and one with an election id is
  PERMISSION_DENIED; with streams open only the primary's election id is accepted
  (PERMISSION_DENIED "Not primary" otherwise). A role nobody arbitrated for is NOT_FOUND.
- Another device id than the server's is answered as PI's server answers it (PI keeps
  state per device id, created on first use; BMv2 serves one device): a controller may
  arbitrate for it and becomes its primary (its PacketOuts are ignored); Write checks that
  device's arbitration, then Write, Read and GetForwardingPipelineConfig are
  FAILED_PRECONDITION (no pipeline); SetForwardingPipelineConfig checks the arbitration,
  then VERIFY succeeds, COMMIT is UNKNOWN "Error in second phase of device update" and the
  other actions UNKNOWN "Error when trying to assign device". (PI then keeps a half-made
  device, whose GetForwardingPipelineConfig answers an empty config and whose Read crashes
  simple_switch_grpc 1.15; that is not imitated.)
- Write/Read/GetForwardingPipelineConfig before a pipeline is set: FAILED_PRECONDITION.
- A failed Write batch ends with UNKNOWN and a ``grpc-status-details-bin`` trailer holding
  the google.rpc.Status with one p4.v1.Error per update.
- StreamChannel: arbitration as :mod:`pybmv2.runtime.arbitration`; PacketOut and
  DigestListAck are honoured only from a primary; PacketIn and DigestList go to the
  primaries. Stream errors (a malformed PacketOut) are only logged unless
  ``stream_error_reporting`` is on (PI's default is off). When the server stops, every
  stream ends with UNAVAILABLE, as when simple_switch_grpc dies (SIGTERM, SIGINT).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from itertools import count
from typing import NoReturn

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from pybmv2.errors import TargetError
from pybmv2.runtime import read_chunks
from pybmv2.runtime.arbitration import Arbitration, election_id_of
from pybmv2.runtime.device import DeviceManager, no_pipeline
from pybmv2.runtime.errors import ERROR_SPACE, P4RuntimeError, from_target_error
from pybmv2.runtime.raw_write import parse_write_request
from pybmv2.runtime.wire import decode_write_request

__all__ = ["API_VERSION", "SHUTDOWN_MESSAGE", "Connection", "P4RuntimeServicer"]

log = logging.getLogger(__name__)

API_VERSION = "1.4.1"
#: the details of the UNAVAILABLE status that ends every stream when the server stops
SHUTDOWN_MESSAGE = "the switch is shutting down"
_CLOSE = object()
SetAction = p4runtime_pb2.SetForwardingPipelineConfigRequest
_ids = count(1)


class Connection:
    """One StreamChannel: an outgoing queue drained by the RPC's response generator."""

    def __init__(self, peer: str) -> None:
        self.id = next(_ids)
        self.peer = peer
        self._queue: queue.Queue[object] = queue.Queue()

    def send(self, msg: p4runtime_pb2.StreamMessageResponse) -> None:
        self._queue.put(msg)

    def fail(self, error: P4RuntimeError) -> None:
        """End the stream with this status."""
        self._queue.put(error)

    def close(self) -> None:
        """End the stream with OK (idempotent)."""
        self._queue.put(_CLOSE)

    def next(self) -> object:
        return self._queue.get()

    def __repr__(self) -> str:
        return f"Connection({self.id}, {self.peer})"


class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    """The P4Runtime service of one device."""

    def __init__(self, device: DeviceManager, *, max_connections: int = 16,
                 api_version: str = API_VERSION, stream_error_reporting: bool = False) -> None:
        self.device = device
        self.arbitration = Arbitration(max_connections)
        self.api_version = api_version
        self.stream_error_reporting = stream_error_reporting
        self._connections: set[Connection] = set()
        self._connections_lock = threading.Lock()
        self._packet_out_lock = threading.Lock()
        self._counts_lock = threading.Lock()
        self.packet_in_count = 0
        self.packet_out_count = 0
        #: Writes decoded by the wire fast path / parsed by protobuf (write_serialized)
        self.write_fast_count = 0
        self.write_fallback_count = 0
        device.on_stream_message = self.send_to_primaries

    # -- helpers ----------------------------------------------------------------------

    def _check_device(self, device_id: int) -> None:
        """Another device id than the server's: a device with no pipeline (PI)."""
        if device_id != self.device.device_id:
            raise no_pipeline()

    def _check_writer(self, device_id: int, role: str, election_id: int | None) -> None:
        """The checks of a Write or SetForwardingPipelineConfig request's sender, against
        the arbitration of the device it names (whichever it is, as PI)."""
        n = self.arbitration.count(device_id, role)
        if role and n == 0:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, f"Unknown role {role!r}")
        if n == 0 and election_id is not None:
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED, "Not primary")
        if n > 0 and not self.arbitration.is_primary_id(device_id, role, election_id):
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED, "Not primary")

    @staticmethod
    def _set_pipeline_elsewhere(action: int) -> None:
        """PI's answer to a SetForwardingPipelineConfig for a device BMv2 cannot assign."""
        if action == SetAction.UNSPECIFIED:
            raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT,
                                 "Invalid SetForwardingPipeline action")
        if action == SetAction.VERIFY:
            return
        if action == SetAction.COMMIT:
            raise P4RuntimeError(grpc.StatusCode.UNKNOWN, "Error in second phase of device update")
        raise P4RuntimeError(grpc.StatusCode.UNKNOWN, "Error when trying to assign device")

    def _is_ours(self, conn: Connection) -> bool:
        """Whether a stream arbitrated for the server's own device."""
        member = self.arbitration.member(conn)
        return member is not None and member.device_id == self.device.device_id

    @staticmethod
    def _abort(context: grpc.ServicerContext, error: P4RuntimeError) -> NoReturn:
        context.abort(error.code, error.message)
        raise AssertionError("context.abort returned")  # pragma: no cover

    def send_to_primaries(self, msg: p4runtime_pb2.StreamMessageResponse) -> None:
        """Deliver a PacketIn / DigestList to the primary of every role (PI: to the one)."""
        primaries = self.arbitration.primaries(self.device.device_id)
        for conn in primaries:
            conn.send(msg)  # type: ignore[attr-defined]
        if primaries and msg.HasField("packet"):
            with self._counts_lock:
                self.packet_in_count += 1

    def close_all(self) -> None:
        """End every open stream as the server shuts down: with UNAVAILABLE, what clients of
        simple_switch_grpc see when it dies (its connections close); OK would tell them the
        stream ended on purpose."""
        with self._connections_lock:
            conns = list(self._connections)
        for conn in conns:
            conn.fail(P4RuntimeError(grpc.StatusCode.UNAVAILABLE, SHUTDOWN_MESSAGE))

    # -- unary RPCs -------------------------------------------------------------------

    def Write(self, request: p4runtime_pb2.WriteRequest,
              context: grpc.ServicerContext) -> p4runtime_pb2.WriteResponse:
        return self._write(context, request.device_id, request.role, election_id_of(request),
                           lambda: self.device.write(request))

    def write_serialized(self, data: bytes,
                         context: grpc.ServicerContext) -> p4runtime_pb2.WriteResponse:
        """Write from the request's wire bytes (see :mod:`pybmv2.runtime.raw_write`).

        A request of table-entry updates is decoded by :mod:`pybmv2.runtime.wire` and
        applied from plain values; any other is parsed by protobuf and goes to
        :meth:`Write`. Both give the same responses and the same switch state.
        """
        batch = decode_write_request(data)
        if batch is None:
            with self._counts_lock:
                self.write_fallback_count += 1
            return self.Write(parse_write_request(data, context), context)
        with self._counts_lock:
            self.write_fast_count += 1
        return self._write(context, batch.device_id, batch.role, batch.election_id,
                           lambda: self.device.write_table_updates(batch.atomicity,
                                                                   batch.updates))

    def _write(self, context: grpc.ServicerContext, device_id: int, role: str,
               election_id: int | None, apply: Callable[[], status_pb2.Status]
               ) -> p4runtime_pb2.WriteResponse:
        """Check the sender, apply the batch, report failed updates as PI does."""
        try:
            self._check_writer(device_id, role, election_id)
            self._check_device(device_id)
            status = apply()
        except P4RuntimeError as exc:
            self._abort(context, exc)
        if status.code != code_pb2.OK:
            context.set_trailing_metadata(
                (("grpc-status-details-bin", status.SerializeToString()),))
            context.set_code(grpc.StatusCode.UNKNOWN)
            context.set_details(status.message)
        return p4runtime_pb2.WriteResponse()

    def read_serialized(self, request: p4runtime_pb2.ReadRequest,
                        context: grpc.ServicerContext) -> Iterator[bytes]:
        """Read, yielding the ReadResponses as wire bytes (:mod:`pybmv2.runtime.raw_read`),
        each at most :data:`~pybmv2.runtime.read_chunks.MAX_RESPONSE_BYTES` long so that a
        client with gRPC's default 4 MiB limit reads a table of any size."""
        try:
            self._check_device(request.device_id)
            frames, error = self.device.read_frames(request)
        except P4RuntimeError as exc:
            context.set_code(exc.code)
            context.set_details(exc.message)
            return
        yield from read_chunks.responses(frames)
        if error is not None:
            context.set_code(error.code)
            context.set_details(error.message)

    def Read(self, request: p4runtime_pb2.ReadRequest,
             context: grpc.ServicerContext) -> Iterator[p4runtime_pb2.ReadResponse]:
        for data in self.read_serialized(request, context):
            yield p4runtime_pb2.ReadResponse.FromString(data)

    def SetForwardingPipelineConfig(
        self, request: p4runtime_pb2.SetForwardingPipelineConfigRequest,
        context: grpc.ServicerContext,
    ) -> p4runtime_pb2.SetForwardingPipelineConfigResponse:
        try:
            self._check_writer(request.device_id, request.role, election_id_of(request))
            if request.device_id != self.device.device_id:
                self._set_pipeline_elsewhere(request.action)
            else:
                self.device.set_pipeline(request.action, request.config)
        except P4RuntimeError as exc:
            log.warning("SetForwardingPipelineConfig failed: %s", exc)
            self._abort(context, exc)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(
        self, request: p4runtime_pb2.GetForwardingPipelineConfigRequest,
        context: grpc.ServicerContext,
    ) -> p4runtime_pb2.GetForwardingPipelineConfigResponse:
        try:
            self._check_device(request.device_id)
            config = self.device.get_pipeline(request.response_type)
        except P4RuntimeError as exc:
            self._abort(context, exc)
        return p4runtime_pb2.GetForwardingPipelineConfigResponse(config=config)

    def Capabilities(self, request: p4runtime_pb2.CapabilitiesRequest,
                     context: grpc.ServicerContext) -> p4runtime_pb2.CapabilitiesResponse:
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=self.api_version)

    # -- StreamChannel ----------------------------------------------------------------

    def StreamChannel(self, request_iterator: Iterator[p4runtime_pb2.StreamMessageRequest],
                      context: grpc.ServicerContext
                      ) -> Iterator[p4runtime_pb2.StreamMessageResponse]:
        conn = Connection(context.peer())
        with self._connections_lock:
            self._connections.add(conn)
        context.add_callback(conn.close)
        reader = threading.Thread(target=self._read_stream, args=(conn, request_iterator),
                                  name=f"p4rt-stream-{conn.id}", daemon=True)
        reader.start()
        try:
            while True:
                item = conn.next()
                if item is _CLOSE:
                    return
                if isinstance(item, P4RuntimeError):
                    context.set_code(item.code)
                    context.set_details(item.message)
                    return
                yield item
        finally:
            with self._connections_lock:
                self._connections.discard(conn)
            for other, msg in self.arbitration.remove(conn):
                other.send(msg)  # type: ignore[attr-defined]
            log.debug("stream %r closed", conn)

    def _read_stream(self, conn: Connection,
                     requests: Iterator[p4runtime_pb2.StreamMessageRequest]) -> None:
        try:
            for request in requests:
                which = request.WhichOneof("update")
                if which == "arbitration":
                    self._arbitrate(conn, request.arbitration)
                elif which == "packet":
                    self._packet_out(conn, request.packet)
                elif which == "digest_ack":
                    if self.arbitration.is_primary(conn) and self._is_ours(conn):
                        self.device.digest_ack(request.digest_ack)
                else:
                    log.debug("stream %r: ignoring a %s message", conn, which)
        except P4RuntimeError as exc:
            log.info("stream %r terminated: %s", conn, exc)
            conn.fail(exc)
        except grpc.RpcError as exc:
            log.debug("stream %r: request stream ended: %s", conn, exc)
        except Exception as exc:
            log.exception("stream %r: unexpected error", conn)
            conn.fail(P4RuntimeError(grpc.StatusCode.INTERNAL, f"internal error: {exc}"))
        finally:
            conn.close()

    def _arbitrate(self, conn: Connection,
                   msg: p4runtime_pb2.MasterArbitrationUpdate) -> None:
        for target, response in self.arbitration.update(conn, msg):
            target.send(response)  # type: ignore[attr-defined]

    def _packet_out(self, conn: Connection, packet: p4runtime_pb2.PacketOut) -> None:
        if not self.arbitration.is_primary(conn) or not self._is_ours(conn) \
                or self.device.pipeline is None:
            log.debug("stream %r: PacketOut from a non-primary client (or for another device, "
                      "or before a pipeline) ignored", conn)
            return
        with self._packet_out_lock:
            try:
                self.device.packet_out(packet)
                self.packet_out_count += 1
            except TargetError as exc:
                self._stream_error(conn, packet, from_target_error(exc))
            except P4RuntimeError as exc:
                self._stream_error(conn, packet, exc)

    def _stream_error(self, conn: Connection, packet: p4runtime_pb2.PacketOut,
                      error: P4RuntimeError) -> None:
        log.warning("stream %r: PacketOut rejected: %s", conn, error)
        if not self.stream_error_reporting:
            return
        resp = p4runtime_pb2.StreamMessageResponse()
        resp.error.canonical_code = error.number
        resp.error.message = error.message
        resp.error.space = ERROR_SPACE
        resp.error.packet_out.packet_out.CopyFrom(packet)
        conn.send(resp)
