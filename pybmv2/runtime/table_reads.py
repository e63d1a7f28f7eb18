"""TableEntry reads in two steps: a snapshot under the device's lock, the encoding outside it.

PI's ``table_read`` answers a wildcard read with every entry of the table (``table_id`` 0:
of every table, const ones included), filtered here by the spec's action, priority and
metadata filters, and a single entry for a request with a match key. Building those entries
is slow in Python, so a read only *takes* them while holding the lock that Write batches
hold (:func:`snapshot`): a copy of each table's list of entries, which is consistent because
entries are copy-on-write (:mod:`pybmv2.tables`), plus the member and group ids of indirect
tables. It *encodes* them afterwards (:func:`encode`), straight to wire bytes
(:mod:`~pybmv2.runtime.read_wire`), holding no lock: packets and other Writes go on.
:func:`entry_message` is the same encoding as a protobuf message. Wildcard reads of a
table's direct counters and meters work the same way (:func:`snapshot_direct`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from p4.v1 import p4runtime_pb2

from pybmv2.errors import EntryNotFoundError
from pybmv2.runtime.codec import (
    decode_match_key,
    encode_action,
    encode_counter_data,
    encode_match_key,
    encode_meter_config,
    invalid,
)
from pybmv2.runtime.idle_timeouts import elapsed_ns
from pybmv2.runtime.p4info import TableBinding
from pybmv2.runtime.pipeline import Pipeline
from pybmv2.runtime.profile_ops import IndirectView
from pybmv2.runtime.read_wire import TableEncoder
from pybmv2.tables import MatchTable, TableEntry

__all__ = ["READ_CHUNK", "DirectRead", "TableRead", "encode", "encode_direct", "entry_message",
           "snapshot", "snapshot_direct"]

#: entries encoded between two calls of the ``pause`` hook of :func:`encode`
READ_CHUNK = 64


@dataclass(frozen=True)
class TableRead:
    """What a read of one table returns, taken under the lock: encoded by :func:`encode`."""

    tb: TableBinding
    encoder: TableEncoder
    requested: p4runtime_pb2.TableEntry
    entries: list[TableEntry]
    #: the member, group and one-shot ids of an indirect table's entries
    indirect: IndirectView | None
    #: the switch's clock when the snapshot was taken (µs): time_since_last_hit is measured to it
    now_us: int = 0


def _find(table: MatchTable, key: tuple, priority: int) -> TableEntry | None:
    try:
        return table.find(key, priority)
    except EntryNotFoundError:
        return None


def _encoder(p: Pipeline, tb: TableBinding) -> TableEncoder:
    encoder = p.read_encoders.get(tb.info.id)
    if encoder is None:
        encoder = p.read_encoders[tb.info.id] = TableEncoder(p.index, tb)
    return encoder


def _default_entry(p: Pipeline, tb: TableBinding, table: MatchTable,
                   requested: p4runtime_pb2.TableEntry) -> bytes:
    if requested.HasField("time_since_last_hit"):
        raise invalid("Default table entries do not support entry ageing, do not set "
                      "'time_since_last_hit' in your ReadRequest")
    response = p4runtime_pb2.ReadResponse()
    out = response.entities.add().table_entry
    out.table_id = tb.info.id
    out.is_default_action = True
    if not tb.info.implementation_id:  # PI reads an indirect table's default without an action
        encode_action(p.index, tb, table.default, out.action.action)
    controller_metadata, metadata = p.default_metadata.get(tb.info.id, (0, b""))
    out.controller_metadata = controller_metadata
    out.metadata = metadata
    return response.SerializeToString()


def _snapshot_one(p: Pipeline, table_id: int,
                  requested: p4runtime_pb2.TableEntry) -> TableRead | bytes:
    tb, table = p.table(table_id)
    if requested.is_default_action:
        return _default_entry(p, tb, table, requested)
    if requested.HasField("time_since_last_hit") and not tb.info.supports_idle_timeout:
        raise invalid("Do not set time_since_last_hit for a ReadRequest if the table does not "
                      "support idle timeout; yes, that includes wildcard reads")
    if len(requested.match):
        key, priority = decode_match_key(tb, requested)
        found = _find(table, key, priority)
        entries = [found] if found is not None else []
    else:
        entries = list(table.entries())
    indirect = None
    if tb.info.implementation_id:
        indirect = p.profiles[tb.info.implementation_id].view()
    return TableRead(tb, _encoder(p, tb), requested, entries, indirect, p.clock_us())


def snapshot(p: Pipeline, requested: p4runtime_pb2.TableEntry) -> list[TableRead | bytes]:
    """PI's ``table_read``, up to the encoding; call it holding the lock of Write batches.

    Returns one item per table read: a :class:`TableRead`, or the serialized ReadResponse
    of a default entry. Raises P4RuntimeError as PI does (an invalid table id, a
    ``time_since_last_hit`` the table cannot honour, a bad match key).
    """
    if requested.table_id == 0:
        return [_snapshot_one(p, table_id, requested) for table_id in p.index.tables]
    return [_snapshot_one(p, requested.table_id, requested)]


def _matches_filters(entry: TableEntry, tb: TableBinding,
                     requested: p4runtime_pb2.TableEntry) -> bool:
    wanted_action = requested.action.action.action_id
    if wanted_action and tb.from_target_action.get(entry.action.action_id) != wanted_action:
        return False
    if requested.priority and entry.priority != requested.priority:
        return False
    if requested.controller_metadata and entry.metadata != requested.controller_metadata:
        return False
    return not (requested.metadata and entry.extra.get("metadata", b"") != requested.metadata)


def _action_field(read: TableRead, entry: TableEntry) -> bytes:
    index = entry.indirect
    if index is None:
        return read.encoder.direct_action(entry.action)
    view = read.indirect
    assert view is not None
    if not index.is_group:
        return TableEncoder.member_action(view.member_ids[index.handle])
    oneshot = view.oneshot.get(index.handle)
    if oneshot is not None:
        return read.encoder.oneshot_action(oneshot)
    return TableEncoder.group_action(view.group_ids[index.handle])


def encode(read: TableRead, pause: Callable[[], None] | None = None) -> Iterator[bytes]:
    """The ReadResponse fields of a snapshot's entries, those the request's filters keep.

    Holds no lock; ``pause`` is called every :data:`READ_CHUNK` entries (the device lets
    other threads run there).
    """
    tb, requested, encoder = read.tb, read.requested, read.encoder
    counters = requested.HasField("counter_data") and bool(tb.info.direct_counter_id)
    meters = requested.HasField("meter_config")
    # snapshot() refused time_since_last_hit on a table without idle timeouts; PI leaves it
    # out for a const table's entries (it skips its store for them)
    now_us = read.now_us if requested.HasField("time_since_last_hit") and not tb.info.is_const_table else None
    filtered = bool(requested.action.action.action_id or requested.priority
                    or requested.controller_metadata or requested.metadata)
    entity = encoder.entity
    for i, entry in enumerate(read.entries):
        if pause is not None and i and i % READ_CHUNK == 0:
            pause()
        if filtered and not _matches_filters(entry, tb, requested):
            continue
        rates = entry.meter.rates if meters and entry.meter is not None else None
        yield entity(entry, _action_field(read, entry), counters=counters, meter=rates, now_us=now_us)


@dataclass(frozen=True)
class DirectRead:
    """A wildcard read of a table's direct counters or meters (``kind``), taken under the
    lock: the counts and meters are those of the entries when :func:`encode_direct` runs."""

    kind: str  # "counter" or "meter"
    encoder: TableEncoder
    entries: list[TableEntry]


def snapshot_direct(p: Pipeline, tb: TableBinding, table: MatchTable, kind: str) -> DirectRead:
    """The entries of a wildcard DirectCounterEntry / DirectMeterEntry read (checked by the
    caller), to encode with no lock held."""
    return DirectRead(kind, _encoder(p, tb), list(table.entries()))


def encode_direct(read: DirectRead, pause: Callable[[], None] | None = None) -> Iterator[bytes]:
    """The ReadResponse fields of a :class:`DirectRead`; ``pause`` as for :func:`encode`."""
    encoder = read.encoder
    for i, entry in enumerate(read.entries):
        if pause is not None and i and i % READ_CHUNK == 0:
            pause()
        if read.kind == "counter":
            yield encoder.direct_counter(entry)
        else:
            yield encoder.direct_meter(entry, entry.meter.rates if entry.meter is not None else None)


def entry_message(read: TableRead, entry: TableEntry) -> p4runtime_pb2.TableEntry:
    """One entry of a snapshot as the protobuf message :func:`encode` serializes."""
    tb, requested = read.tb, read.requested
    out = p4runtime_pb2.TableEntry(table_id=tb.info.id)
    encode_match_key(tb, entry.key, entry.priority, out)
    index, view = entry.indirect, read.indirect
    if index is None:
        encode_action(read.encoder.index, tb, entry.action, out.action.action)
    elif view is not None and not index.is_group:
        out.action.action_profile_member_id = view.member_ids[index.handle]
    elif view is not None and index.handle in view.oneshot:
        action_set = out.action.action_profile_action_set
        for call, weight, watch_kind, watch in view.oneshot[index.handle]:
            ap = action_set.action_profile_actions.add(weight=weight)
            encode_action(read.encoder.index, tb, call, ap.action)
            if watch_kind:
                setattr(ap, watch_kind, watch)
    elif view is not None:
        out.action.action_profile_group_id = view.group_ids[index.handle]
    out.controller_metadata = entry.metadata
    out.metadata = entry.extra.get("metadata", b"")
    # PI (simple_switch_grpc 1.15) never sets is_const on the entries it reads back.
    if requested.HasField("counter_data") and tb.info.direct_counter_id:
        encode_counter_data(entry.packets, entry.bytes, out.counter_data)
    if requested.HasField("meter_config") and entry.meter is not None:
        encode_meter_config(entry.meter.rates, out.meter_config)
    out.idle_timeout_ns = entry.ttl_ns
    if requested.HasField("time_since_last_hit") and not tb.info.is_const_table:
        out.time_since_last_hit.elapsed_ns = elapsed_ns(entry.ttl_ns, entry.hit_us, read.now_us)
    return out
