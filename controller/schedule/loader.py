"""Strict YAML loading and dumping of schedule files (``topologies/schedules/*.yaml``).

::

    name: round-robin-4
    kind: round-robin        # one-shot | round-robin | opera | custom
    racks: 4
    slice_us: 10000          # a day: circuits up
    night_us: 1000           # reconfiguration: every circuit of that switch dark
    circuits:                # one entry per circuit switch (ToR uplink)
      - offset_us: 0         # its cycle's start after the fabric's epoch
        slices:              # matching[src rack] = dst rack (null: dark)
          - [1, 2, 3, 0]
          - [2, 3, 0, 1]
          - [3, 0, 1, 2]

Unknown keys and wrong types raise one ConfigError naming the file, the key path and the
value; the model then checks that every slice is a matching.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from controller.errors import ConfigError
from controller.schedule.model import CircuitPlan, Schedule

__all__ = ["dump_schedule", "load_schedule", "parse_schedule", "schedule_to_dict"]

_TOP = {"name", "kind", "racks", "slice_us", "night_us", "circuits"}


#: the largest integer a schedule holds: the switches' clocks count microseconds in 48 bits
MAX_INT = (1 << 48) - 1


def _int(file: str, key: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(file, key, value, "expected an integer")
    if not minimum <= value <= MAX_INT:
        raise ConfigError(file, key, value, f"must be in {minimum}..{MAX_INT} (a 48-bit microsecond clock)")
    return value


def parse_schedule(doc: Any, file: str = "<schedule>") -> Schedule:
    """A :class:`Schedule` from parsed YAML.

    >>> parse_schedule({"name": "x", "kind": "round-robin", "racks": 2, "slice_us": 10,
    ...                 "night_us": 1, "circuits": [{"slices": [[1, 1]]}]})
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: <schedule>: circuits[0].slices[0]: two racks send to the same rack: not a matching (got [1, 1])
    """
    if not isinstance(doc, dict):
        raise ConfigError(file, "<top>", type(doc).__name__, "expected a mapping")
    for key in doc:
        if key not in _TOP:
            raise ConfigError(file, str(key), doc[key], f"unknown key (allowed: {', '.join(sorted(_TOP))})")
    for key in sorted(_TOP):
        if key not in doc:
            raise ConfigError(file, key, None, "required key is missing")
    if not isinstance(doc["name"], str) or not doc["name"]:
        raise ConfigError(file, "name", doc["name"], "expected a non-empty string")
    if not isinstance(doc["circuits"], list):
        raise ConfigError(file, "circuits", doc["circuits"], "expected a list")
    circuits = []
    for c, entry in enumerate(doc["circuits"]):
        where = f"circuits[{c}]"
        if not isinstance(entry, dict) or set(entry) - {"offset_us", "slices"} or "slices" not in entry:
            raise ConfigError(file, where, entry, "expected a mapping with slices (and offset_us)")
        if not isinstance(entry["slices"], list):
            raise ConfigError(file, f"{where}.slices", entry["slices"], "expected a list of matchings")
        slices = []
        for i, m in enumerate(entry["slices"]):
            if not isinstance(m, list):
                raise ConfigError(file, f"{where}.slices[{i}]", m, "expected a list: the destination of each rack")
            slices.append(tuple(None if d is None else _int(file, f"{where}.slices[{i}][{j}]", d)
                                for j, d in enumerate(m)))
        circuits.append(CircuitPlan(tuple(slices), _int(file, f"{where}.offset_us", entry.get("offset_us", 0))))
    return Schedule(name=doc["name"], kind=str(doc["kind"]), racks=_int(file, "racks", doc["racks"]),
                    slice_us=_int(file, "slice_us", doc["slice_us"]), night_us=_int(file, "night_us", doc["night_us"]),
                    circuits=tuple(circuits), source=file)


def load_schedule(path: str | Path) -> Schedule:
    from controller.yamlfile import read_yaml

    return parse_schedule(read_yaml(path), str(path))


def schedule_to_dict(s: Schedule) -> dict[str, Any]:
    return {"name": s.name, "kind": s.kind, "racks": s.racks, "slice_us": s.slice_us, "night_us": s.night_us,
            "circuits": [{"offset_us": p.offset_us, "slices": [list(m) for m in p.slices]} for p in s.circuits]}


def dump_schedule(s: Schedule, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(schedule_to_dict(s), sort_keys=False, default_flow_style=None))
