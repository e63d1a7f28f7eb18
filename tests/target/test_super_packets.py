"""Super-packets (``mlfabric-switch --super-packets``): a TCP segment the sender's offloads
left whole goes through the switch as one packet on the native engine and comes out whole,
with headers rewritten and a partial checksum the kernel can complete; cut into frames
(by the kernel on a port without TSO, or by the Python engine), every frame is the one the
per-frame path would have sent, with right checksums on the wire."""

from __future__ import annotations

import os
import struct
import subprocess

import pytest
from conformance_project import RAIL_MIRROR
from test_conformance import table_entry

from controller.p4build import pipeline_files
from controller.p4runtime.entities import clone_session_entry, update
from packettest import open_target
from pybmv2.offload import (
    GSO_TCPV4,
    NEEDS_CSUM,
    VNET_HDR,
    VnetHeader,
    frames_of,
    internet_checksum,
    segment,
)

MSS = 1448
SEGMENTS = 5
ROUTES = [r for r in RAIL_MIRROR.rules if r.table == "RailIngress.ipv4_lpm"]


@pytest.fixture
def process_mode(target_name: str) -> None:
    if target_name != "python":
        pytest.skip("super-packets are an extension of the Python target's switch process")
    if os.geteuid() != 0:
        pytest.skip("veth pairs need root")


def _pseudo_partial(frame: bytearray) -> None:
    """The TCP checksum field as a sender with checksum offload leaves it."""
    l4_len = struct.unpack_from("!H", frame, 16)[0] - 20
    struct.pack_into("!H", frame, 50, internet_checksum(frame[26:34], 6 + l4_len))


def super_packet(*, tos: int = 0, dst: str = "10.0.1.0") -> tuple[VnetHeader, bytes]:
    """A TCP segment of SEGMENTS x MSS bytes from 10.0.1.3, as a host's TSO hands it over."""
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether

    payload = bytes(i % 251 for i in range(SEGMENTS * MSS))
    frame = bytearray(bytes(Ether(dst="02:5f:00:01:00:01", src="02:00:00:00:00:03") /
                            IP(src="10.0.1.3", dst=dst, tos=tos, ttl=64, id=7, flags="DF") /
                            TCP(sport=40000, dport=7008, seq=1000, flags="PA") / payload))
    _pseudo_partial(frame)
    return VnetHeader(NEEDS_CSUM, GSO_TCPV4, 54, MSS, 34, 16), bytes(frame)


def _verified(frame: bytes) -> bool:
    """Are the frame's IPv4 header and TCP checksums right?"""
    ihl = (frame[14] & 0xF) * 4
    total = struct.unpack_from("!H", frame, 16)[0]
    ip_ok = internet_checksum(frame[14:14 + ihl]) == 0xFFFF
    l4 = frame[14 + ihl:14 + total]
    return ip_ok and internet_checksum(l4, internet_checksum(frame[26:34], 6 + len(l4))) == 0xFFFF


def _forwarded(frame: bytes, dmac: str, smac: str) -> bytes:
    """What rail_switch's route makes of one frame on the per-frame path."""
    out = bytearray(frame)
    out[0:6] = bytes.fromhex(dmac.replace(":", ""))
    out[6:12] = bytes.fromhex(smac.replace(":", ""))
    out[22] -= 1  # TTL
    struct.pack_into("!H", out, 24, 0)
    struct.pack_into("!H", out, 24, (~internet_checksum(out[14:34])) & 0xFFFF)
    return bytes(out)


