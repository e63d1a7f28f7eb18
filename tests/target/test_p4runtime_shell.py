"""p4runtime-shell, an independent P4Runtime client, drives the Python target's server."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path

import pytest

from pybmv2.runtime.server import P4RuntimeServer
from pybmv2.switch import V1Switch

pytestmark = pytest.mark.target

BUILD = Path(__file__).resolve().parents[2] / "p4src" / "build"
JSON_PATH = BUILD / "rail_switch.json"
P4INFO_PATH = BUILD / "rail_switch.p4info.txtpb"
#: Ethernet + IPv4 (10.0.0.1 -> 10.0.2.9, TTL 64, protocol 253, valid checksum)
_FRAME = bytes.fromhex(
    "000000000001" "000000000002" "0800"
    "4500001400010000" "40fd" "63e3" "0a000001" "0a000209")


@pytest.fixture
def server(target_name: str) -> Iterator[P4RuntimeServer]:
    if target_name != "python":
        pytest.skip("exercises the Python target's own P4Runtime server")
    if not (JSON_PATH.exists() and P4INFO_PATH.exists()):
        pytest.skip(f"rail_switch artifacts not built yet ({JSON_PATH.name}, "
                    f"{P4INFO_PATH.name}: run `make p4`)")
    srv = P4RuntimeServer(V1Switch(None, cpu_port=510), device_id=1, address="127.0.0.1:0")
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(grace=0)


def test_p4runtime_shell_programs_and_reads_a_route(server: P4RuntimeServer) -> None:
    sh = pytest.importorskip("p4runtime_sh.shell")
    sh.setup(device_id=1, grpc_addr=server.address, election_id=(0, 1),
             config=sh.FwdPipeConfig(str(P4INFO_PATH), str(JSON_PATH)), verbose=False)
    try:
        te = sh.TableEntry("RailIngress.ipv4_lpm")(action="RailIngress.set_nexthop")
        te.match["hdr.ipv4.dst_addr"] = "10.0.1.0/24"
        te.action["port"] = "3"
        te.action["dmac"] = "00:00:00:00:00:02"
        te.action["smac"] = "00:00:00:00:00:04"
        te.insert()
        got = list(sh.TableEntry("RailIngress.ipv4_lpm").read())
        assert len(got) == 1
        msg = got[0].msg()
        assert msg.match[0].lpm.value == bytes([10, 0, 1, 0])
        assert msg.match[0].lpm.prefix_len == 24
        assert msg.action.action.params[0].value == b"\x03"
        default = sh.TableEntry("RailIngress.ipv4_lpm")(is_default=True)
        [dflt] = list(default.read())
        assert dflt.msg().is_default_action
        te.delete()
        assert list(sh.TableEntry("RailIngress.ipv4_lpm").read()) == []

        sent: queue.Queue[list[tuple[int, bytes]]] = queue.Queue()
        server.packet_out_sink = sent.put
        sh.PacketOut(payload=_FRAME, egress_port="2").send()
        assert sent.get(timeout=5) == [(2, _FRAME)]

        to_cpu = sh.TableEntry("RailIngress.ipv4_lpm")(action="RailIngress.send_to_cpu")
        to_cpu.match["hdr.ipv4.dst_addr"] = "10.0.2.0/24"
        to_cpu.insert()
        sniffer = sh.PacketIn()
        assert server.deliver_outputs(server.switch.process(4, _FRAME)) == []
        [pin] = list(sniffer.sniff(timeout=1))
        assert pin.packet.payload == _FRAME
        assert pin.packet.metadata[0].value == b"\x04"
    finally:
        sh.teardown()
    switch_tables = server.switch.program.tables if server.switch.program else {}
    assert len(switch_tables["RailIngress.ipv4_lpm"]) == 1  # the send_to_cpu route
