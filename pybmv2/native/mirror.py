"""Keep a native engine's state equal to the Python engine's objects, both ways.

The P4Runtime layer writes the Python objects of the loaded
:class:`~pybmv2.program.Program` (tables, profiles, externs) and the switch's PRE; those stay
the state P4Runtime reads. :class:`EngineMirror` observes them (:meth:`EngineMirror.attach`)
and applies every change to the engine as it is made: an entry by its handle, a default,
a member or group, a multicast group or clone session, a counter or meter cell.
:meth:`EngineMirror.pull` adds the counts the engine made since the last pull to the
Python counters and copies back register cells and meter buckets; it costs what the data
plane touched, not what the tables hold.

:meth:`EngineMirror.push` compares everything and applies the differences. It is the
initial load, the resynchronisation after the Python engine ran packets (tracing), and the
tests' oracle: with the observers attached it finds nothing to do.

Inside a Write (:meth:`EngineMirror.deferring_adds`), new entries are added to the engine
together, with one call, when the Write's updates are done or as soon as any other change
comes (so the engine sees every change in the order Python made it): one call per entry
cost more than the rest of a Write's work on the entry. Packets meet the new entries when
that call returns, before the Write is answered.

Every engine call that changes state takes the engine's lock in C, for that call only: the
I/O thread of process mode never runs a packet against a half-made change, and never waits
for the Python work of a Write (nor for the GIL it may wait for). One change may take a few
calls (an entry, then its meter), as PI applies them on BMv2. :meth:`EngineMirror.push`
holds the lock across all of its calls. :meth:`EngineMirror.pull` takes no engine lock at
all (:meth:`NativeEngine.pull_begin`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pybmv2.action_profiles import ActionProfile
from pybmv2.externs import CounterArray, MeterArray, MeterCell
from pybmv2.native.engine import NativeEngine
from pybmv2.pre import ReplicationEngine
from pybmv2.program import Program
from pybmv2.tables import ActionCall, IndirectIndex, MatchTable, TableEntry

__all__ = ["EngineMirror"]

log = logging.getLogger(__name__)


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
    """The Python state of a Program and a PRE, mirrored into a NativeEngine."""

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
        self._profiles: dict[int, tuple[int, ActionProfile]] = {}
        for pipe in (program.ingress, program.egress):
            for pname, profile in pipe.action_profiles.items():
                self._profiles[id(profile)] = (engine.profile(pipe.name, pname), profile)
        ext = program.externs
        self._registers = {n: [0] * r.size for n, r in ext.registers.items()}
        self._meters: dict[str, list[tuple[MeterCell | None, tuple[float, ...] | None]]] = {
            n: [(None, None)] * m.size for n, m in ext.meters.items()}
        #: value sets as the engine holds them (it starts with them empty, as they load)
        self._value_sets = {n: frozenset[int]() for n in program.parser.value_sets}
        self.ops = 0  # engine calls made by push(), for the tests' oracle
        #: called by :meth:`pull` with each table's name once it is taken (tests pause a
        #: pull there)
        self.pull_hook: Callable[[str], None] | None = None
        #: called with a table's name once an entry added to it reached the engine (tests
        #: pause a Write there)
        self.change_hook: Callable[[str], None] | None = None
        #: entries inserted and not yet added to the engine (:meth:`deferring_adds`)
        self._pending: list[tuple[MatchTable, TableEntry]] = []
        self._deferring = False

    # -- observers: every control-plane change, as it is made ------------------------------

    def attach(self) -> None:
        """Apply the current state, then follow every change."""
        self.push()
        for table in self.program.tables.values():
            table.observer = self
        for _, profile in self._profiles.values():
            profile.observer = self._profile_changed
        for counter in self.program.externs.counters.values():
            counter.observer = self._counter_written
        for meter in self.program.externs.meters.values():
            meter.observer = self._meter_configured
        self.pre.observer = self._pre_changed

    def detach(self) -> None:
        self.flush()
        for table in self.program.tables.values():
            if table.observer is self:
                table.observer = None
        for _, profile in self._profiles.values():
            profile.observer = None
        for counter in self.program.externs.counters.values():
            counter.observer = None
        for meter in self.program.externs.meters.values():
            meter.observer = None
        self.pre.observer = None

    def entry_changed(self, table: MatchTable, old: TableEntry | None, new: TableEntry | None,
                      *, counters: bool = False) -> None:
        name = table.name
        if old is None and new is not None and self._deferring:
            self._pending.append((table, new))
            return
        if self._pending:
            self.flush()
        if new is None:
            assert old is not None
            gone = self._entries[name].pop(old.handle, None)
            if gone is not None:
                self.engine.table_delete(name, gone.eid)
                del self._by_eid[name][gone.eid]
            return
        k = self._entries[name].get(new.handle)
        if k is None:
            self._add(name, new)
            if self.change_hook is not None:
                self.change_hook(name)
            return
        self._update(name, k, new)
        if counters:  # the engine's counts not pulled yet are overwritten too
            self.engine.entry_set_counters(name, k.eid, 0, 0)

    def default_changed(self, table: MatchTable) -> None:
        self.flush()
        self._push_default(table.name, table)

    @contextlib.contextmanager
    def deferring_adds(self, lock: contextlib.AbstractContextManager[Any]) -> Iterator[None]:
        """Entries inserted meanwhile reach the engine together (:meth:`flush`), at the end
        or before any other change. ``lock`` is the switch's, which the caller holds around
        each change: it is taken here to start and to end."""
        with lock:
            self._deferring = True
        try:
            yield
        finally:
            with lock:
                self._deferring = False
                self.flush()

    def flush(self) -> None:
        """Add the entries inserted since the last flush to the engine, with one call.

        An entry the engine refuses (it has no room left in memory) is taken out of its
        Python table too, so that the two keep holding the same entries; that is logged,
        since its Write was answered already."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        eids, error = self.engine.table_add_many(
            [(t.name, e.key, e.priority, e.action, e.handle, e.indirect) for t, e in pending])
        self.ops += 1
        hook = self.change_hook
        for (table, e), eid in zip(pending, eids, strict=False):
            name = table.name
            k = self._entries[name][e.handle] = self._by_eid[name][eid] = _Pushed(
                e, eid, e.action, e.indirect, None, None)
            if e.meter is not None:
                self._update(name, k, e)
            if hook is not None:
                hook(name)
        if error is not None:
            refused = pending[len(eids):]
            log.error("the native engine refused %d entries written (%s): they are taken out "
                      "of their tables again", len(refused), error)
            for table, e in refused:
                if table.get(e.key, e.priority) is e:
                    table.delete(e.key, e.priority)

    def _profile_changed(self, profile: ActionProfile, kind: str, handle: int) -> None:
        self.flush()
        pid, _ = self._profiles[id(profile)]
        if kind == "member":
            self._push_member(pid, profile, handle)
        else:
            self._push_group(pid, profile, handle)

    def _pre_changed(self, kind: str, ident: int) -> None:
        self.flush()
        if kind == "group":
            self._push_mgrp(ident)
        elif kind == "session":
            self._push_session(ident)
        else:
            self._push_pre()

    def _counter_written(self, array: CounterArray, index: int) -> None:
        # Python holds the value: the engine's counts not pulled yet are dropped
        self.flush()
        self.engine.counter_write(array.name, index, 0, 0)

    def _meter_configured(self, array: MeterArray, index: int) -> None:
        self.flush()
        self._push_meter(array.name, array, index)

    # -- Python -> engine, one object ---------------------------------------------------------

    def _add(self, name: str, e: TableEntry) -> None:
        eid = self.engine.table_add(name, e.key, e.priority, e.action, seq=e.handle,
                                    indirect=e.indirect)
        self.ops += 1
        k = self._entries[name][e.handle] = self._by_eid[name][eid] = _Pushed(
            e, eid, e.action, e.indirect, None, None)
        if e.meter is not None:  # the rest of the entry went in with it
            self._update(name, k, e)

    def _update(self, name: str, k: _Pushed, e: TableEntry) -> None:
        k.entry = e
        if e.action != k.action or e.indirect != k.indirect:
            self.engine.table_modify(name, k.eid, e.action, e.indirect)
            self.ops += 1
            k.action, k.indirect = e.action, e.indirect
        if e.meter is not k.meter or (e.meter is not None and _tokens(e.meter) != k.tokens):
            rates = e.meter.rates if e.meter is not None else None
            self.engine.entry_meter(name, k.eid, rates, _tokens(e.meter))
            self.ops += 1
            k.meter, k.tokens = e.meter, _tokens(e.meter)

    def _push_default(self, name: str, table: MatchTable) -> None:
        if self._defaults.get(name) != table.default:
            self.engine.table_set_default(name, table.default)
            self.ops += 1
            self._defaults[name] = table.default

    def _push_member(self, pid: int, profile: ActionProfile, h: int) -> None:
        members = self._members.setdefault(pid, {})
        call = profile.members.get(h)
        if call is None:
            if h in members:
                self.engine.member_delete(pid, h)
                self.ops += 1
                del members[h]
        elif members.get(h) != call:
            self.engine.member_set(pid, h, call)
            self.ops += 1
            members[h] = call

    def _push_group(self, pid: int, profile: ActionProfile, h: int) -> None:
        groups = self._groups.setdefault(pid, {})
        mbrs = profile.active_members(h) if h in profile.groups else None
        if mbrs is None:
            if h in groups:
                self.engine.group_delete(pid, h)
                self.ops += 1
                del groups[h]
        elif groups.get(h) != tuple(mbrs):
            self.engine.group_set(pid, h, mbrs)
            self.ops += 1
            groups[h] = tuple(mbrs)

    def _push_mgrp(self, mgid: int) -> None:
        replicas = self.pre.groups.get(mgid)
        if replicas is None:
            if mgid in self._mgrps:
                self.engine.mgrp_delete(mgid)
                self.ops += 1
                del self._mgrps[mgid]
        elif self._mgrps.get(mgid) != replicas:
            self.engine.mgrp_set(mgid, replicas)
            self.ops += 1
            self._mgrps[mgid] = replicas

    def _push_session(self, sid: int) -> None:
        session = self.pre.sessions.get(sid)
        if session is None:
            if sid in self._sessions:
                self.engine.session_delete(sid)
                self.ops += 1
                del self._sessions[sid]
        elif self._sessions.get(sid) != session:
            self.engine.session_set(sid, session.replicas, session.packet_length_bytes)
            self.ops += 1
            self._sessions[sid] = session

    def _push_meter(self, name: str, meter: MeterArray, i: int) -> None:
        obj, tokens = self._meters[name][i]
        cell = meter.cells[i]
        if cell is not obj or (cell is not None and _tokens(cell) != tokens):
            self.engine.meter_set(name, i, cell.rates if cell else None, _tokens(cell))
            self.ops += 1
            self._meters[name][i] = (cell, _tokens(cell))

    # -- Python -> engine, everything compared ------------------------------------------------

    def push(self) -> int:
        """Apply every difference between the Python state and the engine; how many engine
        calls that took (0 when the observers kept it in step)."""
        self.flush()
        before = self.ops
        with self.engine.locked():
            for name, table in self.program.tables.items():
                self._push_table(name, table)
            for pid, profile in self._profiles.values():
                for h in set(profile.members) | set(self._members.get(pid, {})):
                    self._push_member(pid, profile, h)
                for h in set(profile.groups) | set(self._groups.get(pid, {})):
                    self._push_group(pid, profile, h)
            self._push_pre()
            self._push_registers()
            for name, meter in self.program.externs.meters.items():
                for i in range(meter.size):
                    self._push_meter(name, meter, i)
            self.push_value_sets()
        return self.ops - before

    def push_value_sets(self) -> None:
        """Parser value sets have no observers: P4Runtime cannot write them (as on BMv2),
        only code holding the Program can; the switch compares them before every batch."""
        self.flush()
        for name, members in self.program.parser.value_sets.items():
            if members != self._value_sets.get(name):
                self.engine.value_set_set(name, members)  # the call takes the engine's lock
                self._value_sets[name] = frozenset(members)
                self.ops += 1

    def _push_table(self, name: str, table: MatchTable) -> None:
        engine = self.engine
        pushed, by_eid = self._entries[name], self._by_eid[name]
        entries = list(table.entries())
        live = {e.handle: e for e in entries}
        # deletions first: a key deleted and inserted again has a new handle
        for handle in [h for h in pushed if h not in live]:
            gone = pushed.pop(handle)
            engine.table_delete(name, gone.eid)
            self.ops += 1
            del by_eid[gone.eid]
        for e in entries:
            known = pushed.get(e.handle)
            if known is None:
                self._add(name, e)
            else:
                self._update(name, known, e)
        self._push_default(name, table)

    def _push_pre(self) -> None:
        for mgid in set(self.pre.groups) | set(self._mgrps):
            self._push_mgrp(mgid)
        for sid in set(self.pre.sessions) | set(self._sessions):
            self._push_session(sid)

    def _push_registers(self) -> None:
        for name, reg in self.program.externs.registers.items():
            mine = self._registers[name]
            if reg.values != mine:
                for i, (new, old) in enumerate(zip(reg.values, mine, strict=True)):
                    if new != old:
                        self.engine.register_write(name, i, new)
                        self.ops += 1
                        mine[i] = new

    # -- engine -> Python -------------------------------------------------------------------

    def pull(self) -> None:
        """Bring what the data plane changed since the last pull into the Python objects.

        It takes no engine lock (:meth:`NativeEngine.pull_begin`): the I/O thread forwards
        meanwhile, and what it counts during the pull is taken by the next one. The caller
        keeps pulls apart from each other and from control-plane changes (the switch's
        lock)."""
        self.flush()
        engine = self.engine
        ext = self.program.externs
        engine.pull_begin()
        for name in self.program.tables:
            by_eid = self._by_eid[name]
            for eid, packets, nbytes, state, hit_us in engine.table_take(name):
                k = by_eid[eid]
                k.entry.packets += packets
                k.entry.bytes += nbytes
                if hit_us > k.entry.hit_us:  # a timeout set later (a MODIFY) restarts the clock
                    k.entry.hit_us = hit_us
                if k.entry.meter is not None:
                    k.entry.meter._tokens[:] = state
                    k.tokens = tuple(state)
            if self.pull_hook is not None:
                self.pull_hook(name)
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
