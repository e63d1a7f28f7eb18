"""DirectMeterEntry writes and reads against a committed pipeline.

Checks, their order and codes follow PI's ``direct_meter_write`` / ``direct_meter_read``
(``device_mgr.cpp``) and BMv2's PI target, which has no direct meters for default entries
(a target error, UNKNOWN). Each table entry holds its meter (:attr:`TableEntry.meter`).
Callers hold the switch lock.
"""

from __future__ import annotations

import grpc
from p4.v1 import p4runtime_pb2

from pybmv2.externs import meter_cell
from pybmv2.runtime.codec import decode_meter_config, encode_meter_config, invalid
from pybmv2.runtime.errors import P4RuntimeError
from pybmv2.runtime.p4info import TableBinding
from pybmv2.runtime.pipeline import Pipeline
from pybmv2.runtime.table_ops import entry_of
from pybmv2.runtime.table_reads import DirectRead, snapshot_direct
from pybmv2.tables import MatchTable, TableEntry

__all__ = ["read_direct_meters", "write_direct_meter"]

Update = p4runtime_pb2.Update


def _table(p: Pipeline, msg: p4runtime_pb2.DirectMeterEntry) -> tuple[TableBinding, MatchTable]:
    if not msg.HasField("table_entry"):
        raise invalid("Missing table_entry field in DirectMeterEntry")
    return p.table(msg.table_entry.table_id)


def _check_has_meter(tb: TableBinding) -> None:
    if not tb.info.direct_meter_id:
        raise invalid("Table has no direct meters")


def _default_entry_error(what: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.UNKNOWN, f"Error when {what}")


def write_direct_meter(p: Pipeline, update_type: int,
                       msg: p4runtime_pb2.DirectMeterEntry) -> None:
    """Only MODIFY: set the entry's meter; an unset config resets it to always-green."""
    tb, table = _table(p, msg)
    entry = entry_of(tb, table, msg.table_entry)
    _check_has_meter(tb)
    if update_type == Update.UNSPECIFIED:
        raise invalid("Update type is not set")
    if update_type in (Update.INSERT, Update.DELETE):
        raise invalid(f"{Update.Type.Name(update_type)} update type not supported for meters")
    if update_type != Update.MODIFY:
        raise invalid("Invalid update type")
    rates = decode_meter_config(msg.config if msg.HasField("config") else None)
    if entry is None:
        raise _default_entry_error("writing direct meter spec")
    table.replace(entry, meter=meter_cell(rates))  # copy-on-write (pybmv2.tables)


def _encode(entry: TableEntry, out: p4runtime_pb2.DirectMeterEntry) -> None:
    if entry.meter is not None:
        encode_meter_config(entry.meter.rates, out.config)


def read_direct_meters(p: Pipeline, msg: p4runtime_pb2.DirectMeterEntry,
                       response: p4runtime_pb2.ReadResponse) -> DirectRead | None:
    """One entry's meter (the request's table entry echoed, added to ``response``), or those
    of every entry, returned as a snapshot to encode without the lock."""
    if msg.HasField("table_entry") and msg.table_entry.table_id == 0:
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                             "Reading all direct meters for ALL tables is not supported yet")
    tb, table = _table(p, msg)
    _check_has_meter(tb)
    requested = msg.table_entry
    if len(requested.match) or requested.is_default_action:
        entry = entry_of(tb, table, requested)
        if entry is None:
            raise _default_entry_error("reading meter from target")
        out = response.entities.add().direct_meter_entry
        out.table_entry.CopyFrom(requested)
        _encode(entry, out)
        return None
    return snapshot_direct(p, tb, table, "meter")
