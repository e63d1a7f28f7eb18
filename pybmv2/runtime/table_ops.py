"""TableEntry writes, and DirectCounterEntry writes and reads, against a committed pipeline.

The checks and their order follow PI's ``table_insert`` / ``table_modify`` /
``table_delete`` / ``direct_counter_*`` (``device_mgr.cpp``), plus the spec rules PI leaves
to the target: const tables and const entries are PERMISSION_DENIED, ``is_const`` in a write
and INSERT into a keyless table are INVALID_ARGUMENT, a full table is RESOURCE_EXHAUSTED.
An indirect table's entry may name a member, a group or a one-shot action set
(:mod:`~pybmv2.runtime.profile_ops`). TableEntry reads live in
:mod:`~pybmv2.runtime.table_reads`. Callers hold the switch lock.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc
from p4.v1 import p4runtime_pb2

from pybmv2.errors import TargetError
from pybmv2.externs import MeterRates, meter_cell
from pybmv2.runtime.codec import (
    action_call,
    check_table_action,
    decode_match_key,
    decode_meter_config,
    encode_counter_data,
    invalid,
    key_from_values,
    merge_counter_data,
    merge_counts,
)
from pybmv2.runtime.errors import P4RuntimeError, from_target_error
from pybmv2.runtime.p4info import P4Ids, TableBinding
from pybmv2.runtime.pipeline import Pipeline, invalid_id
from pybmv2.runtime.profile_ops import OneShotPlan
from pybmv2.runtime.table_reads import DirectRead, snapshot_direct
from pybmv2.runtime.values import ActionValue, EntryValue
from pybmv2.tables import NO_ACTION, ActionCall, IndirectIndex, MatchTable, TableEntry

__all__ = ["entry_of", "read_direct_counters", "write_direct_counter", "write_table_entry"]

Update = p4runtime_pb2.Update
#: how many distinct (table, action) pairs a pipeline memoizes
ACTION_MEMO_SIZE = 4096


def _denied(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED, message)


def _find(table: MatchTable, key: tuple, priority: int) -> TableEntry | None:
    return table.get(key, priority)


def _counter_unit(p: Pipeline, tb: TableBinding) -> int:
    return p.index.direct_counters[tb.info.direct_counter_id].unit


def _check_direct_resources(tb: TableBinding, msg: EntryValue) -> MeterRates | None:
    """PI's ``construct_direct_resources`` checks; the rates of ``meter_config`` (None when
    it is unset or the default, always-green one)."""
    rates = None
    if msg.has_meter and not tb.info.direct_meter_id:
        raise invalid("Table has no direct meters")
    if msg.meter_config is not None:
        rates = decode_meter_config(msg.meter_config)
    if msg.counter_data is not None and not tb.info.direct_counter_id:
        raise invalid("Table has no direct counters")
    return rates


def _check_ttl(tb: TableBinding, msg: EntryValue) -> None:
    if msg.idle_timeout_ns < 0:
        raise invalid("idle_timeout_ns must be a positive value")
    if msg.idle_timeout_ns > 0 and not tb.info.supports_idle_timeout:
        raise invalid("idle_timeout_ns must be set to 0 for tables which do not support "
                      "idle timeout")


def _check_default_key(n_matches: int, priority: int) -> None:
    if n_matches:
        raise invalid("Non-empty key for default entry")
    if priority != 0:
        raise invalid("Non-zero priority for default entry")


def _check_action(p: Pipeline, tb: TableBinding, msg: EntryValue) -> None:
    if tb.info.implementation_id:
        _check_indirect_action(tb, msg)
        return
    check_table_action(p.index, tb.info, msg.is_default_action, msg.action_kind,
                       msg.action[0] if msg.action is not None else 0)


def _check_indirect_action(tb: TableBinding, msg: EntryValue) -> None:
    """PI's ``validate_action`` for a table with an action profile implementation."""
    if msg.is_default_action:
        raise invalid(f"Cannot set / reset default action for indirect table {tb.info.id}")
    if msg.action_kind == "action":
        raise invalid(f"Cannot provide direct action for indirect table {tb.info.id}")


def _plan_indirect(p: Pipeline, tb: TableBinding, msg: EntryValue
                   ) -> IndirectIndex | OneShotPlan | None:
    """PI's ``construct_action_entry`` of an indirect table's entry: the member or group it
    names, or the checked plan of its one-shot group (None without an action)."""
    if not tb.info.implementation_id or msg.action_kind is None:
        return None
    mgr = p.profiles[tb.info.implementation_id]
    if msg.action_kind == "action_profile_action_set":
        assert msg.action_set is not None
        return mgr.oneshot_plan(p, msg.action_set)
    if msg.action_kind not in ("action_profile_member_id", "action_profile_group_id"):
        raise invalid("Invalid table action type")
    return mgr.index_of(msg.action_kind, msg.indirect_id)


