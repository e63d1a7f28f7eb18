"""Schedule install on a 16-switch optical fabric: how long it takes and how well the
switches' clocks agree afterwards (each switch's skew bound from its clock probe)."""

from __future__ import annotations

import time

from controller.emulation import load_emulation_module
from controller.schedule import opera
from controller.schedule.install import install_schedule
from controller.topology import optical

__all__ = ["schedule_install"]


def schedule_install(target: str) -> dict[str, float]:
    """12 racks with 4 uplinks (12 ToRs + 4 circuit switches) and an Opera-style schedule
    (10 ms days, 1 ms nights): seconds to probe every clock and install every entry, the
    worst and median skew bound, and the entries installed."""
    fabric_net = load_emulation_module("fabric_net")
    schedule = opera(12, uplinks=4, slice_us=10_000, night_us=1_000)
    with fabric_net.EmulatedFabric(optical(12, 1, uplinks=4, rate_mbps=None), target=target, shape=False,
                                   publish=False) as fab:
        t0 = time.monotonic()
        _, reports = install_schedule(fab.live, schedule)
        seconds = time.monotonic() - t0
    bounds = sorted(r.skew_bound_us for r in reports)
    return {"install_s": seconds, "worst_skew_us": bounds[-1], "median_skew_us": bounds[len(bounds) // 2],
            "switches": len(reports), "entries": sum(r.entries for r in reports)}


if __name__ == "__main__":
    print(schedule_install("python"))
