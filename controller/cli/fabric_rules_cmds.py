"""``mlfabric rules install|diff|sync TOPOLOGY``: the compiled rules of a whole fabric."""

from __future__ import annotations

import argparse
from pathlib import Path

from controller.cli.diff_format import diff_entries, diff_lines
from controller.cli.output import emit, format_table
from controller.cli.running_fabric import running_fabric, with_fabric_addresses
from controller.errors import MlfabricError
from controller.install import (
    InstallOptions,
    SwitchReport,
    diff_fabric,
    install_fabric,
    pipeline_schema,
    sync_fabric,
)
from controller.progress import MultiProgress
from controller.topology import load_topology, require_valid
from controller.topology.model import Topology

__all__ = ["register_fabric_commands"]


def _load(args: argparse.Namespace) -> Topology:
    """The topology, with gRPC addresses (its own or the running fabric's), less --exclude."""
    topo = require_valid(load_topology(args.topology_file), str(args.topology_file))
    topo = with_fabric_addresses(topo, args.topology_file, running_fabric())
    if args.exclude:
        try:
            topo = topo.without(set(args.exclude))
        except KeyError as exc:
            raise MlfabricError(str(exc.args[0])) from None
    return topo


def _report_rows(reports: list[SwitchReport]) -> list[dict]:
    return [{"switch": r.switch, "entries": r.entries, "seconds": round(r.seconds, 3),
             "status": "ok" if r.error is None else f"FAILED: {r.error}",
             **({"diff": r.diff.summary()} if r.diff is not None else {})} for r in reports]


def _options(args: argparse.Namespace) -> InstallOptions:
    return InstallOptions(batch_size=args.batch_size, atomic=args.atomic)


def _install(args: argparse.Namespace) -> int:
    topo = _load(args)
    progress = None if args.json else MultiProgress([s.name for s in topo.switches])
    reports = install_fabric(topo, options=_options(args), progress=progress)
    rows = _report_rows(reports)
    total = sum(r.entries for r in reports)
    emit(rows, as_json=args.json, text=format_table(rows) + f"\n{total} entries on {len(reports)} switches")
    return 0 if all(r.error is None for r in reports) else 1


def _diff(args: argparse.Namespace) -> int:
    topo = _load(args)
    reports = diff_fabric(topo, options=_options(args))
    rows = _report_rows(reports)
    text = [format_table(rows)]
    for row, rep in zip(rows, reports, strict=True):
        if rep.diff is None or rep.diff.in_sync:
            continue
        schema = pipeline_schema(topo.switch(rep.switch).program)[0]
        row.update(diff_entries(schema, rep.diff))
        text += ["", f"{rep.switch}: {rep.diff.summary()}"]
        text += [f"  {line}" for line in diff_lines(schema, rep.diff, args.limit)]
    emit(rows, as_json=args.json, text="\n".join(text))
    return 0 if all(r.error is None and r.diff and r.diff.in_sync for r in reports) else 1


def _sync(args: argparse.Namespace) -> int:
    topo = _load(args)
    progress = None if args.json else MultiProgress([s.name for s in topo.switches])
    reports = sync_fabric(topo, options=_options(args), progress=progress)
    emit(_report_rows(reports), as_json=args.json)
    return 0 if all(r.error is None for r in reports) else 1


def register_fabric_commands(rsub: argparse._SubParsersAction) -> None:
    """Add ``install``, ``diff`` and ``sync`` to the ``rules`` subcommands."""
    for name, func, helptext in (("install", _install, "compile the topology's rules and install them on every switch"),
                                 ("diff", _diff, "compare every switch with the compiled rules and list what differs"),
                                 ("sync", _sync, "make every switch hold exactly the compiled rules")):
        p = rsub.add_parser(name, help=helptext, epilog=f"example: mlfabric rules {name} topologies/rail-only-4x4.yaml")
        p.add_argument("topology_file", type=Path, metavar="TOPOLOGY",
                       help="topology file; switches without a gRPC address take the running fabric's "
                            "(the one `mlfabric fabric up TOPOLOGY` brought up)")
        p.add_argument("--batch-size", type=int, default=1000, help="updates per Write request (default 1000)")
        p.add_argument("--atomic", action="store_true",
                       help="roll back a switch's batch if any update fails (emulated: BMv2 has no atomic writes)")
        p.add_argument("--exclude", action="append", default=[], metavar="SWITCH",
                       help="leave out a failed switch: routes are compiled around it (repeatable)")
        p.add_argument("--json", action="store_true", help="JSON output" + (": every differing entry" if name == "diff" else ""))
        if name == "diff":
            p.add_argument("--limit", type=int, default=10, metavar="N",
                           help="list at most N differing entries per switch in text (default 10, 0: all; "
                                "--json lists all)")
        p.set_defaults(func=func)
