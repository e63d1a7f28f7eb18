"""Action profiles and action selectors (BMv2 ``action_profiles``; tables of type
``indirect`` and ``indirect_ws``), as BMv2's ``ActionProfile`` keeps them.

Members and groups are named by handles BMv2 allocates the same way: the lowest free one.
A group is the *set* of its member handles; a selector picks ``members[hash % size]`` in
ascending handle order, where ``hash`` is the selector's calculation over its input fields
truncated to 32 bits (BMv2's ``hash_t`` is an ``unsigned int``).

A group member can be deactivated (PI's watch ports: its watch port is down): the selector
then picks among the active members only, as BMv2's ``GroupSelection`` does
(``activated[hash % active_count]``). With every member of a non-empty group deactivated
BMv2 divides by zero; here the group selects nothing, like an empty one.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

from pybmv2.calculations import Calculation
from pybmv2.errors import EntryNotFoundError, InvalidEntryError
from pybmv2.layout import PhvLayout
from pybmv2.state import PacketState
from pybmv2.tables import ActionCall, IndirectIndex

__all__ = ["ActionProfile", "IndirectIndex", "ProfileInUseError"]


class ProfileInUseError(InvalidEntryError):
    """A member or group is still referenced (BMv2's MBR_STILL_USED / GRP_STILL_USED)."""


def _lowest_free(used: dict[int, Any]) -> int:
    handle = 0
    while handle in used:
        handle += 1
    return handle


class ActionProfile:
    """One action profile, with a selector when the JSON gives one."""

    def __init__(self, layout: PhvLayout, spec: dict[str, Any]) -> None:
        self.name: str = spec["name"]
        self.id: int = int(spec.get("id", 0))
        self.max_size: int = int(spec.get("max_size", 0))
        selector = spec.get("selector")
        self.selector: Calculation | None = None
        if selector is not None:
            self.selector = Calculation(layout, {"name": self.name, **selector})
        self.members: dict[int, ActionCall] = {}
        self.groups: dict[int, list[int]] = {}  # group handle -> sorted member handles
        #: group handle -> its deactivated member handles (watch port down)
        self.inactive: dict[int, set[int]] = {}
        self._member_refs: dict[int, int] = {}
        self._group_refs: dict[int, int] = {}
        #: told ``(profile, "member" | "group", handle)`` after every change, or None
        self.observer: Callable[[ActionProfile, str, int], None] | None = None

    @property
    def with_selector(self) -> bool:
        return self.selector is not None

    # -- members and groups -------------------------------------------------------------

    def add_member(self, call: ActionCall) -> int:
        handle = _lowest_free(self.members)
        self.members[handle] = call
        self._member_refs[handle] = 0
        self._notify("member", handle)
        return handle

    def modify_member(self, handle: int, call: ActionCall) -> None:
        self._check_member(handle)
        self.members[handle] = call
        self._notify("member", handle)

    def delete_member(self, handle: int) -> None:
        self._check_member(handle)
        if self._member_refs[handle]:
            raise ProfileInUseError(f"action profile {self.name!r}: member {handle} is in use")
        del self.members[handle]
        del self._member_refs[handle]
        self._notify("member", handle)

    def create_group(self) -> int:
        if self.selector is None:
            raise InvalidEntryError(f"action profile {self.name!r} has no selector")
        handle = _lowest_free(self.groups)
        self.groups[handle] = []
        self._group_refs[handle] = 0
        self._notify("group", handle)
        return handle

    def delete_group(self, handle: int) -> None:
        self._check_group(handle)
        if self._group_refs[handle]:
            raise ProfileInUseError(f"action profile {self.name!r}: group {handle} is in use")
        for mbr in self.groups.pop(handle):
            self._member_refs[mbr] -= 1
        del self._group_refs[handle]
        self.inactive.pop(handle, None)
        self._notify("group", handle)

    def group_add_member(self, group: int, member: int) -> None:
        self._check_member(member)
        self._check_group(group)
        members = self.groups[group]
        pos = bisect.bisect_left(members, member)
        if pos < len(members) and members[pos] == member:
            raise InvalidEntryError(f"member {member} is already in group {group}")
        members.insert(pos, member)
        self._member_refs[member] += 1
        self._notify("group", group)

    def group_remove_member(self, group: int, member: int) -> None:
        self._check_member(member)
        self._check_group(group)
        try:
            self.groups[group].remove(member)
        except ValueError:
            raise InvalidEntryError(f"member {member} is not in group {group}") from None
        self._member_refs[member] -= 1
        self.inactive.get(group, set()).discard(member)
        self._notify("group", group)

    def set_active(self, group: int, member: int, active: bool) -> None:
        """Activate or deactivate ``member`` of ``group`` (BMv2's GroupSelection)."""
        self._check_group(group)
        if member not in self.groups[group]:
            raise InvalidEntryError(f"member {member} is not in group {group}")
        off = self.inactive.setdefault(group, set())
        if active == (member in off):
            (off.discard if active else off.add)(member)
            self._notify("group", group)

    def active_members(self, group: int) -> list[int]:
        """The members of ``group`` the selector picks from, in ascending handle order."""
        off = self.inactive.get(group)
        members = self.groups[group]
        return [m for m in members if m not in off] if off else members

    def _notify(self, kind: str, handle: int) -> None:
        if self.observer is not None:
            self.observer(self, kind, handle)

    def _check_member(self, handle: int) -> None:
        if handle not in self.members:
            raise EntryNotFoundError(f"action profile {self.name!r}: no member {handle}")

    def _check_group(self, handle: int) -> None:
        if handle not in self.groups:
            raise EntryNotFoundError(f"action profile {self.name!r}: no group {handle}")

    # -- table references ---------------------------------------------------------------

    def check_index(self, index: IndirectIndex) -> None:
        """Raise unless ``index`` names an existing member (or group)."""
        if index.is_group:
            self._check_group(index.handle)
        else:
            self._check_member(index.handle)

    def ref(self, index: IndirectIndex, delta: int) -> None:
        """Count a table entry's reference to a member or group (``delta`` is +1 or -1)."""
        refs = self._group_refs if index.is_group else self._member_refs
        refs[index.handle] += delta

    def reset(self) -> None:
        self.members.clear()
        self.groups.clear()
        self.inactive.clear()
        self._member_refs.clear()
        self._group_refs.clear()

    # -- packet time --------------------------------------------------------------------

    def resolve(self, s: PacketState, index: IndirectIndex) -> ActionCall | None:
        """The member action this packet uses; None for an empty group (no action)."""
        if not index.is_group:
            return self.members[index.handle]
        members = self.active_members(index.handle)
        if not members:
            return None
        assert self.selector is not None
        h = self.selector.output(s) & 0xFFFFFFFF
        return self.members[members[h % len(members)]]
