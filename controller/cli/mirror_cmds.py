"""``mlfabric mirror add|remove|show|plan JOB``: Checkmate gradient mirroring for one job."""

from __future__ import annotations

import argparse
from pathlib import Path

from controller.cli.output import add_json_flag, emit, format_table
from controller.cli.switch_args import topology_path
from controller.mirror import (
    compile_mirror,
    install_mirror,
    load_job,
    read_mirror,
    remove_mirror,
    resolve_job,
)
from controller.mirror.compile import MirrorProgram
from controller.topology import load_topology

__all__ = ["register"]


def _program(args: argparse.Namespace) -> MirrorProgram:
    path = topology_path(args.topology, f"mirror job {args.job}")
    return compile_mirror(resolve_job(load_job(args.job), load_topology(path)))


def _legs(program: MirrorProgram) -> list[dict[str, object]]:
    return [{"switch": lg.switch, "sender": lg.leg.sender, "receiver": lg.leg.receiver,
             "flow": f"{lg.src_ip} -> {lg.dst_ip}:{lg.dst_port}", "steps": ",".join(map(str, lg.leg.steps)),
             "chunks": ",".join(map(str, lg.leg.chunks)), "relayed": lg.leg.relayed,
             "shadow port": lg.shadow_port, "shadow nic": lg.shadow_nic} for lg in program.legs]


def _plan(args: argparse.Namespace) -> int:
    program = _program(args)
    spec = program.job.spec
    head = (f"job {spec.name}: {spec.world} workers, session {spec.session}, shadow {spec.shadow}, "
            f"ring {spec.ring} {program.plan.ring.order}")
    emit({"job": spec.name, "legs": _legs(program)}, as_json=args.json,
         text=head + "\n" + format_table(_legs(program)))
    return 0


def _add(args: argparse.Namespace) -> int:
    program = _program(args)
    switches = install_mirror(program, election_id=args.election_id)
    emit({"job": program.job.spec.name, "switches": switches, "legs": _legs(program)}, as_json=args.json,
         text=f"mirror {program.job.spec.name}: installed on {', '.join(switches)}\n"
              + format_table(_legs(program)))
    return 0


def _remove(args: argparse.Namespace) -> int:
    program = _program(args)
    n = remove_mirror(program, election_id=args.election_id)
    emit({"job": program.job.spec.name, "deleted": n}, as_json=args.json,
         text=f"mirror {program.job.spec.name}: deleted {n} entries and sessions")
    return 0


def _show(args: argparse.Namespace) -> int:
    program = _program(args)
    rows = [{"switch": r.switch, "flow": f"{r.src} -> {r.dst}:{r.dst_port}", "clone session": r.clone_session,
             "packets": r.packets, "bytes": r.bytes} for r in read_mirror(program)]
    missing = len(program.legs) - len(rows)
    emit({"job": program.job.spec.name, "entries": rows, "missing": missing}, as_json=args.json,
         text=format_table(rows) + (f"\n{missing} of the job's entries are not installed" if missing else ""))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("mirror", help="Checkmate gradient mirroring of a training job to its shadow")
    msub = m.add_subparsers(dest="mirror_command", metavar="ACTION", required=True)
    for name, func, helptext, example in (
        ("plan", _plan, "the mirrored legs, switches and shadow ports (offline)",
         "mlfabric mirror plan topologies/jobs/digits-4x2.yaml --topology topologies/rail-only-5x2-shadow.yaml"),
        ("add", _add, "install the job's mirror entries and clone sessions (all or nothing)",
         "mlfabric mirror add topologies/jobs/digits-4x2.yaml"),
        ("remove", _remove, "delete exactly the job's entries and clone sessions",
         "mlfabric mirror remove topologies/jobs/digits-4x2.yaml"),
        ("show", _show, "the job's installed entries with their packet and byte counters",
         "mlfabric mirror show topologies/jobs/digits-4x2.yaml --json"),
    ):
        p = msub.add_parser(name, help=helptext, epilog=f"example: {example}")
        p.add_argument("job", type=Path, help="the job file (YAML)")
        p.add_argument("--topology", type=Path, default=None,
                       help="topology file (default: $MLFABRIC_TOPOLOGY or the running emulation's)")
        p.add_argument("--election-id", type=int, default=1 if name in ("add", "remove") else 0,
                       help="this controller's election id (reads use 0, a backup, so they never take mastership)")
        add_json_flag(p)
        p.set_defaults(func=func)
