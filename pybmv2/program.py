"""Load a BMv2 JSON document (p4c-bm2-ss output for v1model) into an executable program."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pybmv2.calculations import Calculation
from pybmv2.control import CompiledPipeline
from pybmv2.deparser import Checksum, CompiledDeparser
from pybmv2.errors import JsonFormatError, TargetError, UnsupportedJsonError
from pybmv2.externs import CounterArray, MeterArray, RegisterArray
from pybmv2.layout import PhvLayout
from pybmv2.parser import CompiledParser
from pybmv2.primitives import Action, Externs, compile_action
from pybmv2.tables import MatchTable

__all__ = ["DROP_PORT", "LearnList", "Program"]

#: simple_switch's default drop port (511 for 9-bit ports)
DROP_PORT = 511


@dataclass(frozen=True, slots=True)
class LearnList:
    """A digest's field list: the fields sampled when generate_digest fires."""

    id: int
    name: str
    fields: tuple[tuple[str, str, int, int], ...]  # (header, field, slot index, width)


@dataclass(slots=True)
class Program:
    """Everything a v1model switch needs to run one compiled P4 program."""

    doc: dict[str, Any]
    layout: PhvLayout
    externs: Externs
    actions: dict[int, Action]
    parser: CompiledParser
    ingress: CompiledPipeline
    egress: CompiledPipeline
    deparser: CompiledDeparser
    checksums: list[Checksum]
    errors: dict[str, int]
    field_lists: dict[int, tuple[int, ...]] = field(default_factory=dict)
    learn_lists: dict[int, LearnList] = field(default_factory=dict)
    #: the sha256 of the JSON text it was loaded from (None: built from a parsed document);
    #: the native engine's cache finds a built engine by it
    source_sha256: str | None = None

    @property
    def tables(self) -> dict[str, MatchTable]:
        return {**self.ingress.tables, **self.egress.tables}

    @classmethod
    def from_file(cls, path: str | Path) -> Program:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise TargetError(f"cannot read BMv2 JSON {path}: {exc.strerror}") from exc
        return cls.from_text(text, source=str(path))

    @classmethod
    def from_text(cls, text: str | bytes, source: str = "<json>") -> Program:
        try:
            doc = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise JsonFormatError(f"{source}: not valid JSON ({exc})") from exc
        if not isinstance(doc, dict):
            raise JsonFormatError(f"{source}: the top level is not an object")
        try:
            program = cls.from_json(doc)
            program.source_sha256 = hashlib.sha256(
                text.encode() if isinstance(text, str) else text).hexdigest()
            return program
        except TargetError as exc:
            raise type(exc)(f"{source}: {exc}") from exc
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise JsonFormatError(f"{source}: malformed BMv2 JSON ({exc!r})") from exc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Program:
        arch = doc.get("program", "")
        if doc.get("extern_instances"):
            names = [x.get("name") for x in doc["extern_instances"]]
            raise UnsupportedJsonError(f"extern_instances are not supported: {names}")
        # Parser value sets start empty; P4Runtime cannot fill them on BMv2 either (PI
        # answers UNIMPLEMENTED to ValueSetEntry writes), so a transition on one never
        # matches there. Members are ints of the transition key's width.
        value_sets: dict[str, set[int]] = {v["name"]: set() for v in doc.get("parse_vsets", [])}
        layout = PhvLayout.from_json(doc)
        ext = Externs(layout=layout, drop_port=DROP_PORT)
        for c in doc.get("calculations", []):
            ext.calculations[c["name"]] = Calculation(layout, c)
        for c in doc.get("counter_arrays", []):
            ext.counters[c["name"]] = CounterArray(c)
        for r in doc.get("register_arrays", []):
            ext.registers[r["name"]] = RegisterArray(r)
        for m in doc.get("meter_arrays", []):
            ext.meters[m["name"]] = MeterArray(m)
        actions = {int(a["id"]): compile_action(ext, a) for a in doc.get("actions", [])}
        errors = {name: int(value) for name, value in doc.get("errors", [])}
        parsers = doc.get("parsers", [])
        if len(parsers) != 1:
            raise UnsupportedJsonError(f"expected one parser, found {len(parsers)}")
        parser = CompiledParser(ext, parsers[0], errors, value_sets)
        direct = {c.binding: c for c in ext.counters.values() if c.is_direct and c.binding}
        meters = {m.binding: m for m in ext.meters.values() if m.is_direct and m.binding}
        pipelines = {p["name"]: p for p in doc.get("pipelines", [])}
        for needed in ("ingress", "egress"):
            if needed not in pipelines:
                raise JsonFormatError(f"no {needed!r} pipeline (is this a v1model program? {arch})")
        ingress = CompiledPipeline(layout, pipelines["ingress"], actions, direct, meters)
        egress = CompiledPipeline(layout, pipelines["egress"], actions, direct, meters)
        deparsers = doc.get("deparsers", [])
        if len(deparsers) != 1:
            raise UnsupportedJsonError(f"expected one deparser, found {len(deparsers)}")
        deparser = CompiledDeparser(layout, deparsers[0])
        checksums = [Checksum(layout, c, ext.calculations) for c in doc.get("checksums", [])]
        field_lists = {}
        for fl in doc.get("field_lists", []):
            slots = []
            for el in fl.get("elements", []):
                if el.get("type") != "field":
                    raise UnsupportedJsonError(f"field list {fl.get('name')!r}: {el.get('type')!r}")
                slots.append(layout.field(*el["value"]).index)
            field_lists[int(fl["id"])] = tuple(slots)
        learn_lists = {}
        for ll in doc.get("learn_lists", []):
            fields = []
            for el in ll.get("elements", []):
                slot = layout.field(*el["value"])
                fields.append((el["value"][0], el["value"][1], slot.index, slot.width))
            learn_lists[int(ll["id"])] = LearnList(int(ll["id"]), ll["name"], tuple(fields))
        return cls(doc, layout, ext, actions, parser, ingress, egress, deparser, checksums,
                   errors, field_lists, learn_lists)

    def table(self, name: str) -> MatchTable:
        tables = self.tables
        if name in tables:
            return tables[name]
        raise TargetError(f"no table named {name!r}; tables: {sorted(tables)}")

    def action_by_name(self, name: str) -> Action:
        for a in self.actions.values():
            if a.name == name:
                return a
        raise TargetError(f"no action named {name!r}")
