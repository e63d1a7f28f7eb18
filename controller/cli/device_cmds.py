"""``mlfabric pipeline|mcast|clone|counters|packet`` on one switch."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from google.protobuf import text_format
from p4.v1 import p4runtime_pb2

from controller.cli.output import emit, format_table
from controller.cli.switch_args import add_switch_arguments, connect, remote_schema
from controller.errors import MlfabricError
from controller.p4build import pipeline_files
from controller.p4runtime.client import P4ClientError, P4RuntimeClient
from controller.p4runtime.entities import (
    clone_session_entry,
    decode_rule,
    match_text,
    multicast_group_entry,
    update,
)
from controller.p4runtime.schema import CounterInfo, DirectCounterInfo, P4Schema, load_p4info
from controller.p4runtime.values import encode_int
from mlfabric_base.numbers import positive_float

__all__ = ["parse_replicas", "register"]


def parse_replicas(text: str) -> list[tuple[int, int]]:
    """``1,2,3`` or ``1:1,2:2`` (PORT or PORT:INSTANCE) -> [(port, instance), ...].

    >>> parse_replicas("1,2:7")
    [(1, 0), (2, 7)]
    """
    out = []
    for item in text.split(","):
        port, _, inst = item.strip().partition(":")
        if not port.isdigit() or (inst and not inst.isdigit()):
            raise MlfabricError(f"bad replica {item!r}: expected PORT or PORT:INSTANCE")
        out.append((int(port), int(inst or 0)))
    return out


def _pipeline_load(args: argparse.Namespace) -> int:
    if args.program:
        art = pipeline_files(args.program)
        json_path, p4info_path = art.json, art.p4info
    elif args.json_file and args.p4info:
        json_path, p4info_path = args.json_file, args.p4info
    else:
        raise MlfabricError("give --program NAME, or --json-file and --p4info")
    with connect(args) as client:
        client.set_pipeline(load_p4info(p4info_path), json_path.read_bytes(), cookie=args.cookie)
    emit({"switch": args.switch, "loaded": str(json_path)}, as_json=args.json, text=f"{args.switch}: loaded {json_path.name}")
    return 0


def _pipeline_get(args: argparse.Namespace) -> int:
    with connect(args) as client:
        config = client.get_pipeline("ALL")
    info = config.p4info
    summary = {"switch": args.switch, "cookie": config.cookie.cookie, "tables": [t.preamble.name for t in info.tables],
               "actions": len(info.actions), "counters": [c.preamble.name for c in info.counters],
               "device_config_bytes": len(config.p4_device_config)}
    if args.output:
        args.output.mkdir(parents=True, exist_ok=True)
        (args.output / "pipeline.json").write_bytes(config.p4_device_config)
        (args.output / "pipeline.p4info.txtpb").write_text(text_format.MessageToString(info))
        summary["written_to"] = str(args.output)
    emit(summary, as_json=args.json, text="\n".join(f"{k}: {v}" for k, v in summary.items()))
    return 0


def _pre(args: argparse.Namespace) -> int:
    kind = args.pre_kind
    with connect(args) as client:
        if args.op == "show":
            ent = p4runtime_pb2.Entity()
            if kind == "mcast":
                ent.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = args.id or 0
            else:
                ent.packet_replication_engine_entry.clone_session_entry.session_id = args.id or 0
            rows = []
            for e in client.read([ent]):
                pre = e.packet_replication_engine_entry
                msg = pre.multicast_group_entry if kind == "mcast" else pre.clone_session_entry
                ident = msg.multicast_group_id if kind == "mcast" else msg.session_id
                row = {"id": ident, "replicas": ",".join(f"{r.egress_port}:{r.instance}" for r in msg.replicas)}
                if kind == "clone":
                    row["truncate"] = msg.packet_length_bytes  # bytes a clone keeps, 0: all
                rows.append(row)
            emit(rows, as_json=args.json)
            return 0
        if args.id is None:
            raise MlfabricError(f"{kind} {args.op} needs an id")
        replicas = parse_replicas(args.ports) if args.ports else []
        if args.op != "delete" and not replicas:
            raise MlfabricError(f"{kind} {args.op} needs --ports")
        entry = (multicast_group_entry(args.id, replicas) if kind == "mcast"
                 else clone_session_entry(args.id, replicas, packet_length_bytes=args.truncate or 0))
        op = {"add": "insert", "modify": "modify", "delete": "delete"}[args.op]
        try:
            client.write([update(op, entry)])
        except P4ClientError as err:
            if kind == "clone" and args.truncate and "clone session in target" in str(err):
                raise MlfabricError(f"{args.switch}: clone session {args.id} with --truncate {args.truncate}: {err} "
                                    "(BMv2 does not implement truncation: leave out --truncate)") from None
            raise
    emit({"switch": args.switch, kind: args.id, "op": args.op}, as_json=args.json,
         text=f"{args.switch}: {kind} {args.id} {args.op} ok")
    return 0


def _counter_rows(client: P4RuntimeClient, schema: P4Schema, counter: CounterInfo | DirectCounterInfo,
                  index: int | None) -> list[dict]:
    """One row per cell: ``index`` for an indexed counter; for a direct one, the table and
    the match of the entry it counts, in natural notation."""
    if isinstance(counter, CounterInfo):
        return [{"counter": counter.name, "index": e.index.index, "packets": e.data.packet_count,
                 "bytes": e.data.byte_count} for e in client.read_counter(counter.id, index)]
    rows = []
    for e in client.read_direct_counters(counter.table_id):
        rule = decode_rule(schema, e.table_entry)
        rows.append({"counter": counter.name, "table": rule.table, "entry": match_text(schema, rule),
                     "packets": e.data.packet_count, "bytes": e.data.byte_count})
    return rows


def _counters(args: argparse.Namespace) -> int:
    with connect(args) as client:
        schema = remote_schema(client)
        counters: list[CounterInfo | DirectCounterInfo]
        if args.name:
            counters = [schema.any_counter(args.name)]
            if args.index is not None and isinstance(counters[0], DirectCounterInfo):
                raise MlfabricError(f"--index is for indexed counters: {counters[0].name} is a direct counter "
                                    f"(one cell per entry of {schema.table(counters[0].table_id).name})")
        else:
            counters = [*schema.counters, *([] if args.index is not None else schema.direct_counters)]
        rows = [row for c in counters for row in _counter_rows(client, schema, c, args.index)
                if args.all or row["packets"] or row["bytes"] or args.index is not None]
    emit(rows, as_json=args.json, text=format_table(rows) if rows else f"{args.switch}: all counters are zero")
    return 0


def _packet_send(args: argparse.Namespace) -> int:
    from controller.frames import dissect, frame_from_hex, frame_from_scapy

    payload = frame_from_scapy(args.scapy) if args.scapy else frame_from_hex(args.hex)
    with connect(args) as client:
        schema = remote_schema(client)
        meta = schema.packet_metadata.get("packet_out")
        if not meta:
            raise MlfabricError("the switch's program has no @controller_header(\"packet_out\")")
        values = {"egress_port": args.port}
        md = [(m.id, encode_int(values.get(m.name, 0), m.bitwidth)) for m in meta]
        client.packet_out(payload, md)
        time.sleep(0.2)  # let the stream deliver it before closing
    emit({"switch": args.switch, "sent_bytes": len(payload), "port": args.port, "frame": dissect(payload)},
         as_json=args.json, text=f"{args.switch}: sent {len(payload)} bytes out of port {args.port}: {dissect(payload)}")
    return 0


def _packet_listen(args: argparse.Namespace) -> int:
    from controller.frames import dissect

    got = 0
    deadline = time.monotonic() + args.timeout
    with connect(args) as client:
        schema = remote_schema(client)
        names = {m.id: m.name for m in schema.packet_metadata.get("packet_in", ())}
        while got < args.count and time.monotonic() < deadline:
            msg = client.packet_in(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
            if msg is None:
                continue
            got += 1
            meta = {names.get(m.metadata_id, str(m.metadata_id)): int.from_bytes(m.value, "big") for m in msg.metadata}
            frame = dissect(msg.payload)
            emit({"metadata": meta, "payload": msg.payload.hex(), "frame": frame}, as_json=args.json,
                 text=f"packet-in {meta} {len(msg.payload)} bytes: {frame}")
    if got == 0:
        print(f"{args.switch}: no packet-in within {args.timeout:.1f} s", file=sys.stderr)
        return 1
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    pipe = sub.add_parser("pipeline", help="load or read a switch's P4 pipeline")
    psub = pipe.add_subparsers(dest="pipeline_command", metavar="ACTION", required=True)
    p = psub.add_parser("load", help="SetForwardingPipelineConfig", epilog="example: mlfabric pipeline load rail0 --program rail_switch")
    add_switch_arguments(p)
    p.add_argument("--program", help="a program compiled in p4src/build")
    p.add_argument("--json-file", type=Path, help="a BMv2 JSON compiled elsewhere (with --p4info)")
    p.add_argument("--p4info", type=Path, help="its P4Info (text format)")
    p.add_argument("--cookie", type=int, default=0, help="the pipeline cookie to store with it")
    p.set_defaults(func=_pipeline_load)
    p = psub.add_parser("get", help="GetForwardingPipelineConfig", epilog="example: mlfabric pipeline get rail0 --output /tmp/rail0")
    add_switch_arguments(p)
    p.add_argument("--output", type=Path, help="write the JSON and P4Info into this folder")
    p.set_defaults(func=_pipeline_get)

    for kind, helptext in (("mcast", "multicast groups"), ("clone", "clone (mirror) sessions")):
        p = sub.add_parser(kind, help=f"add, modify, delete or show {helptext}",
                           description="Show lists replicas in the order the switch reads them back: BMv2 (PI) "
                                       "groups them by instance, in its hash map's order, ports ascending "
                                       "within an instance; the Python target answers the same.",
                           epilog=f"examples: mlfabric {kind} add rail0 7 --ports 1,2,3:1\n          mlfabric {kind} show rail0"
                                  + ("\n          mlfabric clone add rail0 5 --ports 4 --truncate 128   # Python target"
                                     if kind == "clone" else ""),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("op", choices=("add", "modify", "delete", "show"), help="what to do")
        add_switch_arguments(p)
        p.add_argument("id", type=int, nargs="?", help="group or session id (show: default all)")
        p.add_argument("--ports", help="replicas: PORT or PORT:INSTANCE, comma separated")
        if kind == "clone":
            p.add_argument("--truncate", type=int, default=0,
                           help="truncate clones to this many bytes (packet_length_bytes; shown by show; "
                                "BMv2 rejects it, the Python target honours it)")
        p.set_defaults(func=_pre, pre_kind=kind)

    p = sub.add_parser("counters", help="read indexed and direct counters",
                       epilog="examples: mlfabric counters rail0 port_rx --index 1\n"
                              "          mlfabric counters rail0 ipv4_lpm_hits   # per entry of ipv4_lpm",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_switch_arguments(p)
    p.add_argument("name", nargs="?", help="one counter, indexed or direct (default: all)")
    p.add_argument("--index", type=int, default=None, help="only this cell of an indexed counter")
    p.add_argument("--all", action="store_true", help="include zero cells")
    p.set_defaults(func=_counters)

    pk = sub.add_parser("packet", help="send or receive packets through the CPU port")
    pksub = pk.add_subparsers(dest="packet_command", metavar="ACTION", required=True)
    p = pksub.add_parser("send", help="PacketOut",
                         epilog="examples: mlfabric packet send rail0 --port 2 --scapy 'Ether()/IP(dst=\"10.0.1.1\")/UDP()'\n"
                                "          mlfabric packet send rail0 --port 2 --hex ffffffffffff000000000001...",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    add_switch_arguments(p)
    p.add_argument("--port", type=int, required=True, help="egress port (packet_out.egress_port)")
    frame = p.add_mutually_exclusive_group(required=True)
    frame.add_argument("--scapy", help="the frame as a scapy expression, e.g. Ether()/IP(dst=\"10.0.1.1\")/UDP()")
    frame.add_argument("--hex", help="the frame, in hex")
    p.set_defaults(func=_packet_send)
    p = pksub.add_parser("listen", help="print PacketIns, dissected; exits 1 if none came",
                         epilog="example: mlfabric packet listen rail0 --count 5 --timeout 10")
    add_switch_arguments(p)
    p.add_argument("--count", type=int, default=1, help="stop after this many packet-ins")
    p.add_argument("--timeout", type=positive_float, default=5.0, help="give up after this many seconds")
    p.set_defaults(func=_packet_listen)
