"""Watch ports, the target's side: deactivated group members in an action profile, and the
switch process's port monitor (pure: no interfaces, a probe stands in for sysfs)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pybmv2.action_profiles import ActionProfile
from pybmv2.errors import InvalidEntryError
from pybmv2.port_monitor import PortMonitor
from pybmv2.tables import IndirectIndex


class _Hash:
    def __init__(self) -> None:
        self.value = 0

    def output(self, _s: Any) -> int:
        return self.value


def _profile() -> tuple[ActionProfile, _Hash, list[tuple[str, int]]]:
    prof = ActionProfile(SimpleNamespace(), {"name": "sel"})  # type: ignore[arg-type]
    h = _Hash()
    prof.selector = h  # type: ignore[assignment]
    seen: list[tuple[str, int]] = []
    prof.observer = lambda _p, kind, handle: seen.append((kind, handle))
    return prof, h, seen


def test_the_selector_picks_among_the_active_members_only() -> None:
    prof, h, seen = _profile()
    calls = [prof.add_member(f"a{i}") for i in range(3)]  # type: ignore[arg-type]
    g = prof.create_group()
    for m in calls:
        prof.group_add_member(g, m)
    seen.clear()
    prof.set_active(g, calls[1], False)
    assert prof.active_members(g) == [calls[0], calls[2]] and seen == [("group", g)]
    prof.set_active(g, calls[1], False)  # no change, no notice
    assert seen == [("group", g)]
    h.value = 3  # 3 % 2 = 1: the second active member
    assert prof.resolve(None, IndirectIndex(g, is_group=True)) == "a2"  # type: ignore[arg-type]
    prof.set_active(g, calls[0], False)
    prof.set_active(g, calls[2], False)
    assert prof.resolve(None, IndirectIndex(g, is_group=True)) is None  # type: ignore[arg-type]  # BMv2: h % 0
    prof.set_active(g, calls[1], True)
    assert prof.active_members(g) == [calls[1]]
    prof.group_remove_member(g, calls[0])  # a removed member leaves its state behind
    prof.group_add_member(g, calls[0])
    assert prof.active_members(g) == [calls[0], calls[1]]
    with pytest.raises(InvalidEntryError, match="not in group"):
        prof.set_active(g, 99, True)


def test_the_port_monitor_reports_each_port_once_and_then_only_changes() -> None:
    state = {"s1-eth1": True, "s1-eth2": False}
    got: list[tuple[int, bool]] = []
    mon = PortMonitor({1: "s1-eth1", 2: "s1-eth2", 3: "gone"}, lambda p, up: got.append((p, up)),
                      probe=lambda iface: state.get(iface, False))
    mon.poll()
    assert got == [(1, True), (2, False), (3, False)]
    mon.poll()
    assert len(got) == 3
    state["s1-eth2"] = True
    state["s1-eth1"] = False
    mon.poll()
    assert got[3:] == [(1, False), (2, True)]
