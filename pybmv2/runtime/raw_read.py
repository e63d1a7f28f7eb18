"""The Read RPC registered with its responses already serialized.

A table Read is encoded straight to wire bytes (:mod:`~pybmv2.runtime.read_wire`), so the
servicer yields the bytes of each ReadResponse and :class:`RawReadHandler` sends them as
they are: parsing them into messages for grpc to serialize again would cost seconds for a
big table. It is added to the gRPC server before the generated P4Runtime handler, which
serves the other methods (gRPC asks generic handlers in the order they were added).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc
from p4.v1 import p4runtime_pb2

__all__ = ["READ_METHOD", "RawReadHandler"]

READ_METHOD = "/p4.v1.P4Runtime/Read"

RawRead = Callable[[p4runtime_pb2.ReadRequest, grpc.ServicerContext], Iterator[bytes]]


def _identity(data: bytes) -> bytes:
    return data


class RawReadHandler(grpc.GenericRpcHandler):
    """Serve Read with ``read(request, context)`` yielding serialized ReadResponses."""

    def __init__(self, read: RawRead) -> None:
        self._handler = grpc.unary_stream_rpc_method_handler(
            read,
            request_deserializer=p4runtime_pb2.ReadRequest.FromString,
            response_serializer=_identity,
        )

    def service(self, handler_call_details: grpc.HandlerCallDetails
                ) -> grpc.RpcMethodHandler | None:
        if handler_call_details.method == READ_METHOD:
            return self._handler
        return None
