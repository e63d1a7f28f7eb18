"""How ``mlfabric rules diff`` shows a switch's differences: pure formatting, no I/O.

Each differing entry is named as a user types it (``ipv4_lpm dst_addr=10.0.1.0/24``) with
its action in natural notation. JSON gets every entry; text gets a compact, capped list.
"""

from __future__ import annotations

from controller.p4runtime.entities import TableRule, action_text, match_text
from controller.p4runtime.reconcile import RuleDiff
from controller.p4runtime.schema import P4Schema

__all__ = ["diff_entries", "diff_lines"]


def _entry(schema: P4Schema, rule: TableRule) -> dict[str, str]:
    return {"table": rule.table, "match": match_text(schema, rule), "action": action_text(schema, rule)}


def diff_entries(schema: P4Schema, d: RuleDiff) -> dict[str, list[dict[str, str]]]:
    """Every differing entry: ``missing`` (compiled, not on the switch), ``extra`` (on the
    switch, not compiled) and ``changed`` (both, with the switch's action and the compiled one).

    >>> from controller.p4build import pipeline_files
    >>> from controller.p4runtime.entities import Lpm
    >>> from controller.p4runtime.reconcile import diff_rules
    >>> s = P4Schema.from_file(pipeline_files("rail_switch").p4info)
    >>> r = TableRule("RailIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(0x0A090000, 16)}, "RailIngress.drop")
    >>> diff_entries(s, diff_rules([r], []))["missing"]
    [{'table': 'RailIngress.ipv4_lpm', 'match': 'dst_addr=10.9.0.0/16', 'action': 'drop()'}]
    """
    changed = []
    for want, have in d.changed:
        row = _entry(schema, want)
        del row["action"]
        changed.append({**row, "switch_action": action_text(schema, have), "compiled_action": action_text(schema, want)})
    return {"missing": [_entry(schema, r) for r in d.missing],
            "changed": changed,
            "extra": [_entry(schema, r) for r in d.extra]}


def diff_lines(schema: P4Schema, d: RuleDiff, limit: int = 10) -> list[str]:
    """The differences as aligned lines, at most ``limit`` (0: all) then ``... and N more``.

    >>> from controller.p4build import pipeline_files
    >>> from controller.p4runtime.entities import Lpm
    >>> from controller.p4runtime.reconcile import diff_rules
    >>> s = P4Schema.from_file(pipeline_files("rail_switch").p4info)
    >>> rules = [TableRule("RailIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(0x0A000000 + (i << 8), 24)},
    ...                    "RailIngress.drop") for i in range(3)]
    >>> print("\\n".join(diff_lines(s, diff_rules(rules, []), limit=2)))
    missing  ipv4_lpm  dst_addr=10.0.0.0/24  drop()
    missing  ipv4_lpm  dst_addr=10.0.1.0/24  drop()
    ... and 1 more
    """
    rows: list[tuple[str, str, str, str]] = []
    for r in d.missing:
        rows.append(("missing", r.table.split(".")[-1], match_text(schema, r), action_text(schema, r)))
    for want, have in d.changed:
        rows.append(("changed", want.table.split(".")[-1], match_text(schema, want),
                     f"switch has {action_text(schema, have)}, compiled {action_text(schema, want)}"))
    for r in d.extra:
        rows.append(("extra", r.table.split(".")[-1], match_text(schema, r), action_text(schema, r)))
    shown = rows if limit <= 0 else rows[:limit]
    widths = [max((len(row[i]) for row in shown), default=0) for i in range(3)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)), row[3]])
             for row in shown]
    if len(rows) > len(shown):
        lines.append(f"... and {len(rows) - len(shown)} more")
    return lines
