"""``mlfabric schedule gen|check|show``: reconfiguration schedules of optical fabrics."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from controller.cli.output import add_json_flag, emit, format_table
from controller.errors import ConfigError
from controller.schedule import (
    ROUTINGS,
    Schedule,
    dump_schedule,
    load_schedule,
    one_shot,
    opera,
    round_robin,
    schedule_to_dict,
    slots,
    strobe_matching,
    timeflow,
)
from controller.topology.model import Topology

__all__ = ["register"]


def _gen(args: argparse.Namespace) -> int:
    if args.kind == "round-robin":
        s = round_robin(args.racks, slice_us=args.slice_us, night_us=args.night_us)
    elif args.kind == "opera":
        s = opera(args.racks, uplinks=args.uplinks, slice_us=args.slice_us, night_us=args.night_us)
    else:
        try:
            days = [int(d) for d in args.days.split(",")]
        except ValueError:
            raise ConfigError("<schedule gen>", "--days", args.days, "a comma-separated list of days") from None
        bad = [d for d in days if not 1 <= d < args.racks]
        if bad:
            raise ConfigError("<schedule gen>", "--days", args.days, f"days are 1..{args.racks - 1}")
        s = one_shot([strobe_matching(args.racks, d - 1) for d in days],
                     name=f"one-shot-{args.racks}-days-{'-'.join(map(str, days))}")
    if args.output:
        try:
            dump_schedule(s, args.output)
        except OSError as exc:
            raise ConfigError(str(args.output), "-o", str(args.output), f"cannot write: {exc.strerror}") from None
        emit(schedule_to_dict(s), as_json=args.json, text=f"wrote {args.output}: {_one_line(s)}")
    else:
        import yaml

        print(yaml.safe_dump(schedule_to_dict(s), sort_keys=False, default_flow_style=None), end="")
    return 0


def _one_line(s: Schedule) -> str:
    if s.kind == "one-shot":
        return f"{s.name}: one-shot, {s.racks} racks, {len(s.circuits)} circuit switch(es), pinned"
    return (f"{s.name}: {s.kind}, {s.racks} racks, {len(s.circuits)} circuit switch(es), "
            f"{s.slice_us} us days + {s.night_us} us nights (duty cycle {s.duty_cycle:.0%}), cycle {s.cycle_us} us")


def _check(args: argparse.Namespace) -> int:
    s = load_schedule(args.file)
    emit({"ok": True, "schedule": s.name}, as_json=args.json, text=f"ok: {_one_line(s)}")
    return 0


def _waits(s: Schedule, routing: str) -> dict[str, object]:
    """Calendar-queue wait of a host's packet, over every (source, destination, arrival slot)."""
    grid = slots(s)
    waits = [e.wait_slots * grid.slot_us for e in timeflow(s, routing) if not e.transit]
    return {"routing": routing, "mean wait us": round(statistics.fmean(waits), 1), "max wait us": max(waits)}


def _show_live(args: argparse.Namespace) -> int:
    """The running fabric's circuit switches, read back: version, cycle, days, where each is now."""
    from controller.install import pipeline_schema
    from controller.p4runtime.client import P4RuntimeClient
    from controller.schedule.install import circuit_switches
    from controller.schedule.readback import read_circuit_switch

    topo = _live_topology(args)
    views = []
    for sw in circuit_switches(topo):
        if not sw.grpc:
            raise ConfigError(topo.name, f"switches.{sw.name}.grpc", None, "no gRPC address: is the fabric running?")
        with P4RuntimeClient(sw.grpc, device_id=sw.device_id, election_id=0).connect() as c:
            views.append(read_circuit_switch(sw.name, c, pipeline_schema(sw.program)[0]))
    rows = []
    for v in views:
        for start, end, index in v.windows or [(0, 0, 0)]:
            pairs = v.matchings.get(index, ())
            rows.append({"switch": v.switch, "version": v.version,
                         "cycle us": v.cycle_us or "pinned", "slice": index,
                         "window us": f"{start}-{end}" if v.cycle_us else "-",
                         "circuits": " ".join(f"{a}->{b}" for a, b in pairs) or "dark",
                         "now": ("<- now, " + f"{v.left_us} us left") if v.cycle_us and v.now == index else ""})
        if v.cycle_us and v.now is None:
            rows.append({"switch": v.switch, "version": v.version, "cycle us": v.cycle_us, "slice": "night",
                         "window us": "-", "circuits": "dark", "now": f"<- now, {v.left_us} us left"})
    pending = [v.switch for v in views if v.pending_flip]
    text = [f"{topo.name}: {len(views)} circuit switch(es), read back live", "", format_table(rows)]
    if pending:
        text.append(f"a reconfiguration is committed but not finished on: {', '.join(pending)}")
    emit({"topology": topo.name, "circuit_switches": [
        {"switch": v.switch, "version": v.version, "cycle_us": v.cycle_us, "windows": v.windows,
         "matchings": {str(k): v2 for k, v2 in v.matchings.items()}, "now": v.now, "left_us": v.left_us,
         "pending_flip": v.pending_flip} for v in views]}, as_json=args.json, text="\n".join(text))
    return 0