def _realize(p: Pipeline, tb: TableBinding, plan: IndirectIndex | OneShotPlan | None,
             failure: str) -> IndirectIndex | None:
    """The index of a planned indirect action, creating a one-shot group if it is one."""
    if isinstance(plan, OneShotPlan):
        return p.profiles[tb.info.implementation_id].oneshot_create(plan, failure)
    return plan


def _drop_oneshot(p: Pipeline, tb: TableBinding, index: IndirectIndex | None) -> None:
    """Delete the group of a one-shot entry that left the table (no-op for other entries)."""
    if tb.info.implementation_id and index is not None:
        p.profiles[tb.info.implementation_id].oneshot_delete(index)


def _call(p: Pipeline, tb: TableBinding, msg: EntryValue) -> ActionCall | None:
    """The entry's direct action (None without one); call after :func:`_check_action`.

    Valid actions are memoized in ``p.action_calls`` (up to :data:`ACTION_MEMO_SIZE`):
    batches often repeat a few actions, and their validation is the costliest step.
    """
    if msg.action_kind is None:
        return None
    if tb.info.implementation_id:
        return NO_ACTION
    action = msg.action
    assert action is not None
    return _memoized(p.action_calls, (tb.info.id, action), lambda: action_call(p.index, tb, action))


def _memoized(memo: dict[tuple[int, ActionValue], ActionCall], key: tuple[int, ActionValue],
              make: Callable[[], ActionCall]) -> ActionCall:
    """``memo[key]``, made by ``make()`` the first time (kept while the memo has room)."""
    call = memo.get(key)
    if call is None:
        call = make()
        if len(memo) < ACTION_MEMO_SIZE:
            memo[key] = call
    return call


def write_table_entry(p: Pipeline, update_type: int, msg: EntryValue) -> None:
    """Apply one TableEntry update; raise P4RuntimeError on failure."""
    tb, table = p.table(msg.table_id)
    if msg.has_time_since_last_hit:
        raise invalid("has_time_since_last_hit must not be set in WriteRequest")
    if msg.is_const:
        raise invalid("is_const must be false in a WriteRequest")
    try:
        if update_type == Update.INSERT:
            if (msg.action_kind == "action" and not msg.is_default_action and not msg.idle_timeout_ns
                    and msg.meter_config is None and not msg.has_meter and msg.counter_data is None
                    and tb.info.takes_plain_entries):
                _insert_plain(p, tb, table, msg)
            else:
                _insert(p, tb, table, msg)
        elif update_type == Update.MODIFY:
            _modify(p, tb, table, msg)
        elif update_type == Update.DELETE:
            _delete(p, tb, table, msg)
        elif update_type == Update.UNSPECIFIED:
            raise invalid("Update type is not set")
        else:
            raise invalid("Invalid update type")
    except TargetError as exc:
        raise from_target_error(exc) from exc


def _insert(p: Pipeline, tb: TableBinding, table: MatchTable, msg: EntryValue) -> None:
    if msg.is_default_action:
        raise invalid("Cannot use INSERT for default entry")
    if msg.action_kind is None:
        raise invalid("'action' field must be set")
    if tb.info.is_const_table:
        raise _denied(f"table {tb.info.name!r} is const: its entries cannot be inserted")
    if not tb.info.match_fields:
        raise invalid(f"table {tb.info.name!r} is keyless: only its default entry exists")
    key, priority = key_from_values(tb, msg.matches, msg.priority)
    _check_action(p, tb, msg)
    call = _call(p, tb, msg)
    assert call is not None
    plan = _plan_indirect(p, tb, msg)
    rates = _check_direct_resources(tb, msg)
    _check_ttl(tb, msg)
    if _find(table, key, priority) is not None:
        raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS,
                             "Match entry exists, use MODIFY if you wish to change action")
    translated = tb.info.translated_field
    if translated is not None:
        # PI translates nothing: BMv2 gets the P4Runtime-width key and refuses every entry
        raise P4RuntimeError(grpc.StatusCode.UNKNOWN,
                             f"Error when adding match entry to target: match field {translated.name!r} is of a "
                             f"@p4runtime_translation type ({translated.bitwidth} bits in the P4Info), which PI "
                             "does not translate; simple_switch_grpc refuses every entry of this table")
    index = _realize(p, tb, plan, "Error when adding match entry to target")
    entry = TableEntry(key, call, priority, metadata=msg.controller_metadata, indirect=index,
                       ttl_ns=msg.idle_timeout_ns, hit_us=p.clock_us())  # the timeout starts now
    if msg.metadata:
        entry.extra["metadata"] = msg.metadata
    entry.meter = meter_cell(rates)
    if msg.counter_data is not None:
        entry.packets, entry.bytes = merge_counts(
            _counter_unit(p, tb), msg.counter_data, (0, 0))
    try:
        # key and action validated above (key_from_values, _check_action); from here on the
        # entry only changes by copy (pybmv2.tables)
        table.insert(entry, checked=True)
    except TargetError:
        if plan is not index:  # PI's cleanup of a one-shot group created for nothing
            _drop_oneshot(p, tb, index)
        raise


