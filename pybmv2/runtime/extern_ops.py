"""Counter, meter, PRE and digest-config entities against a committed pipeline.

Checks and codes follow PI's ``device_mgr.cpp`` (``counter_write``/``counter_read``,
``meter_write``/``meter_read``, ``pre_*``) and what BMv2's PI target returns: an index
outside a counter or meter array is a target error, UNKNOWN. Callers hold the switch lock.
"""

from __future__ import annotations

import grpc
from p4.v1 import p4runtime_pb2

from pybmv2.errors import TargetError
from pybmv2.externs import CounterArray, MeterArray
from pybmv2.runtime.codec import (
    decode_meter_config,
    encode_counter_data,
    encode_meter_config,
    invalid,
    merge_counter_data,
)
from pybmv2.runtime.errors import P4RuntimeError, from_target_error
from pybmv2.runtime.p4info import P4Ids
from pybmv2.runtime.pipeline import Pipeline, invalid_id
from pybmv2.runtime.pre_codec import (
    FIRST_RESERVED_GROUP_ID,
    check_group_id,
    decode_clone_session,
    decode_multicast_group,
    encode_clone_session,
    encode_multicast_group,
)
from pybmv2.switch import V1Switch

__all__ = [
    "read_counters",
    "read_meters",
    "read_pre",
    "write_counter",
    "write_meter",
    "write_pre",
]

Update = p4runtime_pb2.Update


def _update_type_error(update_type: int, what: str) -> P4RuntimeError:
    if update_type == Update.UNSPECIFIED:
        return invalid("Update type is not set")
    if update_type in (Update.INSERT, Update.DELETE):
        return invalid(f"{Update.Type.Name(update_type)} update type not supported for {what}")
    return invalid("Invalid update type")


def _index(msg: p4runtime_pb2.CounterEntry | p4runtime_pb2.MeterEntry, size: int,
           what: str) -> int:
    index = msg.index.index
    if index < 0:
        raise invalid("A negative number is not a valid index value")
    if index >= size:
        raise P4RuntimeError(grpc.StatusCode.UNKNOWN,
                             f"Error when {what} from target: index {index} out of range "
                             f"0..{size - 1}")
    return index


# -- counters -------------------------------------------------------------------------------


def _counter(p: Pipeline, counter_id: int) -> CounterArray:
    if not p.index.is_valid_id(counter_id, P4Ids.COUNTER):
        raise invalid_id()
    return p.program.externs.counters[p.binding.counters[counter_id]]


def write_counter(p: Pipeline, update_type: int, msg: p4runtime_pb2.CounterEntry) -> None:
    """MODIFY writes a cell, DELETE zeroes it (PI), INSERT is INVALID_ARGUMENT."""
    array = _counter(p, msg.counter_id)
    if not msg.HasField("index"):
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                             "Wildcard write is not supported for indirect counters yet")
    if msg.index.index < 0:
        raise invalid("A negative number is not a valid index value")
    if update_type not in (Update.MODIFY, Update.DELETE):
        raise _update_type_error(update_type, "counters")
    index = _index(msg, array.size, "writing to counter")
    if update_type == Update.DELETE:
        array.write(index, 0, 0)
        return
    unit = p.index.counters[msg.counter_id].unit
    array.write(index, *merge_counter_data(unit, msg.data, array.read(index)))


def _read_counter(p: Pipeline, counter_id: int, msg: p4runtime_pb2.CounterEntry,
                  response: p4runtime_pb2.ReadResponse) -> None:
    array = _counter(p, counter_id)
    if msg.HasField("index"):
        indices: range | list[int] = [_index(msg, array.size, "reading counter")]
    else:
        indices = range(array.size)
    for i in indices:
        out = response.entities.add().counter_entry
        out.counter_id = counter_id
        out.index.index = i
        encode_counter_data(*array.read(i), out.data)


def read_counters(p: Pipeline, msg: p4runtime_pb2.CounterEntry,
                  response: p4runtime_pb2.ReadResponse) -> None:
    """counter_id 0 reads every indirect counter; an unset index reads every cell."""
    ids = list(p.index.counters) if msg.counter_id == 0 else [msg.counter_id]
    for counter_id in ids:
        _read_counter(p, counter_id, msg, response)


# -- meters ---------------------------------------------------------------------------------


def _meter(p: Pipeline, meter_id: int) -> MeterArray:
    if not p.index.is_valid_id(meter_id, P4Ids.METER):
        raise invalid_id()
    return p.program.externs.meters[p.binding.meters[meter_id]]


def write_meter(p: Pipeline, update_type: int, msg: p4runtime_pb2.MeterEntry) -> None:
    """Only MODIFY: an unset config resets the cell to always-green (PI)."""
    array = _meter(p, msg.meter_id)
    if not msg.HasField("index"):
        raise P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED,
                             "Wildcard write is not supported for indirect meters yet")
    if msg.index.index < 0:
        raise invalid("A negative number is not a valid index value")
    if update_type != Update.MODIFY:
        raise _update_type_error(update_type, "meters")
    rates = decode_meter_config(msg.config if msg.HasField("config") else None)
    index = _index(msg, array.size, "writing meter spec")
    try:
        array.configure(index, rates)
    except TargetError as exc:
        raise from_target_error(exc) from exc


