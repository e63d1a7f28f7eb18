"""ActionProfileMember and ActionProfileGroup writes and reads, and one-shot selector groups.

Manual mode follows PI's ``ActionProfAccessManual`` (``action_prof_mgr.cpp``) over BMv2's
action profiles, including how weights are programmed: a member of weight *w* in some group
is backed by *w* target members (copies of its action, created on demand, the surplus
deleted when no group needs them), and a group holds one target member per unit of weight.
Since a selector picks among a group's target members in handle order, this is what makes
member choice (and read-backs) match simple_switch_grpc.

One-shot mode (a table entry's ``action_profile_action_set``) follows PI's
``ActionProfAccessOneshot``: each entry gets a hidden group with one target member per unit
of each action's weight, in the order given, deleted with the entry (or replaced by a new
group on MODIFY); the entry reads back as the action set it was written with. A profile is
in one mode at a time: it takes the mode of its first use and can switch only while empty
("Invalid attempt to mix action selector programming modes" otherwise), and reading its
members or groups is manual-mode use. Callers hold the switch lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import grpc
from p4.v1 import p4runtime_pb2

from pybmv2.action_profiles import ActionProfile
from pybmv2.errors import TargetError
from pybmv2.runtime.codec import action_call, encode_action, invalid
from pybmv2.runtime.errors import P4RuntimeError
from pybmv2.runtime.p4info import ActionProfileInfo, P4Ids, TableBinding
from pybmv2.runtime.port_status import PortStatus
from pybmv2.runtime.read_wire import OneShotAction
from pybmv2.runtime.values import action_from_proto
from pybmv2.tables import ActionCall, IndirectIndex

if TYPE_CHECKING:
    from pybmv2.runtime.pipeline import Pipeline

__all__ = ["IndirectView", "OneShotPlan", "ProfileManager", "read_groups", "read_members",
           "write_group", "write_member"]

Update = p4runtime_pb2.Update


def _error(code: grpc.StatusCode, message: str) -> P4RuntimeError:
    return P4RuntimeError(code, message)


def _unknown(message: str) -> P4RuntimeError:
    return _error(grpc.StatusCode.UNKNOWN, message)


@dataclass
class MemberState:
    """PI's ``MemberState``: the action, its target handles, and how many groups use it
    with each weight (weight 1 counts the member itself)."""

    call: ActionCall
    binding: TableBinding
    handles: list[int]
    weight_counts: dict[int, int] = field(default_factory=lambda: {1: 1})


@dataclass
class GroupState:
    handle: int
    max_size: int
    membership: dict[int, int] = field(default_factory=dict)  # member id -> weight
    #: member id -> its watch as written: ("watch", int), ("watch_port", bytes) or ("", 0)
    watch: dict[int, tuple[str, int | bytes]] = field(default_factory=dict)


@dataclass(frozen=True)
class OneShotPlan:
    """A validated one-shot action set, before its group is created."""

    actions: tuple[OneShotAction, ...]


@dataclass(frozen=True)
class OneShotGroup:
    """A one-shot group: its target member handles (in creation order) and action set."""

    members: tuple[int, ...]
    actions: tuple[OneShotAction, ...]


@dataclass(frozen=True)
class IndirectView:
    """A copy of a profile's handle -> id maps: what a read encodes without the lock."""

    member_ids: dict[int, int]
    group_ids: dict[int, int]
    oneshot: dict[int, tuple[OneShotAction, ...]]


def _watch(action: p4runtime_pb2.ActionProfileAction) -> tuple[str, int | bytes]:
    which = action.WhichOneof("watch_kind")
    if which == "watch":
        return which, action.watch
    if which == "watch_port":
        return which, action.watch_port
    return "", 0


