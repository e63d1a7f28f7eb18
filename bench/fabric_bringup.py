"""Bring-up and teardown of emulated fabrics: 16 switches, and rail-only fabrics of 128 to 1,024 GPUs."""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path

from controller.emulation import load_emulation_module
from controller.topology import rail_only


def bring_up(target: str, runs: int = 3) -> dict[str, float]:
    """Median seconds from nothing to a 16-switch rail-only fabric with every rule installed,
    and to nothing again. 4 servers x 16 GPUs: 16 rail switches, 64 host links."""
    fabric_net = load_emulation_module("fabric_net")
    ups, downs = [], []
    for _ in range(runs):
        topo = rail_only(4, 16, rate_mbps=None)
        t0 = time.monotonic()
        fab = fabric_net.EmulatedFabric(topo, target=target, shape=False, publish=False)
        try:
            fab.start()
            ups.append(time.monotonic() - t0)
        finally:
            t1 = time.monotonic()
            fab.stop()
            downs.append(time.monotonic() - t1)
    ups.sort()
    downs.sort()
    return {"bring_up_s": ups[len(ups) // 2], "teardown_s": downs[len(downs) // 2], "switches": 16}


#: the rail-only fabrics of the scale rows: servers of 8 GPUs (8 rail switches)
SCALE_SERVERS = (16, 32, 64, 128)


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def growth_exponent(sizes: list[float], seconds: list[float]) -> float:
    """b of the least-squares fit ``seconds = a * size ** b`` (1: linear).

    >>> round(growth_exponent([256, 512, 1024], [2.0, 4.0, 8.0]), 3)
    1.0
    """
    xs = [math.log(s) for s in sizes]
    ys = [math.log(max(t, 1e-9)) for t in seconds]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def scale_series(target: str, servers: tuple[int, ...] = SCALE_SERVERS) -> list[dict[str, float]]:
    """Per size: seconds from nothing to every rule installed (shaped 100 Mbit/s links, as
    `fabric up` makes them), and to nothing again; the resident memory of the controller's
    process and of the switch processes, up."""
    fabric_net = load_emulation_module("fabric_net")
    out = []
    for n in servers:
        topo = rail_only(n, 8, rate_mbps=100)
        t0 = time.monotonic()
        fab = fabric_net.EmulatedFabric(topo, target=target, publish=False)
        try:
            fab.start()
            up = time.monotonic() - t0
            switches_mb = sum(_rss_mb(pid) for pid in fab.switch_pids().values())
            controller_mb = _rss_mb(os.getpid())
            answered, worst_ms = rail_pings(fab, topo) if n == max(servers) else (math.nan, math.nan)
        finally:
            t1 = time.monotonic()
            fab.stop()
            down = time.monotonic() - t1
        leftover = [i for i in fabric_net.interface_names(topo) if Path(f"/sys/class/net/{i}").exists()]
        out.append({"gpus": n * 8, "bring_up_s": up, "teardown_s": down, "switches_mb": switches_mb,
                    "controller_mb": controller_mb, "left_behind": len(leftover),
                    "rails_answered": answered, "rails": 8, "worst_rtt_ms": worst_ms,
                    "build_s": fab.timings.build_s, "switches_s": fab.timings.switches_s,
                    "hosts_s": fab.timings.hosts_s, "rules_s": fab.timings.rules_s})
    return out


def rail_pings(fab, topo) -> tuple[int, float]:
    """From the first server to the last, one ping per rail (NIC r to NIC r, through rail
    switch r): how many rails answered, and the slowest round trip (ms)."""
    first, last = topo.hosts[0], topo.hosts[-1]
    host = fab.host(first.name)
    answered, worst = 0, 0.0
    for nic in first.nics:
        peer = next(p for p in last.nics if p.rail == nic.rail)
        out = host.cmd(f"ping -n -c 3 -i 0.05 -W 1 -I {nic.address} {peer.address}")
        rtts = [float(x) for x in re.findall(r"time=([0-9.]+) ms", out)]
        if rtts:
            answered += 1
            worst = max(worst, *rtts)
    return answered, worst
