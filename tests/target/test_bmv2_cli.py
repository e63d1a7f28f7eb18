"""``mlfabric bmv2-cli SWITCH`` runs BMv2's simple_switch_CLI, with this environment's thrift,
against the switch's Thrift port recorded in the published fabric.

A fabric's simple_switch_grpc may be built without Thrift (then the emulation test skips its
Thrift command, saying so); ``simple_switch``, BMv2's Thrift-only build of the same switch,
stands in for it here: the Thrift service simple_switch_CLI talks to is the same.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.bmv2_thrift import simple_switch_cli, thrift_support
from controller.errors import ToolchainMissing
from controller.live_fabric import PARAM, FabricAccess
from controller.readiness import free_tcp_port, wait_for_tcp
from controller.topology import dump_topology, rail_only

pytestmark = pytest.mark.target

REPO = Path(__file__).resolve().parents[2]
JSON_PATH = REPO / "p4src" / "build" / "rail_switch.json"


@pytest.fixture
def thrift_switch(target_name: str, tmp_path: Path) -> Iterator[int]:
    """A simple_switch running rail_switch with a Thrift server; its port."""
    if target_name != "bmv2":
        pytest.skip("simple_switch_CLI talks to BMv2 only (--target bmv2)")
    exe = shutil.which("simple_switch")
    if exe is None or not thrift_support(exe)[0]:
        pytest.skip("BMv2's simple_switch (with Thrift) is not installed")
    try:
        simple_switch_cli(9090)
    except ToolchainMissing as exc:
        pytest.skip(f"simple_switch_CLI is unusable here: {exc}")
    port = free_tcp_port()
    proc = subprocess.Popen([exe, "--thrift-port", str(port), "--device-id", "7",
                             "--notifications-addr", f"ipc://{tmp_path}/notifications.ipc", str(JSON_PATH)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_tcp(f"127.0.0.1:{port}", timeout=10, what="simple_switch's Thrift server")
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_bmv2_cli_reaches_the_switch_by_name(thrift_switch: int, tmp_path: Path) -> None:
    topo = rail_only(2, 2, rate_mbps=None)
    access = FabricAccess(target="bmv2", thrift_ports={"rail0": thrift_switch}, thrift_server=True)
    live = tmp_path / "live.yaml"
    dump_topology(dataclasses.replace(topo, params={**topo.params, PARAM: access.to_params()}), live)
    commands = ("table_num_entries RailIngress.ipv4_lpm\n"
                "table_add RailIngress.ipv4_lpm RailIngress.drop 10.9.0.0/16 =>\n"
                "table_num_entries RailIngress.ipv4_lpm\n")
    proc = subprocess.run([sys.executable, "-m", "controller.cli", "bmv2-cli", "rail0", "--topology", str(live)],
                          input=commands, capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    answers = [line.removeprefix("RuntimeCmd: ").strip() for line in proc.stdout.splitlines()
               if line.startswith("RuntimeCmd: ")]
    assert [a for a in answers if a.isdigit()] == ["0", "1"], proc.stdout
    assert "Adding entry to lpm match table RailIngress.ipv4_lpm" in proc.stdout, proc.stdout


def test_switches_started_without_a_thrift_port_each_get_their_own(target_name: str, tmp_path: Path) -> None:
    """A Thrift-enabled simple_switch_grpc serves Thrift on 9090 by default: without a port
    of its own, a second switch beside the first fails to start."""
    from controller.switch_process import SwitchProcess, SwitchSpec

    if target_name != "bmv2":
        pytest.skip("Thrift ports are BMv2's (--target bmv2)")
    specs = [SwitchSpec(name=f"thrift{i}", target="bmv2", ports={}, grpc_address=f"127.0.0.1:{free_tcp_port()}")
             for i in range(2)]
    with SwitchProcess(specs[0]) as first, SwitchProcess(specs[1]) as second:
        ports = [first.spec.thrift_port, second.spec.thrift_port]
        assert None not in ports and ports[0] != ports[1]
        assert first.proc is not None and second.proc is not None
        assert first.proc.poll() is None and second.proc.poll() is None
