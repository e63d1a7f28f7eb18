"""An optical fabric in Mininet: circuit switches follow a round-robin schedule installed on a
common epoch. A host pair's packets cross only in the slices whose matching connects their
racks, and nothing crosses at night.

The ToRs' time-flow entries (direct routing) send a packet for rack 1 only in a slot whose
circuit leads there; stock BMv2 has no calendar queue, so the others are dropped at the ToR
(counted in calendar_drops). Rack 0 reaches rack 1 in day 0 only."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.emulation import load_emulation_module
from controller.p4build import pipeline_files
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.schema import P4Schema
from controller.schedule import round_robin
from controller.topology import optical

# schedules: make test runs the first test a second time on the Python engine; calendar queues run on both
# engines through the switch_engine fixture

fabric_net = load_emulation_module("fabric_net")
udp_probe_run = load_emulation_module("udp_probe_run")
switch_engines = load_emulation_module("switch_engines")

#: a packet this close to a slice boundary may be counted on either side (host and switch
#: latency under a loaded 2-core machine)
MARGIN_US = 30_000


def _run(target: str, schedule, **fabric_options):
    """Rack 0's host sends UDP to rack 1's for 2 s; (sent, received, arrivals by slice, ToR drops)."""
    topo = optical(4, 1, uplinks=1, rate_mbps=None)
    with fabric_net.EmulatedFabric(topo, target=target, shape=False, publish=False,
                                   schedule=schedule, **fabric_options) as fab:
        assert len(fab.clock_reports) == 5
        # what this test's arithmetic needs: arrivals within MARGIN_US of a boundary are not
        # judged, so every clock must be known to better than that. (The 1 ms goal is a
        # figure of `make bench`: a probe's round trip depends on how busy the machine is.)
        assert all(r.skew_bound_us < MARGIN_US for r in fab.clock_reports), fab.clock_reports
        epoch = fab.schedule_epoch_us
        sent, got = udp_probe_run.probe(fab, "h0_0", "h1_0", "10.200.1.1", seconds=2.0, idle=2.0)
        tor0 = fab.live.switch("tor0")
        schema = P4Schema.from_file(pipeline_files("tor_switch").p4info)
        with P4RuntimeClient(tor0.grpc, device_id=tor0.device_id, election_id=0).connect() as c:
            waited = sum(e.data.packet_count for e in c.read_counter(schema.counter("calendar_drops").id))
    arrivals: dict[object, int] = {}
    for _, arrived in got:
        t = int(arrived * 1e6 - epoch)
        at = schedule.at(0, t)
        into = t % schedule.period_us
        if min(into, abs(into - schedule.slice_us), schedule.period_us - into) < MARGIN_US:
            continue  # too close to a boundary to say which side
        key = "night" if at.index is None else at.index
        arrivals[key] = arrivals.get(key, 0) + 1
    return len(sent), len(got), arrivals, waited


@pytest.mark.both_engines
def test_traffic_crosses_only_in_the_slices_that_connect_the_racks(target_name: str) -> None:
    schedule = round_robin(4, slice_us=200_000, night_us=100_000)
    sent, received, arrivals, waited = _run(target_name, schedule)
    assert sent > 200 and received, "nothing crossed in a whole cycle"
    assert "night" not in arrivals, f"packets crossed at night: {arrivals}"
    assert set(arrivals) == {0}, f"packets crossed outside day 0 (the only day 0 -> 1): {arrivals}"
    assert arrivals[0] > 20
    assert waited > 50, "packets for rack 1 outside day 0 are dropped at the ToR (no calendar queue)"


def test_calendar_queues_hold_packets_until_their_slot(target_name: str, switch_engine: str | None,
                                                      tmp_path: Path) -> None:
    """The Python target's calendar-queue extension, on each of its packet engines: a packet
    for rack 1 sent in any slot waits at the ToR for day 0 instead of being dropped."""
    if target_name != "python":
        pytest.skip("calendar queues are a Python-target extension; BMv2 drops instead (the test above)")
    schedule = round_robin(4, slice_us=200_000, night_us=100_000)
    sent, received, arrivals, waited = _run("python", schedule, calendar_queues=True,
                                           switch_args=("--queue-depth", "2000"), engine=switch_engine,
                                           log_dir=tmp_path)
    engines = switch_engines.fabric_engines("python", tmp_path, ["tor0", "tor1", "tor2", "tor3", "ocs0"])
    assert set(engines.values()) == {switch_engine}, engines
    assert set(arrivals) == {0}, f"held packets must leave in day 0 only: {arrivals}"
    assert waited == 0, "nothing is dropped for want of a circuit: it waits"
    assert received >= 0.9 * sent, f"{received} of {sent} arrived"
