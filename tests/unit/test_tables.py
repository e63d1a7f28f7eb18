"""Match tables: entry management errors and lookup semantics, without a program."""

from __future__ import annotations

import pytest

from pybmv2.errors import EntryExistsError, EntryNotFoundError, InvalidEntryError, TableFullError
from pybmv2.layout import PhvLayout
from pybmv2.state import PacketState
from pybmv2.tables import ActionCall, MatchTable, TableEntry

DOC = {
    "header_types": [{"name": "h_t", "fields": [["a", 32, False], ["b", 16, False], ["c", 8, False]]}],
    "headers": [{"name": "h", "id": 0, "header_type": "h_t", "metadata": False}],
}
LAYOUT = PhvLayout.from_json(DOC)


def table(*keys: tuple[str, str], max_size: int = 16) -> MatchTable:
    spec = {
        "name": "t", "id": 0, "max_size": max_size, "action_ids": [1, 2],
        "key": [{"match_type": mt, "target": ["h", f], "mask": None} for f, mt in keys],
    }
    return MatchTable(LAYOUT, spec, {1: "fwd", 2: "drop"})


def packet(a: int = 0, b: int = 0, c: int = 0) -> PacketState:
    return PacketState([a, b, c], [True], 0, b"")


def test_exact_hit_and_miss() -> None:
    t = table(("b", "exact"))
    t.insert(TableEntry((7,), ActionCall(1, (3,))))
    assert t.lookup(packet(b=7)).action == ActionCall(1, (3,))
    assert t.lookup(packet(b=8)) is None


def test_longest_prefix_wins() -> None:
    t = table(("a", "lpm"))
    t.insert(TableEntry(((0x0A000000, 8),), ActionCall(1, (8,))))
    t.insert(TableEntry(((0x0A010000, 16),), ActionCall(1, (16,))))
    t.insert(TableEntry(((0, 0),), ActionCall(2)))
    assert t.lookup(packet(a=0x0A010203)).action.args == (16,)
    assert t.lookup(packet(a=0x0A020304)).action.args == (8,)
    assert t.lookup(packet(a=0x0B000000)).action.action_id == 2


def test_lpm_with_exact_keys() -> None:
    t = table(("c", "exact"), ("a", "lpm"))
    t.insert(TableEntry((1, (0x0A000000, 8)), ActionCall(1, (1,))))
    assert t.lookup(packet(a=0x0A000001, c=1)) is not None
    assert t.lookup(packet(a=0x0A000001, c=2)) is None


def test_ternary_highest_priority_wins() -> None:
    t = table(("b", "ternary"))
    t.insert(TableEntry(((0x0800, 0xFFFF),), ActionCall(1, (1,)), priority=10))
    t.insert(TableEntry(((0, 0),), ActionCall(1, (2,)), priority=1))
    assert t.lookup(packet(b=0x0800)).action.args == (1,)
    assert t.lookup(packet(b=0x86DD)).action.args == (2,)


def test_range_and_optional() -> None:
    t = table(("b", "range"), ("c", "optional"))
    t.insert(TableEntry(((100, 200), (6, 0xFF)), ActionCall(1), priority=5))
    assert t.lookup(packet(b=150, c=6)) is not None
    assert t.lookup(packet(b=250, c=6)) is None
    assert t.lookup(packet(b=150, c=17)) is None


def test_duplicate_insert_is_already_exists() -> None:
    t = table(("b", "exact"))
    t.insert(TableEntry((1,), ActionCall(1)))
    with pytest.raises(EntryExistsError):
        t.insert(TableEntry((1,), ActionCall(2)))


def test_missing_entry_is_not_found() -> None:
    t = table(("b", "exact"))
    with pytest.raises(EntryNotFoundError):
        t.delete((1,))
    with pytest.raises(EntryNotFoundError):
        t.modify((1,), 0, ActionCall(1))


@pytest.mark.parametrize(
    ("keys", "key", "priority", "message"),
    [
        ((("b", "exact"),), (1 << 16,), 0, "does not fit"),
        ((("b", "ternary"),), ((1, 0xFF),), 0, "priority"),
        ((("b", "ternary"),), ((0x100, 0xFF),), 1, "outside its mask"),
        ((("a", "lpm"),), ((0x0A000001, 8),), 0, "beyond its /8 prefix"),
        ((("a", "lpm"),), ((0, 33),), 0, "prefix length 33"),
        ((("b", "range"),), ((5, 4),), 1, "low 5 > high 4"),
        ((("b", "exact"),), (1, 2), 0, "2 fields, expected 1"),
    ],
)
def test_invalid_entries_name_the_problem(keys, key, priority, message) -> None:
    t = table(*keys)
    with pytest.raises(InvalidEntryError, match=message):
        t.insert(TableEntry(key, ActionCall(1), priority=priority))


def test_unknown_action_is_rejected() -> None:
    t = table(("b", "exact"))
    with pytest.raises(InvalidEntryError, match="action id 9"):
        t.insert(TableEntry((1,), ActionCall(9)))


def test_table_full() -> None:
    t = table(("b", "exact"), max_size=2)
    t.insert(TableEntry((1,), ActionCall(1)))
    t.insert(TableEntry((2,), ActionCall(1)))
    with pytest.raises(TableFullError, match="full"):
        t.insert(TableEntry((3,), ActionCall(1)))


def test_delete_then_lookup_misses() -> None:
    t = table(("a", "lpm"))
    t.insert(TableEntry(((0x0A000000, 8),), ActionCall(1)))
    t.delete(((0x0A000000, 8),))
    assert t.lookup(packet(a=0x0A000001)) is None
    assert len(t) == 0


def test_const_entries_from_the_json_may_have_bits_outside_mask_or_prefix() -> None:
    # p4c writes `0x1111 &&& 0xF` as written; BMv2 matches it as 0x1 &&& 0xF
    t = table(("b", "ternary"))
    with pytest.raises(InvalidEntryError, match="outside its mask"):
        t.insert(TableEntry(((0x1111, 0xF),), ActionCall(1, (1,)), priority=1))
    t.insert(TableEntry(((0x1111, 0xF),), ActionCall(1, (1,)), priority=1), canonical=False)
    assert t.lookup(packet(b=0x0001)).action.args == (1,)
    lpm = table(("a", "lpm"))
    lpm.insert(TableEntry(((0x1FFFFFFF, 4),), ActionCall(1, (2,))), canonical=False)
    assert lpm.lookup(packet(a=0x10000000)).action.args == (2,)
