"""802.1Q frames through a switch process on real veth pairs.

Linux takes the tag out of every frame a packet socket receives and reports it beside the
frame; the switch must put it back (as BMv2's libpcap does), so that a tagged frame leaves
unchanged, the ``--pcap`` input shows it as it was on the wire and the per-port byte counter
counts its 4 tag bytes. It runs in a private network namespace, as the target tier's veth tests do.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance_v1model import IP_PACKET, VLAN_FRAMES

from controller.netstate import NetRecord
from controller.p4build import PROGRAM_DIRS, pipeline_files
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.schema import P4Schema, load_p4info
from controller.readiness import free_tcp_port, wait_for
from controller.switch_process import SwitchProcess, SwitchSpec
from packettest.veth import VethPorts

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="veth pairs need root")

TAGGED = dict((name, frame) for name, _, frame in VLAN_FRAMES)["tagged-ipv4-bridged"]


@contextlib.contextmanager
def vlan_switch(target: str, pcap_dir: Path) -> Iterator[tuple[VethPorts, P4RuntimeClient, P4Schema]]:
    artifact = pipeline_files("vlan", PROGRAM_DIRS[1])
    with contextlib.ExitStack() as stack:
        record = stack.enter_context(NetRecord(f"vlan-{target}"))
        veth = VethPorts((1, 2, 3), record, prefix=f"vl{os.getpid() % 10000}")
        stack.callback(veth.close)
        spec = SwitchSpec(name=f"vlan-{target}", target=target, ports=veth.switch_ifaces,
                          grpc_address=f"127.0.0.1:{free_tcp_port()}", pcap_dir=pcap_dir)
        stack.enter_context(SwitchProcess(spec, record))
        client = P4RuntimeClient(spec.grpc_address, device_id=spec.device_id).connect()
        stack.callback(client.close)
        p4info = load_p4info(artifact.p4info)
        client.set_pipeline(p4info, artifact.json.read_bytes())
        yield veth, client, P4Schema(p4info)


def pcap_frames(path: Path) -> list[bytes]:
    from scapy.utils import rdpcap

    return [bytes(p) for p in rdpcap(str(path))] if path.exists() and path.stat().st_size > 24 else []


def test_tagged_frame_leaves_unchanged_and_pcap_and_counter_show_the_tag(
        target_name: str, tmp_path: Path) -> None:
    with vlan_switch(target_name, tmp_path) as (veth, client, schema):
        veth.send(1, TAGGED)
        assert veth.collect(expect=1) == [(2, TAGGED)]
        untagged = b"\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x01\x08\x00" + IP_PACKET
        veth.send(1, untagged)
        ((port, routed),) = veth.collect(expect=1)
        assert port == 3 and len(routed) == len(untagged)
        s1, s2 = veth.switch_ifaces[1], veth.switch_ifaces[2]
        wait_for(lambda: len(pcap_frames(tmp_path / f"{s1}_in.pcap")) == 2, timeout=5,
                 what="the --pcap input file")
        assert pcap_frames(tmp_path / f"{s1}_in.pcap") == [TAGGED, untagged]
        wait_for(lambda: pcap_frames(tmp_path / f"{s2}_out.pcap") == [TAGGED], timeout=5,
                 what="the --pcap output file")
        (cell,) = client.read_counter(schema.counter("I.rx").id, 1)
        assert (cell.data.packet_count, cell.data.byte_count) == (2, len(TAGGED) + len(untagged))
