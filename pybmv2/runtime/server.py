"""P4RuntimeServer: a gRPC P4Runtime server around a V1Switch.

Contract with the I/O layer
===========================

The server never reads or writes ports. Whoever runs the switch (the process-mode I/O
layer, or a test in-process) does, and talks to the server through three hooks:

``server.deliver_outputs(frames) -> frames``
    Call it with every ``(port, frame)`` list the switch emitted (``V1Switch.process``, or
    the egress of process mode). Frames on the switch's CPU port become PacketIn messages
    for the primary controller (the ``packet_in`` controller header is parsed into
    metadata and stripped); the other frames are returned, in order, for transmission.

``server.packet_out_injector = fn(port, frame)``  (optional)
    If set, a PacketOut is turned into a frame (the ``packet_out`` controller header
    followed by the payload) and handed to ``fn`` with the CPU port; the I/O layer feeds it
    to the switch like any received frame and passes what comes out to
    ``deliver_outputs``. Use this when the switch runs on its own thread with queues.

``server.packet_out_sink = fn(frames)``  (used when no injector is set)
    The server processes the PacketOut frame synchronously with
    ``switch.process(cpu_port, frame)``, delivers CPU-port frames as PacketIns, and calls
    ``fn`` with the remaining ``(port, frame)`` list so that they can be transmitted. With
    neither hook set, those frames are logged and dropped.

Digests need no hook: every committed pipeline installs ``switch.on_digest``, whose
samples become DigestList messages once a controller configured the digest (DigestEntry).

All switch state changes happen under ``switch.lock``; hooks may be called from gRPC worker
threads. ``deliver_outputs`` is thread-safe and never blocks on a client.

Write fast path, serialized reads
=================================

protobuf runs in pure Python here, so Write is registered with its request left serialized
(:mod:`~pybmv2.runtime.raw_write`): a batch of plain table-entry updates is decoded by
:mod:`~pybmv2.runtime.wire` and applied from plain values, any other request is parsed by
protobuf as before. Both go through the same validation (:mod:`~pybmv2.runtime.codec`,
:mod:`~pybmv2.runtime.table_ops`) and give the same responses and state;
``ServerOptions(write_fast_path=False)`` turns the fast path off. Read is registered the
same way, with its responses already serialized (:mod:`~pybmv2.runtime.raw_read`): table
entries are encoded straight to wire bytes, outside every lock.

Example::

    switch = V1Switch(None, cpu_port=510)
    with P4RuntimeServer(switch, device_id=1, address="127.0.0.1:0") as server:
        print("listening on", server.address)
        ...
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent import futures
from dataclasses import dataclass
from types import TracebackType

import grpc
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from pybmv2.runtime import wire_native
from pybmv2.runtime.device import DeviceManager, Frames
from pybmv2.runtime.raw_read import RawReadHandler
from pybmv2.runtime.raw_write import RawWriteHandler
from pybmv2.runtime.service import API_VERSION, P4RuntimeServicer
from pybmv2.switch import V1Switch

__all__ = ["P4RuntimeServer", "ServerOptions"]

log = logging.getLogger(__name__)

#: PI's SetMaxReceiveMessageSize(256MB)
MAX_MESSAGE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class ServerOptions:
    """Tuning knobs of :class:`P4RuntimeServer`; the defaults mirror PI."""

    #: gRPC worker threads; every open StreamChannel holds one
    max_workers: int = 32
    #: live StreamChannels per (device_id, role) before RESOURCE_EXHAUSTED
    max_connections: int = 16
    api_version: str = API_VERSION
    #: send StreamError messages for rejected PacketOuts (PI: disabled by default)
    stream_error_reporting: bool = False
    #: seconds given to in-flight RPCs by stop()
    grace_seconds: float = 1.0
    max_message_bytes: int = MAX_MESSAGE_BYTES
    #: decode table-entry Writes straight from the wire (:mod:`pybmv2.runtime.wire`);
    #: off, every Write is parsed by protobuf. Results are the same either way.
    write_fast_path: bool = True


class P4RuntimeServer:
    """Serve P4Runtime for one switch on ``address`` ("host:port"; port 0 picks one)."""

    def __init__(self, switch: V1Switch, device_id: int = 0,
                 address: str = "127.0.0.1:9559", *,
                 options: ServerOptions | None = None) -> None:
        self.switch = switch
        self.device_id = device_id
        self.requested_address = address
        self.options = options or ServerOptions()
        self.device = DeviceManager(switch, device_id)
        self.servicer = P4RuntimeServicer(
            self.device,
            max_connections=self.options.max_connections,
            api_version=self.options.api_version,
            stream_error_reporting=self.options.stream_error_reporting,
        )
        self._server: grpc.Server | None = None
        self._port: int | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> int:
        """Bind and start serving; return the bound port. Raises OSError if it cannot bind."""
        if self._server is not None:
            raise RuntimeError("P4RuntimeServer already started")
        n = self.options.max_message_bytes
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self.options.max_workers,
                                       thread_name_prefix=f"p4rt-{self.device_id}"),
            options=[
                ("grpc.so_reuseport", 0),
                ("grpc.max_receive_message_length", n),
                ("grpc.max_send_message_length", n),
            ],
        )
        if self.options.write_fast_path:  # must come first: it takes over Write
            server.add_generic_rpc_handlers((RawWriteHandler(self.servicer.write_serialized),))
            wire_native.start_building()  # Writes are decoded in Python until it is loaded
        server.add_generic_rpc_handlers((RawReadHandler(self.servicer.read_serialized),))
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.servicer, server)
        try:
            port = server.add_insecure_port(self.requested_address)
        except RuntimeError as exc:  # grpcio >= 1.53 raises instead of returning 0
            raise OSError(f"cannot bind P4Runtime server to {self.requested_address}: "
                          f"{exc}") from exc
        if port == 0:
            raise OSError(f"cannot bind P4Runtime server to {self.requested_address}")
        server.start()
        self.device.start()
        self._server, self._port = server, port
        log.info("P4Runtime server for device %d listening on %s", self.device_id,
                 self.address)
        return port

    def stop(self, grace: float | None = None) -> None:
        """Stop serving (idempotent): every StreamChannel ends at once with UNAVAILABLE, as
        when simple_switch_grpc dies, other RPCs in flight get ``grace`` seconds."""
        server, self._server = self._server, None
        if server is None:
            return
        self.servicer.close_all()
        server.stop(self.options.grace_seconds if grace is None else grace).wait()
        self.device.stop()
        log.info("P4Runtime server for device %d stopped", self.device_id)

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        """Block until the server stops; True if it did within ``timeout``."""
        server = self._server
        if server is None:
            return True
        return bool(server.wait_for_termination(timeout))

    def __enter__(self) -> P4RuntimeServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("P4RuntimeServer not started")
        return self._port

    @property
    def address(self) -> str:
        """The bound "host:port" (the requested host with the actual port)."""
        host = self.requested_address.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._server is not None

    # -- I/O hooks ------------------------------------------------------------------------

    def deliver_outputs(self, frames: Iterable[tuple[int, bytes]]) -> Frames:
        """CPU-port frames become PacketIns; return the others for transmission."""
        return self.device.deliver_outputs(frames)

    @property
    def packet_out_sink(self) -> Callable[[Frames], None] | None:
        return self.device.packet_out_sink

    @packet_out_sink.setter
    def packet_out_sink(self, sink: Callable[[Frames], None] | None) -> None:
        self.device.packet_out_sink = sink

    @property
    def packet_out_injector(self) -> Callable[[int, bytes], None] | None:
        return self.device.packet_out_injector

    @packet_out_injector.setter
    def packet_out_injector(self, injector: Callable[[int, bytes], None] | None) -> None:
        self.device.packet_out_injector = injector

    # -- local configuration --------------------------------------------------------------

    def set_pipeline(self, p4info: p4info_pb2.P4Info, device_config: bytes,
                     cookie: int | None = None) -> None:
        """Commit a pipeline locally, as a VERIFY_AND_COMMIT from a controller would.

        For a switch started with a program and its P4Info (``--p4info``). Raises
        :class:`pybmv2.runtime.errors.P4RuntimeError` if the config is rejected.
        """
        config = p4runtime_pb2.ForwardingPipelineConfig(p4_device_config=device_config)
        config.p4info.CopyFrom(p4info)
        if cookie is not None:
            config.cookie.cookie = cookie
        self.device.set_pipeline(
            p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, config)
