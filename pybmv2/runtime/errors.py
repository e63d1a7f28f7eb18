"""P4Runtime errors: the canonical gRPC code of every failure, and PI's batch reporting.

:class:`P4RuntimeError` carries the canonical code the PI server (``p4lang/PI``,
``proto/frontend/src/device_mgr.cpp``) returns for the same mistake. Target errors from
:mod:`pybmv2.errors` are mapped with :func:`from_target_error`. :func:`batch_status`
reproduces PI's ``P4ErrorReporter``: a Write batch with at least one failed update yields a
``google.rpc.Status`` with code UNKNOWN whose ``details`` hold one ``p4.v1.Error`` per
update, the successful ones included (with ``canonical_code`` OK).
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2

from pybmv2.errors import (
    EntryExistsError,
    EntryNotFoundError,
    InvalidEntryError,
    JsonFormatError,
    PacketIOError,
    TableFullError,
    TargetError,
    UnsupportedJsonError,
)

__all__ = [
    "ERROR_SPACE",
    "P4RuntimeError",
    "batch_status",
    "code_number",
    "from_target_error",
    "grpc_code",
]

#: the ``space`` PI puts in every p4.v1.Error it reports for BMv2
ERROR_SPACE = "ALL-sswitch-p4org"

_TARGET_CODES: tuple[tuple[type[TargetError], grpc.StatusCode], ...] = (
    (EntryExistsError, grpc.StatusCode.ALREADY_EXISTS),
    (EntryNotFoundError, grpc.StatusCode.NOT_FOUND),
    (TableFullError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (InvalidEntryError, grpc.StatusCode.INVALID_ARGUMENT),
    (JsonFormatError, grpc.StatusCode.INVALID_ARGUMENT),
    (UnsupportedJsonError, grpc.StatusCode.UNIMPLEMENTED),
    (PacketIOError, grpc.StatusCode.UNAVAILABLE),
)


class P4RuntimeError(Exception):
    """A request failed with a canonical gRPC status code.

    >>> P4RuntimeError(grpc.StatusCode.NOT_FOUND, "Cannot find match entry").number
    5
    """

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message

    @property
    def number(self) -> int:
        """The numeric google.rpc.Code of :attr:`code`."""
        return code_number(self.code)

    def to_p4_error(self) -> p4runtime_pb2.Error:
        """This error as the ``p4.v1.Error`` PI puts in a Write batch status."""
        return p4runtime_pb2.Error(
            canonical_code=self.number, message=self.message, space=ERROR_SPACE
        )


def code_number(code: grpc.StatusCode) -> int:
    """The google.rpc.Code number of a grpc.StatusCode (``code.value`` is ``(n, name)``)."""
    return int(code.value[0])


_BY_NUMBER = {code_number(c): c for c in grpc.StatusCode}


def grpc_code(number: int) -> grpc.StatusCode:
    """The grpc.StatusCode of a google.rpc.Code number (UNKNOWN if out of range, as PI)."""
    return _BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)


def from_target_error(exc: TargetError) -> P4RuntimeError:
    """The P4Runtime error for an exception raised by the Python target."""
    for cls, code in _TARGET_CODES:
        if isinstance(exc, cls):
            return P4RuntimeError(code, str(exc))
    return P4RuntimeError(grpc.StatusCode.UNKNOWN, str(exc))


def batch_status(results: Sequence[P4RuntimeError | None]) -> status_pb2.Status:
    """The google.rpc.Status of a Write batch, as PI's ``P4ErrorReporter`` builds it.

    ``results`` has one element per update: None for success. All OK gives code OK and no
    details; otherwise the code is UNKNOWN and every update gets a ``p4.v1.Error`` detail.
    """
    status = status_pb2.Status(code=code_pb2.OK)
    if all(r is None for r in results):
        return status
    status.code = code_pb2.UNKNOWN
    failed = sum(1 for r in results if r is not None)
    status.message = f"{failed} of {len(results)} updates failed"
    for r in results:
        detail = status.details.add()
        if r is None:
            detail.Pack(p4runtime_pb2.Error(canonical_code=code_pb2.OK))
        else:
            detail.Pack(r.to_p4_error())
    return status
