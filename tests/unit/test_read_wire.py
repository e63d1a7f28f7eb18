"""Table reads encoded straight to wire bytes (pybmv2.runtime.read_wire) against protobuf.

Random entries (fixed seeds) of every match kind, direct and indirect actions, one-shot
action sets with watch ports, metadata, direct counters and meters are written through the
device; each table's read must be byte for byte what protobuf serializes for the messages
:func:`pybmv2.runtime.table_reads.entry_message` builds.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from pybmv2.externs import MeterRates, meter_cell
from pybmv2.runtime import table_reads
from pybmv2.runtime.codec import encode_counter_data, encode_match_key, encode_meter_config
from pybmv2.runtime.device import DeviceManager
from pybmv2.runtime.p4info import P4InfoIndex
from pybmv2.runtime.read_wire import entity_bytes, varint
from pybmv2.runtime.testing import load_config
from pybmv2.switch import V1Switch

pytestmark = pytest.mark.unit

BUILDS = {"matching": Path(__file__).parents[1] / "p4programs" / "build",
          "selectors": Path(__file__).parents[1] / "p4programs" / "build",
          "direct_meter": Path(__file__).parents[1] / "p4programs" / "build",
          "stateful": Path(__file__).parents[1] / "p4programs" / "build",
          "rail_switch": Path(__file__).parents[2] / "p4src" / "build"}
MatchType = p4info_pb2.MatchField.MatchType
Update = p4runtime_pb2.Update


def _value(rng: random.Random, width: int) -> int:
    return rng.choice((0, 1, (1 << width) - 1, rng.getrandbits(width)))


def _field_match(rng: random.Random, mf, out: p4runtime_pb2.FieldMatch) -> bool:
    """Fill a random valid match of ``mf``; False to leave the field out (a wildcard)."""
    w = mf.bitwidth
    full = (1 << w) - 1
    kind = mf.match_type
    if kind == MatchType.EXACT:
        out.exact.value = _value(rng, w).to_bytes((w + 7) // 8, "big")
    elif kind == MatchType.LPM:
        plen = rng.randint(0, w)
        if plen == 0:
            return False
        value = _value(rng, w) & (full ^ ((1 << (w - plen)) - 1))
        out.lpm.value, out.lpm.prefix_len = value.to_bytes((w + 7) // 8, "big"), plen
    elif kind == MatchType.TERNARY:
        mask = _value(rng, w)
        if mask == 0:
            return False
        out.ternary.value = (_value(rng, w) & mask).to_bytes((w + 7) // 8, "big")
        out.ternary.mask = mask.to_bytes((w + 7) // 8, "big")
    elif kind == MatchType.RANGE:
        low, high = sorted((_value(rng, w), _value(rng, w)))
        if low == 0 and high == full:
            return False
        out.range.low, out.range.high = low.to_bytes((w + 7) // 8, "big"), high.to_bytes((w + 7) // 8, "big")
    else:
        if rng.random() < 0.3:
            return False
        out.optional.value = _value(rng, w).to_bytes((w + 7) // 8, "big")
    out.field_id = mf.id
    return True


def _action(rng: random.Random, ids: P4InfoIndex, action_id: int, out: p4runtime_pb2.Action) -> None:
    out.action_id = action_id
    for p in ids.actions[action_id].params:
        out.params.add(param_id=p.id, value=_value(rng, p.bitwidth).to_bytes((p.bitwidth + 7) // 8, "big"))


def _entry(rng: random.Random, ids: P4InfoIndex, info, members: dict[int, list[int]],
           groups: dict[int, list[int]]) -> p4runtime_pb2.TableEntry:
    te = p4runtime_pb2.TableEntry(table_id=info.id)
    for mf in info.match_fields:
        fm = p4runtime_pb2.FieldMatch()
        if _field_match(rng, mf, fm):
            te.match.add().CopyFrom(fm)
    if info.requires_priority:
        te.priority = rng.choice((1, 2, 1000, (1 << 31) - 1))
    te.controller_metadata = rng.choice((0, 1, 1 << 63, rng.getrandbits(64)))
    te.metadata = rng.choice((b"", b"\x00", b"cookie"))
    actions = [a for a, scope in info.action_scopes.items() if scope != p4info_pb2.ActionRef.DEFAULT_ONLY]
    profile = info.implementation_id
    if not profile:
        _action(rng, ids, rng.choice(actions), te.action.action)
    elif rng.random() < 0.5 and (members.get(profile) or groups.get(profile)):
        if groups.get(profile) and rng.random() < 0.5:
            te.action.action_profile_group_id = rng.choice(groups[profile])
        else:
            te.action.action_profile_member_id = rng.choice(members[profile])
    else:
        action_set = te.action.action_profile_action_set
        for _ in range(rng.randint(1, 3)):
            ap = action_set.action_profile_actions.add(weight=rng.randint(1, 3))
            _action(rng, ids, rng.choice(actions), ap.action)
            watch = rng.random()
            if watch < 0.3:
                ap.watch = rng.choice((0, 5, -1))
            elif watch < 0.6:
                ap.watch_port = rng.choice((b"", b"\x00\x07"))
    return te


def _device(program: str) -> tuple[DeviceManager, P4InfoIndex]:
    build = BUILDS[program]
    dev = DeviceManager(V1Switch(None), 0)
    dev.set_pipeline(p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                     load_config(build / f"{program}.p4info.txtpb", build / f"{program}.json"))
    return dev, P4InfoIndex(dev.require_pipeline().p4info)


def _profiles(rng: random.Random, dev: DeviceManager, ids: P4InfoIndex
              ) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """Some manual members and groups in every other action profile (the rest: one-shot)."""
    members: dict[int, list[int]] = {}
    groups: dict[int, list[int]] = {}
    req = p4runtime_pb2.WriteRequest()
    for k, (pid, profile) in enumerate(sorted(ids.action_profiles.items())):
        if k % 2:
            continue
        table = ids.tables[profile.table_ids[0]]
        actions = [a for a, s in table.action_scopes.items() if s != p4info_pb2.ActionRef.DEFAULT_ONLY]
        members[pid] = list(range(1, 6))
        for mid in members[pid]:
            m = req.updates.add(type=Update.INSERT).entity.action_profile_member
            m.action_profile_id, m.member_id = pid, mid
            _action(rng, ids, rng.choice(actions), m.action)
        if profile.with_selector:
            groups[pid] = [10, 11]
            for gid in groups[pid]:
                g = req.updates.add(type=Update.INSERT).entity.action_profile_group
                g.action_profile_id, g.group_id = pid, gid
                for mid in rng.sample(members[pid], 2):
                    g.members.add(member_id=mid, weight=rng.randint(1, 2))
    assert dev.write(req).code == 0
    return members, groups


@pytest.mark.parametrize("program", sorted(BUILDS))
@pytest.mark.parametrize("seed", [1, 2])
def test_wire_reads_equal_protobuf(program: str, seed: int) -> None:
    rng = random.Random(seed)
    dev, ids = _device(program)
    members, groups = _profiles(rng, dev, ids)
    for info in ids.tables.values():
        if info.is_const_table or not info.match_fields:
            continue
        req = p4runtime_pb2.WriteRequest()
        for _ in range(40):
            req.updates.add(type=Update.INSERT).entity.table_entry.CopyFrom(
                _entry(rng, ids, info, members, groups))
        dev.write(req)  # duplicates and the like fail alone
    p = dev.require_pipeline()
    for table in p.tables.values():  # direct counters and meters with values to read back
        for entry in list(table.entries()):
            table.replace(entry, packets=rng.getrandbits(40), bytes=rng.getrandbits(50))
    checked = 0
    for extra in ("", "counter_data", "meter_config"):
        requested = p4runtime_pb2.TableEntry()
        if extra:
            getattr(requested, extra).SetInParent()
        for read in table_reads.snapshot(p, requested):
            if isinstance(read, bytes):
                continue
            got = b"".join(table_reads.encode(read))
            want = b"".join(entity_bytes(table_reads.entry_message(read, e).SerializeToString())
                            for e in read.entries)
            assert got == want, f"{read.tb.info.name} ({extra or 'plain'})"
            assert p4runtime_pb2.ReadResponse.FromString(got).SerializeToString() == got
            checked += len(read.entries)
    assert checked > 0


def test_varint_matches_protobuf() -> None:
    for value in (0, 1, 127, 128, 300, (1 << 32) - 1, (1 << 63), (1 << 64) - 1):
        msg = p4runtime_pb2.TableEntry(controller_metadata=value)
        assert msg.SerializeToString() == (b"\x28" + varint(value) if value else b"")


def _direct_reference(read: table_reads.DirectRead, tb, entry) -> bytes:
    """The old protobuf encoding of a wildcard direct counter / meter read's entity."""
    response = p4runtime_pb2.ReadResponse()
    if read.kind == "counter":
        out = response.entities.add().direct_counter_entry
        encode_counter_data(entry.packets, entry.bytes, out.data)
    else:
        out = response.entities.add().direct_meter_entry
        if entry.meter is not None:
            encode_meter_config(entry.meter.rates, out.config)
    out.table_entry.table_id = tb.info.id
    encode_match_key(tb, entry.key, entry.priority, out.table_entry)
    return response.SerializeToString()


