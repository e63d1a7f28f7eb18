"""``mlfabric aggregate plan|add|remove|show``: in-network aggregation (SwitchML) jobs on the
rail switches."""

from __future__ import annotations

import argparse
from pathlib import Path

from controller.aggregate import (
    AggregationProgram,
    SwitchAggregationState,
    compile_aggregation,
    install_aggregation,
    load_job,
    read_aggregation,
    remove_aggregation,
    resolve_job,
)
from controller.cli.output import add_json_flag, emit, format_table
from controller.cli.running_fabric import running_fabric, with_fabric_addresses
from controller.cli.switch_args import topology_path
from controller.topology import load_topology
from controller.topology.model import Topology

__all__ = ["register"]


def _topology(args: argparse.Namespace, what: str, *, live: bool = True) -> Topology:
    path = topology_path(args.topology, what)
    topo = load_topology(path)
    return with_fabric_addresses(topo, path, running_fabric()) if live else topo


def _which(text: str) -> int | str:
    """A job id, the job id of a job file, or a name."""
    if text.isdigit():
        return int(text)
    if text.endswith((".yaml", ".yml")) or Path(text).is_file():
        return load_job(text).job
    return text


def _workers(program: AggregationProgram) -> list[dict[str, object]]:
    groups = {g.switch: g for g in program.job.groups}
    return [{"switch": sw.switch, "rail": sw.rail, "rank": w.rank, "host": w.host, "ip": w.ip, "port": w.port,
             "bit": w.index, "rid": w.index + 1, "pool": f"[{sw.pool_base}, {sw.pool_base + sw.pool_size})"}
            for sw in program.switches for w in groups[sw.switch].workers]


def _plan(args: argparse.Namespace) -> int:
    spec = load_job(args.job)
    resolved = resolve_job(spec, _topology(args, f"aggregation job {args.job}", live=False))
    program = compile_aggregation(resolved, pool_bases=dict.fromkeys(resolved.switch_names, 0), epoch=1)
    head = (f"job {spec.name} (id {spec.job}): {len(spec.workers)} workers in {len(program.switches)} rail groups, "
            f"{spec.slots} slots per switch, multicast group {program.switches[0].mgid:#x} "
            "(pools shown as on empty switches)")
    emit({"job": spec.name, "id": spec.job, "workers": _workers(program)}, as_json=args.json,
         text=head + "\n" + format_table(_workers(program)))
    return 0


def _add(args: argparse.Namespace) -> int:
    spec = load_job(args.job)
    topo = _topology(args, f"aggregation job {args.job}")
    program = install_aggregation(topo, spec, epoch=args.epoch, election_id=args.election_id)
    pools = ", ".join(f"{sw.switch} [{sw.pool_base}, {sw.pool_base + sw.pool_size})" for sw in program.switches)
    emit({"job": spec.name, "id": spec.job, "epoch": program.epoch, "switches": list(program.switch_names),
          "workers": _workers(program)}, as_json=args.json,
         text=f"aggregate {spec.name} (id {spec.job}, epoch {program.epoch}): installed on {pools}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    which = _which(args.job)
    done = remove_aggregation(_topology(args, f"aggregation job {args.job}"), which, election_id=args.election_id)
    emit({"job": done.name, "id": done.job, "switches": list(done.switches), "deleted": done.deleted},
         as_json=args.json,
         text=f"aggregate {done.name or '(unnamed)'} (id {done.job}): deleted {done.deleted} entries and groups "
              f"on {', '.join(done.switches)}")
    return 0


def _state_dict(state: SwitchAggregationState) -> dict[str, object]:
    return {"switch": state.switch,
            "jobs": [{"id": j.job, "name": j.name, "workers": [w.ip for w in j.workers], "group": j.group_size,
                      "pool": list(j.pool), "epoch": j.epoch, "mgid": j.mgid, "shadow": j.shadow,
                      "packets": sum(w.packets for w in j.workers)} for j in state.jobs],
            "events": {name: {"packets": p, "bytes": b} for name, (p, b) in state.events.items()}}


def _show(args: argparse.Namespace) -> int:
    which = None if args.job is None else _which(args.job)
    states = read_aggregation(_topology(args, "aggregate show"), which, election_id=args.election_id)
    jobs = [{"switch": s.switch, "id": j.job, "name": j.name, "workers": f"{len(j.workers)}/{j.group_size}",
             "pool": f"[{j.pool[0]}, {j.pool[1]})", "epoch": j.epoch, "shadow": j.shadow or "-",
             "packets": sum(w.packets for w in j.workers)}
            for s in states for j in s.jobs]
    events = [{"switch": s.switch, **{name: p for name, (p, _b) in s.events.items()}} for s in states]
    emit([_state_dict(s) for s in states], as_json=args.json,
         text=format_table(jobs) + "\n\nagg_events (packets)\n" + format_table(events))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser("aggregate", help="in-network aggregation (SwitchML) of training jobs on the rail switches")
    asub = a.add_subparsers(dest="aggregate_command", metavar="ACTION", required=True)
    for name, func, helptext, example in (
        ("plan", _plan, "the job's rail groups: switch, workers' bits, ports and rids (offline)",
         "mlfabric aggregate plan topologies/jobs/aggregate-rail-only-4x4.yaml --topology topologies/rail-only-4x4.yaml"),
        ("add", _add, "install the job's pools, multicast groups and entries (all or nothing)",
         "mlfabric aggregate add topologies/jobs/aggregate-rail-only-4x4.yaml"),
        ("remove", _remove, "delete exactly the job's entries and multicast groups on every switch",
         "mlfabric aggregate remove aggregate-rail-only-4x4"),
        ("show", _show, "the jobs installed on each switch and its agg_events counters",
         "mlfabric aggregate show --json"),
    ):
        p = asub.add_parser(name, help=helptext, epilog=f"example: {example}")
        if name in ("plan", "add"):
            p.add_argument("job", type=Path, help="the job file (YAML)")
        elif name == "remove":
            p.add_argument("job", help="the job: its id, its name, or its job file")
        else:
            p.add_argument("job", nargs="?", default=None,
                           help="only this job: its id, its name, or its job file (default: every job)")
        p.add_argument("--topology", type=Path, default=None,
                       help="topology file (default: $MLFABRIC_TOPOLOGY or the running emulation's); "
                            "without gRPC addresses, those of the fabric running from it")
        if name == "add":
            p.add_argument("--epoch", type=int, default=None,
                           help="the pools' epoch, a non-zero 32-bit value never used on these slots before "
                                "(default: from the time in ms)")
        if name != "plan":
            p.add_argument("--election-id", type=int, default=0 if name == "show" else 1,
                           help="this controller's election id (show uses 0, a backup, so it never takes mastership)")
        add_json_flag(p)
        p.set_defaults(func=func)
