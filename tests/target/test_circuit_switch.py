"""circuit_switch on the selected target: pinned circuits forward port to port and never
touch the frame; on the Python target, whose clock a test can set, the switch follows its
schedule's days and drops at night, at the phase the controller's offset gives."""

from __future__ import annotations

import pytest

from controller.p4build import pipeline_files
from controller.p4runtime.entities import encode_rule, update
from controller.schedule import one_shot, opera, round_robin
from controller.schedule.ocs_rules import circuit_switch_rules, clock_rule
from packettest import open_target

FRAME = bytes(range(256)) * 2  # anything: an OCS parses nothing


def _install(sw, rules) -> None:
    sw.client.write([update("modify" if r.is_default else "insert", encode_rule(sw.schema, r)) for r in rules])


def test_pinned_circuits_forward_unchanged_and_dark_ports_drop(target_name: str) -> None:
    s = one_shot([(1, 0, None, None)])
    with open_target(target_name, pipeline_files("circuit_switch")) as sw:
        _install(sw, [clock_rule(s, 0), *circuit_switch_rules(s, 0)])
        assert sw.send(1, FRAME, expect=1) == [(2, FRAME)]
        assert sw.send(2, FRAME[:64], expect=1) == [(1, FRAME[:64])]
        assert sw.send(3, FRAME, expect=0) == []


@pytest.mark.parametrize("make", [
    lambda: round_robin(4, slice_us=900, night_us=100),
    lambda: opera(5, uplinks=2, slice_us=700, night_us=300),
])
def test_days_and_nights_follow_the_schedule_on_a_set_clock(target_name: str, make) -> None:
    if target_name != "python":
        pytest.skip("time-dependent: needs the Python target's settable clock (BMv2's runs on its own)")
    s = make()
    started, epoch = 123_456, 7_000
    for c in range(len(s.circuits)):
        with open_target("python", pipeline_files("circuit_switch")) as sw:
            now = {"t": 0}
            sw.switch.clock = lambda now=now: now["t"]
            _install(sw, [clock_rule(s, c, started_at_us=started, epoch_us=epoch), *circuit_switch_rules(s, c)])
            for t in range(0, 2 * s.cycle_of(s.circuits[c]), 50):
                now["t"] = t
                at = s.at(c, t + started - epoch)  # the fabric's time of the switch's t
                out = sw.send(1, FRAME, expect=None)
                if at.index is None:
                    assert out == [], f"t={t}: night, but forwarded {out}"
                else:
                    dst = s.circuits[c].slices[at.index][0]
                    assert out == [(dst + 1, FRAME)], f"t={t}: slice {at.index} sends rack 0 to {dst}"


def test_clock_probe_measures_the_switch_clock(target_name: str) -> None:
    """A probe's timestamp lies between its send and receive times on the controller's clock
    (shifted by the switch's start): the estimate's error is within its stated bound."""
    from controller.schedule.clock import controller_now_us, probe_clock

    with open_target(target_name, pipeline_files("circuit_switch")) as sw:
        first = probe_clock(sw.client, sw.schema, probes=12)
        second = probe_clock(sw.client, sw.schema, probes=12)
    assert first.samples == 12 and first.uncertainty_us < 50_000
    # the same switch, measured twice: both estimates agree within their bounds (the clocks
    # of the controller and the switch run at the same rate)
    assert abs(first.started_at_us - second.started_at_us) <= first.uncertainty_us + second.uncertainty_us + 1
    assert first.started_at_us < controller_now_us()
