"""``mlfabric topology gen|check|show|draw``."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from controller.cli.output import add_json_flag, emit, format_table
from controller.errors import ConfigError
from controller.topology import (
    check_topology,
    dump_topology,
    load_topology,
    optical,
    rail_fat_tree,
    rail_only,
    topoopt,
)
from controller.topology.generators import UPLINK_ROUTINGS
from controller.topology.model import JUMBO_MTU, MTU_RANGE, Topology
from mlfabric_base.numbers import positive_float

__all__ = ["register"]


def _gen(args: argparse.Namespace) -> int:
    low, high = MTU_RANGE
    if not low <= args.mtu <= high:
        raise ConfigError("<topology gen>", "--mtu", args.mtu, f"an MTU must be in {low}..{high} bytes")
    if args.kind == "rail-only":
        topo = rail_only(args.servers, args.gpus, radix=args.radix, rate_mbps=args.rate_mbps, mtu=args.mtu)
    elif args.kind == "fat-tree":
        topo = rail_fat_tree(args.servers, args.gpus, spines=args.spines, radix=args.radix,
                             oversubscription=args.oversubscription, rate_mbps=args.rate_mbps, mtu=args.mtu,
                             uplink_routing=args.uplink_routing)
    elif args.kind == "optical":
        topo = optical(args.servers, args.hosts, uplinks=args.uplinks, rate_mbps=args.rate_mbps, mtu=args.mtu)
    else:
        topo = topoopt(args.servers, args.degree, rate_mbps=args.rate_mbps, mtu=args.mtu)
    if args.output:
        dump_topology(topo, args.output)
    summary = _summary(topo)
    if args.output:
        emit(summary, as_json=args.json, text=f"wrote {args.output}: {_one_line(topo)}")
    else:
        import yaml

        from controller.topology.loader import topology_to_dict

        print(yaml.safe_dump(topology_to_dict(topo), sort_keys=False, width=120), end="")
    return 0


def _one_line(topo: Topology) -> str:
    extra = ""
    if topo.kind == "topoopt":
        extra = f", strides {topo.params['strides']}, diameter {topo.params['diameter']}"
    return f"{topo.kind}, {len(topo.hosts)} servers, {len(topo.switches)} switches, {len(topo.links)} links{extra}"


def _check(args: argparse.Namespace) -> int:
    topo = load_topology(args.file)
    errors = check_topology(topo, str(args.file))
    if args.json:
        emit({"file": str(args.file), "ok": not errors, "errors": [str(e) for e in errors]}, as_json=True)
    elif errors:
        for e in errors:
            print(e)
        print(f"{len(errors)} problem(s) in {args.file}")
    else:
        print(f"{args.file}: ok ({_one_line(topo)})")
    return 1 if errors else 0


def _summary(topo: Topology) -> dict:
    ports: Counter[str] = Counter()
    for lk in topo.links:
        for ep in (lk.a, lk.b):
            if topo.is_switch(ep.node):
                ports[ep.node] += 1
    per_rail = Counter(n.rail for h in topo.hosts for n in h.nics if n.rail is not None)
    return {
        "name": topo.name,
        "kind": topo.kind,
        "servers": len(topo.hosts),
        "links": len(topo.links),
        "switches": [
            {"switch": s.name, "role": s.role, "rail": "" if s.rail is None else s.rail, "device_id": s.device_id,
             "ports": ports[s.name], "program": s.program, "grpc": s.grpc or ""}
            for s in topo.switches
        ],
        "gpus_per_rail": {str(r): n for r, n in sorted(per_rail.items())},
        "params": {k: v for k, v in topo.params.items() if v is not None},
    }


def _show(args: argparse.Namespace) -> int:
    topo = load_topology(args.file)
    s = _summary(topo)
    text = "\n".join([
        f"{topo.name}: {_one_line(topo)}",
        "",
        format_table(s["switches"]),
        "",
        "GPUs per rail: " + (", ".join(f"rail {r}: {n}" for r, n in s["gpus_per_rail"].items()) or "-"),
    ])
    emit(s, as_json=args.json, text=text)
    return 0


#: what ``topology draw -o`` writes (matplotlib's formats a reader opens)
DRAW_FORMATS = (".png", ".pdf", ".svg")


def _draw(args: argparse.Namespace) -> int:
    from controller.topology.draw import draw_topology

    suffix = Path(args.output).suffix.lower()
    if suffix not in DRAW_FORMATS:
        raise ConfigError("<topology draw>", "-o", str(args.output),
                          f"draws {', '.join(DRAW_FORMATS)} files, not {suffix or 'a file without a suffix'}")
    topo = load_topology(args.file)
    out = draw_topology(topo, args.output)
    emit({"file": str(out)}, as_json=args.json, text=f"wrote {out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    topo = sub.add_parser("topology", help="generate, check, summarise and draw topology files")
    tsub = topo.add_subparsers(dest="topology_command", metavar="ACTION", required=True)

    g = tsub.add_parser("gen", help="generate a fabric",
                        epilog="examples: mlfabric topology gen rail-only --servers 4 --gpus 4 -o topologies/rail-only-4x4.yaml\n"
                               "          mlfabric topology gen fat-tree --servers 4 --gpus 4 --spines 2 -o ft.yaml\n"
                               "          mlfabric topology gen topoopt --servers 16 --degree 3\n"
                               "          mlfabric topology gen optical --servers 4 --hosts 1 --uplinks 1 -o topologies/optical-4x1.yaml",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("kind", choices=("rail-only", "fat-tree", "topoopt", "optical"), help="the fabric's family")
    g.add_argument("--servers", type=int, required=True, help="servers (HB domains); n for topoopt; racks for optical")
    g.add_argument("--hosts", type=int, default=1, help="hosts per rack (optical)")
    g.add_argument("--uplinks", type=int, default=1, help="ToR uplinks = circuit switches (optical)")
    g.add_argument("--gpus", type=int, default=8, help="GPUs per server = rails (rail fabrics)")
    g.add_argument("--degree", type=int, default=4, help="interfaces per server (topoopt)")
    g.add_argument("--radix", type=int, default=None, help="switch radix: rails larger than one switch become a per-rail Clos")
    g.add_argument("--spines", type=int, default=2, help="spine switches (fat-tree)")
    g.add_argument("--oversubscription", type=positive_float, default=1.0, help="leaf oversubscription (fat-tree)")
    g.add_argument("--uplink-routing", choices=UPLINK_ROUTINGS, default="ecmp",
                   help="how a leaf picks its uplink (fat-tree): ecmp hashes the 5-tuple; dst-server takes "
                        "destination server mod uplinks (d-mod-k), even for pairwise all-to-all rounds")
    g.add_argument("--rate-mbps", type=positive_float, default=100.0, help="link rate to shape in the emulation")
    g.add_argument("--mtu", type=int, default=JUMBO_MTU,
                   help=f"the fabric's MTU, bytes (default {JUMBO_MTU}: jumbo frames, as ML training fabrics run)")
    g.add_argument("-o", "--output", type=Path, help="write YAML here (default: print it)")
    add_json_flag(g)
    g.set_defaults(func=_gen)

    for name, func, helptext, example in (
        ("check", _check, "validate a topology file offline", "mlfabric topology check topologies/rail-only-4x4.yaml"),
        ("show", _show, "summary table: switches, ports, GPUs per rail", "mlfabric topology show topologies/rail-only-4x4.yaml"),
    ):
        p = tsub.add_parser(name, help=helptext, epilog=f"example: {example}")
        p.add_argument("file", type=Path, help="the topology file (YAML)")
        add_json_flag(p)
        p.set_defaults(func=func)
    d = tsub.add_parser("draw", help="draw the fabric as a PNG, rails coloured",
                        epilog="example: mlfabric topology draw topologies/rail-only-4x4.yaml -o fabric.png")
    d.add_argument("file", type=Path, help="the topology file (YAML)")
    d.add_argument("-o", "--output", type=Path, required=True, help="the PNG to write")
    add_json_flag(d)
    d.set_defaults(func=_draw)

