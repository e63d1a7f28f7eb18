"""Frames and P4Runtime state shared by the benchmarks: rail_switch with N /24 routes."""

from __future__ import annotations

from controller.p4runtime.entities import TableRule, encode_rule, parse_match, update
from controller.p4runtime.schema import P4Schema
from packettest.frames import ethernet, ipv4, udp


def route_rules(schema: P4Schema, n: int, ports: tuple[int, ...] = (2,)) -> list[TableRule]:
    """``n`` /24 routes 10.x.y.0/24 -> one of ``ports``."""
    table = schema.table("ipv4_lpm")
    out = []
    for i in range(n):
        name, match = parse_match(table, "hdr.ipv4.dst_addr", f"10.{i >> 8 & 255}.{i & 255}.0/24")
        out.append(TableRule(table.name, {name: match}, "RailIngress.set_nexthop",
                             {"port": ports[i % len(ports)], "dmac": 0x2, "smac": 0xA02}))
    return out


def route_updates(schema: P4Schema, n: int, ports: tuple[int, ...] = (2,)) -> list:
    """The same routes as P4Runtime insert updates (protobuf objects)."""
    return [update("insert", encode_rule(schema, r)) for r in route_rules(schema, n, ports)]


def frames(n_routes: int, count: int = 256, size: int = 64) -> list[bytes]:
    """``count`` UDP frames of ``size`` bytes to destinations spread over the routes."""
    out = []
    for i in range(count):
        r = (i * 7919) % n_routes
        payload = b"x" * max(0, size - 14 - 20 - 8)
        out.append(ethernet("00:00:00:00:0a:01", "00:00:00:00:00:01", 0x0800,
                            ipv4("10.255.0.1", f"10.{r >> 8 & 255}.{r & 255}.9", udp(1000 + i, 80, payload))))
    return out
