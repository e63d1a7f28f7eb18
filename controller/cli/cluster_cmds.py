"""``mlfabric cluster check|plan|stand-ins``: the machines a fabric spreads over (docs/cluster.md).

``check MACHINES`` asks every machine, over SSH, whether it has what a fabric needs; ``plan
TOPOLOGY MACHINES`` prints where each node would run and the bytes the model says cross
machines; ``stand-ins N`` runs N stand-in machines (network namespaces with an SSH server
each) on this one until interrupted, and writes their machines file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from controller.cli.output import add_json_flag, emit, format_table
from controller.topology.model import JUMBO_MTU, Topology
from mlfabric_base.numbers import nonnegative_float, positive_int

if TYPE_CHECKING:
    from controller.cluster import Machines, Placement

__all__ = ["register"]


def _check(args: argparse.Namespace) -> int:
    from controller.cluster import load_machines
    from controller.cluster.check import check_machines

    machines = load_machines(args.machines)
    checks = check_machines(machines, link_mtu=args.mtu)
    rows = []
    for c in checks:
        f = c.facts
        rows.append({"machine": c.machine, "ready": "yes" if c.ok else "NO", "cores": f.get("cores", "-"),
                     "mininet": f.get("mininet") or "-", "project": f.get("project") or "-",
                     "bmv2": (f.get("bmv2") or "-").replace("simple_switch_grpc ", "")[:24],
                     "pipelines": f.get("pipelines") or "-",
                     "problems": "; ".join(c.problems) or "-", "notes": "; ".join(c.notes) or "-"})
    ok = all(c.ok for c in checks)
    emit({"machines": rows, "ok": ok}, as_json=args.json,
         text=format_table(rows) + ("\nevery machine is ready" if ok else "\nnot ready: see problems"))
    return 0 if ok else 1


def _plan(args: argparse.Namespace) -> int:
    from controller.cluster import load_machines, place
    from controller.cluster.placement import placement_info, placement_text
    from controller.topology import load_topology

    topo = load_topology(args.topology)
    machines = load_machines(args.machines)
    p = place(topo, machines, gpu_bytes=args.gpu_mb * 2**20)
    rows = []
    for m in machines.machines:
        nodes = p.nodes_on(m.name)
        hosts = [n for n in nodes if n in p.hosts]
        gpus = sum(topo.host(h).gpus or len(topo.host(h).nics) for h in hosts)
        rows.append({"machine": m.name, "cores": m.cores, "hosts": len(hosts), "gpus": gpus,
                     "switches": len(nodes) - len(hosts), "gpus_per_core": round(gpus / m.cores, 2),
                     "nodes": " ".join(nodes)})
    pairs = [{"between": f"{a} - {b}", "links": sum(1 for i in p.cross_links
                                                     if {p.machine_of[topo.links[i].a.node],
                                                         p.machine_of[topo.links[i].b.node]} == {a, b}),
              "mb_per_iteration": round(v / 2**20, 1)} for (a, b), v in p.cross_bytes.items()]
    others = _edition_placers(topo, machines, args.gpu_mb * 2**20)
    compared = [_placer_row("mlfabric (this plan)", topo, p), *(_placer_row(n, topo, q) for n, q in others.items())]
    text = (f"{topo.name} on {args.machines}: {placement_text(p, machines)}\n\n" + format_table(rows)
            + ("\n\ncrossing machines (the model's bytes per iteration, each GPU sending "
               f"{args.gpu_mb:g} MiB):\n" + format_table(pairs) if pairs else "\n\nno link crosses machines")
            + ("\n\nagainst Mininet's cluster edition's placers (the same model):\n" + format_table(compared)
               if others else ""))
    emit({"topology": topo.name, "machines": rows, "crossing": pairs, "placers": compared,
          **placement_info(p, machines)}, as_json=args.json, text=text)
    return 0


def _edition_placers(topo: Topology, machines: Machines, gpu_bytes: float) -> dict[str, Placement]:
    """The cluster edition's placers on ``topo`` (none where Mininet is not importable)."""
    from controller.cluster.placement import evaluate
    from controller.emulation import load_emulation_module

    try:
        placers = load_emulation_module("cluster_placers")
    except ImportError:
        return {}
    return {name: evaluate(topo, machines, placers.edition_placement(name, topo, machines), gpu_bytes=gpu_bytes)
            for name in placers.PLACERS}


def _placer_row(name: str, topo: Topology, p: Placement) -> dict[str, object]:
    switches = [sum(1 for s in topo.switches if p.machine_of[s.name] == m) for m in set(p.machine_of.values())]
    gpus = [sum(topo.host(h).gpus or len(topo.host(h).nics) for h in p.hosts if p.machine_of[h] == m)
            for m in set(p.machine_of.values())]
    return {"placer": name, "links_crossing": len(p.cross_links), "bytes_crossing": f"{p.cross_share:.0%}",
            "most_switches_on_one": max(switches, default=0), "most_gpus_on_one": max(gpus, default=0)}


def _stand_ins(args: argparse.Namespace) -> int:
    from controller.emulation import run_emulation_module

    argv = [str(args.count), "--prefix", args.prefix]
    if args.folder:
        argv += ["--folder", str(args.folder)]
    if args.duration:
        argv += ["--for", str(args.duration)]
    return run_emulation_module("standin_machines", argv)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="fabrics across machines: check them, plan a placement, stand machines in")
    csub = p.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    ck = csub.add_parser("check", help="per machine (over SSH): root, Mininet, the project and its pipelines, "
                                       "BMv2, tunnels and the underlay's MTU",
                         epilog="example: mlfabric cluster check machines.yaml")
    ck.add_argument("machines", type=Path, help="the machines file (docs/cluster.md)")
    ck.add_argument("--mtu", type=positive_int, default=JUMBO_MTU,
                    help="the fabric's frames the tunnels must carry (default: %(default)s)")
    add_json_flag(ck)
    ck.set_defaults(func=_check)
    pl = csub.add_parser("plan", help="where each node of a topology would run, and the bytes crossing machines",
                         epilog="example: mlfabric cluster plan topologies/rail-only-4x4.yaml machines.yaml")
    pl.add_argument("topology", type=Path, help="the topology file")
    pl.add_argument("machines", type=Path, help="the machines file")
    pl.add_argument("--gpu-mb", type=nonnegative_float, default=33.0,
                    help="MiB each GPU sends per iteration, weighting the links (default: the rail-only "
                         "experiment's, 33)")
    add_json_flag(pl)
    pl.set_defaults(func=_plan)
    si = csub.add_parser("stand-ins", help="run N stand-in machines (network namespaces with sshd) until Ctrl-C "
                                           "(root)",
                         epilog="example: mlfabric cluster stand-ins 2 --folder /tmp/machines")
    si.add_argument("count", type=positive_int, help="how many (1-16)")
    si.add_argument("--folder", type=Path, default=None,
                    help="for the machines file, the SSH key and config (default: results/stand-ins-TIME)")
    si.add_argument("--prefix", default="mlfc", help="of the namespaces and the bridge (default: %(default)s)")
    si.add_argument("--for", dest="duration", type=nonnegative_float, default=None, help="stop after this many seconds")
    si.set_defaults(func=_stand_ins)
