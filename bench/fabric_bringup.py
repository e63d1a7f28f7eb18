"""Bring-up and teardown of a 16-switch emulated fabric (pipelines loaded, rules installed)."""

from __future__ import annotations

import time

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
