"""Compile a BMv2 JSON pipeline (tables and conditionals) into a graph of closures."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pybmv2.action_profiles import ActionProfile
from pybmv2.errors import JsonFormatError, UnsupportedJsonError
from pybmv2.expressions import compile_expression, field_writer
from pybmv2.externs import GREEN, MeterArray
from pybmv2.layout import PhvLayout
from pybmv2.primitives import Action
from pybmv2.state import PacketState
from pybmv2.tables import ActionCall, MatchTable, TableEntry

__all__ = ["CompiledPipeline", "parse_action_entry"]

Node = Callable[[PacketState], Any]
#: what a table does with the entry a packet hits before its action runs
HitHook = Callable[[PacketState, TableEntry], None]


def parse_action_entry(spec: dict[str, Any]) -> ActionCall:
    """The ActionCall of a JSON ``default_entry`` or const entry ``action_entry``."""
    args = tuple(int(a, 16) for a in spec.get("action_data", []))
    return ActionCall(int(spec["action_id"]), args)


class CompiledPipeline:
    """One control (``ingress`` or ``egress``): its tables and compiled control flow."""

    def __init__(
        self,
        layout: PhvLayout,
        spec: dict[str, Any],
        actions: dict[int, Action],
        direct_counters: dict[str, Any],
        direct_meters: dict[str, MeterArray] | None = None,
    ) -> None:
        self.name: str = spec["name"]
        #: the control's action profiles and selectors, by name
        self.action_profiles: dict[str, ActionProfile] = {
            p["name"]: ActionProfile(layout, p) for p in spec.get("action_profiles", [])
        }
        action_names = {a.id: a.name for a in actions.values()}
        #: a one-element cell holding the tracer (None when tracing is off), read by every node
        self._trace: list[Callable[[str], None] | None] = [None]
        self.tables: dict[str, MatchTable] = {}
        for t in spec.get("tables", []):
            table = MatchTable(layout, t, action_names)
            if table.action_profile_name is not None:
                profile = self.action_profiles.get(table.action_profile_name)
                if profile is None:
                    raise JsonFormatError(f"table {table.name!r}: unknown action profile "
                                          f"{table.action_profile_name!r}")
                if (t.get("type") == "indirect_ws") != profile.with_selector:
                    raise JsonFormatError(f"table {table.name!r}: table type {t.get('type')!r} "
                                          f"does not suit action profile {profile.name!r}")
                table.profile = profile
            self._load_defaults(table, t)
            self.tables[table.name] = table
        self._nodes: dict[str, list[Node]] = {}
        cells: dict[str, list[Node]] = {}
        for name in list(self.tables) + [c["name"] for c in spec.get("conditionals", [])]:
            cells[name] = []

        def ref(name: str | None) -> list[Node] | None:
            if name is None:
                return None
            if name not in cells:
                raise JsonFormatError(f"pipeline {self.name!r}: unknown node {name!r}")
            return cells[name]

        for t in spec.get("tables", []):
            table = self.tables[t["name"]]
            on_hit = _hit_hook(layout, table, table.name in direct_counters,
                               (direct_meters or {}).get(table.name))
            cells[table.name].append(self._table_node(table, t, actions, ref, on_hit, self._trace))
        for c in spec.get("conditionals", []):
            cells[c["name"]].append(self._conditional_node(layout, c, ref, self._trace))
        init = spec.get("init_table")
        self._first = ref(init)

    @staticmethod
    def _load_defaults(table: MatchTable, t: dict[str, Any]) -> None:
        d = t.get("default_entry")
        if d:
            table.default = parse_action_entry(d)
            table.initial_default = table.default
            table.default_is_const = bool(d.get("action_const", False))
            table.default_entry_is_const = bool(d.get("action_entry_const", False))
        for e in t.get("entries", []):
            key: list[Any] = []
            for m in e["match_key"]:
                mt = m["match_type"]
                if mt in ("exact", "valid"):
                    key.append(int(m["key"], 16))
                elif mt == "lpm":
                    key.append((int(m["key"], 16), int(m["prefix_length"])))
                elif mt in ("ternary", "optional"):
                    key.append((int(m["key"], 16), int(m["mask"], 16)))
                elif mt == "range":
                    key.append((int(m["start"], 16), int(m["end"], 16)))
                else:
                    raise UnsupportedJsonError(f"table {table.name!r}: const entry match {mt!r}")
            # BMv2 const-entry priorities: smaller is stronger. P4Runtime: larger wins.
            prio = 0
            if table.requires_priority:
                prio = (1 << 31) - 1 - int(e.get("priority", 1))  # as PI reads them back
            entry = TableEntry(tuple(key), parse_action_entry(e["action_entry"]), prio, True)
            table.max_size = max(table.max_size, len(table) + 1)
            table.insert(entry, canonical=False)

    @staticmethod
    def _table_node(
        table: MatchTable,
        t: dict[str, Any],
        actions: dict[int, Action],
        ref: Callable[[str | None], list[Node] | None],
        on_hit: HitHook | None,
        trace: list[Callable[[str], None] | None],
    ) -> Node:
        next_tables = t.get("next_tables", {})
        base_default = ref(t.get("base_default_next"))
        hit_miss = "__HIT__" in next_tables or "__MISS__" in next_tables
        hit_cell = ref(next_tables.get("__HIT__")) if hit_miss else None
        miss_cell = ref(next_tables.get("__MISS__")) if hit_miss else None
        by_action: dict[int, list[Node] | None] = {}
        for aid, aname in zip(t.get("action_ids", []), t.get("actions", []), strict=False):
            by_action[int(aid)] = ref(next_tables[aname]) if aname in next_tables else base_default
        runners = {aid: a.run for aid, a in actions.items()}
        names = {aid: a.name for aid, a in actions.items()}

        if not table.keys and not hit_miss:
            # p4c turns statements in apply blocks into keyless tables (tbl_*): they always
            # run their default action, so skip the lookup.
            def apply_keyless(s: PacketState) -> Any:
                call = table.default
                tr = trace[0]
                if tr is not None:
                    tr(f"Applying table '{table.name}': action {names.get(call.action_id, '?')}")
                s.args = call.args  # type: ignore[assignment]
                run = runners.get(call.action_id)
                if run is not None:
                    run(s)
                cell = by_action.get(call.action_id, base_default)
                return cell[0] if cell else None

            return apply_keyless

        profile = table.profile
        if profile is not None:
            return CompiledPipeline._indirect_node(
                table, profile, runners, names, by_action, base_default,
                (hit_cell, miss_cell) if hit_miss else None, on_hit, trace)

        def apply(s: PacketState) -> Any:
            entry = table.lookup(s)
            if entry is None:
                call = table.default
            else:
                call = entry.action
                if on_hit is not None:
                    on_hit(s, entry)
            tr = trace[0]
            if tr is not None:
                tr(f"Applying table '{table.name}': key {table.read_key(s)} "
                   f"{'hit, handle ' + str(entry.handle) if entry is not None else 'miss (default)'}; "
                   f"action {names.get(call.action_id, '?')}{list(call.args)}")
            s.args = call.args  # type: ignore[assignment]
            run = runners.get(call.action_id)
            if run is not None:
                run(s)
            if hit_miss:
                cell = hit_cell if entry is not None else miss_cell
            else:
                cell = by_action.get(call.action_id, base_default)
            return cell[0] if cell else None

        return apply

    @staticmethod
    def _indirect_node(
        table: MatchTable,
        profile: ActionProfile,
        runners: dict[int, Callable[[PacketState], None]],
        names: dict[int, str],
        by_action: dict[int, list[Node] | None],
        base_default: list[Node] | None,
        hit_miss: tuple[list[Node] | None, list[Node] | None] | None,
        on_hit: HitHook | None,
        trace: list[Callable[[str], None] | None],
    ) -> Node:
        """BMv2's ``MatchTableIndirect::lookup``: a miss runs no action (no default member
        can be set) and goes to the miss node; a hit runs the member's action, chosen by
        the selector's hash for a group; an empty group runs nothing and ends the control."""

        def apply_indirect(s: PacketState) -> Any:
            entry = table.lookup(s)
            call = None
            if entry is not None:
                if on_hit is not None:
                    on_hit(s, entry)
                assert entry.indirect is not None
                call = profile.resolve(s, entry.indirect)
            tr = trace[0]
            if tr is not None:
                what = "miss" if entry is None else f"hit, handle {entry.handle}"
                action = "none" if call is None else \
                    f"{names.get(call.action_id, '?')}{list(call.args)}"
                tr(f"Applying table '{table.name}': key {table.read_key(s)} {what}; "
                   f"action {action}")
            if call is not None:
                s.args = call.args  # type: ignore[assignment]
                run = runners.get(call.action_id)
                if run is not None:
                    run(s)
            elif entry is not None:
                return None  # empty group
            if hit_miss is not None:
                cell = hit_miss[0] if entry is not None else hit_miss[1]
            elif call is None:
                cell = base_default
            else:
                cell = by_action.get(call.action_id, base_default)
            return cell[0] if cell else None

        return apply_indirect

    @staticmethod
    def _conditional_node(
        layout: PhvLayout, c: dict[str, Any], ref: Callable[[str | None], list[Node] | None],
        trace: list[Callable[[str], None] | None],
    ) -> Node:
        cond = compile_expression(layout, c["expression"])
        true_cell, false_cell = ref(c.get("true_next")), ref(c.get("false_next"))
        name = c["name"]

        def branch(s: PacketState) -> Any:
            value = bool(cond(s))
            tr = trace[0]
            if tr is not None:
                tr(f"Condition '{name}' is {str(value).lower()}")
            cell = true_cell if value else false_cell
            return cell[0] if cell else None

        return branch

    def set_trace(self, trace: Callable[[str], None] | None) -> None:
        """Report every table applied (key, hit or miss, action) and condition taken."""
        self._trace[0] = trace

    def apply(self, s: PacketState) -> None:
        node = self._first[0] if self._first else None
        while node is not None:
            if s.exit:
                break
            node = node(s)