def watch_port(kind: str, value: int | bytes) -> int | None:
    r"""The port a watch names, or None for none (PI's ``watch_port_p4rt_to_pi``: ``watch`` 0
    is SDN_PORT_UNKNOWN; a ``watch_port`` bytestring that is empty or longer than 4 bytes is
    no port).

    >>> watch_port("watch", 5), watch_port("watch", 0), watch_port("watch_port", b"\x00\x07")
    (5, None, 7)
    >>> watch_port("watch_port", b""), watch_port("", 0)
    (None, None)
    """
    if kind == "watch":
        assert isinstance(value, int)
        return None if value == 0 else value & 0xFFFFFFFF
    if kind == "watch_port":
        assert isinstance(value, bytes)
        return int.from_bytes(value, "big") if 0 < len(value) <= 4 else None
    return None


class ProfileManager:
    """The P4Runtime state of one action profile: member and group ids and handles."""

    def __init__(self, info: ActionProfileInfo, profile: ActionProfile,
                 bindings: list[TableBinding]) -> None:
        self.info = info
        self.profile = profile
        self.bindings = bindings
        self.members: dict[int, MemberState] = {}
        self.groups: dict[int, GroupState] = {}
        self.member_of_handle: dict[int, int] = {}
        self.group_of_handle: dict[int, int] = {}
        #: PI's selector usage: None until first used, then "manual" or "oneshot"
        self.mode: str | None = None
        #: one-shot group handle -> its members and action set
        self.oneshot_groups: dict[int, OneShotGroup] = {}
        #: the device's port status, which watch ports follow (set when the pipeline is
        #: committed; until then no port is up)
        self.ports = PortStatus()

    # -- watch ports -----------------------------------------------------------------------

    def _watched(self) -> list[tuple[int, list[int], int | None]]:
        """Every group member's ``(group handle, target member handles, watch port)``."""
        out = []
        for group in self.groups.values():
            for member_id, weight in group.membership.items():
                port = watch_port(*group.watch.get(member_id, ("", 0)))
                out.append((group.handle, self.members[member_id].handles[:weight], port))
        for handle, oneshot in self.oneshot_groups.items():
            at = 0
            for _, weight, kind, value in oneshot.actions:
                out.append((handle, list(oneshot.members[at:at + weight]), watch_port(kind, value)))
                at += weight
        return out

    def enforce_watch_ports(self, port: int | None = None) -> None:
        """Activate the group members whose watch port is up (or who watch none) and
        deactivate the others, as PI's WatchPortEnforcer does; only those watching ``port``
        when given (a port's status changed)."""
        for group, handles, watched in self._watched():
            if port is not None and watched != port:
                continue
            active = watched is None or self.ports.up(watched)
            for handle in handles:
                self.profile.set_active(group, handle, active)

    # -- programming mode ----------------------------------------------------------------

    def use(self, mode: str) -> None:
        """PI's ``check_selector_usage``: enter ``mode`` unless the other one holds state."""
        if self.mode == mode:
            return
        empty = (not self.oneshot_groups if self.mode == "oneshot"
                 else not self.members and not self.groups)
        if self.mode is not None and not empty:
            raise invalid("Invalid attempt to mix action selector programming modes")
        self.mode = mode

    # -- members -------------------------------------------------------------------------

    def _check_action_id(self, p: Pipeline, action_id: int) -> TableBinding:
        """PI's ``validate_action`` of a profile: the binding of a table that has it."""
        if not p.index.is_valid_id(action_id, P4Ids.ACTION):
            raise invalid("Invalid P4 id")
        for tb in self.bindings:
            if action_id in tb.to_target_action:
                return tb
        raise invalid("Invalid action for action profile")

    def _call(self, p: Pipeline, action: p4runtime_pb2.Action) -> tuple[ActionCall, TableBinding]:
        tb = self._check_action_id(p, action.action_id)
        return action_call(p.index, tb, action_from_proto(action)), tb

    def member_create(self, p: Pipeline, msg: p4runtime_pb2.ActionProfileMember) -> None:
        call, tb = self._call(p, msg.action)
        if msg.member_id in self.members:
            raise _error(grpc.StatusCode.ALREADY_EXISTS, f"Duplicate member id: {msg.member_id}")
        handle = self.profile.add_member(call)
        self.members[msg.member_id] = MemberState(call, tb, [handle])
        self.member_of_handle[handle] = msg.member_id

    def member_modify(self, p: Pipeline, msg: p4runtime_pb2.ActionProfileMember) -> None:
        call, tb = self._call(p, msg.action)
        state = self._member(msg.member_id)
        for handle in state.handles:
            self.profile.modify_member(handle, call)
        state.call, state.binding = call, tb

    def member_delete(self, msg: p4runtime_pb2.ActionProfileMember) -> None:
        state = self._member(msg.member_id)
        for handle in list(state.handles):
            try:
                self.profile.delete_member(handle)
            except TargetError as exc:
                raise _unknown("Error when deleting member on target") from exc
            del self.member_of_handle[handle]
            state.handles.remove(handle)
        del self.members[msg.member_id]

    def _member(self, member_id: int) -> MemberState:
        state = self.members.get(member_id)
        if state is None:
            raise _error(grpc.StatusCode.NOT_FOUND, f"Member id does not exist: {member_id}")
        return state

    # -- groups --------------------------------------------------------------------------

    def group_create(self, msg: p4runtime_pb2.ActionProfileGroup) -> None:
        if msg.max_size < 0:
            raise invalid("Group max_size cannot be less than 0")
        if self.info.max_group_size > 0 and msg.max_size > self.info.max_group_size:
            raise invalid("Group max_size cannot exceed static max_group_size (from P4Info)")
        if msg.group_id in self.groups:
            raise _error(grpc.StatusCode.ALREADY_EXISTS, f"Duplicate group id: {msg.group_id}")
        try:
            handle = self.profile.create_group()
        except TargetError as exc:
            raise _unknown("Error when creating group on target") from exc
        self.groups[msg.group_id] = GroupState(handle, msg.max_size)
        self.group_of_handle[handle] = msg.group_id
        self._update_members(msg)

    def group_modify(self, msg: p4runtime_pb2.ActionProfileGroup) -> None:
        group = self._group(msg.group_id)
        if msg.max_size != 0 and msg.max_size != group.max_size:
            raise invalid("Cannot change group max_size after group creation")
        self._update_members(msg)

    def group_delete(self, msg: p4runtime_pb2.ActionProfileGroup) -> None:
        group = self._group(msg.group_id)
        try:
            self.profile.delete_group(group.handle)
        except TargetError as exc:
            raise _unknown("Error when deleting group on target") from exc
        for member_id, weight in group.membership.items():
            state = self.members[member_id]
            state.weight_counts[weight] -= 1
            self._purge(state)
        del self.group_of_handle[group.handle]
        del self.groups[msg.group_id]

    def _group(self, group_id: int) -> GroupState:
        group = self.groups.get(group_id)
        if group is None:
            raise _error(grpc.StatusCode.NOT_FOUND, f"Group id does not exist: {group_id}")
        return group

    def _update_members(self, msg: p4runtime_pb2.ActionProfileGroup) -> None:
        """PI's ``group_update_members`` (individual adds and removes)."""
        if any(m.weight <= 0 for m in msg.members):
            raise invalid("Member weight must be a positive integer value")
        group = self.groups[msg.group_id]
        max_size = group.max_size or self.info.max_group_size
        if max_size > 0 and sum(m.weight for m in msg.members) > max_size:
            raise _error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                         "Sum of member weights exceeds maximum group size")
        new: dict[int, int] = {}
        for m in msg.members:
            if m.member_id not in self.members:
                raise _error(grpc.StatusCode.NOT_FOUND,
                             f"Member id does not exist: {m.member_id}")
            if m.member_id in new:
                raise invalid(f"Duplicate member id {m.member_id} for group {msg.group_id}, "
                              "use weights instead")
            new[m.member_id] = m.weight
        ids = sorted(set(group.membership) | set(new))
        for member_id in ids:
            state = self.members[member_id]
            current, wanted = group.membership.get(member_id, 0), new.get(member_id, 0)
            for _ in range(len(state.handles), wanted):
                handle = self.profile.add_member(state.call)
                state.handles.append(handle)
                self.member_of_handle[handle] = member_id
            if current > 0:
                state.weight_counts[current] -= 1
            for i in range(current - 1, wanted - 1, -1):
                self.profile.group_remove_member(group.handle, state.handles[i])
            for i in range(current, wanted):
                self.profile.group_add_member(group.handle, state.handles[i])
            if wanted > 0:
                state.weight_counts[wanted] = state.weight_counts.get(wanted, 0) + 1
        group.membership = new
        group.watch = {m.member_id: _watch(m) for m in msg.members}
        for member_id in ids:
            self._purge(self.members[member_id])
        self.enforce_watch_ports()

    def _purge(self, state: MemberState) -> None:
        """PI's ``purge_unused_weighted_members``: drop copies no group needs any more."""
        used = [w for w, n in state.weight_counts.items() if n > 0]
        max_weight = max(used, default=1)
        state.weight_counts = {w: n for w, n in state.weight_counts.items() if w <= max_weight}
        while len(state.handles) > max_weight:
            handle = state.handles.pop()
            self.profile.delete_member(handle)
            del self.member_of_handle[handle]

    # -- table entries -------------------------------------------------------------------

    def index_of(self, kind: str, indirect_id: int) -> IndirectIndex:
        """The target index of a table action's member or group id (PI's
        ``construct_action_entry_indirect``)."""
        self.use("manual")
        if kind == "action_profile_member_id" and indirect_id in self.members:
            return IndirectIndex(self.members[indirect_id].handles[0])
        if kind == "action_profile_group_id" and indirect_id in self.groups:
            return IndirectIndex(self.groups[indirect_id].handle, is_group=True)
        raise invalid("Invalid member / group id")

    def view(self) -> IndirectView:
        """A copy of the maps a table read needs, to encode its entries without the lock."""
        return IndirectView(dict(self.member_of_handle), dict(self.group_of_handle),
                            {h: g.actions for h, g in self.oneshot_groups.items()})

    # -- one-shot groups -----------------------------------------------------------------

    def oneshot_plan(self, p: Pipeline, action_set: p4runtime_pb2.ActionProfileActionSet
                     ) -> OneShotPlan:
        """PI's ``group_create`` checks, in its order, with nothing created yet."""
        self.use("oneshot")
        actions = action_set.action_profile_actions
        if not actions:
            raise _error(grpc.StatusCode.UNIMPLEMENTED,
                         "No support for empty action profile groups")
        for a in actions:
            self._check_action_id(p, a.action.action_id)
        if any(a.weight <= 0 for a in actions):
            raise invalid("Member weight must be a positive integer value")
        if self.info.max_group_size > 0 and sum(a.weight for a in actions) > \
                self.info.max_group_size:
            raise _error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                         "Sum of weights exceeds static max_group_size (from P4Info)")
        return OneShotPlan(tuple((self._call(p, a.action)[0], a.weight, *_watch(a))
                                 for a in actions))

    def oneshot_create(self, plan: OneShotPlan, failure: str) -> IndirectIndex:
        """Create a planned group: one target member per unit of weight, in order.

        ``failure`` is the message of the UNKNOWN error of a profile without a selector: BMv2
        creates the group there, and then refuses the table entry that points to it.
        """
        if not self.profile.with_selector:
            raise _unknown(failure)
        handles = [self.profile.add_member(call)
                   for call, weight, _, _ in plan.actions for _ in range(weight)]
        group = self.profile.create_group()
        for handle in handles:
            self.profile.group_add_member(group, handle)
        self.oneshot_groups[group] = OneShotGroup(tuple(handles), plan.actions)
        self.enforce_watch_ports()
        return IndirectIndex(group, is_group=True)

    def oneshot_delete(self, index: IndirectIndex | None) -> None:
        """Delete the group of a one-shot entry (no-op for other indexes)."""
        if index is None or not index.is_group:
            return
        group = self.oneshot_groups.pop(index.handle, None)
        if group is None:
            return
        self.profile.delete_group(index.handle)
        for handle in group.members:
            self.profile.delete_member(handle)

    # -- reads ---------------------------------------------------------------------------

    def read_members(self, p: Pipeline, member_id: int,
                     response: p4runtime_pb2.ReadResponse) -> None:
        """One entity per target member, in handle order (weighted copies included)."""
        self.use("manual")
        if member_id:
            state = self.members.get(member_id)
            handles = [state.handles[0]] if state is not None else []
        else:
            handles = sorted(self.profile.members)
        for handle in handles:
            out = response.entities.add().action_profile_member
            out.action_profile_id = self.info.id
            mid = self.member_of_handle[handle]
            encode_action(p.index, self.members[mid].binding, self.profile.members[handle],
                          out.action)
            out.member_id = mid

    def read_groups(self, group_id: int, response: p4runtime_pb2.ReadResponse) -> None:
        self.use("manual")
        if group_id:
            group = self.groups.get(group_id)
            handles = [group.handle] if group is not None else []
        else:
            handles = sorted(self.profile.groups)
        for handle in handles:
            gid = self.group_of_handle[handle]
            out = response.entities.add().action_profile_group
            out.action_profile_id = self.info.id
            out.group_id = gid
            out.max_size = self.groups[gid].max_size
            weights: dict[int, int] = {}
            for mbr in self.profile.groups[handle]:
                mid = self.member_of_handle[mbr]
                weights[mid] = weights.get(mid, 0) + 1
            # PI reads every member's watch into one variable and writes the last one read
            # (the member of the highest handle) into every member it returns
            last = self.member_of_handle[self.profile.groups[handle][-1]] if weights else 0
            kind, value = self.groups[gid].watch.get(last, ("", 0))
            for mid in sorted(weights):
                member = out.members.add(member_id=mid, weight=weights[mid])
                if kind == "watch":
                    member.watch = value
                elif kind == "watch_port":
                    member.watch_port = value