def _insert_plain(p: Pipeline, tb: TableBinding, table: MatchTable, msg: EntryValue) -> None:
    """:func:`_insert` of the entry most writes are (a direct action, no direct resources, no
    timeout, into a table that :attr:`TableInfo.takes_plain_entries`): the same checks in
    the same order, less the ones such an entry passes, and its action checked once per
    pipeline."""
    key, priority = key_from_values(tb, msg.matches, msg.priority)
    action = msg.action
    assert action is not None

    def checked_call() -> ActionCall:
        check_table_action(p.index, tb.info, False, "action", action[0])
        return action_call(p.index, tb, action)

    call = _memoized(p.entry_calls, (tb.info.id, action), checked_call)
    if table.get(key, priority) is not None:
        raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS,
                             "Match entry exists, use MODIFY if you wish to change action")
    entry = TableEntry(key, call, priority, metadata=msg.controller_metadata, hit_us=p.clock_us())
    if msg.metadata:
        entry.extra["metadata"] = msg.metadata
    table.insert(entry, checked=True)


def _modify(p: Pipeline, tb: TableBinding, table: MatchTable, msg: EntryValue) -> None:
    if msg.is_default_action:
        _modify_default(p, tb, table, msg)
        return
    key, priority = key_from_values(tb, msg.matches, msg.priority)
    _check_action(p, tb, msg)
    call = _call(p, tb, msg)
    plan = _plan_indirect(p, tb, msg)
    rates = _check_direct_resources(tb, msg)
    _check_ttl(tb, msg)
    entry = _find(table, key, priority)
    if call is None and not (entry is not None and entry.is_const):
        raise invalid("'action' field must be set for non-default entries")
    if entry is None:
        raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, "Cannot find match entry")
    # entries are copy-on-write (pybmv2.tables): every change below swaps in a new entry
    if entry.is_const:
        if call is not None:
            raise _denied("const entries cannot be modified, except their direct resources")
    elif call is not None:
        old = entry.indirect
        index = _realize(p, tb, plan, "Error when modifying match entry in target")
        if index is not None:
            entry = table.modify_indirect(key, priority, index)
            _drop_oneshot(p, tb, old)  # PI: the new group in, then the old one out
        else:
            entry = table.modify(key, priority, call)
        entry = table.replace(entry, metadata=msg.controller_metadata,
                              extra={**entry.extra, "metadata": msg.metadata})
    if msg.meter_config is not None:
        entry = table.replace(entry, meter=meter_cell(rates))
    if tb.info.supports_idle_timeout:
        # PI (f96af95) sets the timeout on every MODIFY, even an unchanged one, and BMv2's
        # set_entry_ttl restarts the entry's clock
        entry = table.replace(entry, ttl_ns=msg.idle_timeout_ns, hit_us=p.clock_us())
    if msg.counter_data is not None:
        packets, nbytes = merge_counts(_counter_unit(p, tb), msg.counter_data,
                                       (entry.packets, entry.bytes))
        table.set_counters(entry, packets, nbytes)


def _modify_default(p: Pipeline, tb: TableBinding, table: MatchTable, msg: EntryValue) -> None:
    _check_default_key(len(msg.matches), msg.priority)
    _check_action(p, tb, msg)
    if table.default_entry_is_const:
        raise _denied(f"Cannot set / reset default action for table {tb.info.id} which has "
                      "a const default action")
    call = _call(p, tb, msg)
    _check_direct_resources(tb, msg)  # bmv2 drops a default entry's meter_config
    _check_ttl(tb, msg)
    if msg.counter_data is not None:
        raise P4RuntimeError(grpc.StatusCode.UNKNOWN,
                             "Error when modifying match entry in target: bmv2 does not "
                             "support direct counters for default entries")
    if call is None:
        table.set_default(table.initial_default)
        p.default_metadata.pop(tb.info.id, None)
    else:
        table.set_default(call)
        p.default_metadata[tb.info.id] = (msg.controller_metadata, msg.metadata)


