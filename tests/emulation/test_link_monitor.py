"""The link monitors every experiment's rows carry: a UDP flow offered at twice its link's rate
keeps the sender's NIC queue full, and that NIC is seen carrying its configured rate while
busy; a link that only carried pings is not judged. (UDP, not TCP: how deep a TCP sender's
queue gets depends on where the path's bottleneck sits, which differs between the switch
engines, and a queue that never holds a period's worth is rightly not judged.)
Through a fabric's own sampler (:func:`cpu_sampler.fabric_cpu_sampler`), as the experiments
use it."""

from __future__ import annotations

from pathlib import Path

from controller.emulation import load_emulation_module
from controller.experiments.cpu_use import cpu_row
from controller.experiments.fidelity import breaches
from controller.topology import rail_only

fabric_net = load_emulation_module("fabric_net")
cpu_sampler = load_emulation_module("cpu_sampler")

RATE_MBPS = 10


def test_a_busy_link_is_seen_carrying_its_rate(target_name: str, tmp_path: Path) -> None:
    topo = rail_only(2, 1, rate_mbps=RATE_MBPS)
    address = topo.hosts[1].nics[0].address
    with fabric_net.EmulatedFabric(topo, target=target_name, publish=False, log_dir=tmp_path) as fab:
        sampler = cpu_sampler.fabric_cpu_sampler(fab, [s.name for s in topo.switches])
        assert sampler.links is not None and len(sampler.links.ends) == 4, "both ends of both links"
        server = fab.host("s1").popen(["iperf3", "-s", "-1", "-p", "5201"])
        try:
            fab.host("s0").cmd(f"ping -c 1 -W 2 {address}")
            with sampler.measure() as quiet:
                fab.host("s0").cmd(f"ping -c 3 -i 0.2 -W 2 {address}")
            with sampler.measure() as bulk:
                out = fab.host("s0").cmd(f"iperf3 -c {address} -p 5201 -u -b {2 * RATE_MBPS}M -t 2")
        finally:
            server.kill()
            server.wait()
    assert "receiver" in out, out
    idle = quiet[0].links
    assert idle is not None and idle.backlogged == 0 and idle.carried is None, idle
    use = bulk[0].links
    assert use is not None and use.links == 4 and use.backlogged >= 1, use
    # the sender's NIC held the queue, and while busy sent its configured rate (htb runs a few
    # per cent over it while busy)
    assert use.slowest == "s0-eth0" and use.fastest in {"s0-eth0", "rail0-eth2"}, use
    assert 0.9 <= use.carried <= 1.1, use
    assert use.overshoot is not None and use.overshoot <= 1.05, use
    row = cpu_row(bulk[0])
    assert row["link_carried"] == use.carried and not [b for b in breaches(row) if b.monitor.startswith("link")]