def read_meters(p: Pipeline, msg: p4runtime_pb2.MeterEntry,
                response: p4runtime_pb2.ReadResponse) -> None:
    ids = list(p.index.meters) if msg.meter_id == 0 else [msg.meter_id]
    for meter_id in ids:
        array = _meter(p, meter_id)
        if msg.HasField("index"):
            indices: range | list[int] = [_index(msg, array.size, "reading meter spec")]
        else:
            indices = range(array.size)
        for i in indices:
            out = response.entities.add().meter_entry
            out.meter_id = meter_id
            out.index.index = i
            if not encode_meter_config(array.rates(i), out.config):
                out.ClearField("config")


# -- packet replication engine --------------------------------------------------------------


def _write_group(p: Pipeline, switch: V1Switch, update_type: int,
                 msg: p4runtime_pb2.MulticastGroupEntry) -> None:
    group = decode_multicast_group(msg)
    gid = group.group_id
    pre = switch.pre
    if update_type == Update.INSERT:
        if gid in pre.groups:
            raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS,
                                 "Multicast group already exists")
        pre.insert_group(gid, group.replicas)
        p.group_order.insert(gid)
    elif update_type == Update.MODIFY:
        if gid not in pre.groups:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, "Multicast group does not exist")
        pre.modify_group(gid, group.replicas)
    elif update_type == Update.DELETE:
        if gid not in pre.groups:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, "Multicast group does not exist")
        pre.delete_group(gid)
        p.group_order.erase(gid)
        p.group_forms.pop(gid, None)
        p.group_metadata.pop(gid, None)
        return
    else:
        raise invalid("Update type is not set" if update_type == Update.UNSPECIFIED
                      else "Invalid update type")
    p.group_forms[gid] = group.forms
    p.group_metadata[gid] = group.metadata


def _write_session(p: Pipeline, switch: V1Switch, update_type: int,
                   msg: p4runtime_pb2.CloneSessionEntry) -> None:
    session, forms = decode_clone_session(msg)
    sid = session.session_id
    pre = switch.pre
    if session.packet_length_bytes and update_type != Update.DELETE and not pre.truncation:
        # what simple_switch_grpc answers; mlfabric-switch --clone-truncation honours it
        raise P4RuntimeError(grpc.StatusCode.UNKNOWN, "Error when creating clone session in target")
    if update_type == Update.INSERT:
        if sid in pre.sessions:
            raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS,
                                 "Clone session id already exists")
        pre.insert_session(session)
        p.group_order.insert(FIRST_RESERVED_GROUP_ID + sid)  # PI's group behind the session
        p.session_order.insert(sid)
    elif update_type == Update.MODIFY:
        if sid not in pre.sessions:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, "Clone session id does not exist")
        pre.modify_session(session)
    elif update_type == Update.DELETE:
        if sid not in pre.sessions:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, "Clone session id does not exist")
        pre.delete_session(sid)
        p.group_order.erase(FIRST_RESERVED_GROUP_ID + sid)
        p.session_order.erase(sid)
        p.session_forms.pop(sid, None)
        return
    else:
        raise invalid("Update type is not set" if update_type == Update.UNSPECIFIED
                      else "Invalid update type")
    p.session_forms[sid] = forms


def write_pre(p: Pipeline, switch: V1Switch, update_type: int,
              msg: p4runtime_pb2.PacketReplicationEngineEntry) -> None:
    which = msg.WhichOneof("type")
    try:
        if which == "multicast_group_entry":
            _write_group(p, switch, update_type, msg.multicast_group_entry)
        elif which == "clone_session_entry":
            _write_session(p, switch, update_type, msg.clone_session_entry)
        else:
            raise invalid("Invalid PRE operation")
    except TargetError as exc:
        raise from_target_error(exc) from exc


def read_pre(p: Pipeline, switch: V1Switch, msg: p4runtime_pb2.PacketReplicationEngineEntry,
             response: p4runtime_pb2.ReadResponse) -> None:
    """Group/session id 0 is a wildcard; a missing one is NOT_FOUND (PI)."""
    which = msg.WhichOneof("type")
    pre = switch.pre
    if which == "multicast_group_entry":
        gid = msg.multicast_group_entry.multicast_group_id
        check_group_id(gid, for_write=False)
        if gid and gid not in pre.groups:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, "Multicast group does not exist")
        # a wildcard read iterates PI's hash map, leaving out the groups behind clone sessions
        wanted = [g for g in p.group_order if g < FIRST_RESERVED_GROUP_ID] if gid == 0 else [gid]
        for g in wanted:
            out = response.entities.add().packet_replication_engine_entry
            encode_multicast_group(g, pre.groups[g], p.group_forms.get(g, {}),
                                   p.group_metadata.get(g, b""), out.multicast_group_entry)
    elif which == "clone_session_entry":
        sid = msg.clone_session_entry.session_id
        if sid and sid not in pre.sessions:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, "Clone session id does not exist")
        for s in list(p.session_order) if sid == 0 else [sid]:
            out = response.entities.add().packet_replication_engine_entry
            encode_clone_session(pre.sessions[s], p.session_forms.get(s, {}),
                                 out.clone_session_entry)
    else:
        raise invalid("Invalid PRE operation")
