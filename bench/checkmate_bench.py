"""Checkmate figures: the shadow's receive path in MB/s of mirrored payload, and the switch's
forwarding rate with mirroring on against off, each against a baseline of the same run."""

from __future__ import annotations

import ipaddress
import time

from bench.traffic import route_updates
from controller.p4build import pipeline_files
from controller.p4runtime.entities import (
    Exact,
    TableRule,
    Ternary,
    clone_session_entry,
    encode_rule,
    update,
)
from packettest.frames import ethernet, ipv4
from packettest.targets import InProcessTarget, ProcessTarget
from workloads.checkmate.capture import parse_segment
from workloads.checkmate.capture_plan import CaptureLeg, capture_plan
from workloads.checkmate.reassembly import FrameStream
from workloads.checkmate.replica import GradientAssembler
from workloads.checkmate.tagging import TOS_MASK, clone_session_id, mirror_tos
from workloads.framing import HEADER, make_tag
from workloads.plan import Layout, ring_plan

__all__ = ["mirror_forwarding", "mirror_process_mode", "shadow_receive"]

MSS = 1448


def _tcp(sport: int, dport: int, seq: int, payload: bytes) -> bytes:
    import struct

    return struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x18, 512, 0, 0) + payload


def _stream_frames(mb: float) -> tuple[list[bytes], int, int, GradientAssembler, CaptureLeg]:
    """Ethernet frames of one mirrored leg carrying ``mb`` MB of all-gather payload."""
    layout = Layout.grid(8, 1, lambda d, r: f"10.0.1.{d}")
    plan = capture_plan(layout, ring_plan(layout))
    size = 256 * 1024  # float32 parameters: 1 MB per iteration
    asm = GradientAssembler(plan, size)
    leg = plan.primary
    raw = bytearray()
    payload = 0
    iterations = max(1, int(mb / (4 * size * len(leg.steps) / plan.chunks / 1e6)))
    for it in range(iterations):
        for step, chunk in zip(leg.steps, leg.chunks, strict=True):
            n = asm.chunk_bytes(chunk)
            raw += HEADER.pack(make_tag(it * 8 + 3, step), n) + bytes(n)
            payload += n
    frames = []
    for off in range(0, len(raw), MSS):
        ip = ipv4("10.0.1.7", "10.0.1.0", _tcp(40000, 7008, (1000 + 1 + off) % 2**32, bytes(raw[off:off + MSS])),
                  proto=6)
        ip = ip[:1] + bytes([mirror_tos(1)]) + ip[2:]
        frames.append(ethernet("02:00:00:00:00:00", "02:00:00:00:00:07", 0x0800, ip))
    return frames, len(raw), payload, asm, leg


def shadow_receive(mb: float = 32.0) -> dict[str, float]:
    """MB/s of mirrored payload through parse -> stream reassembly -> gradient assembly, and
    a baseline in the same run: copying the same frames' payloads into one buffer."""
    frames, total, payload, asm, leg = _stream_frames(mb)
    t0 = time.perf_counter()
    buf = bytearray()
    for f in frames:
        buf += f[54:]
    base_s = time.perf_counter() - t0
    stream = FrameStream(plausible=lambda tag, n: asm.plausible(leg, tag, n), lengths=asm.lengths(leg))
    stream.add(1000, b"", syn=True, now=0.0)
    t0 = time.perf_counter()
    delivered = 0
    for i, f in enumerate(frames):
        seg = parse_segment(f)
        assert seg is not None
        stream.add(seg.seq, seg.payload, now=0.0)
        if i % 64 == 63 or i == len(frames) - 1:
            for item in stream.poll(0.0):
                if asm.add(leg, item.tag, item.payload) is not None:  # type: ignore[union-attr]
                    delivered += len(item.payload)  # type: ignore[union-attr]
            for it in asm.seen():
                asm.drop_through(it)
    shadow_s = time.perf_counter() - t0
    return {"mb_per_s": total / shadow_s / 1e6, "baseline_mb_per_s": total / base_s / 1e6,
            "delivered_fraction": delivered / payload}


FLOWS = 8  # mirrored legs through one switch: four jobs' worth


def _mirror_frames(count: int) -> list[bytes]:
    out = []
    for i in range(count):
        ip = ipv4("10.0.1.7", f"10.0.{i % FLOWS}.1", _tcp(40000, 7008, i * 100, b"x" * 100), proto=6)
        out.append(ethernet("00:00:00:00:00:01", "00:00:00:00:0a:01", 0x0800,
                            ip[:1] + bytes([mirror_tos(1)]) + ip[2:]))
    return out


def _mirror_state(target: InProcessTarget | ProcessTarget, shadow_port: int) -> None:
    session = clone_session_id(1)
    target.client.write([update("insert", clone_session_entry(session, [(shadow_port, 1)]))])
    rules = [TableRule("RailIngress.mirror.mirror_select",
                       {"hdr.ipv4.src_addr": Exact(int(ipaddress.IPv4Address("10.0.1.7"))),
                        "hdr.ipv4.dst_addr": Exact(int(ipaddress.IPv4Address(f"10.0.{k}.1"))),
                        "hdr.ipv4.diffserv": Ternary(mirror_tos(1), TOS_MASK),
                        "meta.l4_dst_port": Exact(7008)},
                       "RailIngress.mirror.mirror_to_shadow", {"session": session}, priority=1)
             for k in range(FLOWS)]
    target.client.write([update("insert", encode_rule(target.schema, r)) for r in rules])


def mirror_process_mode(kind: str, seconds: float = 3.0) -> dict[str, float]:
    """Packets/s of a switch process of ``kind`` between veths (port 1 in, port 2 out, the
    copies on port 3), with the mirror entries off and on: the same measurement for BMv2
    and the Python target."""
    from bench.forwarding import _throughput

    out: dict[str, float] = {}
    frames = _mirror_frames(256)
    for mode in ("off", "on"):
        target = ProcessTarget(kind, pipeline_files("rail_switch"), (1, 2, 3))
        try:
            target.client.write(route_updates(target.schema, 1000, ports=(2,)))
            if mode == "on":
                _mirror_state(target, 3)
            target.veth.send(1, frames[0])
            if target.veth.receive(2, timeout=2.0) is None:
                raise RuntimeError(f"{kind}: the switch forwards nothing")
            out[mode] = _throughput(target.veth, frames, seconds)
        finally:
            target.close()
    out["ratio"] = out["on"] / out["off"]
    return out


def mirror_forwarding(seconds: float = 3.0) -> dict[str, float]:
    """Packets/s of the in-process target on rail_switch with 1k routes, forwarding TCP
    segments of eight mirrored legs: with no mirror entries, and with the entries that clone
    every one of those packets to a shadow port (the worst case: all traffic mirrored)."""
    frames = _mirror_frames(250)

    def rate(target: InProcessTarget) -> float:
        process = target.switch.process
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for f in frames:
                process(1, f)
            n += len(frames)
        return n / (time.perf_counter() - start)

    out: dict[str, float] = {}
    for mode in ("off", "on"):
        target = InProcessTarget(pipeline_files("rail_switch"))
        try:
            target.client.write(route_updates(target.schema, 1000))
            if mode == "on":
                _mirror_state(target, 3)
                outputs = target.switch.process(1, frames[0])
                out["copies_per_packet"] = float(len(outputs))
            out[mode] = rate(target)
        finally:
            target.close()
    out["ratio"] = out["on"] / out["off"]
    return out


if __name__ == "__main__":
    print(shadow_receive(8.0))
