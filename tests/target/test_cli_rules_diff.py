"""``mlfabric rules diff`` lists the entries that differ, per switch, on live switch processes."""

from __future__ import annotations

import json

from p4.v1 import p4runtime_pb2
from test_fabric_install import running

from controller.cli import main
from controller.install import install_fabric
from controller.p4build import pipeline_files
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.entities import Lpm, TableRule, encode_rule, update
from controller.p4runtime.schema import P4Schema
from controller.topology import dump_topology, rail_only


def _lpm(prefix: int, action: str = "RailIngress.drop", **params: int) -> TableRule:
    return TableRule("RailIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(prefix, 16)}, action, params)


def test_diff_lists_missing_extra_and_changed_entries(target_name: str, tmp_path, capsys) -> None:
    schema = P4Schema.from_file(pipeline_files("rail_switch").p4info)
    with running(rail_only(2, 2), target_name) as (live, _):
        install_fabric(live)
        path = tmp_path / "live.yaml"
        dump_topology(live, path)
        assert main(["rules", "diff", str(path), "--json"]) == 0
        assert [r["diff"] for r in json.loads(capsys.readouterr().out)] == ["0 missing, 0 changed, 0 extra"] * 2

        sw = live.switches[0]
        with P4RuntimeClient(sw.grpc, device_id=sw.device_id) as client:
            first, second = client.read_table_entries(schema.table("ipv4_lpm").id)[:2]
            client.write([update("delete", first)])  # now missing
            client.write([update("modify", _with_drop(second, schema))])  # now changed
            client.write([update("insert", encode_rule(schema, _lpm(0x0B000000 + (i << 16))))
                          for i in range(12)])  # 12 extra
        assert main(["rules", "diff", str(path), "--json"]) == 1
        rows = {r["switch"]: r for r in json.loads(capsys.readouterr().out)}
        row = rows[sw.name]
        assert row["diff"] == "1 missing, 1 changed, 12 extra"
        assert len(row["extra"]) == 12  # JSON lists everything
        assert row["extra"][0] == {"table": "RailIngress.ipv4_lpm", "match": row["extra"][0]["match"], "action": "drop()"}
        assert {e["match"] for e in row["extra"]} == {f"dst_addr=11.{i}.0.0/16" for i in range(12)}
        assert row["missing"][0]["action"].startswith("set_nexthop(")
        (ch,) = row["changed"]
        assert ch["switch_action"] == "drop()" and ch["compiled_action"].startswith("set_nexthop(")
        assert "missing" not in rows[live.switches[1].name]  # in sync: nothing listed

        assert main(["rules", "diff", str(path), "--limit", "5"]) == 1
        out = capsys.readouterr().out
        assert f"{sw.name}: 1 missing, 1 changed, 12 extra" in out
        listed = out.split(f"{sw.name}: 1 missing")[1].splitlines()[1:]
        assert [line.split()[0] for line in listed] == ["missing", "changed", "extra", "extra", "extra", "..."]
        assert listed[-1].strip() == "... and 9 more"
        assert "switch has drop(), compiled set_nexthop(" in listed[1]


def _with_drop(entry: p4runtime_pb2.TableEntry, schema: P4Schema) -> p4runtime_pb2.TableEntry:
    """``entry`` with its action replaced by drop()."""
    out = p4runtime_pb2.TableEntry()
    out.CopyFrom(entry)
    out.action.action.Clear()
    out.action.action.action_id = schema.action("drop").id
    return out