def _manager(p: Pipeline, profile_id: int) -> ProfileManager:
    if not p.index.is_valid_id(profile_id, P4Ids.ACTION_PROFILE):
        raise invalid("Invalid P4 id")
    return p.profiles[profile_id]


def _check_update(kind: int) -> None:
    if kind == Update.UNSPECIFIED:
        raise invalid("Update type is not set")
    if kind not in (Update.INSERT, Update.MODIFY, Update.DELETE):
        raise invalid("Invalid update type")


def write_member(p: Pipeline, kind: int, msg: p4runtime_pb2.ActionProfileMember) -> None:
    mgr = _manager(p, msg.action_profile_id)
    mgr.use("manual")
    _check_update(kind)
    if kind == Update.INSERT:
        mgr.member_create(p, msg)
    elif kind == Update.MODIFY:
        mgr.member_modify(p, msg)
    else:
        mgr.member_delete(msg)


def write_group(p: Pipeline, kind: int, msg: p4runtime_pb2.ActionProfileGroup) -> None:
    mgr = _manager(p, msg.action_profile_id)
    mgr.use("manual")
    _check_update(kind)
    if kind == Update.INSERT:
        mgr.group_create(msg)
    elif kind == Update.MODIFY:
        mgr.group_modify(msg)
    else:
        mgr.group_delete(msg)


def read_members(p: Pipeline, msg: p4runtime_pb2.ActionProfileMember,
                 response: p4runtime_pb2.ReadResponse) -> None:
    ids = [msg.action_profile_id] if msg.action_profile_id else list(p.profiles)
    for pid in ids:
        _manager(p, pid).read_members(p, msg.member_id, response)


def read_groups(p: Pipeline, msg: p4runtime_pb2.ActionProfileGroup,
                response: p4runtime_pb2.ReadResponse) -> None:
    ids = [msg.action_profile_id] if msg.action_profile_id else list(p.profiles)
    for pid in ids:
        _manager(p, pid).read_groups(msg.group_id, response)
