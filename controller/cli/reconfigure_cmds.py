"""``mlfabric reconfigure FILE``: move the running optical fabric to another schedule (a one-shot
schedule is a topology: one pinned matching per circuit switch), make-before-break."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from controller.cli.output import add_json_flag, emit, format_table
from controller.schedule import ROUTINGS, load_schedule

__all__ = ["register"]


def _reconfigure(args: argparse.Namespace) -> int:
    from controller.cli.switch_args import topology_path
    from controller.experiments.results import interrupt_on_signals
    from controller.reconfigure.apply import reconfigure
    from controller.topology import load_topology

    schedule = load_schedule(args.file)
    topo = load_topology(topology_path(args.topology, "reconfigure"))
    # SIGTERM and SIGHUP unwind as Ctrl-C does: a reconfiguration stopped before its cut rolls back
    with interrupt_on_signals():
        r = reconfigure(topo, schedule, routing=args.routing, guard_us=args.guard_us, margin_us=args.margin_us,
                        lead_us=args.lead_us, probes=args.probes, finish=not args.no_finish,
                        progress=None if args.json else lambda line: print(line, file=sys.stderr, flush=True))
    rows = [{"switch": s.switch, "role": s.role, "prepared": s.prepared, "commit acked ms": round(s.acked_ms, 1),
             "before the cut ms": round(s.slack_ms, 1)} for s in r.switches]
    lines = [f"{topo.name} -> {schedule.name} (configuration version {r.version}), "
             f"guard {r.times.guard_us} us, worst clock skew {r.worst_skew_us:.0f} us",
             f"connected and surveyed in {r.probed_ms:.0f} ms; the last switch acknowledged the new "
             f"configuration and its flip {r.committed_ms:.0f} ms after the call",
             format_table(rows)]
    if r.finished_ms is not None:
        lines.append(f"finished {r.finished_ms:.0f} ms after the call; old entries deleted by {r.collected_ms:.0f} ms")
    else:
        lines.append("not finished (--no-finish): the next reconfigure or schedule install completes it")
    if r.finished_earlier:
        lines.append(f"first finished an interrupted reconfiguration on {', '.join(r.finished_earlier)}")
    if r.late:
        lines.append(f"warning: {', '.join(r.late)} acknowledged after the cut (raise --lead-us)")
    emit({"schedule": schedule.name, "version": r.version, "cut_us": r.times.cut_us,
          "ocs_flip_us": r.times.ocs_flip_us, "epoch_us": r.times.epoch_us, "probed_ms": r.probed_ms,
          "committed_ms": r.committed_ms, "finished_ms": r.finished_ms,
          "collected_ms": r.collected_ms, "worst_skew_us": r.worst_skew_us, "switches": rows,
          "late": r.late}, as_json=args.json, text="\n".join(lines))
    return 1 if r.late else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reconfigure", help="move the running optical fabric to another schedule or pinned topology, "
                            "make-before-break",
        description="Two-phase, time-versioned update: every switch gets the new configuration under the "
                    "other version and when to flip to it (ToRs stop using the old entries at the cut, "
                    "circuit switches flip inside the guard, ToRs use the new entries from the new epoch; "
                    "what must wait is held). The flip is inert until the cut: a switch that rejects its "
                    "part rolls every switch back before then.",
        epilog="examples: mlfabric reconfigure topologies/schedules/round-robin-4.yaml\n"
               "          mlfabric reconfigure pinned.yaml --routing direct --guard-us 4000",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=Path, help="a schedule file (mlfabric schedule gen); one-shot: a pinned topology")
    p.add_argument("--topology", type=Path, default=None, help="topology with gRPC addresses (default: the running one)")
    p.add_argument("--routing", choices=ROUTINGS, default="direct", help="the ToRs' time-flow routing")
    p.add_argument("--guard-us", type=int, default=None,
                   help="from the cut to the new epoch (default: 2 ms + twice the worst clock skew)")
    p.add_argument("--margin-us", type=int, default=0, help="ToRs send nothing in the first and last MARGIN of a day")
    p.add_argument("--lead-us", type=int, default=None, help="from the writes to the cut: time for every switch to take its part or roll back "
                        "(default: 100 ms + 150 us per entry written)")
    p.add_argument("--probes", type=int, default=8, help="clock probes per switch")
    p.add_argument("--no-finish", action="store_true", help="stop after the commit (the flip still happens)")
    add_json_flag(p)
    p.set_defaults(func=_reconfigure)
