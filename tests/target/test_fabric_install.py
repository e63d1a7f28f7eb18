"""Install generated fabrics onto real switch processes over gRPC, read them back, and
reconcile a restarted switch."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest

from controller.install import InstallOptions, diff_fabric, install_fabric, sync_fabric
from controller.netstate import NetRecord
from controller.readiness import free_tcp_port
from controller.switch_process import SwitchProcess, SwitchSpec
from controller.topology import rail_fat_tree, rail_only
from controller.topology.model import Topology


@contextlib.contextmanager
def running(topo: Topology, target: str, engine: str | None = None):
    """Start one switch process (no data ports) per switch; yield the topology with addresses."""
    with NetRecord("fabric-install") as record, contextlib.ExitStack() as stack:
        switches = []
        procs = {}
        for sw in topo.switches:
            spec = SwitchSpec(name=sw.name, target=target, ports={}, device_id=sw.device_id,
                              grpc_address=f"127.0.0.1:{free_tcp_port()}", engine=engine)
            procs[sw.name] = stack.enter_context(SwitchProcess(spec, record))
            switches.append(dataclasses.replace(sw, grpc=spec.grpc_address))
        yield dataclasses.replace(topo, switches=tuple(switches)), procs


@pytest.mark.parametrize("topo", [rail_only(4, 4), rail_fat_tree(4, 2, spines=2)], ids=lambda t: t.kind)
def test_install_then_read_back_equal(topo: Topology, target_name: str, switch_engine: str | None) -> None:
    with running(topo, target_name, switch_engine) as (live, _):
        reports = install_fabric(live)
        assert [r.error for r in reports] == [None] * len(live.switches)
        assert sum(r.entries for r in reports) > 0
        for rep in diff_fabric(live):
            assert rep.diff is not None, f"{rep.switch}: the read failed: {rep.error}"
            assert rep.diff.in_sync, f"{rep.switch}: {rep.diff.summary()}"


def test_restart_then_sync_restores_the_switch(target_name: str, switch_engine: str | None) -> None:
    topo = rail_fat_tree(2, 2, spines=2)
    with running(topo, target_name, switch_engine) as (live, procs):
        install_fabric(live)
        victim = live.switches[0]
        proc = procs[victim.name]
        proc.stop()
        proc.start()
        after = {r.switch: r for r in diff_fabric(live, options=InstallOptions(load_pipeline=False))
                 if r.switch != victim.name}
        assert all(r.diff.in_sync for r in after.values())
        synced = {r.switch: r for r in sync_fabric(live)}
        assert synced[victim.name].error is None
        assert synced[victim.name].entries > 0
        assert all(r.diff.in_sync for r in diff_fabric(live))


def test_sync_removes_extra_and_fixes_changed_entries(target_name: str, switch_engine: str | None) -> None:
    from controller.p4build import pipeline_files
    from controller.p4runtime.client import P4RuntimeClient
    from controller.p4runtime.entities import Lpm, TableRule, encode_rule, update
    from controller.p4runtime.schema import P4Schema

    topo = rail_only(2, 1)
    schema = P4Schema.from_file(pipeline_files("rail_switch").p4info)
    with running(topo, target_name, switch_engine) as (live, _):
        install_fabric(live)
        sw = live.switches[0]
        extra = TableRule("RailIngress.ipv4_lpm", {"hdr.ipv4.dst_addr": Lpm(0x0B000000, 8)}, "RailIngress.drop")
        with P4RuntimeClient(sw.grpc, device_id=sw.device_id) as client:
            client.write([update("insert", encode_rule(schema, extra))])
        (rep,) = diff_fabric(live)
        assert rep.diff.summary() == "0 missing, 0 changed, 1 extra"
        (rep,) = sync_fabric(live)
        assert rep.error is None
        (rep,) = diff_fabric(live)
        assert rep.diff.in_sync
