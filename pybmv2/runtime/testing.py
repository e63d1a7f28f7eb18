"""Helpers for driving a P4Runtime server over real gRPC, for tests and debugging.

:class:`StreamClient` opens one StreamChannel whose responses are queued by a reader
thread; unary RPCs go through the same channel. Always call :meth:`StreamClient.close`.
:func:`load_config` reads a P4Info text file and a BMv2 JSON into a pipeline config.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
from google.protobuf import text_format
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

__all__ = ["StreamClient", "batch_errors", "load_config", "update"]

_END = object()


class StreamClient:
    """A channel, a stub and one StreamChannel whose responses land in a queue."""

    def __init__(self, address: str, device_id: int, election_id: int | None,
                 role: str = "") -> None:
        self.device_id = device_id
        self.election_id = election_id
        self.role = role
        self.channel = grpc.insecure_channel(address)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue[object] = queue.Queue()
        self.responses: queue.Queue[p4runtime_pb2.StreamMessageResponse | None] = queue.Queue()
        self.stream_error: grpc.RpcError | None = None
        self._stream = self.stub.StreamChannel(self._request_iter())
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _request_iter(self) -> Iterator[p4runtime_pb2.StreamMessageRequest]:
        while True:
            item = self._requests.get()
            if item is _END:
                return
            yield item

    def _read(self) -> None:
        try:
            for resp in self._stream:
                self.responses.put(resp)
        except grpc.RpcError as exc:
            self.stream_error = exc
        finally:
            self.responses.put(None)

    def send(self, req: p4runtime_pb2.StreamMessageRequest) -> None:
        self._requests.put(req)

    def arbitrate(self, election_id: int | None = None,
                  timeout: float = 5) -> p4runtime_pb2.MasterArbitrationUpdate:
        if election_id is not None:
            self.election_id = election_id
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        if self.election_id is not None:
            req.arbitration.election_id.high = self.election_id >> 64
            req.arbitration.election_id.low = self.election_id & ((1 << 64) - 1)
        if self.role:
            req.arbitration.role.name = self.role
        self.send(req)
        return self.expect("arbitration", timeout).arbitration

    def expect(self, kind: str, timeout: float = 5) -> p4runtime_pb2.StreamMessageResponse:
        """The next stream message of this kind (others of a different kind are skipped)."""
        while True:
            resp = self.responses.get(timeout=timeout)
            if resp is None:
                raise AssertionError(f"stream ended while waiting for {kind}: "
                                     f"{self.stream_error}")
            if resp.HasField(kind):
                return resp

    def packet_out(self, payload: bytes, metadata: dict[int, bytes]) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.packet.payload = payload
        for mid, value in metadata.items():
            req.packet.metadata.add(metadata_id=mid, value=value)
        self.send(req)

    def _stamp(self, req: p4runtime_pb2.WriteRequest
               | p4runtime_pb2.SetForwardingPipelineConfigRequest) -> None:
        req.device_id = self.device_id
        if self.role:
            req.role = self.role
        if self.election_id is not None:
            req.election_id.high = self.election_id >> 64
            req.election_id.low = self.election_id & ((1 << 64) - 1)

    def write(self, *updates: p4runtime_pb2.Update,
              atomicity: int = p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR) -> None:
        req = p4runtime_pb2.WriteRequest(atomicity=atomicity)
        self._stamp(req)
        req.updates.extend(updates)
        self.stub.Write(req, timeout=10)

    def read(self, *entities: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        out: list[p4runtime_pb2.Entity] = []
        for resp in self.stub.Read(req, timeout=10):
            out.extend(resp.entities)
        return out

    def set_pipeline(self, config: p4runtime_pb2.ForwardingPipelineConfig,
                     action: int = p4runtime_pb2.SetForwardingPipelineConfigRequest
                     .VERIFY_AND_COMMIT) -> None:
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(action=action)
        self._stamp(req)
        req.config.CopyFrom(config)
        self.stub.SetForwardingPipelineConfig(req, timeout=30)

    def close(self) -> None:
        self._requests.put(_END)
        self._reader.join(timeout=5)
        self.channel.close()


def batch_errors(exc: grpc.RpcError) -> list[p4runtime_pb2.Error]:
    """The p4.v1.Error details of a failed Write (one per update)."""
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            errors = []
            for detail in status.details:
                err = p4runtime_pb2.Error()
                assert detail.Unpack(err)
                errors.append(err)
            return errors
    raise AssertionError(f"no grpc-status-details-bin in {exc!r}")


def load_config(p4info_path: str | Path, json_path: str | Path,
                cookie: int | None = None) -> p4runtime_pb2.ForwardingPipelineConfig:
    """A ForwardingPipelineConfig from a P4Info text file and a BMv2 JSON file."""
    config = p4runtime_pb2.ForwardingPipelineConfig(
        p4_device_config=Path(json_path).read_bytes())
    text_format.Parse(Path(p4info_path).read_text(), config.p4info)
    if cookie is not None:
        config.cookie.cookie = cookie
    return config


def update(kind: int, entity: p4runtime_pb2.Entity) -> p4runtime_pb2.Update:
    """An Update of the given type (p4runtime_pb2.Update.INSERT, ...) for one entity."""
    u = p4runtime_pb2.Update(type=kind)
    u.entity.CopyFrom(entity)
    return u
