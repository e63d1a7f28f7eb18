"""In-network aggregation figures: what 64 lanes cost a switch. Packets/s of aggregation
requests through a switch process between veths (a one-worker job: every request completes
its round at once and its sum leaves on port 2), against plain forwarding of the same frame
size in the same run, on BMv2 and on the Python target."""

from __future__ import annotations

import ipaddress

from bench.forwarding import _throughput
from bench.traffic import route_updates
from controller.p4build import pipeline_files
from controller.p4runtime.entities import (
    Exact,
    TableRule,
    encode_rule,
    multicast_group_entry,
    update,
)
from packettest.frames import ethernet, ipv4, udp
from packettest.targets import ProcessTarget
from workloads.aggregation.wire import (
    AGG_UDP_PORT,
    FLAG_SET,
    LANES,
    PAYLOAD_BYTES,
    WORKER_PORT,
    Chunk,
    encode,
)

WORKER = "10.0.0.1"
SLOTS = 64


def _requests() -> list[bytes]:
    """Two rounds of every slot, the second in the other set, so the cycle can repeat."""
    out = []
    for i in range(2 * SLOTS):
        payload = encode(Chunk(job=1, slot=i % SLOTS, offset=i * LANES, values=tuple(range(LANES)),
                               flags=FLAG_SET if i >= SLOTS else 0))
        out.append(ethernet("02:5f:00:01:00:01", "02:00:00:00:00:01", 0x0800,
                            ipv4(WORKER, "10.0.255.254", udp(WORKER_PORT, AGG_UDP_PORT, payload), proto=17)))
    return out


def _plain() -> list[bytes]:
    """Frames of the same size that rail_switch only forwards (to 10.0.0.x, routed to port 2)."""
    return [ethernet("02:5f:00:01:00:01", "02:00:00:00:00:01", 0x0800,
                     ipv4(WORKER, f"10.0.0.{2 + i % 200}", udp(WORKER_PORT, 9000, bytes(PAYLOAD_BYTES)), proto=17))
            for i in range(256)]


def _job(target: ProcessTarget) -> None:
    ip = int(ipaddress.IPv4Address(WORKER))
    rules = [TableRule("RailIngress.aggregate.agg_workers", {"hdr.agg.job": Exact(1), "hdr.ipv4.src_addr": Exact(ip)},
                       "RailIngress.aggregate.set_worker",
                       {"worker_bit": 1, "workers": 1, "pool_base": 0, "pool_size": SLOTS, "mgid": 0x4001,
                        "epoch": 1}),
             TableRule("RailEgress.aggregate_result.agg_result",
                       {"hdr.agg.job": Exact(1), "standard_metadata.egress_rid": Exact(1)},
                       "RailEgress.aggregate_result.to_worker", {"dmac": 0x020000000001, "addr": ip})]
    target.client.write([update("insert", multicast_group_entry(0x4001, [(2, 1)]))]
                        + [update("insert", encode_rule(target.schema, r)) for r in rules])


def process_mode(kind: str, seconds: float = 3.0) -> dict[str, float]:
    """Packets/s of aggregation requests and of plain forwarding through one switch process
    of ``kind``, and their ratio."""
    out: dict[str, float] = {}
    for mode, frames in (("forwarding", _plain()), ("aggregation", _requests())):
        target = ProcessTarget(kind, pipeline_files("rail_switch"), (1, 2))
        try:
            target.client.write(route_updates(target.schema, 1000, ports=(2,)))
            _job(target)
            target.veth.send(1, frames[0])
            if target.veth.receive(2, timeout=2.0) is None:
                raise RuntimeError(f"{kind}: nothing came out for {mode}")
            out[mode] = _throughput(target.veth, frames[1:] + frames[:1], seconds)
        finally:
            target.close()
    out["ratio"] = out["aggregation"] / out["forwarding"]
    return out
