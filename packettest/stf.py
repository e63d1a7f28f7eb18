"""p4c's STF packet tests (``.stf`` files beside its sample programs), read into P4Runtime.

An STF file adds table entries and multicast groups in simple_switch_CLI's terms, sends
packets and states the packets expected on each port. :func:`parse_stf` reads one into
steps; :func:`stf_writes` turns a step's entries into P4Runtime updates for a program's
P4Info, naming tables, fields and actions as p4c's ``bmv2stf.py`` does (full names, or an
unambiguous suffix). Commands P4Runtime cannot express (register and counter access, meter
rates) raise :class:`StfError`, so that a test using them is reported as such.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2

from controller.p4runtime.entities import (
    Exact,
    Lpm,
    MatchValue,
    Optional,
    Range,
    TableRule,
    Ternary,
    clone_session_entry,
    encode_rule,
    multicast_group_entry,
    update,
)
from controller.p4runtime.schema import P4Schema, TableInfo

__all__ = ["StfEntry", "StfError", "StfExpect", "StfPacket", "StfTest", "expect_matches",
           "parse_stf", "stf_writes"]


class StfError(ValueError):
    """An STF file uses something this reader cannot turn into P4Runtime (names it)."""


@dataclass(frozen=True, slots=True)
class StfEntry:
    """``add`` (or ``setdefault`` when ``default``): a table entry in STF notation."""

    table: str
    keys: tuple[tuple[str, str], ...]
    action: str
    args: tuple[tuple[str, str], ...]
    priority: int | None = None
    default: bool = False


@dataclass(frozen=True, slots=True)
class StfPacket:
    port: int
    data: bytes


@dataclass(frozen=True, slots=True)
class StfExpect:
    """An expected packet: hex digits with ``*`` wildcards; a longer packet matches unless
    ``exact_length``. An empty pattern expects any packet."""

    port: int
    pattern: str
    exact_length: bool = False


@dataclass(frozen=True, slots=True)
class StfMulticast:
    """A multicast group as the ``mc_*`` commands built it: (port, rid) replicas."""

    group: int
    replicas: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class StfMirror:
    session: int
    port: int | None = None
    group: int | None = None


Step = StfEntry | StfPacket | StfMulticast | StfMirror


@dataclass
class StfTest:
    steps: list[Step] = field(default_factory=list)
    expects: list[StfExpect] = field(default_factory=list)

    @property
    def ports(self) -> list[int]:
        used = {s.port for s in self.steps if isinstance(s, StfPacket)} | {e.port for e in self.expects}
        for s in self.steps:
            if isinstance(s, StfMulticast):
                used |= {p for p, _ in s.replicas}
            elif isinstance(s, StfMirror) and s.port is not None:
                used.add(s.port)
        return sorted(used)


_CALL = re.compile(r"^([\w.$\[\]]+)\((.*)\)$")
_UNSUPPORTED = ("register_read", "register_write", "register_reset", "counter_read",
                "counter_write", "meter_get_rates", "meter_set_rates", "meter_array_set_rates",
                "mirroring_delete", "mc_node_update")


def _args(text: str) -> tuple[tuple[str, str], ...]:
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition(":")
        if not sep:
            raise StfError(f"action argument {part!r} is not NAME:VALUE")
        out.append((name.strip(), value.strip()))
    return tuple(out)


def _action(words: Sequence[str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    m = _CALL.match("".join(words))
    if not m:
        raise StfError(f"bad action call {' '.join(words)!r}")
    return m.group(1), _args(m.group(2))


def _add(words: list[str]) -> StfEntry:
    table, rest = words[1], words[2:]
    priority = None
    if rest and re.fullmatch(r"-?\d+", rest[0]):
        priority, rest = int(rest[0]), rest[1:]
    keys = []
    while rest and "(" not in rest[0]:
        name, sep, value = rest.pop(0).partition(":")
        if not sep:
            raise StfError(f"table {table}: key {name!r} is not NAME:VALUE")
        keys.append((name, value))
    name, args = _action(rest)
    return StfEntry(table, tuple(keys), name, args, priority)


def parse_stf(text: str) -> StfTest:
    """Read an STF file.

    >>> t = parse_stf("add t 3 h.f:0x0a** act(x:1)\\npacket 1 00 01\\nexpect 2 00 ** $")
    >>> t.steps[0], t.steps[1], t.expects
    (StfEntry(table='t', keys=(('h.f', '0x0a**'),), action='act', args=(('x', '1'),), priority=3, default=False), StfPacket(port=1, data=b'\\x00\\x01'), [StfExpect(port=2, pattern='00**', exact_length=True)])
    """
    test = StfTest()
    nodes: list[tuple[int, tuple[int, ...]]] = []
    groups: dict[int, list[tuple[int, int]]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        cmd = words[0]
        if cmd == "add":
            test.steps.append(_add(words))
        elif cmd == "setdefault":
            name, args = _action(words[2:])
            test.steps.append(StfEntry(words[1], (), name, args, default=True))
        elif cmd == "packet":
            try:
                test.steps.append(StfPacket(int(words[1]), bytes.fromhex("".join(words[2:]))))
            except ValueError as exc:
                raise StfError(f"bad packet line {line!r}") from exc
        elif cmd == "expect":
            pattern = "".join(words[2:])
            exact = pattern.endswith("$")
            test.expects.append(StfExpect(int(words[1]), pattern.rstrip("$").upper(), exact))
        elif cmd == "mc_mgrp_create":
            groups[int(words[1])] = []
        elif cmd == "mc_node_create":
            nodes.append((int(words[1]), tuple(int(p) for p in words[2:])))
        elif cmd == "mc_node_associate":
            group, node = int(words[1]), int(words[2])
            rid, ports = nodes[node]
            groups.setdefault(group, []).extend((p, rid) for p in ports)
            test.steps.append(StfMulticast(group, tuple(groups[group])))
        elif cmd == "mirroring_add":
            test.steps.append(StfMirror(int(words[1]), port=int(words[2])))
        elif cmd == "mirroring_add_mc":
            test.steps.append(StfMirror(int(words[1]), group=int(words[2])))
        elif cmd in ("wait", "mirroring_get", "check_counter"):
            continue
        elif cmd in _UNSUPPORTED:
            raise StfError(f"STF command {cmd!r} has no P4Runtime equivalent on BMv2")
        else:
            raise StfError(f"unknown STF command {cmd!r}")
    return test


def _by_suffix(kind: str, want: str, names: Iterable[str]) -> str:
    names = list(names)
    if want in names:
        return want
    hits = [n for n in names if n.endswith("." + want) or n.endswith(want)]
    if len(hits) == 1:
        return hits[0]
    raise StfError(f"{kind} {want!r}: {'ambiguous' if hits else 'no match'} among {sorted(names)}")


def _int(text: str) -> int:
    return int(text, 0) if not text.isdigit() else int(text)


def _key(table: TableInfo, name: str, text: str) -> tuple[str, MatchValue]:
    fields = {f.name: f for f in table.match_fields}
    m = re.match(r"(.*)\$(\d+)(.*)", name)
    if m:
        name = f"{m.group(1)}[{m.group(2)}]{m.group(3)}"
    if name.endswith(".valid"):
        name = name[: -len("valid")] + "$valid$"
    mf = fields[_by_suffix(f"table {table.name} key", name, fields)]
    w = mf.bitwidth
    full = (1 << w) - 1
    if mf.match_type == "lpm" or (mf.match_type == "ternary" and "*" in text):
        if "/" in text and mf.match_type == "lpm":
            prefix, plen = text.split("/")
            return mf.name, Lpm(_int(prefix) & full, int(plen))
        base = {"0x": 16, "0b": 2, "0o": 8}.get(text[:2].lower())
        if base is None:
            return mf.name, Lpm(_int(text) & full, w) if mf.match_type == "lpm" else Exact(_int(text))
        digits = text[2:]
        bits = {16: 4, 2: 1, 8: 3}[base]
        number = int(digits.replace("*", "0"), base)
        mask = int("".join("0" if c == "*" else "f" if base == 16 else "1" if base == 2 else "7"
                           for c in digits), base)
        if mf.match_type == "lpm":  # as bmv2stf: the value as written, its known digits the prefix
            known = (len(digits) - digits.count("*")) * bits
            return mf.name, Lpm(number & full & ~((1 << max(w - known, 0)) - 1), min(known, w))
        return mf.name, Ternary(number & mask & full, mask & full)
    value = _int(text) & full
    if mf.match_type == "ternary":
        return mf.name, Ternary(value, full)
    if mf.match_type == "range":
        return mf.name, Range(value, value)
    if mf.match_type == "optional":
        return mf.name, Optional(value)
    return mf.name, Exact(value)


def _entry_rule(schema: P4Schema, e: StfEntry) -> TableRule:
    names = [t.preamble.name for t in schema.p4info.tables]
    aliases = {t.preamble.alias: t.preamble.name for t in schema.p4info.tables}
    name = aliases.get(e.table) or _by_suffix("table", e.table, names)
    table = schema.table(name)
    actions = {schema.action(a).name: schema.action(a) for a in table.action_ids}
    action = actions[_by_suffix(f"table {table.name} action", e.action, actions)]
    params = {p.name for p in action.params}
    args = {}
    for pname, text in e.args:
        args[_by_suffix(f"action {action.name} parameter", pname, params)] = _int(text)
    if e.default:
        return TableRule(table.name, {}, action.name, args, is_default=True)
    match: dict[str, MatchValue] = {}
    for f in table.match_fields:  # STF leaves out what it does not care about
        if f.match_type == "exact":
            match[f.name] = Exact(0)
    for kname, ktext in e.keys:
        fname, value = _key(table, kname, ktext)
        match[fname] = value
    needs_priority = any(f.match_type in ("ternary", "range", "optional") for f in table.match_fields)
    priority = (max(e.priority or 0, 0) + 1) if needs_priority else 0
    return TableRule(table.name, match, action.name, args, priority)


def stf_writes(schema: P4Schema, step: Step, groups: dict[int, tuple[tuple[int, int], ...]]
               ) -> list[p4runtime_pb2.Update]:
    """The P4Runtime updates for one configuration step. ``groups`` holds the multicast
    groups written so far (a mirror session to a group copies its replicas)."""
    if isinstance(step, StfEntry):
        rule = _entry_rule(schema, step)
        return [update("modify" if step.default else "insert", encode_rule(schema, rule))]
    if isinstance(step, StfMulticast):
        kind = "modify" if step.group in groups else "insert"
        groups[step.group] = step.replicas
        return [update(kind, multicast_group_entry(step.group, step.replicas))]
    if isinstance(step, StfMirror):
        replicas = ((step.port, 0),) if step.port is not None else groups.get(step.group or 0, ())
        return [update("insert", clone_session_entry(step.session, replicas))]
    raise TypeError(f"not a configuration step: {step!r}")


def expect_matches(expect: StfExpect, frame: bytes) -> bool:
    """p4c's compare_pkt: wildcards match anything; a longer packet matches unless the
    pattern ended with ``$``.

    >>> expect_matches(StfExpect(1, "00**02"), bytes([0, 1, 2, 3]))
    True
    >>> expect_matches(StfExpect(1, "00**02", exact_length=True), bytes([0, 1, 2, 3]))
    False
    """
    got = frame.hex().upper()
    want = expect.pattern
    if len(got) < len(want) or (expect.exact_length and len(got) > len(want)):
        return False
    return all(w in ("*", g) for w, g in zip(want, got, strict=False))
