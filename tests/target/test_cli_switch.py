"""The controller CLI against a live switch process of the selected target."""

from __future__ import annotations

import json

import pytest
from p4.v1 import p4runtime_pb2

from controller.cli import main
from controller.netstate import NetRecord
from controller.readiness import free_tcp_port
from controller.switch_process import SwitchProcess, SwitchSpec


@pytest.fixture(scope="module", params=["python", "native"])
def switch(request: pytest.FixtureRequest, target_name: str):
    """The switch process, on each of the Python target's engines in turn (BMv2: once)."""
    if target_name != "python" and request.param == "native":
        pytest.skip("the native engine is an engine of the Python target")
    spec = SwitchSpec(name="cli", target=target_name, ports={}, device_id=3,
                      grpc_address=f"127.0.0.1:{free_tcp_port()}",
                      engine=request.param if target_name == "python" else None)
    with NetRecord("cli-test") as record, SwitchProcess(spec, record) as proc:
        yield proc.grpc_address


DEV = ["--device-id", "3"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """Run the CLI; options for the switch go last, as users type them."""
    args = list(argv)
    if args and args[0] != "--no-dev" and any(a.startswith("127.0.0.1:") for a in args):
        args += DEV
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_pipeline_load_add_show_delete(switch: str, capsys) -> None:
    sw = [switch]
    assert run(capsys, "pipeline", "load", *sw, "--program", "rail_switch")[0] == 0
    code, out, _ = run(capsys, "rules", "add", *sw, "ipv4_lpm", "dst_addr=10.9.0.0/16",
                       "set_nexthop", "port=3", "dmac=02:00:00:00:00:09", "smac=02:5f:00:01:00:03")
    assert code == 0, out
    code, out, _ = run(capsys, "rules", "show", *sw, "ipv4_lpm")
    assert code == 0
    assert "10.9.0.0/16" in out and "02:00:00:00:00:09" in out and "set_nexthop(port=3" in out
    code, out, _ = run(capsys, "rules", "show", *sw, "--json")
    data = json.loads(out)
    assert data["RailIngress.ipv4_lpm"]["entries"][0]["hdr.ipv4.dst_addr"] == "10.9.0.0/16"
    assert run(capsys, "rules", "delete", *sw, "ipv4_lpm", "dst_addr=10.9.0.0/16")[0] == 0
    assert "RailIngress.ipv4_lpm: no entries" in run(capsys, "rules", "show", *sw)[1]


NEXTHOP = ["set_nexthop", "port=3", "dmac=02:00:00:00:00:09", "smac=02:5f:00:01:00:03"]


def test_modify_changes_an_entry_and_names_one_that_does_not_exist(switch: str, capsys) -> None:
    sw = [switch]
    run(capsys, "pipeline", "load", *sw, "--program", "rail_switch")
    assert run(capsys, "rules", "add", *sw, "ipv4_lpm", "dst_addr=10.9.0.0/16", *NEXTHOP)[0] == 0
    code, out, err = run(capsys, "rules", "modify", *sw, "ipv4_lpm", "dst_addr=10.9.0.0/16", "set_nexthop", "port=4",
                         "dmac=02:00:00:00:00:0a", "smac=02:5f:00:01:00:04")
    assert code == 0, err
    assert "modified RailIngress.ipv4_lpm dst_addr=10.9.0.0/16 set_nexthop(port=4, dmac=02:00:00:00:00:0a" in out
    (entry,) = json.loads(run(capsys, "rules", "show", *sw, "ipv4_lpm", "--json")[1])["RailIngress.ipv4_lpm"]["entries"]
    assert entry["action"] == "set_nexthop(port=4, dmac=02:00:00:00:00:0a, smac=02:5f:00:01:00:04)"
    code, _, err = run(capsys, "rules", "modify", *sw, "ipv4_lpm", "dst_addr=10.8.0.0/16", "drop")
    assert code == 1 and err.count("\n") == 1
    assert "RailIngress.ipv4_lpm has no entry dst_addr=10.8.0.0/16 to modify" in err


def test_show_lists_each_tables_default_action_and_default_writes_say_so(switch: str, capsys) -> None:
    sw = [switch]
    run(capsys, "pipeline", "load", *sw, "--program", "rail_switch")
    code, out, _ = run(capsys, "rules", "show", *sw, "ipv4_lpm")
    assert code == 0 and out.splitlines() == ["RailIngress.ipv4_lpm: no entries", "default: drop()"]
    # the option among the positionals, as people type it
    code, out, err = run(capsys, "rules", "add", *sw, "ipv4_lpm", "--default", *NEXTHOP)
    assert code == 0, err
    assert out.strip().endswith("default action of RailIngress.ipv4_lpm set to "
                                "set_nexthop(port=3, dmac=02:00:00:00:00:09, smac=02:5f:00:01:00:03)")
    data = json.loads(run(capsys, "rules", "show", *sw, "--json")[1])
    assert data["RailIngress.ipv4_lpm"] == {
        "entries": [], "default": "set_nexthop(port=3, dmac=02:00:00:00:00:09, smac=02:5f:00:01:00:03)"}
    assert data["RailIngress.ecmp_nexthop"]["default"] == "drop()"
    code, out, _ = run(capsys, "rules", "delete", *sw, "--default", "ipv4_lpm")
    assert code == 0 and out.strip().endswith("default action of RailIngress.ipv4_lpm reset to drop()")


def test_direct_counters_are_read_per_entry(switch: str, capsys) -> None:
    from controller.p4build import pipeline_files
    from controller.p4runtime.client import P4RuntimeClient
    from controller.p4runtime.schema import P4Schema

    sw = [switch]
    run(capsys, "pipeline", "load", *sw, "--program", "rail_switch")
    run(capsys, "rules", "add", *sw, "ipv4_lpm", "dst_addr=10.9.0.0/16", *NEXTHOP)
    run(capsys, "rules", "add", *sw, "ipv4_lpm", "dst_addr=10.8.0.0/16", "drop")
    schema = P4Schema.from_file(pipeline_files("rail_switch").p4info)
    with P4RuntimeClient(switch, device_id=3) as client:
        (entry,) = [e for e in client.read_table_entries(schema.table("ipv4_lpm").id) if e.match[0].lpm.prefix_len == 16
                    and e.match[0].lpm.value == bytes([10, 9, 0, 0])]
        u = p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY)
        u.entity.direct_counter_entry.table_entry.CopyFrom(entry)
        u.entity.direct_counter_entry.data.packet_count = 5
        u.entity.direct_counter_entry.data.byte_count = 320
        client.write([u])
    code, out, _ = run(capsys, "counters", *sw, "ipv4_lpm_hits", "--json")
    assert code == 0
    assert json.loads(out) == [{"counter": "RailIngress.ipv4_lpm_hits", "table": "RailIngress.ipv4_lpm",
                                "entry": "dst_addr=10.9.0.0/16", "packets": 5, "bytes": 320}]
    code, out, _ = run(capsys, "counters", *sw, "ipv4_lpm_hits", "--all")
    assert "dst_addr=10.8.0.0/16" in out and "dst_addr=10.9.0.0/16" in out
    code, _, err = run(capsys, "counters", *sw, "ipv4_lpm_hits", "--index", "1")
    assert code == 1 and err.count("\n") == 1 and "is a direct counter" in err
    rows = json.loads(run(capsys, "counters", *sw, "--json")[1])
    assert [r["entry"] for r in rows if r["counter"] == "RailIngress.ipv4_lpm_hits"] == ["dst_addr=10.9.0.0/16"]


