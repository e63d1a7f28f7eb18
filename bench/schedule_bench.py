"""Schedules on emulated optical fabrics: install time and clock skew on 16 switches, and
the shortest slice of which the emulation can still use at least 90%."""

from __future__ import annotations

import time

from controller.emulation import load_emulation_module
from controller.schedule import opera
from controller.schedule.install import install_schedule
from controller.topology import optical

__all__ = ["calendar_effect", "schedule_install", "shortest_slice", "usable_day"]


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



def usable_day(target: str, slice_us: int, seconds: float = 1.5) -> float:
    """The fraction of the packets rack 0 sends to rack 1 during their day that arrive
    (round-robin, 4 racks, nights a tenth of a day, no calendar queue): what skew and
    latency leave of a day."""
    from controller.schedule import round_robin

    fabric_net = load_emulation_module("fabric_net")
    udp_probe_run = load_emulation_module("udp_probe_run")
    schedule = round_robin(4, slice_us=slice_us, night_us=max(1, slice_us // 10))
    gap = min(0.0005, slice_us / 20 / 1e6)
    with fabric_net.EmulatedFabric(optical(4, 1, uplinks=1, rate_mbps=None), target=target, shape=False,
                                   publish=False, schedule=schedule) as fab:
        sent_times, arrivals = udp_probe_run.probe(fab, "h0_0", "h1_0", "10.200.1.1", seconds=seconds, gap=gap)
        epoch = fab.schedule_epoch_us
    got = {n for n, _ in arrivals}
    assert epoch is not None
    in_day = [n for n, t in enumerate(sent_times) if schedule.at(0, int(t * 1e6 - epoch)).index == 0]
    return sum(1 for n in in_day if n in got) / max(1, len(in_day))


def shortest_slice(target: str, goal: float = 0.9) -> dict[str, float]:
    """The shortest day (of 40, 20, 10, 5, 2 ms) of which at least ``goal`` is usable."""
    usable = {}
    best = None
    for ms in (40, 20, 10, 5, 2):
        usable[ms] = usable_day(target, ms * 1000)
        if usable[ms] >= goal:
            best = ms
    return {"shortest_slice_ms": best or float("nan"), **{f"usable_at_{ms}ms": v for ms, v in usable.items()}}


def calendar_effect(calendar_queues: bool, seconds: float = 2.0) -> dict[str, float]:
    """Rack 0 -> rack 1 for ``seconds`` through a 4-rack strobe (200 ms days, 100 ms nights,
    only day 0 connects them), Python target: packets sent, delivered, dropped at the ToR
    for want of a circuit. Without calendar queues the ToR drops as BMv2 would."""
    from controller.p4build import pipeline_files
    from controller.p4runtime.client import P4RuntimeClient
    from controller.p4runtime.schema import P4Schema
    from controller.schedule import round_robin

    fabric_net = load_emulation_module("fabric_net")
    udp_probe_run = load_emulation_module("udp_probe_run")
    schedule = round_robin(4, slice_us=200_000, night_us=100_000)
    extra = ("--queue-depth", "2000") if calendar_queues else ()
    with fabric_net.EmulatedFabric(optical(4, 1, uplinks=1, rate_mbps=None), target="python", shape=False,
                                   publish=False, schedule=schedule, calendar_queues=calendar_queues,
                                   switch_args=extra) as fab:
        sent, got = udp_probe_run.probe(fab, "h0_0", "h1_0", "10.200.1.1", seconds=seconds, idle=2.0)
        tor0 = fab.live.switch("tor0")
        schema = P4Schema.from_file(pipeline_files("tor_switch").p4info)
        with P4RuntimeClient(tor0.grpc, device_id=tor0.device_id, election_id=0).connect() as c:
            dropped = sum(e.data.packet_count for e in c.read_counter(schema.counter("calendar_drops").id))
    return {"sent": len(sent), "delivered": len(got), "dropped_at_tor": dropped}