def _hit_hook(layout: PhvLayout, table: MatchTable, count: bool,
              meter: MeterArray | None) -> HitHook | None:
    """BMv2's work on a hit before the action: time-stamp the entry with the packet's
    ingress timestamp (tables with support_timeout, as BMv2's ``update_ts``), count it
    (direct counter) and write the entry's meter colour to the meter's ``result_target``
    (direct meter; unconfigured is green). None when the table does none of these."""
    inner = _resource_hook(layout, table, count, meter)
    if not table.support_timeout or not layout.has_field("standard_metadata", "ingress_global_timestamp"):
        return inner
    ts = layout.field("standard_metadata", "ingress_global_timestamp").index

    if inner is None:
        def stamp(s: PacketState, entry: TableEntry) -> None:
            entry.hit_us = s.values[ts]
        return stamp

    def stamp_then(s: PacketState, entry: TableEntry) -> None:
        entry.hit_us = s.values[ts]
        inner(s, entry)
    return stamp_then


def _resource_hook(layout: PhvLayout, table: MatchTable, count: bool,
                   meter: MeterArray | None) -> HitHook | None:
    """The direct counter's and direct meter's work on a hit (None: neither)."""
    if table.direct_meter_name is not None and (
            meter is None or meter.name != table.direct_meter_name):
        raise JsonFormatError(f"table {table.name!r}: direct meter "
                              f"{table.direct_meter_name!r} is not bound to it")
    if meter is not None and table.direct_meter_name is None:
        raise JsonFormatError(f"direct meter {meter.name!r} is bound to table "
                              f"{table.name!r}, which does not list it")
    if meter is None:
        return _count_hit if count else None
    if meter.result_target is None:
        raise JsonFormatError(f"direct meter {meter.name!r} has no result_target")
    write = field_writer(layout.field(*meter.result_target))
    units = meter.units

    def meter_hit(s: PacketState, entry: TableEntry) -> None:
        if count:
            _count_hit(s, entry)
        cell = entry.meter
        write(s, GREEN if cell is None else cell.execute(units(len(s.data))))

    return meter_hit


def _count_hit(s: PacketState, entry: TableEntry) -> None:
    entry.packets += 1
    entry.bytes += len(s.data)