@pytest.mark.parametrize(("argv", "message"), [
    (["rules", "add", "{sw}", "no_such_table", "x=1", "drop"], "no table named 'no_such_table'"),
    (["rules", "add", "{sw}", "ipv4_lpm", "bogus=1", "drop"], "has no match field 'bogus'"),
    (["rules", "add", "{sw}", "ipv4_lpm", "dst_addr=10.0.0.0/8", "fly"], "no action named 'fly'"),
    (["rules", "add", "{sw}", "ipv4_lpm", "dst_addr=10.0.0.0/8", "set_nexthop", "port=600", "dmac=1", "smac=1"],
     "does not fit in 9 bits"),
    (["rules", "add", "{sw}", "ipv4_lpm", "dst_addr=10.0.0.0/8"], "no action given"),
    (["rules", "show", "no-such-switch", "--topology", "topologies/rail-only-4x4.yaml"], "unknown switch 'no-such-switch'"),
])
def test_bad_input_is_a_one_line_error(switch: str, capsys, argv: list[str], message: str) -> None:
    run(capsys, "pipeline", "load", switch, "--program", "rail_switch")
    argv = [a.replace("{sw}", switch) for a in argv]
    code, _, err = run(capsys, *argv)
    assert code == 1
    assert message in err
    assert err.count("\n") == 1


def test_mcast_and_counters(switch: str, capsys) -> None:
    sw = [switch]
    run(capsys, "pipeline", "load", *sw, "--program", "rail_switch")
    assert run(capsys, "mcast", "add", *sw, "7", "--ports", "1,2:1")[0] == 0
    code, out, _ = run(capsys, "mcast", "show", *sw, "--json")
    (group,) = json.loads(out)
    assert group == {"id": 7, "replicas": "2:1,1:0"}  # BMv2's order: see test_replicas_show_in_bmv2s_order
    code, out, _ = run(capsys, "counters", *sw, "port_rx", "--index", "1", "--json")
    assert code == 0 and json.loads(out)[0]["packets"] == 0


#: simple_switch_grpc 1.15.5's read-back of 19 replicas (p, p) written in ascending order: PI
#: keeps them in a hash map by instance, which grows from 13 to 29 buckets at the 14th
BMV2_19 = ",".join(f"{p}:{p}" for p in [*range(19, 13, -1), *range(1, 14)])


