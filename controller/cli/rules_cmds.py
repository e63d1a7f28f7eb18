"""``mlfabric rules show|add|modify|delete`` on one switch (and ``install|diff|sync`` from
:mod:`controller.cli.fabric_rules_cmds`)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller.cli.fabric_rules_cmds import register_fabric_commands
from controller.cli.output import emit, format_table
from controller.cli.switch_args import add_switch_arguments, connect, remote_schema
from controller.errors import MlfabricError
from controller.p4runtime.client import P4ClientError, P4RuntimeClient
from controller.p4runtime.entities import (
    TableRule,
    action_text,
    decode_rule,
    encode_rule,
    format_rule,
    match_text,
    parse_match,
    rule_key,
    update,
)
from controller.p4runtime.schema import P4Schema, TableInfo
from controller.p4runtime.values import parse_int

__all__ = ["IntermixedParser", "parse_rule_tokens", "register", "show_data", "show_text"]


class IntermixedParser(argparse.ArgumentParser):
    """Options anywhere among the positionals (``rules add SW T --default drop``).

    A subparser does not get :meth:`parse_intermixed_args` from the top-level parser, so
    this one always parses that way.
    """

    _inner = False

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        if self._inner:
            return super().parse_known_args(args, namespace)
        self._inner = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._inner = False


def parse_rule_tokens(schema: P4Schema, table_name: str, tokens: list[str], priority: int,
                      need_action: bool = True) -> TableRule:
    """``FIELD=VALUE... ACTION PARAM=VALUE...`` -> a TableRule, with every name checked.

    >>> from controller.p4build import pipeline_files
    >>> s = P4Schema.from_file(pipeline_files("rail_switch").p4info)
    >>> r = parse_rule_tokens(s, "ipv4_lpm", ["dst_addr=10.0.0.0/8", "set_nexthop", "port=1", "dmac=1", "smac=2"], 0)
    >>> r.action, dict(r.params)
    ('RailIngress.set_nexthop', {'port': 1, 'dmac': 1, 'smac': 2})
    """
    table = schema.table(table_name)
    match = {}
    action = ""
    params: dict[str, int] = {}
    for tok in tokens:
        key, sep, value = tok.partition("=")
        if not sep:
            if action:
                raise MlfabricError(f"two actions given: {action!r} and {tok!r}")
            action = schema.action(tok).name
            continue
        if not action:
            name, m = parse_match(table, key, value)
            match[name] = m
        else:
            info = schema.action(action).param(key)
            params[info.name] = parse_int(value, info.bitwidth, f"{action} parameter {key}")
    if need_action and not action:
        raise MlfabricError(f"no action given for table {table.name}; actions: "
                            + ", ".join(schema.action(a).name for a in table.action_ids))
    return TableRule(table.name, match, action, params, priority)


def show_data(schema: P4Schema, tables: Iterable[TableInfo], rules: Iterable[TableRule],
              defaults: Mapping[str, TableRule]) -> dict[str, dict[str, Any]]:
    """``{table: {"entries": [rows], "default": "ACTION(params)" or None}}`` for ``rules show``."""
    out: dict[str, dict[str, Any]] = {t.name: {"entries": []} for t in tables}
    for r in rules:
        out.setdefault(r.table, {"entries": []})["entries"].append(format_rule(schema, r))
    for name, d in defaults.items():  # None: read back without an action (an indirect table's)
        out.setdefault(name, {"entries": []})["default"] = action_text(schema, d) if d.action else None
    return dict(sorted(out.items()))


def show_text(data: Mapping[str, Mapping[str, Any]]) -> str:
    """Each table: its entries as an aligned table, then ``default: ACTION(params)``.

    >>> print(show_text({"RailIngress.ipv4_lpm": {"entries": [], "default": "drop()"}}))
    RailIngress.ipv4_lpm: no entries
    default: drop()
    """
    blocks = []
    for table, block in data.items():
        rows = block["entries"]
        count = f"{len(rows)} entr{'y' if len(rows) == 1 else 'ies'}"
        lines = [f"{table} ({count})", format_table(rows)] if rows else [f"{table}: no entries"]
        if "default" in block:
            lines.append(f"default: {block['default'] or '(no action)'}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _show(args: argparse.Namespace) -> int:
    with connect(args) as client:
        schema = remote_schema(client)
        tables = [schema.table(args.table)] if args.table else list(schema.tables)
        rules = client.read_rules(schema, tables[0].id if args.table else 0)
        defaults = {d.table: d for d in (decode_rule(schema, e) for e in client.read_default_entries(t.id for t in tables))}
    data = show_data(schema, tables, rules, defaults)
    emit(data, as_json=args.json, text=show_text(data) if data else f"{args.switch}: the program has no tables")
    return 0


def _entry_present(client: P4RuntimeClient, schema: P4Schema, rule: TableRule) -> bool:
    key = rule_key(decode_rule(schema, encode_rule(schema, rule)))  # as the switch would hold it
    return any(rule_key(r) == key for r in client.read_rules(schema, schema.table(rule.table).id))


def _write_default(args: argparse.Namespace, client: P4RuntimeClient, schema: P4Schema,
                   rule: TableRule) -> tuple[str, str]:
    """Set (add, modify) or reset (delete) a table's default action: always a MODIFY.
    Returns what was done and the default action now."""
    if rule.match:
        raise MlfabricError(f"--default sets the action a miss runs in {rule.table}: give ACTION PARAM=VALUE..., "
                            f"not match fields ({match_text(schema, rule)})")
    if args.kind == "delete" and rule.action:
        raise MlfabricError(f"rules delete --default resets {rule.table}'s default action to the program's: "
                            f"give no action (got {action_text(schema, rule)})")
    rule = TableRule(rule.table, {}, rule.action, rule.params, 0, True)
    client.write([update("modify", encode_rule(schema, rule))])
    if args.kind == "delete":
        (entry,) = client.read_default_entries([schema.table(rule.table).id])
        now = action_text(schema, decode_rule(schema, entry))
        return f"default action of {rule.table} reset to {now}", now
    now = action_text(schema, rule)
    return f"default action of {rule.table} set to {now}", now


def _write_entry(args: argparse.Namespace) -> int:
    with connect(args) as client:
        schema = remote_schema(client)
        rule = parse_rule_tokens(schema, args.table, args.tokens, args.priority,
                                 need_action=args.kind != "delete" and not args.default)
        if args.default:
            said, now = _write_default(args, client, schema, rule)
            emit({"switch": args.switch, "table": rule.table, "default": now}, as_json=args.json,
                 text=f"{args.switch}: {said}")
            return 0
        try:
            client.write([update(args.kind, encode_rule(schema, rule))])
        except P4ClientError:
            if args.kind != "insert" and not _entry_present(client, schema, rule):
                raise MlfabricError(f"{args.switch}: {rule.table} has no entry {match_text(schema, rule)} to "
                                    f"{args.kind}" + (" (add it with `mlfabric rules add`)" if args.kind == "modify" else "")
                                    ) from None
            raise
    verb = {"insert": "added", "modify": "modified", "delete": "deleted"}[args.kind]
    what = match_text(schema, rule) + (f" {action_text(schema, rule)}" if rule.action else "")
    emit({"switch": args.switch, args.kind: format_rule(schema, rule)}, as_json=args.json,
         text=f"{args.switch}: {verb} {rule.table} {what}")
    return 0


_EXAMPLES: Mapping[str, Sequence[str]] = {
    "add": ("mlfabric rules add rail0 ipv4_lpm dst_addr=10.9.0.0/16 set_nexthop port=3 dmac=02:00:00:00:00:09 "
            "smac=02:5f:00:01:00:03", "mlfabric rules add rail0 ipv4_lpm --default drop"),
    "modify": ("mlfabric rules modify rail0 ipv4_lpm dst_addr=10.9.0.0/16 set_nexthop port=4 dmac=02:00:00:00:00:09 "
               "smac=02:5f:00:01:00:04", "mlfabric rules modify rail0 ipv4_lpm --default drop"),
    "delete": ("mlfabric rules delete rail0 ipv4_lpm dst_addr=10.9.0.0/16",
               "mlfabric rules delete rail0 ipv4_lpm --default   # back to the program's default action"),
}


def register(sub: argparse._SubParsersAction) -> None:
    rules = sub.add_parser("rules", help="install, read and edit table entries")
    rsub = rules.add_subparsers(dest="rules_command", metavar="ACTION", required=True, parser_class=IntermixedParser)
    register_fabric_commands(rsub)
    s = rsub.add_parser("show", help="read a switch's entries and each table's default action (natural notation)",
                        epilog="example: mlfabric rules show rail0 ipv4_lpm")
    add_switch_arguments(s)
    s.add_argument("table", nargs="?", help="only this table")
    s.set_defaults(func=_show)
    helps = {"add": "insert one entry, or set a table's default action",
             "modify": "change the action of one existing entry, or a table's default action",
             "delete": "delete one entry, or reset a table's default action"}
    for kind, helptext in helps.items():
        p = rsub.add_parser(kind, help=helptext, formatter_class=argparse.RawDescriptionHelpFormatter,
                            epilog="examples: " + "\n          ".join(_EXAMPLES[kind]))
        add_switch_arguments(p)
        p.add_argument("table", help="table name, full or a unique suffix (ipv4_lpm)")
        p.add_argument("tokens", nargs="*", metavar="FIELD=VALUE|ACTION|PARAM=VALUE",
                       help="match fields, then the action and its parameters"
                            + (" (the match alone identifies the entry)" if kind == "delete" else ""))
        p.add_argument("--priority", type=int, default=0, help="the entry's priority (ternary, range and optional tables)")
        p.add_argument("--default", action="store_true",
                       help="the table's default action (what a miss runs) instead of an entry; anywhere on the line")
        p.set_defaults(func=_write_entry, kind={"add": "insert", "modify": "modify", "delete": "delete"}[kind])
