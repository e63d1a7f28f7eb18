"""rail_switch's mirror stage on the selected target: the original leaves exactly as it would
without mirroring, the copy goes to the shadow's port with only its destination MAC changed;
and the controller's compiled entries (``mlfabric mirror add``) install and read back."""

from __future__ import annotations

from conformance_project import RAIL_MIRROR, tcp_frame
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from test_conformance import install, table_entry

from controller.mirror import compile_mirror, parse_job, resolve_job
from controller.p4build import pipeline_files
from controller.p4runtime.entities import clone_session_entry, decode_rule, encode_rule, update
from packettest import open_target

ROUTES = [r for r in RAIL_MIRROR.rules if r.table == "RailIngress.ipv4_lpm"]


def _routes_only(sw) -> None:
    sw.client.write([update("insert", table_entry(sw, r)) for r in ROUTES])


def test_original_is_byte_identical_with_and_without_mirroring(target_name: str) -> None:
    frames = [tcp_frame(tos) for tos in (0x84, 0x87, 0x00)]
    with open_target(target_name, pipeline_files("rail_switch")) as sw:
        _routes_only(sw)
        plain = [sw.send(1, f, expect=1) for f in frames]
    with open_target(target_name, pipeline_files("rail_switch")) as sw:
        install(sw, RAIL_MIRROR)
        mirrored = [sw.send(1, f, expect=2 if f[15] & 0x80 else 1) for f in frames]
    for before, after in zip(plain, mirrored, strict=True):
        assert [o for o in after if o[0] == 2] == before
    tagged = mirrored[0]
    copy = next(f for p, f in tagged if p == 3)
    original = Ether(frames[0])
    shadow = Ether(copy)
    assert shadow.dst == "02:00:00:00:00:04" and shadow.src == original.src
    assert shadow[IP].ttl == original[IP].ttl, "the I2E copy is the packet as it entered"
    assert bytes(shadow[TCP]) == bytes(original[TCP]) and shadow[IP].tos == 0x84
    assert len(mirrored[2]) == 1, "untagged segments are never copied"


def test_compiled_job_entries_install_and_read_back(target_name: str) -> None:
    from controller.topology import rail_only

    topo = rail_only(3, 1)
    spec = parse_job({"name": "j", "session": 2, "shadow": "s2", "port": 7000,
                      "workers": [{"rank": 0, "host": "s0", "rail": 0}, {"rank": 1, "host": "s1", "rail": 0}]})
    program = compile_mirror(resolve_job(spec, topo))
    (sw_state,) = program.switches
    with open_target(target_name, pipeline_files("rail_switch")) as sw:
        sw.client.write([update("insert", clone_session_entry(sw_state.clone_session, sw_state.replicas))]
                        + [update("insert", encode_rule(sw.schema, r)) for r in sw_state.rules])
        back = {decode_rule(sw.schema, e) for t in ("mirror_select", "mirror_rewrite")
                for e in sw.client.read_table_entries(sw.schema.table(t).id)}
    assert back == set(sw_state.rules)
