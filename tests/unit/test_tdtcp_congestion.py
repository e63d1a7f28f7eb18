"""Per-TDN congestion control: slow start, loss halving, timeout collapse, TDN independence,
the shared state of mode single, and RFC 6298 RTT estimation."""

from __future__ import annotations

import pytest

from controller.errors import ConfigError
from workloads.tdtcp.congestion import (
    INFINITE,
    CaState,
    CongestionConfig,
    CongestionControl,
    Credits,
)
from workloads.tdtcp.rtt import RttEstimator

MSS = 1000
CFG = CongestionConfig(mss=MSS, initial_window=10, min_rto=0.2, initial_rto=1.0)


def fill(cc: CongestionControl, tdn: int) -> int:
    """Send a full window in ``tdn``; the bytes sent."""
    st = cc.state(tdn)
    n = st.cwnd - st.in_flight
    cc.on_send(tdn, n, snd_una=0, snd_nxt=10**9)
    return n


def ack(cc: CongestionControl, tdn: int, n: int, *, una: int = 0, nxt: int = 10**9) -> None:
    cc.on_ack(Credits(delivered={tdn: n}, left_flight={tdn: n}), snd_una=una, snd_nxt=nxt)


def test_slow_start_doubles_per_round_trip_then_avoidance_adds_one_mss() -> None:
    cc = CongestionControl("tdtcp", CFG)
    st = cc.active
    assert st.cwnd == 10 * MSS and st.ssthresh == INFINITE and st.state is CaState.SLOW_START
    sent = fill(cc, 0)
    for _ in range(sent // MSS):  # one ACK per segment: +1 MSS each
        ack(cc, 0, MSS)
    assert st.cwnd == 20 * MSS and st.in_flight == 0
    st.ssthresh = 20 * MSS
    assert st.state is CaState.CONGESTION_AVOIDANCE
    fill(cc, 0)
    for _ in range(20):  # a whole window acknowledged: +1 MSS
        ack(cc, 0, MSS)
    assert st.cwnd == 21 * MSS


def test_no_growth_when_not_cwnd_limited() -> None:
    cc = CongestionControl("tdtcp", CFG)
    cc.on_send(0, 2 * MSS, snd_una=0, snd_nxt=2 * MSS)  # an application-limited trickle
    ack(cc, 0, 2 * MSS)
    assert cc.active.cwnd == 10 * MSS


def test_loss_halves_once_per_window_and_recovery_ends_at_the_recovery_point() -> None:
    cc = CongestionControl("tdtcp", CFG)
    st = cc.active
    fill(cc, 0)  # 10 segments: [0, 10000)
    cc.on_ack(Credits(delivered={0: 3 * MSS}, left_flight={0: 4 * MSS}, lost=((0, 0),)),
              snd_una=0, snd_nxt=10 * MSS)
    assert st.state is CaState.FAST_RECOVERY and st.recoveries == 1
    assert st.ssthresh == 5 * MSS and st.cwnd == 5 * MSS  # flight 10 MSS halved
    cc.on_ack(Credits(lost=((0, 4 * MSS),)), snd_una=0, snd_nxt=10 * MSS)  # same window
    assert st.recoveries == 1 and st.cwnd == 5 * MSS
    ack(cc, 0, MSS, una=9 * MSS, nxt=10 * MSS)  # below the recovery point: no growth
    assert st.state is CaState.FAST_RECOVERY and st.cwnd == 5 * MSS
    ack(cc, 0, MSS, una=10 * MSS, nxt=10 * MSS)
    assert st.state is CaState.CONGESTION_AVOIDANCE and st.cwnd == 5 * MSS


def test_timeout_collapses_to_one_mss_and_backs_off() -> None:
    cc = CongestionControl("tdtcp", CFG)
    st = cc.active
    st.rtt.sample(0.1)
    fill(cc, 0)
    cc.on_timeout(0, {0: 10 * MSS}, snd_nxt=10 * MSS)
    assert (st.cwnd, st.ssthresh, st.state, st.in_flight) == (MSS, 5 * MSS, CaState.LOSS, 0)
    assert st.rtt.rto == pytest.approx(0.6)  # base 0.3 s doubled
    cc.on_send(0, MSS, snd_una=0, snd_nxt=10 * MSS)
    cc.on_timeout(0, {0: MSS}, snd_nxt=10 * MSS)  # the retransmission timed out too
    assert st.ssthresh == 5 * MSS and st.rtt.rto == pytest.approx(1.2) and st.timeouts == 2
    cc.on_send(0, MSS, snd_una=0, snd_nxt=10 * MSS)
    ack(cc, 0, MSS, una=MSS, nxt=10 * MSS)  # slow start from one MSS, still in loss
    assert st.cwnd == 2 * MSS and st.state is CaState.LOSS
    ack(cc, 0, 0, una=10 * MSS, nxt=10 * MSS)
    assert st.state is CaState.SLOW_START


def test_a_loss_in_tdn_1_leaves_tdn_0_alone() -> None:
    cc = CongestionControl("tdtcp", CFG)
    fill(cc, 0)
    for _ in range(10):
        ack(cc, 0, MSS)
    before = (cc.state(0).cwnd, cc.state(0).ssthresh, cc.state(0).state)
    assert cc.set_active(1)
    fill(cc, 1)
    cc.on_ack(Credits(lost=((1, 0),), left_flight={1: MSS}), snd_una=0, snd_nxt=10**6)
    cc.on_timeout(1, {1: 9 * MSS}, snd_nxt=10**6)
    assert cc.state(1).state is CaState.LOSS and cc.state(1).cwnd == MSS
    assert (cc.state(0).cwnd, cc.state(0).ssthresh, cc.state(0).state) == before
    assert cc.active is cc.state(1) and cc.switches == 1
    assert not cc.set_active(1) and cc.switches == 1
    assert cc.set_active(0) and cc.active.cwnd == 20 * MSS


def test_single_mode_shares_one_state_whatever_the_tdn() -> None:
    cc = CongestionControl("single", CFG)
    fill(cc, 0)
    cc.set_active(1)
    assert cc.active is cc.state(0) is cc.state(7)
    cc.on_ack(Credits(lost=((1, 0),), left_flight={1: MSS}), snd_una=0, snd_nxt=10**6)
    assert cc.state(0).state is CaState.FAST_RECOVERY
    assert [k for k, _ in cc.states()] == ["shared"]


def test_acks_credit_the_tdn_the_bytes_were_sent_in_across_a_switch() -> None:
    cc = CongestionControl("tdtcp", CFG)
    fill(cc, 0)
    cc.set_active(1)
    fill(cc, 1)
    assert cc.state(0).in_flight == cc.state(1).in_flight == 10 * MSS
    cc.on_ack(Credits(delivered={0: 2 * MSS, 1: MSS}, left_flight={0: 2 * MSS, 1: MSS},
                      rtt_samples=((0, 0.05), (1, 0.002))), snd_una=0, snd_nxt=10**6)
    assert (cc.state(0).in_flight, cc.state(1).in_flight) == (8 * MSS, 9 * MSS)
    assert (cc.state(0).cwnd, cc.state(1).cwnd) == (12 * MSS, 11 * MSS)
    assert cc.state(0).rtt.srtt == pytest.approx(0.05) and cc.state(1).rtt.srtt == pytest.approx(0.002)
    assert cc.state(0).bytes_delivered == 2 * MSS and cc.state(1).bytes_delivered == MSS


def test_snapshot_is_json_ready() -> None:
    snap = CongestionControl("tdtcp", CFG).active.snapshot()
    assert snap == {"cwnd": 10 * MSS, "ssthresh": None, "state": "slow_start", "in_flight": 0,
                    "srtt_ms": None, "rttvar_ms": 0.0, "rto_ms": 1000.0}


def test_rto_follows_rfc_6298_with_bounds() -> None:
    est = RttEstimator(initial_rto=1.0, min_rto=0.2, max_rto=2.0)
    est.sample(0.010)
    assert est.rto == 0.2  # srtt + 4 rttvar = 0.03 s, raised to the minimum
    est.sample(0.030)  # rttvar = 3/4*5ms + 1/4*20ms = 8.75 ms; srtt = 12.5 ms
    assert est.srtt == pytest.approx(0.0125) and est.rttvar == pytest.approx(0.00875)
    for _ in range(5):
        est.back_off()
    assert est.rto == 2.0
    est.sample(0.010)
    assert est.backoff == 0


@pytest.mark.parametrize(("key", "value"), [("mss", 0), ("initial_window", True), ("min_rto", 0.0),
                                            ("max_cwnd", 100)])
def test_bad_config_names_the_key(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=key):
        CongestionConfig(**{key: value})  # type: ignore[arg-type]


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match="mode"):
        CongestionControl("cubic", CFG)  # type: ignore[arg-type]


def test_recovery_ends_when_the_cumulative_ack_passes_it_whichever_tdn_is_credited() -> None:
    cc = CongestionControl("tdtcp", CFG)
    fill(cc, 0)
    cc.on_ack(Credits(lost=((0, 0),), left_flight={0: MSS}), snd_una=0, snd_nxt=10 * MSS)
    assert cc.state(0).state is CaState.FAST_RECOVERY
    cc.set_active(1)
    fill(cc, 1)
    ack(cc, 1, MSS, una=12 * MSS, nxt=20 * MSS)  # credits TDN 1 only, passes TDN 0's point
    assert cc.state(0).state is CaState.CONGESTION_AVOIDANCE and cc.state(0).cwnd == 5 * MSS
