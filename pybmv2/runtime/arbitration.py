"""Client arbitration: which StreamChannel is the primary of each (device_id, role).

Pure bookkeeping, no gRPC I/O: every call returns the MasterArbitrationUpdate messages to
send and to which connection. The rules are PI's (``proto/server/pi_server.cpp``,
``DeviceState``), extended with roles as the P4Runtime spec describes:

- the primary of a (device_id, role) is the live connection with the highest election id;
  when it leaves, the next highest becomes primary (PI), every connection is notified;
- a new connection that becomes primary makes everybody be notified, a new backup only
  hears about itself; the status is OK for the primary and ALREADY_EXISTS for backups
  (NOT_FOUND when nobody is primary), ``election_id`` is the primary's;
- an election id already used by a live connection of the same (device_id, role) is
  INVALID_ARGUMENT, more than ``max_connections`` streams is RESOURCE_EXHAUSTED, a second
  arbitration message changing the device id or role is FAILED_PRECONDITION;
- an unset election id (spec, "Unset Election ID") is lower than any other: such a
  connection never becomes primary and several of them may coexist.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from pybmv2.runtime.errors import P4RuntimeError

__all__ = ["Arbitration", "Member", "Notification", "election_id_of"]

#: PI's DeviceState::max_connections
MAX_CONNECTIONS = 16

Notification = tuple[Hashable, p4runtime_pb2.StreamMessageResponse]


def election_id_of(msg: p4runtime_pb2.MasterArbitrationUpdate
                   | p4runtime_pb2.WriteRequest
                   | p4runtime_pb2.SetForwardingPipelineConfigRequest) -> int | None:
    """The 128-bit election id of a message, or None if the field is unset."""
    if not msg.HasField("election_id"):
        return None
    return (msg.election_id.high << 64) | msg.election_id.low


@dataclass
class Member:
    """One live connection taking part in the arbitration of a (device_id, role)."""

    device_id: int
    role: str
    election_id: int | None
    role_config: p4runtime_pb2.Role | None = None


class Arbitration:
    """Tracks the live connections of every (device_id, role) and their primary."""

    def __init__(self, max_connections: int = MAX_CONNECTIONS) -> None:
        self.max_connections = max_connections
        self._lock = threading.Lock()
        self._members: dict[Hashable, Member] = {}

    # -- queries ----------------------------------------------------------------------

    def _group(self, device_id: int, role: str) -> list[tuple[Hashable, Member]]:
        return [(c, m) for c, m in self._members.items()
                if m.device_id == device_id and m.role == role]

    def _primary(self, device_id: int, role: str) -> Hashable | None:
        best: tuple[Hashable, int] | None = None
        for conn, m in self._group(device_id, role):
            if m.election_id is not None and (best is None or m.election_id > best[1]):
                best = (conn, m.election_id)
        return best[0] if best else None

    def primary(self, device_id: int, role: str = "") -> Hashable | None:
        with self._lock:
            return self._primary(device_id, role)

    def primaries(self, device_id: int) -> list[Hashable]:
        """The primary connection of every role of a device."""
        with self._lock:
            roles = {m.role for m in self._members.values() if m.device_id == device_id}
            found = (self._primary(device_id, r) for r in sorted(roles))
            return [c for c in found if c is not None]

    def count(self, device_id: int, role: str = "") -> int:
        with self._lock:
            return len(self._group(device_id, role))

    def is_primary_id(self, device_id: int, role: str, election_id: int | None) -> bool:
        """Whether a request carrying this election id comes from the primary."""
        with self._lock:
            primary = self._primary(device_id, role)
            if primary is None or election_id is None:
                return False
            return self._members[primary].election_id == election_id

    def is_primary(self, conn: Hashable) -> bool:
        with self._lock:
            m = self._members.get(conn)
            return m is not None and self._primary(m.device_id, m.role) is conn

    def member(self, conn: Hashable) -> Member | None:
        with self._lock:
            return self._members.get(conn)

    # -- changes ----------------------------------------------------------------------

    def _notification(self, conn: Hashable, m: Member) -> Notification:
        resp = p4runtime_pb2.StreamMessageResponse()
        arb = resp.arbitration
        arb.device_id = m.device_id
        primary = self._primary(m.device_id, m.role)
        if m.role:
            arb.role.name = m.role
        if primary is not None:
            pm = self._members[primary]
            assert pm.election_id is not None
            arb.election_id.high = pm.election_id >> 64
            arb.election_id.low = pm.election_id & ((1 << 64) - 1)
            if pm.role_config is not None and pm.role_config.HasField("config"):
                arb.role.config.CopyFrom(pm.role_config.config)
        if primary is conn:
            arb.status.code = code_pb2.OK
            arb.status.message = "Is primary"
        elif primary is not None:
            arb.status.code = code_pb2.ALREADY_EXISTS
            arb.status.message = "Is backup"
        else:
            arb.status.code = code_pb2.NOT_FOUND
            arb.status.message = "No primary"
        return conn, resp

    def _notify_all(self, device_id: int, role: str) -> list[Notification]:
        return [self._notification(c, m) for c, m in self._group(device_id, role)]

    def _check_unique(self, conn: Hashable, device_id: int, role: str,
                      election_id: int | None, message: str) -> None:
        if election_id is None:
            return
        for other, m in self._group(device_id, role):
            if other is not conn and m.election_id == election_id:
                raise P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, message)

    def update(self, conn: Hashable, msg: p4runtime_pb2.MasterArbitrationUpdate
               ) -> list[Notification]:
        """Handle a MasterArbitrationUpdate received on ``conn``.

        Raises P4RuntimeError when the stream must be terminated with that status.
        """
        role = msg.role.name if msg.HasField("role") else ""
        election_id = election_id_of(msg)
        role_msg = p4runtime_pb2.Role()
        role_msg.CopyFrom(msg.role)
        with self._lock:
            current = self._members.get(conn)
            if current is None:
                if len(self._group(msg.device_id, role)) >= self.max_connections:
                    raise P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                         "Too many connections")
                self._check_unique(conn, msg.device_id, role, election_id,
                                   "Election id already exists")
                self._members[conn] = Member(msg.device_id, role, election_id, role_msg)
                if self._primary(msg.device_id, role) is conn:
                    return self._notify_all(msg.device_id, role)
                return [self._notification(conn, self._members[conn])]
            if current.device_id != msg.device_id:
                raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION, "Invalid device id")
            if current.role != role:
                raise P4RuntimeError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "Role cannot change on a live stream; open a new StreamChannel")
            self._check_unique(conn, msg.device_id, role, election_id,
                               "New election id already exists")
            was_primary = self._primary(current.device_id, role) is conn
            current.election_id = election_id
            current.role_config = role_msg
            is_primary = self._primary(current.device_id, role) is conn
            if was_primary != is_primary:
                return self._notify_all(current.device_id, role)
            return [self._notification(conn, current)]

    def remove(self, conn: Hashable) -> list[Notification]:
        """Forget a connection whose stream ended; notify the others if it was primary."""
        with self._lock:
            m = self._members.get(conn)
            if m is None:
                return []
            was_primary = self._primary(m.device_id, m.role) is conn
            del self._members[conn]
            if was_primary:
                return self._notify_all(m.device_id, m.role)
            return []