def _show(args: argparse.Namespace) -> int:
    if args.file is None:
        return _show_live(args)
    s = load_schedule(args.file)
    rows = []
    for c, plan in enumerate(s.circuits):
        for i, m in enumerate(plan.slices):
            rows.append({"circuit": c, "slice": i,
                         "start us": plan.offset_us + i * s.period_us if s.kind != "one-shot" else 0,
                         "circuits": " ".join(f"{a}->{b}" for a, b in enumerate(m) if b is not None)})
    waits = [_waits(s, r) for r in ROUTINGS]
    data = {**schedule_to_dict(s), "duty_cycle": s.duty_cycle, "cycle_us": s.cycle_us, "waits": waits}
    text = [_one_line(s), "", format_table(rows), "", "wait in the calendar queue (first hop, host traffic):",
            format_table(waits)]
    if args.at is not None:
        now = [{"circuit": c, "slice": a.index if a.index is not None else "night", "left us": a.left_us}
               for c in range(len(s.circuits)) for a in [s.at(c, args.at)]]
        data["at"] = now
        text += ["", f"at {args.at} us after the epoch:", format_table(now)]
    emit(data, as_json=args.json, text="\n".join(text))
    return 0


def _live_topology(args: argparse.Namespace) -> Topology:
    from controller.cli.switch_args import topology_path
    from controller.topology import load_topology

    return load_topology(topology_path(args.topology, f"schedule {args.schedule_command}"))


def _install(args: argparse.Namespace) -> int:
    from controller.schedule.install import install_schedule

    s = load_schedule(args.file)
    epoch, reports = install_schedule(_live_topology(args), s, routing=args.routing, probes=args.probes,
                                      hold=args.calendar_queues, margin_us=args.margin_us)
    rows = [{"switch": r.switch, "circuit": r.circuit if r.circuit >= 0 else "-", "offset us": r.offset_us,
             "skew bound us": round(r.skew_bound_us, 1), "entries": r.entries} for r in reports]
    emit({"schedule": s.name, "epoch_us": epoch, "switches": rows}, as_json=args.json,
         text=f"{_one_line(s)}\ninstalled on a common epoch (controller clock {epoch:.0f} us):\n"
         + format_table(rows))
    return 0


def _stop(args: argparse.Namespace) -> int:
    from controller.schedule.install import stop_schedule

    done = stop_schedule(_live_topology(args))
    emit({"stopped": done}, as_json=args.json, text=f"circuit switches dark: {', '.join(done) or 'none'}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("schedule", help="reconfiguration schedules of optical fabrics (files, generators)")
    ssub = p.add_subparsers(dest="schedule_command", metavar="ACTION", required=True)
    g = ssub.add_parser("gen", help="write a schedule: round-robin (strobe), opera or one-shot",
                        epilog="examples: mlfabric schedule gen round-robin --racks 4 --slice-us 10000 "
                               "--night-us 1000 -o topologies/schedules/rr-4.yaml\n"
                               "          mlfabric schedule gen opera --racks 8 --uplinks 2\n"
                               "          mlfabric schedule gen one-shot --racks 4 --days 1,2,3",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("kind", choices=("round-robin", "opera", "one-shot"), help="the schedule's family")
    g.add_argument("--racks", type=int, required=True, help="ToRs in the fabric")
    g.add_argument("--slice-us", type=int, default=10_000, help="a day: how long a matching holds")
    g.add_argument("--night-us", type=int, default=1_000, help="reconfiguration gap after each day")
    g.add_argument("--uplinks", type=int, default=2, help="opera: circuit switches (ToR uplinks)")
    g.add_argument("--days", default="1", help="one-shot: the strobe day (1..racks-1) each circuit switch pins, "
                   "comma-separated (a topology: circuit switch k connects rack j to rack j + day_k)")
    g.add_argument("-o", "--output", type=Path, default=None, help="file to write (default: print YAML)")
    add_json_flag(g)
    g.set_defaults(func=_gen)
    c = ssub.add_parser("check", help="check a schedule file offline",
                        epilog="example: mlfabric schedule check topologies/schedules/rr-4.yaml")
    c.add_argument("file", type=Path, help="the schedule file (YAML)")
    add_json_flag(c)
    c.set_defaults(func=_check)
    i = ssub.add_parser("install", help="install a schedule on the running fabric's circuit switches, one epoch",
                        epilog="example: mlfabric schedule install topologies/schedules/round-robin-4.yaml")
    i.add_argument("file", type=Path, help="the schedule file (YAML)")
    i.add_argument("--topology", type=Path, default=None, help="topology with gRPC addresses (default: the running one)")
    i.add_argument("--probes", type=int, default=16, help="clock probes per switch")
    i.add_argument("--routing", choices=ROUTINGS, default="direct", help="the ToRs' time-flow routing")
    i.add_argument("--margin-us", type=int, default=0, help="the ToRs send nothing in the first and last MARGIN "
                   "us of a day (latency and clock skew)")
    i.add_argument("--calendar-queues", action="store_true",
                   help="the ToRs hold what waits (Python target started with --calendar-queue release_us)")
    add_json_flag(i)
    i.set_defaults(func=_install)
    t = ssub.add_parser("stop", help="every circuit switch dark: its slices and circuits deleted",
                        epilog="example: mlfabric schedule stop")
    t.add_argument("--topology", type=Path, default=None, help="topology with gRPC addresses (default: the running one)")
    add_json_flag(t)
    t.set_defaults(func=_stop)
    s = ssub.add_parser("show", help="a schedule file's slices, duty cycle and calendar-queue waits; "
                                     "without a file, the running fabric's, read back from its circuit switches",
                        epilog="examples: mlfabric schedule show topologies/schedules/round-robin-4.yaml --at 25000\n"
                               "          mlfabric schedule show            # the running fabric, live",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("file", type=Path, nargs="?", default=None, help="the schedule file (default: read the running fabric)")
    s.add_argument("--topology", type=Path, default=None, help="live: topology with gRPC addresses "
                   "(default: the running one)")
    s.add_argument("--at", type=int, default=None, help="also say where each circuit is at this time (us)")
    add_json_flag(s)
    s.set_defaults(func=_show)