def _delete(p: Pipeline, tb: TableBinding, table: MatchTable, msg: EntryValue) -> None:
    if msg.is_default_action:
        raise invalid("Cannot use DELETE for default entry")
    if tb.info.is_const_table:
        raise _denied(f"table {tb.info.name!r} is const: its entries cannot be deleted")
    key, priority = key_from_values(tb, msg.matches, msg.priority)
    entry = _find(table, key, priority)
    if entry is None:
        raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, "Cannot find match entry")
    if entry.is_const:
        raise _denied("const entries cannot be deleted")
    table.delete(key, priority)
    _drop_oneshot(p, tb, entry.indirect)


# -- direct counters ------------------------------------------------------------------------


def _direct_counter_table(p: Pipeline, msg: p4runtime_pb2.DirectCounterEntry,
                          reading: bool) -> tuple[TableBinding, MatchTable]:
    if not msg.HasField("table_entry"):
        raise invalid("Missing table_entry field in DirectCounterEntry")
    if reading and msg.table_entry.table_id == 0:
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                             "Reading all direct counters for ALL tables is not supported yet")
    if not p.index.is_valid_id(msg.table_entry.table_id, P4Ids.TABLE):
        raise invalid_id()
    tb, table = p.table(msg.table_entry.table_id)
    if not tb.info.direct_counter_id:
        raise invalid("Table has no direct counters")
    return tb, table


def entry_of(tb: TableBinding, table: MatchTable,
             requested: p4runtime_pb2.TableEntry) -> TableEntry | None:
    """PI's ``entry_handle_from_table_entry``: the entry a TableEntry names, None for the
    default entry; INVALID_ARGUMENT if there is no such entry."""
    if requested.is_default_action:
        _check_default_key(len(requested.match), requested.priority)
        return None
    key, priority = decode_match_key(tb, requested)
    entry = _find(table, key, priority)
    if entry is None:
        raise invalid("Cannot map table entry to handle")
    return entry


def _entry_for_counter(tb: TableBinding, table: MatchTable,
                       requested: p4runtime_pb2.TableEntry, what: str) -> TableEntry:
    entry = entry_of(tb, table, requested)
    if entry is None:
        raise P4RuntimeError(grpc.StatusCode.UNKNOWN,
                             f"Error when {what} counter from target: bmv2 does not support "
                             "direct counters for default entries")
    return entry


def write_direct_counter(p: Pipeline, update_type: int,
                         msg: p4runtime_pb2.DirectCounterEntry) -> None:
    """PI's ``direct_counter_write``: MODIFY sets, DELETE zeroes, INSERT is invalid."""
    tb, table = _direct_counter_table(p, msg, reading=False)
    entry = _entry_for_counter(tb, table, msg.table_entry, "writing to")
    if update_type == Update.MODIFY:
        packets, nbytes = merge_counter_data(_counter_unit(p, tb), msg.data,
                                             (entry.packets, entry.bytes))
        table.set_counters(entry, packets, nbytes)
    elif update_type == Update.DELETE:
        table.set_counters(entry, 0, 0)
    elif update_type == Update.INSERT:
        raise invalid("INSERT update type not supported for counters")
    elif update_type == Update.UNSPECIFIED:
        raise invalid("Update type is not set")
    else:
        raise invalid("Invalid update type")


def read_direct_counters(p: Pipeline, msg: p4runtime_pb2.DirectCounterEntry,
                         response: p4runtime_pb2.ReadResponse) -> DirectRead | None:
    """PI's ``direct_counter_read``: one entry's counter (added to ``response``), or those
    of the whole table, returned as a snapshot to encode without the lock."""
    tb, table = _direct_counter_table(p, msg, reading=True)
    requested = msg.table_entry
    if len(requested.match) or requested.is_default_action:
        entry = _entry_for_counter(tb, table, requested, "reading")
        out = response.entities.add().direct_counter_entry
        out.table_entry.CopyFrom(requested)
        encode_counter_data(entry.packets, entry.bytes, out.data)
        return None
    return snapshot_direct(p, tb, table, "counter")
