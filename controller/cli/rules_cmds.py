"""``mlfabric rules install|show|add|delete|diff|sync``."""

from __future__ import annotations

import argparse
from pathlib import Path

from controller.cli.output import emit, format_table
from controller.cli.switch_args import add_switch_arguments, connect, remote_schema
from controller.errors import MlfabricError
from controller.install import InstallOptions, diff_fabric, install_fabric, sync_fabric
from controller.p4runtime.entities import (
    TableRule,
    decode_rule,
    encode_rule,
    format_rule,
    parse_match,
    update,
)
from controller.p4runtime.schema import P4Schema
from controller.p4runtime.values import parse_int
from controller.progress import MultiProgress
from controller.topology import load_topology, require_valid

__all__ = ["parse_rule_tokens", "register"]


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


def _load(args: argparse.Namespace):
    topo = require_valid(load_topology(args.topology_file), str(args.topology_file))
    if args.exclude:
        try:
            topo = topo.without(set(args.exclude))
        except KeyError as exc:
            raise MlfabricError(str(exc.args[0])) from None
    return topo


def _report_rows(reports) -> list[dict]:
    return [{"switch": r.switch, "entries": r.entries, "seconds": round(r.seconds, 3),
             "status": "ok" if r.error is None else f"FAILED: {r.error}",
             **({"diff": r.diff.summary()} if r.diff is not None else {})} for r in reports]


def _install(args: argparse.Namespace) -> int:
    topo = _load(args)
    progress = None if args.json else MultiProgress([s.name for s in topo.switches])
    opts = InstallOptions(batch_size=args.batch_size, atomic=args.atomic)
    reports = install_fabric(topo, options=opts, progress=progress)
    rows = _report_rows(reports)
    total = sum(r.entries for r in reports)
    emit(rows, as_json=args.json, text=format_table(rows) + f"\n{total} entries on {len(reports)} switches")
    return 0 if all(r.error is None for r in reports) else 1


def _diff(args: argparse.Namespace) -> int:
    reports = diff_fabric(_load(args))
    rows = _report_rows(reports)
    emit(rows, as_json=args.json)
    return 0 if all(r.error is None and r.diff and r.diff.in_sync for r in reports) else 1


def _sync(args: argparse.Namespace) -> int:
    topo = _load(args)
    progress = None if args.json else MultiProgress([s.name for s in topo.switches])
    reports = sync_fabric(topo, options=InstallOptions(batch_size=args.batch_size, atomic=args.atomic), progress=progress)
    emit(_report_rows(reports), as_json=args.json)
    return 0 if all(r.error is None for r in reports) else 1


def _show(args: argparse.Namespace) -> int:
    with connect(args) as client:
        schema = remote_schema(client)
        table_id = schema.table(args.table).id if args.table else 0
        rules = [decode_rule(schema, e) for e in client.read_table_entries(table_id)]
    by_table: dict[str, list[dict]] = {}
    for r in rules:
        by_table.setdefault(r.table, []).append(format_rule(schema, r))
    if args.json:
        emit(by_table, as_json=True)
        return 0
    if not by_table:
        print(f"{args.switch}: no entries" + (f" in {args.table}" if args.table else ""))
    for table, rows in sorted(by_table.items()):
        print(f"{table} ({len(rows)} entries)")
        print(format_table(rows))
        print()
    return 0


def _add_or_delete(args: argparse.Namespace) -> int:
    with connect(args) as client:
        schema = remote_schema(client)
        rule = parse_rule_tokens(schema, args.table, args.tokens, args.priority, need_action=args.kind != "delete")
        client.write([update(args.kind if not args.default else "modify",
                             encode_rule(schema, TableRule(rule.table, rule.match, rule.action, rule.params,
                                                           rule.priority, args.default)))])
    emit({"switch": args.switch, args.kind: format_rule(schema, rule)}, as_json=args.json,
         text=f"{args.kind}: {rule.table} {format_rule(schema, rule)}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    rules = sub.add_parser("rules", help="install, read and edit table entries")
    rsub = rules.add_subparsers(dest="rules_command", metavar="ACTION", required=True)
    for name, func, helptext in (("install", _install, "compile the topology's rules and install them on every switch"),
                                 ("diff", _diff, "compare every switch with the compiled rules"),
                                 ("sync", _sync, "make every switch hold exactly the compiled rules")):
        p = rsub.add_parser(name, help=helptext, epilog=f"example: mlfabric rules {name} topologies/rail-only-4x4.yaml")
        p.add_argument("topology_file", type=Path, metavar="TOPOLOGY")
        p.add_argument("--batch-size", type=int, default=1000)
        p.add_argument("--atomic", action="store_true",
                       help="roll back a switch's batch if any update fails (emulated: BMv2 has no atomic writes)")
        p.add_argument("--exclude", action="append", default=[], metavar="SWITCH",
                       help="leave out a failed switch: routes are compiled around it (repeatable)")
        p.add_argument("--json", action="store_true")
        p.set_defaults(func=func)
    s = rsub.add_parser("show", help="read a switch's entries (natural notation)",
                        epilog="example: mlfabric rules show rail0 ipv4_lpm")
    add_switch_arguments(s)
    s.add_argument("table", nargs="?", help="only this table")
    s.set_defaults(func=_show)
    for kind in ("add", "delete"):
        p = rsub.add_parser(kind, help=f"{kind} one entry",
                            epilog=f"example: mlfabric rules {kind} rail0 ipv4_lpm dst_addr=10.9.0.0/16"
                                   + (" set_nexthop port=3 dmac=02:00:00:00:00:09 smac=02:5f:00:01:00:03" if kind == "add" else ""))
        add_switch_arguments(p)
        p.add_argument("table")
        p.add_argument("tokens", nargs="*", metavar="FIELD=VALUE|ACTION|PARAM=VALUE")
        p.add_argument("--priority", type=int, default=0, help="for ternary, range and optional tables")
        p.add_argument("--default", action="store_true", help="set the table's default action instead")
        p.set_defaults(func=_add_or_delete, kind="insert" if kind == "add" else "delete")