@pytest.mark.parametrize("program", ["direct_meter", "rail_switch", "stateful"])
def test_wire_direct_counter_and_meter_reads_equal_protobuf(program: str) -> None:
    rng = random.Random(3)
    dev, ids = _device(program)
    for info in ids.tables.values():
        if info.is_const_table or not info.match_fields:
            continue
        req = p4runtime_pb2.WriteRequest()
        for _ in range(40):
            req.updates.add(type=Update.INSERT).entity.table_entry.CopyFrom(_entry(rng, ids, info, {}, {}))
        dev.write(req)
    p = dev.require_pipeline()
    checked = 0
    for table_id, info in ids.tables.items():
        tb, table = p.table(table_id)
        for entry in list(table.entries()):
            rates = MeterRates(*(rng.choice((0, 1, rng.getrandbits(40))) for _ in range(4)))
            table.replace(entry, packets=rng.getrandbits(30), bytes=rng.getrandbits(40),
                          meter=meter_cell(rates) if rng.random() < 0.7 else None)
        kinds = [k for k, has in (("counter", info.direct_counter_id), ("meter", info.direct_meter_id)) if has]
        for kind in kinds:
            read = table_reads.snapshot_direct(p, tb, table, kind)
            got = b"".join(table_reads.encode_direct(read))
            assert got == b"".join(_direct_reference(read, tb, e) for e in read.entries), (info.name, kind)
            checked += len(read.entries)
    assert checked > 0