@pytest.mark.usefixtures("process_mode")
def test_a_super_packet_crosses_the_native_engine_whole_and_cuts_into_the_per_frame_output() -> None:
    hdr, frame = super_packet()
    expected = [_forwarded(f, "02:00:00:00:00:00", "02:5f:00:01:00:02") for f in segment(frame, hdr)]
    assert len(expected) == SEGMENTS and all(_verified(f) for f in expected)
    with open_target("python-process", pipeline_files("rail_switch"), ports=(1, 2, 3), engine="native",
                     super_packets=True) as sw:
        sw.client.write([update("insert", table_entry(sw, r)) for r in ROUTES])
        sw.veth.drain()
        sw.veth.send_raw(1, hdr.pack() + frame)
        got = sw.veth.receive_raw(2, timeout=5.0)
        assert got is not None, sw.log_text()[-2000:]
        out = VnetHeader.unpack(got)
        # one packet, whole: the kernel never cut it on the way
        assert (out.gso_type, out.gso_size, out.hdr_len, out.csum_start, out.csum_offset) == (GSO_TCPV4, MSS, 54, 34, 16)
        assert out.flags & NEEDS_CSUM and len(got) == VNET_HDR.size + len(frame)
        assert frames_of(got) == expected
        assert sw.veth.receive_raw(2, timeout=0.3) is None
        # the P4 counter counts the super-packet once, with every byte the switch saw
        table = sw.schema.table("ipv4_lpm").id
        counts = {c.table_entry.match[0].lpm.value: c.data.packet_count
                  for c in sw.client.read_direct_counters(table)}
        assert counts[bytes([10, 0, 1, 0])] == 1
        assert "the native engine runs the ports" in sw.log_text()


@pytest.mark.usefixtures("process_mode")
def test_the_kernel_cuts_a_super_packet_where_a_port_has_no_segmentation_offload_with_right_checksums() -> None:
    """The wire's view: port 3's interface takes no TSO and no checksum offload, so the kernel cuts what the switch
    sends there; a capture on the far end sees SEGMENTS frames, each checksum right, the
    mirrored copy of a Checkmate-tagged leg too (its headers rewritten in egress)."""
    hdr, frame = super_packet(tos=0x84)
    with open_target("python-process", pipeline_files("rail_switch"), ports=(1, 2, 3), engine="native",
                     super_packets=True) as sw:
        mirror = [r for r in RAIL_MIRROR.rules if r.table != "RailIngress.ipv4_lpm"]
        sw.client.write([update("insert", table_entry(sw, r)) for r in ROUTES + mirror])
        sw.client.write([update("insert", clone_session_entry(101, [(3, 1)]))])
        subprocess.run(["ethtool", "-K", sw.veth.switch_ifaces[3], "tso", "off", "gso", "off", "tx", "off"], check=True,
                       capture_output=True)
        sw.veth.drain()
        sw.veth.send_raw(1, hdr.pack() + frame)
        original = sw.veth.receive_raw(2, timeout=5.0)
        assert original is not None and VnetHeader.unpack(original).gso_size == MSS
        copies = []
        while (got := sw.veth.receive_raw(3, timeout=2.0)) is not None and len(copies) < SEGMENTS + 1:
            copies.append(got)
        assert len(copies) == SEGMENTS, [len(c) for c in copies]
        for raw in copies:
            assert VnetHeader.unpack(raw).gso_type == 0  # cut by the kernel: plain frames
            wire = raw[VNET_HDR.size:]
            assert wire[0:6] == bytes.fromhex("020000000004") and _verified(wire), wire[:64].hex()
        seqs = [struct.unpack_from("!I", raw, VNET_HDR.size + 38)[0] for raw in copies]
        assert seqs == [1000 + k * MSS for k in range(SEGMENTS)]


@pytest.mark.usefixtures("process_mode")
def test_the_python_engine_cuts_a_super_packet_into_frames_first() -> None:
    hdr, frame = super_packet()
    expected = [_forwarded(f, "02:00:00:00:00:00", "02:5f:00:01:00:02") for f in segment(frame, hdr)]
    with open_target("python-process", pipeline_files("rail_switch"), ports=(1, 2, 3), engine="python",
                     super_packets=True) as sw:
        sw.client.write([update("insert", table_entry(sw, r)) for r in ROUTES])
        sw.veth.drain()
        sw.veth.send_raw(1, hdr.pack() + frame)
        got = [sw.veth.receive_raw(2, timeout=5.0) for _ in range(SEGMENTS)]
        assert all(g is not None for g in got)
        assert [g[VNET_HDR.size:] for g in got if g] == expected
        assert all(VnetHeader.unpack(g).gso_type == 0 for g in got if g)
