"""Keep a native engine's state equal to the Python engine's objects, both ways.

In phase 1 the P4Runtime layer still writes the Python objects of the loaded
:class:`~pybmv2.program.Program` (tables, profiles, externs) and the switch's PRE. Before a
batch, :meth:`EngineMirror.push` applies what changed there to the engine (entries by
handle, defaults, members, groups, multicast groups, clone sessions, meter configurations,
register cells); after it, :meth:`EngineMirror.pull` adds the counts the engine made to the
Python counters and copies back register cells and meter buckets. The Python objects stay
the state that P4Runtime reads and writes, so both engines can serve one switch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pybmv2.externs import MeterCell
from pybmv2.native.engine import NativeEngine
from pybmv2.pre import ReplicationEngine
from pybmv2.program import Program
from pybmv2.tables import ActionCall, IndirectIndex, MatchTable, TableEntry

__all__ = ["EngineMirror"]


@dataclass(slots=True)
class _Pushed:
    """What the engine holds for one Python table entry."""

    entry: TableEntry
    eid: int
    action: ActionCall
    indirect: IndirectIndex | None
    meter: MeterCell | None
    tokens: tuple[float, ...] | None


def _tokens(cell: MeterCell | None) -> tuple[float, ...] | None:
    return None if cell is None else tuple(cell._tokens)


class EngineMirror:
    """The diff between a Program's Python state and a NativeEngine, applied on demand."""

    def __init__(self, engine: NativeEngine, program: Program, pre: ReplicationEngine) -> None:
        self.engine = engine
        self.program = program
        self.pre = pre
        self._entries: dict[str, dict[int, _Pushed]] = {n: {} for n in program.tables}
        self._by_eid: dict[str, dict[int, _Pushed]] = {n: {} for n in program.tables}
        self._defaults: dict[str, ActionCall] = {}
        self._members: dict[int, dict[int, ActionCall]] = {}
        self._groups: dict[int, dict[int, tuple[int, ...]]] = {}
        self._mgrps: dict[int, tuple[Any, ...]] = {}
        self._sessions: dict[int, Any] = {}
        ext = program.externs
        self._registers = {n: [0] * r.size for n, r in ext.registers.items()}
        self._meters: dict[str, list[tuple[MeterCell | None, tuple[float, ...] | None]]] = {
            n: [(None, None)] * m.size for n, m in ext.meters.items()}

    # -- Python -> engine -------------------------------------------------------------------

    def push(self) -> None:
        for name, table in self.program.tables.items():
            self._push_table(name, table)
        self._push_profiles()
        self._push_pre()
        self._push_registers()
        self._push_meters()

    def _push_table(self, name: str, table: MatchTable) -> None:
        engine = self.engine
        pushed, by_eid = self._entries[name], self._by_eid[name]
        entries = list(table.entries())
        live = {e.handle: e for e in entries}
        # deletions first: a key deleted and inserted again has a new handle
        for handle in [h for h, k in pushed.items() if live.get(h) is not k.entry]:
            gone = pushed.pop(handle)
            engine.table_delete(name, gone.eid)
            del by_eid[gone.eid]
        for e in entries:
            known = pushed.get(e.handle)
            if known is None:
                eid = engine.table_add(name, e.key, e.priority, e.action, seq=e.handle,
                                       indirect=e.indirect)
                k = pushed[e.handle] = by_eid[eid] = _Pushed(e, eid, e.action, e.indirect,
                                                             None, None)
            else:
                k = known
            if e.action != k.action or e.indirect != k.indirect:
                engine.table_modify(name, k.eid, e.action, e.indirect)
                k.action, k.indirect = e.action, e.indirect
            if e.meter is not k.meter or (e.meter is not None and _tokens(e.meter) != k.tokens):
                rates = e.meter.rates if e.meter is not None else None
                engine.entry_meter(name, k.eid, rates, _tokens(e.meter))
                k.meter, k.tokens = e.meter, _tokens(e.meter)
        if self._defaults.get(name) != table.default:
            engine.table_set_default(name, table.default)
            self._defaults[name] = table.default

    def _push_profiles(self) -> None:
        engine = self.engine
        for pipe in (self.program.ingress, self.program.egress):
            for pname, profile in pipe.action_profiles.items():
                pid = engine.profile(pipe.name, pname)
                members = self._members.setdefault(pid, {})
                for h, call in profile.members.items():
                    if members.get(h) != call:
                        engine.member_set(pid, h, call)
                        members[h] = call
                for h in [h for h in members if h not in profile.members]:
                    engine.member_delete(pid, h)
                    del members[h]
                groups = self._groups.setdefault(pid, {})
                for h, mbrs in profile.groups.items():
                    if groups.get(h) != tuple(mbrs):
                        engine.group_set(pid, h, mbrs)
                        groups[h] = tuple(mbrs)
                for h in [h for h in groups if h not in profile.groups]:
                    engine.group_delete(pid, h)
                    del groups[h]

    def _push_pre(self) -> None:
        engine = self.engine
        for mgid, replicas in self.pre.groups.items():
            if self._mgrps.get(mgid) != replicas:
                engine.mgrp_set(mgid, replicas)
                self._mgrps[mgid] = replicas
        for mgid in [m for m in self._mgrps if m not in self.pre.groups]:
            engine.mgrp_delete(mgid)
            del self._mgrps[mgid]
        for sid, session in self.pre.sessions.items():
            if self._sessions.get(sid) != session:
                engine.session_set(sid, session.replicas, session.packet_length_bytes)
                self._sessions[sid] = session
        for sid in [s for s in self._sessions if s not in self.pre.sessions]:
            engine.session_delete(sid)
            del self._sessions[sid]

    def _push_registers(self) -> None:
        for name, reg in self.program.externs.registers.items():
            mine = self._registers[name]
            if reg.values != mine:
                for i, (new, old) in enumerate(zip(reg.values, mine, strict=True)):
                    if new != old:
                        self.engine.register_write(name, i, new)
                        mine[i] = new

    def _push_meters(self) -> None:
        for name, meter in self.program.externs.meters.items():
            mine = self._meters[name]
            for i, cell in enumerate(meter.cells):
                obj, tokens = mine[i]
                if cell is not obj or (cell is not None and _tokens(cell) != tokens):
                    self.engine.meter_set(name, i, cell.rates if cell else None, _tokens(cell))
                    mine[i] = (cell, _tokens(cell))

    # -- engine -> Python -------------------------------------------------------------------

    def pull(self) -> None:
        engine = self.engine
        for name in self.program.tables:
            by_eid = self._by_eid[name]
            for eid, packets, nbytes, state in engine.table_take(name):
                k = by_eid[eid]
                k.entry.packets += packets
                k.entry.bytes += nbytes
                if k.entry.meter is not None:
                    k.entry.meter._tokens[:] = state
                    k.tokens = tuple(state)
        ext = self.program.externs
        for name, counter in ext.counters.items():
            for i, packets, nbytes in engine.counter_take(name, counter.size):
                counter.packets[i] += packets
                counter.bytes[i] += nbytes
        for name, reg in ext.registers.items():
            for i, value in engine.register_take(name, reg.size):
                reg.values[i] = self._registers[name][i] = value
        for name, meter in ext.meters.items():
            for i, state in engine.meter_take(name, meter.size):
                cell = meter.cells[i]
                if cell is not None:
                    cell._tokens[:] = state
                    self._meters[name][i] = (cell, tuple(state))