def test_replicas_show_in_bmv2s_order(switch: str, capsys) -> None:
    sw = [switch]
    run(capsys, "pipeline", "load", *sw, "--program", "rail_switch")
    assert run(capsys, "mcast", "add", *sw, "9", "--ports", ",".join(f"{p}:{p}" for p in range(1, 20)))[0] == 0
    for gid in range(10, 24):
        run(capsys, "mcast", "add", *sw, str(gid), "--ports", "1")
    assert json.loads(run(capsys, "mcast", "show", *sw, "9", "--json")[1]) == [{"id": 9, "replicas": BMV2_19}]
    groups = json.loads(run(capsys, "mcast", "show", *sw, "--json")[1])
    assert [g["id"] for g in groups] == [23, 22, *range(9, 22)]  # PI's map of groups grows at the 14th too
    assert run(capsys, "clone", "add", *sw, "5", "--ports", ",".join(f"{p}:{p}" for p in range(1, 20)))[0] == 0
    assert json.loads(run(capsys, "clone", "show", *sw, "5", "--json")[1]) == [
        {"id": 5, "replicas": BMV2_19, "truncate": 0}]


def test_clone_truncation_is_refused_as_bmv2_refuses_it(switch: str, capsys) -> None:
    """PI's simple_switch target: "TODO add support for truncation in bmv2"; the Python
    target answers the same unless started with its --clone-truncation extension."""
    sw = [switch]
    run(capsys, "pipeline", "load", *sw, "--program", "rail_switch")
    code, _, err = run(capsys, "clone", "add", *sw, "5", "--ports", "4", "--truncate", "128")
    assert code == 1 and err.count("\n") == 1 and "BMv2 does not implement truncation" in err
    assert run(capsys, "clone", "add", *sw, "5", "--ports", "4")[0] == 0
    code, out, _ = run(capsys, "clone", "show", *sw)
    assert out.splitlines()[0].split() == ["id", "replicas", "truncate"]
    assert json.loads(run(capsys, "clone", "show", *sw, "--json")[1]) == [{"id": 5, "replicas": "4:0", "truncate": 0}]


def test_clone_show_gives_the_truncation_the_extension_honours(target_name: str, capsys) -> None:
    if target_name != "python":
        pytest.skip("--clone-truncation is the Python target's extension; BMv2 refuses truncation")
    spec = SwitchSpec(name="cli-trunc", target="python", ports={}, device_id=3,
                      grpc_address=f"127.0.0.1:{free_tcp_port()}", extra_args=("--clone-truncation",))
    with NetRecord("cli-test") as record, SwitchProcess(spec, record) as proc:
        sw = [proc.grpc_address]
        assert run(capsys, "pipeline", "load", *sw, "--program", "rail_switch")[0] == 0
        assert run(capsys, "clone", "add", *sw, "5", "--ports", "4", "--truncate", "128")[0] == 0
        shown = json.loads(run(capsys, "clone", "show", *sw, "--json")[1])
    assert shown == [{"id": 5, "replicas": "4:0", "truncate": 128}]


def test_packets_are_built_and_shown_with_scapy_and_silence_is_a_failure(switch: str, capsys) -> None:
    sw = [switch]
    assert run(capsys, "pipeline", "load", *sw, "--program", "rail_switch")[0] == 0
    code, out, _ = run(capsys, "packet", "send", *sw, "--port", "2", "--scapy",
                       'Ether(dst="02:00:00:00:00:09")/IP(src="10.0.0.1", dst="10.9.0.1")/UDP(sport=40000, dport=40001)')
    assert code == 0 and "Ether / IP / UDP 10.0.0.1:40000 > 10.9.0.1:40001" in out, out
    code, out, err = run(capsys, "packet", "send", *sw, "--port", "2", "--scapy", "Ether()/NoSuchLayer()")
    assert code == 1 and err.count("\n") == 1 and "NoSuchLayer" in err
    code, _, err = run(capsys, "packet", "listen", *sw, "--timeout", "0.3")
    assert code == 1 and "no packet-in within 0.3 s" in err


def test_an_indirect_tables_default_shows_as_bmv2_reads_it(switch: str, capsys) -> None:
    """PI reads an action-selector table's default entry back without an action."""
    build = "tests/p4programs/build/selectors"
    assert run(capsys, "pipeline", "load", switch, "--json-file", f"{build}.json", "--p4info", f"{build}.p4info.txtpb")[0] == 0
    data = json.loads(run(capsys, "rules", "show", switch, "--json")[1])
    assert {t: block["default"] for t, block in data.items()} == {"I.by_op": None, "I.ecmp": None, "I.wide": None}
    assert "I.ecmp: no entries\ndefault: (no action)" in run(capsys, "rules", "show", switch)[1]
