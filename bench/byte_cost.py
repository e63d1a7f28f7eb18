"""CPU-seconds per emulated gigabyte: bulk TCP between two Mininet hosts through one switch.

Two servers on one rail switch (``rail_only(2, 1)``, links unshaped), offloads off on the
hosts as in every experiment; iperf3 sends a fixed amount one way. The cost is the machine's
busy CPU time (every core: the hosts' TCP stacks, the veths, the switch) over the gigabytes
delivered, and the switch process's own share of it, per MTU and per switch: the Python
target's engines, BMv2 and a Linux bridge (the kernel's own forwarding, no P4 switch).
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

from controller.emulation import load_emulation_module
from controller.experiments.cpu_use import cpu_use
from controller.topology import rail_only

__all__ = ["bridge_byte_cost", "byte_cost"]


def _iperf(client: Any, server: Any, address: str, megabytes: int) -> float:
    """Bytes iperf3 delivered from ``client`` to ``server``'s ``address``; the server is this
    function's own process, stopped however the transfer ends."""
    listener = server.popen(["iperf3", "-s", "-1", "-p", "5201"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        out = client.cmd(f"iperf3 -c {address} -p 5201 -n {megabytes}M -J")
        data = json.loads(out[out.index("{"):])
        return float(data["end"]["sum_received"]["bytes"])
    finally:
        if listener.poll() is None:
            listener.kill()
        listener.wait()


def _measure(sampler: Any, run: Any) -> dict[str, float]:
    before = sampler.sample()
    t0 = time.monotonic()
    delivered = run()
    seconds = time.monotonic() - t0
    use = cpu_use(before, sampler.sample())
    gigabytes = delivered / 1e9
    machine_cpu_s = use.machine * use.cores * seconds
    return {"gigabytes": gigabytes, "seconds": seconds, "goodput_mbps": 8 * delivered / seconds / 1e6,
            "machine_cpu_s_per_gb": machine_cpu_s / gigabytes,
            "switch_cpu_s_per_gb": use.total * seconds / gigabytes}


def byte_cost(target: str, engine: str | None, mtu: int, megabytes: int = 300, *,
              super_frames: int = 0) -> dict[str, float]:
    """Through one P4 switch of ``target`` (and the Python target's ``engine``); with
    ``super_frames``, the hosts' offloads on and the switch forwarding super-packets of
    that many frames whole (``mlfabric-switch --super-packets``)."""
    fabric_net = load_emulation_module("fabric_net")
    sampler_mod = load_emulation_module("cpu_sampler")
    topo = rail_only(2, 1, rate_mbps=None, mtu=mtu)
    with fabric_net.EmulatedFabric(topo, target=target, engine=engine, shape=False, publish=False,
                                   super_frames=super_frames) as fab:
        sampler = sampler_mod.fabric_cpu_sampler(fab, [s.name for s in topo.switches])
        s0, s1 = fab.host("s0"), fab.host("s1")
        address = topo.host("s1").nics[0].address
        _iperf(s0, s1, address, 20)  # warm up: ARP is static, but TCP's window grows
        return _measure(sampler, lambda: _iperf(s0, s1, address, megabytes))


def bridge_byte_cost(mtu: int, megabytes: int = 300) -> dict[str, float]:
    """The same through a Linux bridge (no switch process: its cost is the kernel's)."""
    from mininet.net import Mininet

    sampler_mod = load_emulation_module("cpu_sampler")
    host_config = load_emulation_module("host_config")
    net = Mininet(controller=None, build=False, autoSetMacs=True)
    bridge = "bbrbench0"
    try:
        h0, h1 = net.addHost("bh0", ip="10.77.0.1/24"), net.addHost("bh1", ip="10.77.0.2/24")
        root = net.addHost("bbr", inNamespace=False)  # the bridge's ports, in the root namespace
        subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True)
        for h in (h0, h1):
            link = net.addLink(h, root)
            for intf in (link.intf1, link.intf2):
                intf.cmd(f"ip link set dev {intf.name} mtu {mtu}")
            subprocess.run(["ip", "link", "set", link.intf2.name, "master", bridge, "up"], check=True)
        subprocess.run(["ip", "link", "set", bridge, "mtu", str(mtu), "up"], check=True)
        net.build()
        for h in (h0, h1):
            host_config.prepare_host(h)
        h0.cmd("ping -c 1 -W 2 10.77.0.2")
        sampler = sampler_mod.CpuSampler({})
        _iperf(h0, h1, "10.77.0.2", 20)
        return _measure(sampler, lambda: _iperf(h0, h1, "10.77.0.2", megabytes))
    finally:
        net.stop()
        subprocess.run(["ip", "link", "del", bridge], check=False, capture_output=True)
