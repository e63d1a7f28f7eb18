"""rail_switch's aggregation stage on the selected target, read as the protocol: a slot adds
its workers' chunks and multicasts the sum once all have contributed, each copy addressed to
its worker; a duplicate is answered from the completed set and never added twice; slots
outside the job's pool and unknown jobs or workers are dropped; agg_events counts each.
Every request enters on port 1: a switch process orders only one port's packets, and each
outcome depends on the ones before (the switch tells workers apart by their addresses)."""

from __future__ import annotations

import time

from conformance_project import RAIL_AGGREGATE, agg_frame
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from test_conformance import install

from controller.p4build import pipeline_files
from packettest import open_target
from workloads.aggregation.wire import FLAG_RESULT, FLAG_RETRANSMIT, FLAG_SET, LANES, decode

EVENTS = ("contribution", "completion", "duplicate answered", "duplicate dropped", "unknown", "outside pool")


def _results(outputs):
    return {port: (Ether(frame), decode(bytes(Ether(frame)[UDP].payload))) for port, frame in outputs}


def _events(sw, expected: dict[str, int]) -> dict[str, int]:
    """agg_events once it equals ``expected``, or after 5 s: a dropped packet has no output to
    wait for, and a process target may still be counting it."""
    counter = sw.schema.counter("RailIngress.aggregate.agg_events")
    deadline = time.monotonic() + 5
    while True:
        seen = {EVENTS[e.index.index]: e.data.packet_count for e in sw.client.read_counter(counter.id)
                if e.index.index < len(EVENTS) and e.data.packet_count}
        if seen == expected or time.monotonic() > deadline:
            return seen
        time.sleep(0.05)


def test_a_slot_adds_every_worker_and_multicasts_the_sum_to_each(target_name: str) -> None:
    with open_target(target_name, pipeline_files("rail_switch")) as sw:
        install(sw, RAIL_AGGREGATE)
        assert sw.send(1, agg_frame(0, 2, (1, -2, 3), exponent=130), expect=0) == []
        assert sw.send(1, agg_frame(1, 2, (10, -20, 30), exponent=141), expect=0) == []
        out = _results(sw.send(1, agg_frame(2, 2, (100, -200, 300) + (5,) * 61, exponent=120), expect=3))
        events = _events(sw, {"contribution": 3, "completion": 1})
    assert sorted(out) == [1, 2, 3], "one copy per worker"
    for port, (frame, chunk) in out.items():
        assert frame.dst == f"02:00:00:00:00:{port:02x}" and frame[IP].dst == f"10.0.0.{port}"
        assert frame[IP].src == "10.0.255.254" and frame[UDP].sport == 48864 and frame[UDP].dport == 48865
        assert chunk.values == (111, -222, 333) + (5,) * 61
        assert chunk.flags == FLAG_RESULT and chunk.slot == 2 and chunk.offset == 2 * LANES
        assert chunk.exponent == 141, "the largest exponent"
        assert chunk.workers == 3 and chunk.bitmap == 0b111
    assert events == {"contribution": 3, "completion": 1}


def test_a_duplicate_is_answered_from_the_completed_set_and_never_added_twice(target_name: str) -> None:
    with open_target(target_name, pipeline_files("rail_switch")) as sw:
        install(sw, RAIL_AGGREGATE)
        sw.send(1, agg_frame(0, 0, (1,)), expect=0)
        assert sw.send(1, agg_frame(0, 0, (1,)), expect=0) == [], "a duplicate of an incomplete round is dropped"
        sw.send(1, agg_frame(1, 0, (2,)), expect=0)
        sw.send(1, agg_frame(2, 0, (4,)), expect=3)
        again = sw.send(1, agg_frame(1, 0, (2,)), expect=1)
        sw.send(1, agg_frame(1, 0, (50,), flags=FLAG_SET), expect=0)  # the slot's next round, in the other set
        late = sw.send(1, agg_frame(2, 0, (4,)), expect=1)
        events = _events(sw, {"contribution": 4, "completion": 1, "duplicate answered": 2, "duplicate dropped": 1})
    ((port, (frame, chunk)),) = _results(again).items()
    assert port == 1 and frame[IP].dst == "10.0.0.2" and frame.dst == "02:00:00:00:00:02", \
        "back to the sender, by the port it came in"
    assert chunk.values[0] == 7 and chunk.flags == FLAG_RESULT | FLAG_RETRANSMIT
    ((port, (_, chunk)),) = _results(late).items()
    assert port == 1 and chunk.values[0] == 7, "the previous round stays readable while the next one fills"
    assert events == {"contribution": 4, "completion": 1, "duplicate answered": 2, "duplicate dropped": 1}


def test_slots_outside_the_pool_and_unknown_jobs_or_workers_are_dropped(target_name: str) -> None:
    with open_target(target_name, pipeline_files("rail_switch")) as sw:
        install(sw, RAIL_AGGREGATE)
        assert sw.send(1, agg_frame(0, 4, (1,)), expect=0) == [], "the pool holds slots 0..3"
        assert sw.send(1, agg_frame(0, 0, (1,), job=9), expect=0) == []
        assert sw.send(1, agg_frame(0, 0, (1,), src="10.0.0.9"), expect=0) == []
        events = _events(sw, {"outside pool": 1, "unknown": 2})
    assert events == {"outside pool": 1, "unknown": 2}
