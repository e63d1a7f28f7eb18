"""Multicast groups and clone sessions: P4Runtime PRE entries <-> ReplicationEngine objects.

Validation and read-back follow PI (``pre_mc_mgr.cpp``, ``pre_clone_mgr.cpp``,
``device_mgr.cpp``): group id 0 is INVALID_ARGUMENT and ids from 2^15 are OUT_OF_RANGE
(PI reserves them for clone sessions); clone session ids must lie in [1, 32768); a class of
service is UNIMPLEMENTED; a duplicate replica is INVALID_ARGUMENT. A replica port may be
given as ``egress_port`` or as a ``port`` bytestring; the form is remembered so that a read
returns what was written, with replicas in the order PI returns them (:func:`pi_replica_order`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import grpc
from google.protobuf.internal.containers import RepeatedCompositeFieldContainer
from p4.v1 import p4runtime_pb2

from pybmv2.pre import CloneSession, Replica
from pybmv2.runtime.codec import invalid
from pybmv2.runtime.errors import P4RuntimeError
from pybmv2.runtime.hash_order import hash_order

__all__ = [
    "FIRST_RESERVED_GROUP_ID",
    "MAX_CLONE_SESSION_ID",
    "DecodedGroup",
    "PortForms",
    "check_group_id",
    "check_session_id",
    "decode_clone_session",
    "decode_multicast_group",
    "encode_clone_session",
    "encode_multicast_group",
]

#: PI's PreMcMgr::first_reserved_group_id()
FIRST_RESERVED_GROUP_ID = 1 << 15
#: PI's PreCloneMgr::kMaxCloneSessionId (exclusive)
MAX_CLONE_SESSION_ID = 32768

#: replica -> length of the ``port`` bytestring it was written with (0: ``egress_port``)
PortForms = Mapping[Replica, int]


@dataclass(frozen=True)
class DecodedGroup:
    group_id: int
    replicas: tuple[Replica, ...]
    forms: dict[Replica, int]
    metadata: bytes = b""


def _decode_port(replica: p4runtime_pb2.Replica) -> tuple[int, int]:
    """(port, form) of a replica, PI's ``GetReplicaPort`` / ``bytestring_to_pi_port``."""
    which = replica.WhichOneof("port_kind")
    if which == "egress_port":
        return replica.egress_port, 0
    if which == "port":
        data = bytes(replica.port)
        if not data:
            raise invalid("Port must not be the empty string")
        if len(data) > 4:
            raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                                 f"Got port of {len(data)} bytes, but only 4 bytes are "
                                 "supported")
        value = int.from_bytes(data, "big")
        if value == 0 or value >= 1 << 31:
            raise invalid("Port must be non-negative.")
        return value, len(data)
    raise invalid("Missing port in multicast group replica")


def _decode_replicas(
    replicas: Iterable[p4runtime_pb2.Replica], what: str
) -> tuple[tuple[Replica, ...], dict[Replica, int]]:
    out: list[Replica] = []
    forms: dict[Replica, int] = {}
    for r in replicas:
        port, form = _decode_port(r)
        rep = Replica(port, r.instance)
        if rep in forms:
            raise invalid(f"Duplicate replica in {what}")
        forms[rep] = form
        out.append(rep)
    return tuple(out), forms


def pi_replica_order(replicas: Iterable[Replica]) -> list[Replica]:
    """Replicas in the order BMv2's PI reads them back.

    PI keeps one node per instance (rid) in a ``std::unordered_map`` built afresh by each
    write, its ports in a ``std::set``: the rids come in that map's iteration order
    (:mod:`pybmv2.runtime.hash_order`), ports ascending inside a rid (checked against
    simple_switch_grpc 1.15.5, also for groups of more than 13 rids, where the map grows).

    >>> [(r.egress_port, r.rid) for r in pi_replica_order(
    ...     [Replica(4, 2), Replica(3, 0), Replica(1, 0), Replica(2, 1), Replica(5, 1)])]
    [(2, 1), (5, 1), (1, 0), (3, 0), (4, 2)]
    """
    by_rid: dict[int, list[Replica]] = {}
    for rep in replicas:
        by_rid.setdefault(rep.rid, []).append(rep)
    return [rep for rid in hash_order(by_rid) for rep in sorted(by_rid[rid], key=lambda r: r.egress_port)]


def _encode_replicas(replicas: Iterable[Replica], forms: PortForms,
                     out: RepeatedCompositeFieldContainer) -> None:
    for rep in pi_replica_order(replicas):
        msg = out.add(instance=rep.rid)
        nbytes = forms.get(rep, 0)
        if nbytes:
            msg.port = rep.egress_port.to_bytes(nbytes, "big")
        else:
            msg.egress_port = rep.egress_port


def check_group_id(group_id: int, *, for_write: bool) -> None:
    """PI's group id checks (0 is a wildcard on read, invalid on write)."""
    if for_write and group_id == 0:
        raise invalid("0 is not a valid group id")
    if group_id >= FIRST_RESERVED_GROUP_ID:
        raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE, "Group id value is too high")


def decode_multicast_group(entry: p4runtime_pb2.MulticastGroupEntry) -> DecodedGroup:
    """Validate a MulticastGroupEntry of a Write."""
    check_group_id(entry.multicast_group_id, for_write=True)
    replicas, forms = _decode_replicas(entry.replicas, "multicast group")
    return DecodedGroup(entry.multicast_group_id, replicas, forms, bytes(entry.metadata))


def encode_multicast_group(group_id: int, replicas: Iterable[Replica], forms: PortForms,
                           metadata: bytes,
                           out: p4runtime_pb2.MulticastGroupEntry) -> None:
    out.multicast_group_id = group_id
    _encode_replicas(replicas, forms, out.replicas)
    if metadata:
        out.metadata = metadata


def check_session_id(session_id: int) -> None:
    """PI's ``validate_session_id`` (0 is rejected with its own message first)."""
    if session_id == 0:
        raise invalid("0 is not a valid session id")
    if not 1 <= session_id < MAX_CLONE_SESSION_ID:
        raise invalid("Clone session id out-of-range")


def decode_clone_session(
    entry: p4runtime_pb2.CloneSessionEntry,
) -> tuple[CloneSession, dict[Replica, int]]:
    """Validate a CloneSessionEntry of a Write."""
    check_session_id(entry.session_id)
    replicas, forms = _decode_replicas(entry.replicas, "clone session")
    if entry.class_of_service != 0:
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                             "COS for clone sessions not supported yet")
    if entry.packet_length_bytes > 0xFFFF:
        raise invalid(f"packet_length_bytes {entry.packet_length_bytes} exceeds 65535")
    session = CloneSession(entry.session_id, replicas, entry.class_of_service,
                           entry.packet_length_bytes)
    return session, forms


def encode_clone_session(session: CloneSession, forms: PortForms,
                         out: p4runtime_pb2.CloneSessionEntry) -> None:
    out.session_id = session.session_id
    _encode_replicas(session.replicas, forms, out.replicas)
    out.class_of_service = session.class_of_service
    out.packet_length_bytes = session.packet_length_bytes
