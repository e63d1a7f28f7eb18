"""The Write RPC registered with its request left serialized, for the wire fast path.

:class:`RawWriteHandler` answers ``/p4.v1.P4Runtime/Write`` with a method handler whose
request deserializer is the identity, so the servicer receives the request's bytes and
decides whether protobuf has to parse them (``P4RuntimeServicer.write_serialized``). It is
added to the gRPC server *before* the generated P4Runtime handler, which still serves every
other method (gRPC asks generic handlers in the order they were added).
:func:`parse_write_request` is the protobuf parse grpc would have done, failing the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import grpc
from p4.v1 import p4runtime_pb2

__all__ = ["WRITE_METHOD", "RawWriteHandler", "parse_write_request"]

log = logging.getLogger(__name__)

WRITE_METHOD = "/p4.v1.P4Runtime/Write"
#: what grpc answers (with INTERNAL) when its request deserializer fails
DESERIALIZE_ERROR = "Exception deserializing request!"

RawWrite = Callable[[bytes, grpc.ServicerContext], p4runtime_pb2.WriteResponse]


def _identity(data: bytes) -> bytes:
    return data


class RawWriteHandler(grpc.GenericRpcHandler):
    """Serve Write with ``write(request_bytes, context)``; decline every other method."""

    def __init__(self, write: RawWrite) -> None:
        self._handler = grpc.unary_unary_rpc_method_handler(
            write,
            request_deserializer=_identity,
            response_serializer=p4runtime_pb2.WriteResponse.SerializeToString,
        )

    def service(self, handler_call_details: grpc.HandlerCallDetails
                ) -> grpc.RpcMethodHandler | None:
        if handler_call_details.method == WRITE_METHOD:
            return self._handler
        return None


def parse_write_request(data: bytes,
                        context: grpc.ServicerContext) -> p4runtime_pb2.WriteRequest:
    """``WriteRequest.FromString``; on failure abort the RPC as grpc's deserializer does."""
    try:
        return p4runtime_pb2.WriteRequest.FromString(data)
    except Exception:  # grpc catches any exception of a request deserializer the same way
        log.exception("Exception deserializing a %d-byte WriteRequest", len(data))
        context.abort(grpc.StatusCode.INTERNAL, DESERIALIZE_ERROR)
        raise AssertionError("context.abort returned") from None  # pragma: no cover
