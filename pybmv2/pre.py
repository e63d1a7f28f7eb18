"""The packet replication engine: multicast groups and clone (mirror) sessions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pybmv2.errors import EntryExistsError, EntryNotFoundError, InvalidEntryError

__all__ = ["CloneSession", "Replica", "ReplicationEngine"]


@dataclass(frozen=True, slots=True)
class Replica:
    egress_port: int
    rid: int  # instance / egress_rid


@dataclass(frozen=True, slots=True)
class CloneSession:
    session_id: int
    replicas: tuple[Replica, ...]
    class_of_service: int = 0
    packet_length_bytes: int = 0  # truncation, 0 for none


class ReplicationEngine:
    """Multicast groups (mgid -> replicas) and clone sessions, as the PRE holds them."""

    MAX_MGID = 0xFFFF
    MAX_SESSION = 0x7FFF

    def __init__(self, *, truncation: bool = False) -> None:
        self.groups: dict[int, tuple[Replica, ...]] = {}
        self.sessions: dict[int, CloneSession] = {}
        #: extension: honour a clone session's packet_length_bytes. BMv2 1.15.5 (PI's
        #: simple_switch target) implements no truncation and refuses such a session.
        self.truncation = truncation
        #: told ``("group" | "session", id)`` after every change (``("clear", 0)``), or None
        self.observer: Callable[[str, int], None] | None = None

    def _notify(self, kind: str, ident: int) -> None:
        if self.observer is not None:
            self.observer(kind, ident)

    # multicast groups
    def insert_group(self, mgid: int, replicas: tuple[Replica, ...]) -> None:
        if not 0 < mgid <= self.MAX_MGID:
            raise InvalidEntryError(f"multicast group id {mgid} out of range 1..{self.MAX_MGID}")
        if mgid in self.groups:
            raise EntryExistsError(f"multicast group {mgid} already exists")
        self._check_unique(replicas, f"multicast group {mgid}")
        self.groups[mgid] = replicas
        self._notify("group", mgid)

    def modify_group(self, mgid: int, replicas: tuple[Replica, ...]) -> None:
        if mgid not in self.groups:
            raise EntryNotFoundError(f"multicast group {mgid} does not exist")
        self._check_unique(replicas, f"multicast group {mgid}")
        self.groups[mgid] = replicas
        self._notify("group", mgid)

    def delete_group(self, mgid: int) -> None:
        if self.groups.pop(mgid, None) is None:
            raise EntryNotFoundError(f"multicast group {mgid} does not exist")
        self._notify("group", mgid)

    # clone sessions
    def insert_session(self, session: CloneSession) -> None:
        sid = session.session_id
        if not 0 < sid <= self.MAX_SESSION:
            raise InvalidEntryError(f"clone session id {sid} out of range 1..{self.MAX_SESSION}")
        if sid in self.sessions:
            raise EntryExistsError(f"clone session {sid} already exists")
        self._check_unique(session.replicas, f"clone session {sid}")
        self.sessions[sid] = session
        self._notify("session", sid)

    def modify_session(self, session: CloneSession) -> None:
        if session.session_id not in self.sessions:
            raise EntryNotFoundError(f"clone session {session.session_id} does not exist")
        self._check_unique(session.replicas, f"clone session {session.session_id}")
        self.sessions[session.session_id] = session
        self._notify("session", session.session_id)

    def delete_session(self, sid: int) -> None:
        if self.sessions.pop(sid, None) is None:
            raise EntryNotFoundError(f"clone session {sid} does not exist")
        self._notify("session", sid)

    def clear(self) -> None:
        self.groups.clear()
        self.sessions.clear()
        self._notify("clear", 0)

    @staticmethod
    def _check_unique(replicas: tuple[Replica, ...], what: str) -> None:
        if len(set(replicas)) != len(replicas):
            raise InvalidEntryError(f"{what}: duplicate replica")
