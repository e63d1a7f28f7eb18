"""``mlfabric dashboard`` on a running fabric: the page and the topology are served, a link
carrying a UDP flow at about its configured rate is seen in the event stream, with the links it
does not cross idle, the switch's CPU and ports are sampled and its tables are read on request.
(The drawing itself: test_dashboard_browser.py; the data behind it is checked here.)"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from controller.dashboard.client import next_samples
from controller.dashboard.live import LiveSampler
from controller.dashboard.rates import watched_interface
from controller.dashboard.server import Dashboard
from controller.emulation import load_emulation_module
from controller.topology import rail_only

fabric_net = load_emulation_module("fabric_net")

RATE_MBPS = 10


def test_the_dashboard_serves_the_fabric_and_sees_a_busy_link(target_name: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFABRIC_STATE_DIR", str(tmp_path / "state"))  # a journal of this test's fabric only
    topo = rail_only(2, 1, rate_mbps=RATE_MBPS)
    address = topo.hosts[1].nics[0].address
    with fabric_net.EmulatedFabric(topo, target=target_name, publish=False, log_dir=tmp_path) as fab, \
            Dashboard(LiveSampler(0.5), port=0) as board:
        page = urllib.request.urlopen(board.url, timeout=10).read().decode()
        assert "EventSource(\"/api/stream\")" in page and "<svg" in page
        drawn = json.loads(urllib.request.urlopen(board.url + "api/topology", timeout=10).read())
        assert {n["name"] for n in drawn["nodes"]} == {"s0", "s1", "rail0"}
        assert {lk["interface"] for lk in drawn["links"]} == {"rail0-eth1", "rail0-eth2"}
        tables = json.loads(urllib.request.urlopen(board.url + "api/tables/rail0", timeout=10).read())
        idle = next_samples(board.url, 2)[-1]
        assert all(r["tx_mbps"] < 0.5 and r["rx_mbps"] < 0.5 for r in idle["links"]), idle
        server = fab.host("s1").popen(["iperf3", "-s", "-1", "-p", "5201"])
        client = None
        try:
            fab.host("s0").cmd(f"ping -c 1 -W 2 {address}")
            client = fab.host("s0").popen(["iperf3", "-c", address, "-p", "5201", "-u", "-b", f"{RATE_MBPS}M",
                                           "-t", "4"])
            busy = next_samples(board.url, 4)[-1]  # 2 s into the flow, one full sample inside it
        finally:
            if client is not None:
                client.wait(timeout=20)
            server.kill()
            server.wait()
    rates = {r["interface"]: r for r in busy["links"]}
    sender = watched_interface(fab.live, next(lk for lk in fab.live.links if "s0" in (lk.a.node, lk.b.node)))
    receiver = "rail0-eth2" if sender == "rail0-eth1" else "rail0-eth1"
    # s0's flow comes up its link (rx at the switch port) and goes down s1's (tx), at about 10 Mbit/s
    assert 0.7 <= rates[sender]["utilisation"] <= 1.2 and rates[sender]["rx_mbps"] > 7, rates
    assert rates[receiver]["tx_mbps"] > 7, rates
    (rail0,) = busy["switches"]
    # read twice from /proc (its 10 ms ticks: a switch forwarding 10 Mbit/s may read 0 over a 0.5 s sample)
    assert rail0["switch"] == "rail0" and rail0["cpu"] is not None and 0 <= rail0["cpu"] < 2, rail0
    assert {p["interface"] for p in rail0["ports"]} == {"rail0-eth1", "rail0-eth2"}
    assert all(p["backlog_bytes"] is not None and p["drops"] >= 0 and p["queue_ms"] >= 0 for p in rail0["ports"]), rail0
    assert busy["fabric"] == topo.name and busy["dashboard_cpu"] < 0.05
    assert sum(tables["tables"].values()) >= 2 and all(n >= 0 for n in tables["tables"].values()), tables
