"""ActionProfileMember and ActionProfileGroup writes and reads (P4Runtime "manual" mode).

This follows PI's ``ActionProfAccessManual`` (``action_prof_mgr.cpp``) over BMv2's action
profiles, including how weights are programmed: a member of weight *w* in some group is
backed by *w* target members (copies of its action, created on demand, the surplus deleted
when no group needs them), and a group holds one target member per unit of weight. Since a
selector picks among a group's target members in handle order, this is what makes member
choice (and read-backs) match simple_switch_grpc. Callers hold the switch lock.
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
from pybmv2.runtime.values import action_from_proto
from pybmv2.tables import ActionCall, IndirectIndex

if TYPE_CHECKING:
    from pybmv2.runtime.pipeline import Pipeline

__all__ = ["ProfileManager", "read_groups", "read_members", "write_group", "write_member"]

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

    # -- members -------------------------------------------------------------------------

    def _call(self, p: Pipeline, action: p4runtime_pb2.Action) -> tuple[ActionCall, TableBinding]:
        if not p.index.is_valid_id(action.action_id, P4Ids.ACTION):
            raise invalid("Invalid P4 id")
        for tb in self.bindings:
            if action.action_id in tb.to_target_action:
                return action_call(p.index, tb, action_from_proto(action)), tb
        raise invalid("Invalid action for action profile")

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
        for member_id in ids:
            self._purge(self.members[member_id])

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
        if kind == "action_profile_member_id" and indirect_id in self.members:
            return IndirectIndex(self.members[indirect_id].handles[0])
        if kind == "action_profile_group_id" and indirect_id in self.groups:
            return IndirectIndex(self.groups[indirect_id].handle, is_group=True)
        raise invalid("Invalid member / group id")

    def encode_index(self, index: IndirectIndex, action: p4runtime_pb2.TableAction) -> None:
        if index.is_group:
            action.action_profile_group_id = self.group_of_handle[index.handle]
        else:
            action.action_profile_member_id = self.member_of_handle[index.handle]

    # -- reads ---------------------------------------------------------------------------

    def read_members(self, p: Pipeline, member_id: int,
                     response: p4runtime_pb2.ReadResponse) -> None:
        """One entity per target member, in handle order (weighted copies included)."""
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
            for mid in sorted(weights):
                out.members.add(member_id=mid, weight=weights[mid])


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
    _check_update(kind)
    if kind == Update.INSERT:
        mgr.member_create(p, msg)
    elif kind == Update.MODIFY:
        mgr.member_modify(p, msg)
    else:
        mgr.member_delete(msg)


def write_group(p: Pipeline, kind: int, msg: p4runtime_pb2.ActionProfileGroup) -> None:
    mgr = _manager(p, msg.action_profile_id)
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
