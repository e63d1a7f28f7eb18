"""``mlfabric host list|exec`` against a running fabric: a way into an emulated host."""

from __future__ import annotations

import json
import subprocess
import sys

from controller.emulation import load_emulation_module
from controller.topology import dump_topology, rail_only

fabric_net = load_emulation_module("fabric_net")


def test_hosts_are_listed_and_a_command_runs_inside_one(target_name: str, tmp_path) -> None:
    topo = rail_only(2, 2, rate_mbps=None)
    live = tmp_path / "live.yaml"

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "controller.cli", "host", *args], capture_output=True, text=True,
                              timeout=60)

    with fabric_net.EmulatedFabric(topo, target=target_name, shape=False, publish=False) as fab:
        dump_topology(fab.live, live)
        listed = cli("list", "--topology", str(live), "--json")
        other = topo.hosts[1].nics[0].address
        ping = cli("exec", "--topology", str(live), "s0", "--", "ping", "-c1", "-W2", other)
        inside = cli("exec", "--topology", str(live), "s0", "--", "ip", "-br", "addr")
        unknown = cli("exec", "--topology", str(live), "s9", "--", "true")
    hosts = json.loads(listed.stdout)["hosts"]
    assert [h["host"] for h in hosts] == ["s0", "s1"] and all(isinstance(h["pid"], int) for h in hosts)
    assert ping.returncode == 0 and "1 received" in ping.stdout, ping.stdout + ping.stderr
    assert topo.hosts[0].nics[0].address in inside.stdout, "the command ran in s0's namespace"
    assert unknown.returncode == 1 and unknown.stderr.count("\n") == 1 and "s9" in unknown.stderr
    after = cli("exec", "--topology", str(live), "s0", "--", "true")
    assert after.returncode == 1 and "is gone: the fabric is not running" in after.stderr
