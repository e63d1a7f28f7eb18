"""TDTCP's controller side, pure: TDNs of a schedule, the ticks' instants, who a ToR tells, and
the experiment's fabric and figures."""

from __future__ import annotations

import dataclasses

import pytest

from controller.errors import ConfigError
from controller.experiments.tdtcp import (
    Tdn,
    TdtcpConfig,
    capacity_mbps,
    fabric,
    goodput_mbps,
    schedule,
    summarize,
    switch_args,
    tdn_at,
)
from controller.schedule import one_shot, opera, round_robin, slots, strobe_matching
from controller.schedule.tdn import tdn_changes, tdn_of_slots
from controller.tdtcp.notify import NOTIFY_SESSION, notify_plan
from controller.tdtcp.ticker import change_instants
from controller.topology import optical


def test_each_distinct_fabric_state_is_a_tdn_and_nights_keep_the_one_before() -> None:
    s = round_robin(4, slice_us=900, night_us=100)
    tdns = tdn_of_slots(s)
    grid = slots(s)
    assert len(tdns) == grid.count and sorted(set(tdns)) == [0, 1, 2]
    assert tdns[9] == tdns[8] == 0 and tdns[10] == 1  # slot 9 is day 0's night
    assert [(c.at_us, c.tdn) for c in tdn_changes(s)] == [(0, 0), (1000, 1), (2000, 2)]
    assert tdn_of_slots(one_shot([strobe_matching(4, 0)])) == [0]
    # Opera's staggered switches: every slot where any switch changes is a new fabric state
    assert len(set(tdn_of_slots(opera(4, uplinks=3, slice_us=10_000, night_us=1_000)))) > 3


def test_the_margin_does_not_move_the_tdns() -> None:
    s = round_robin(3, slice_us=10_000, night_us=1_000)
    plain, margined = tdn_of_slots(s), tdn_of_slots(s, margin_us=1_000)
    g1, g2 = slots(s), slots(s, 1_000)
    assert [plain[k * g2.slot_us // g1.slot_us] for k in range(g2.count)] == margined


def test_ticks_come_after_every_change_from_now_on() -> None:
    s = round_robin(3, slice_us=900, night_us=100)
    it = change_instants(s, epoch_us=0.0, after_us=2_500.0)
    got = [next(it) for _ in range(4)]
    assert [(t, c.tdn) for t, c in got] == [(3000.0, 1), (4000.0, 0), (5000.0, 1), (6000.0, 0)]
    assert list(change_instants(one_shot([strobe_matching(3, 0)]), 0.0, 0.0)) == []


def test_a_tor_tells_all_one_or_none_of_its_hosts_and_names_a_stranger() -> None:
    topo = optical(2, 3)
    everyone = notify_plan(topo, "tor0", "all")
    assert everyone.hosts == ("h0_0", "h0_1", "h0_2") and [p for p, _ in everyone.replicas] == [1, 2, 3]
    assert everyone.rules[0].params == {"session": NOTIFY_SESSION}
    nobody = notify_plan(topo, "tor0", "none")
    assert nobody.replicas == () and nobody.rules[0].action == "NoAction" and len(nobody.rules) == 1
    with pytest.raises(ConfigError, match=r"host of the rack.*got 'h1_0'"):
        notify_plan(topo, "tor0", "h1_0")
    with pytest.raises(ConfigError, match="from ToRs"):
        notify_plan(topo, "ocs0", "all")


def test_the_experiments_fabric_alternates_a_fast_and_a_slow_tdn() -> None:
    cfg = TdtcpConfig(day_ms=20, gap_ms=1, fast=Tdn(16, 500), slow=Tdn(2, 2500))
    s = schedule(cfg)
    assert sorted(set(tdn_of_slots(s))) == [0, 1]
    assert [tdn_at(cfg, t) for t in (0, 19_999, 20_500, 21_000, 40_999, 41_500, 42_000)] == [0, 0, None, 1, 1, None, 0]
    rates = {(lk.a.node, lk.b.node): lk.rate_mbps for lk in fabric(cfg).links}
    assert rates[("tor0", "ocs0")] == 16 and rates[("tor1", "ocs1")] == 2 and rates[("h0_0", "tor0")] == 16
    assert switch_args(cfg)["ocs1"] == ("--port-delay", "1:2500", "--port-delay", "2:2500")
    assert capacity_mbps(cfg) == pytest.approx(18 * 20 / 42)
    # the hosts' links follow the faster TDN, so that they never hold a TDN below its rate
    # (a fixed 40 Mb/s halved an 80 Mb/s fast TDN); an explicit rate caps the capacity
    fast80 = TdtcpConfig(day_ms=20, gap_ms=1, fast=Tdn(80, 500), slow=Tdn(10, 2500))
    assert {lk.rate_mbps for lk in fabric(fast80).links if lk.a.node.startswith("h")} == {80}
    assert capacity_mbps(fast80) == pytest.approx(90 * 20 / 42)
    assert capacity_mbps(dataclasses.replace(fast80, host_rate_mbps=40)) == pytest.approx(50 * 20 / 42)
    with pytest.raises(ConfigError, match="host_rate_mbps"):
        TdtcpConfig(host_rate_mbps=0)
    with pytest.raises(ConfigError, match="multiple of the gap"):
        TdtcpConfig(day_ms=20, gap_ms=3)
    with pytest.raises(ConfigError, match="transports"):
        TdtcpConfig(transports=("bbr",))


def test_goodput_skips_slow_start_and_summaries_compare_means() -> None:
    assert goodput_mbps([(0.0, 0), (0.5, 10), (1.0, 125_000), (2.0, 375_000)]) == pytest.approx(2.0)
    assert goodput_mbps([(0.0, 0)]) == 0.0
    s = summarize({"tdtcp": [6.0, 4.0], "cubic": [2.5, 2.5], "single": []})
    assert s["tdtcp"]["mean_mbps"] == 5.0 and s["tdtcp"]["vs_cubic"] == 2.0 and "single" not in s
    assert s["tdtcp"]["sd_mbps"] == pytest.approx(2 ** 0.5)
