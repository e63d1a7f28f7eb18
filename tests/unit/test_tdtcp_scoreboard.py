"""The sender's scoreboard and the receiver's reassembly: SACK, loss detection, per-TDN
credit across a TDN switch, Karn-safe RTT samples, in-order delivery."""

from __future__ import annotations

import itertools
import random

import pytest

from workloads.tdtcp.congestion import CongestionConfig, CongestionControl
from workloads.tdtcp.intervals import IntervalSet
from workloads.tdtcp.reassembly import Reassembly
from workloads.tdtcp.scoreboard import Scoreboard

MSS = 1000


def send(sb: Scoreboard, count: int, tdn: int, t: int = 0) -> None:
    for _ in range(count):
        nxt = sb.next_new()
        assert nxt is not None
        sb.on_transmit(nxt[0], nxt[1], tdn=tdn, now_ns=t)


def test_cumulative_ack_credits_each_segment_to_its_tdn_across_a_switch() -> None:
    sb = Scoreboard(total=10 * MSS, mss=MSS)
    cc = CongestionControl("tdtcp", CongestionConfig(mss=MSS))
    for k in range(6):
        tdn = 0 if k < 4 else 1  # the switch after four segments
        cc.set_active(tdn)
        seg = sb.on_transmit(k * MSS, MSS, tdn=tdn, now_ns=k)
        cc.on_send(seg.tdn, MSS, snd_una=0, snd_nxt=sb.snd_nxt)
    res = sb.on_ack(cum_ack=5 * MSS, sacks=[], echo_ts_ns=4, data_tdn=1, now_ns=1_000_004)
    assert res.credits.delivered == {0: 4 * MSS, 1: MSS} and res.credits.left_flight == res.credits.delivered
    assert res.credits.rtt_samples == ((1, 0.001),)
    cc.on_ack(res.credits, snd_una=sb.snd_una, snd_nxt=sb.snd_nxt)
    assert (cc.state(0).in_flight, cc.state(1).in_flight) == (0, MSS)
    assert cc.state(0).bytes_delivered == 4 * MSS and cc.state(1).bytes_delivered == MSS


def test_a_segment_lost_in_tdn_0_and_resent_in_tdn_1_is_credited_to_tdn_1() -> None:
    sb = Scoreboard(total=10 * MSS, mss=MSS, per_tdn_loss=True)
    cc = CongestionControl("tdtcp", CongestionConfig(mss=MSS))
    for k in range(5):
        sb.on_transmit(k * MSS, MSS, tdn=0, now_ns=k)
        cc.on_send(0, MSS, snd_una=0, snd_nxt=sb.snd_nxt)
    res = sb.on_ack(cum_ack=0, sacks=[(MSS, 5 * MSS)], echo_ts_ns=4, data_tdn=0, now_ns=10)
    cc.on_ack(res.credits, snd_una=sb.snd_una, snd_nxt=sb.snd_nxt)
    assert res.credits.lost == ((0, 0),) and cc.state(0).in_flight == 0  # 4 SACKed + 1 lost
    cc.set_active(1)
    seg = sb.next_retransmission()
    assert seg is not None
    sb.on_transmit(seg.seq, MSS, tdn=cc.active_tdn, now_ns=20)
    cc.on_send(1, MSS, snd_una=0, snd_nxt=sb.snd_nxt, retransmission=True)
    res = sb.on_ack(cum_ack=5 * MSS, sacks=[], echo_ts_ns=20, data_tdn=1, now_ns=30)
    cc.on_ack(res.credits, snd_una=sb.snd_una, snd_nxt=sb.snd_nxt)
    assert res.credits.delivered == {1: MSS} and res.credits.rtt_samples == ((1, 1e-8),)
    assert (cc.state(0).in_flight, cc.state(1).in_flight) == (0, 0)
    assert (cc.state(0).bytes_delivered, cc.state(1).bytes_delivered) == (4 * MSS, MSS)
    assert cc.state(1).bytes_retransmitted == MSS and cc.state(0).recoveries == 1
    assert cc.state(0).state.value == "congestion_avoidance"  # the cumulative ACK passed its point


def test_sack_marks_the_hole_lost_once_three_mss_above_it_arrived() -> None:
    sb = Scoreboard(total=10 * MSS, mss=MSS)
    send(sb, 8, tdn=0)
    r = sb.on_ack(cum_ack=MSS, sacks=[(2 * MSS, 4 * MSS)], echo_ts_ns=1, data_tdn=0, now_ns=2)
    assert r.credits.lost == ()  # two MSS above the hole: maybe reordering
    r = sb.on_ack(cum_ack=MSS, sacks=[(2 * MSS, 5 * MSS)], echo_ts_ns=1, data_tdn=0, now_ns=2)
    assert r.credits.lost == ((0, MSS),) and r.credits.left_flight == {0: 2 * MSS}
    hole = sb.next_retransmission()
    assert hole is not None and hole.seq == MSS
    sb.on_transmit(hole.seq, MSS, tdn=0, now_ns=3)
    assert sb.next_retransmission() is None
    r = sb.on_ack(cum_ack=5 * MSS, sacks=[], echo_ts_ns=3, data_tdn=0, now_ns=5)
    assert r.advanced and r.credits.delivered == {0: MSS} and r.credits.rtt_samples == ((0, 2e-9),)


def test_loss_evidence_counts_only_the_same_tdn_in_tdtcp_mode() -> None:
    """Data sent later on a faster TDN overtakes data on a slower one: not a loss for TDTCP,
    a loss for the single-state baseline."""
    for per_tdn, expect in ((True, ()), (False, ((0, 0), (0, MSS)))):
        sb = Scoreboard(total=20 * MSS, mss=MSS, per_tdn_loss=per_tdn)
        send(sb, 2, tdn=0)
        send(sb, 5, tdn=1)
        r = sb.on_ack(cum_ack=0, sacks=[(2 * MSS, 7 * MSS)], echo_ts_ns=5, data_tdn=1, now_ns=9)
        assert r.credits.lost == expect
        assert r.credits.delivered == {1: 5 * MSS}


def test_overtaken_data_is_lost_once_overdue_for_its_own_tdn() -> None:
    """TDTCP: TDN 0's segments, overtaken by TDN 1's, are lost only once older than TDN 0's
    RTT plus its reordering window (here 1000 ns), not at once."""
    sb = Scoreboard(total=20 * MSS, mss=MSS, per_tdn_loss=True)
    send(sb, 2, tdn=0, t=0)
    send(sb, 5, tdn=1, t=100)
    wait = {0: 1000, 1: 10}.__getitem__
    r = sb.on_ack(cum_ack=0, sacks=[(2 * MSS, 4 * MSS)], echo_ts_ns=100, data_tdn=1, now_ns=500, rack_wait=wait)
    assert r.credits.lost == ()
    r = sb.on_ack(cum_ack=0, sacks=[(2 * MSS, 5 * MSS)], echo_ts_ns=100, data_tdn=1, now_ns=1001, rack_wait=wait)
    assert r.credits.lost == ((0, 0), (0, MSS)) and r.credits.left_flight == {0: 2 * MSS, 1: MSS}


def test_three_duplicate_acks_without_sack_mark_the_first_segment_lost() -> None:
    sb = Scoreboard(total=10 * MSS, mss=MSS)
    send(sb, 5, tdn=0)
    for n in range(3):
        r = sb.on_ack(cum_ack=0, sacks=[], echo_ts_ns=1, data_tdn=0, now_ns=2)
        assert r.duplicate and r.credits.lost == (((0, 0),) if n == 2 else ())


def test_a_lost_retransmission_is_detected_by_later_deliveries() -> None:
    sb = Scoreboard(total=10 * MSS, mss=MSS)
    send(sb, 5, tdn=0, t=100)
    sb.on_ack(cum_ack=0, sacks=[(MSS, 4 * MSS)], echo_ts_ns=100, data_tdn=0, now_ns=200)
    sb.on_transmit(0, MSS, tdn=0, now_ns=300)  # the retransmission, then it is lost too
    send(sb, 1, tdn=0, t=400)
    r = sb.on_ack(cum_ack=0, sacks=[(MSS, 6 * MSS)], echo_ts_ns=400, data_tdn=0, now_ns=500, reo_wnd_ns=50)
    assert r.credits.lost == ((0, 0),)
    seg = sb.next_retransmission()
    assert seg is not None and seg.seq == 0 and seg.tx == 2


def test_without_timestamps_karn_skips_retransmitted_segments() -> None:
    sb = Scoreboard(total=10 * MSS, mss=MSS)
    send(sb, 2, tdn=0, t=0)
    sb.on_timeout()
    sb.on_transmit(0, MSS, tdn=0, now_ns=1000)
    r = sb.on_ack(cum_ack=MSS, sacks=[], echo_ts_ns=0, data_tdn=0, now_ns=1500)
    assert r.credits.rtt_samples == ()  # ambiguous: no sample
    sb.on_transmit(MSS, MSS, tdn=0, now_ns=2000)
    send(sb, 1, tdn=0, t=2000)
    r = sb.on_ack(cum_ack=3 * MSS, sacks=[], echo_ts_ns=0, data_tdn=0, now_ns=2600)
    assert r.credits.rtt_samples == ()  # the first segment it acks was retransmitted


def test_timeout_declares_everything_outstanding_lost_per_tdn() -> None:
    sb = Scoreboard(total=10 * MSS, mss=MSS)
    send(sb, 3, tdn=0)
    send(sb, 2, tdn=1)
    sb.on_ack(cum_ack=0, sacks=[(4 * MSS, 5 * MSS)], echo_ts_ns=1, data_tdn=1, now_ns=2)
    assert sb.on_timeout() == {0: 3 * MSS, 1: MSS}
    order = []
    while (seg := sb.next_retransmission()) is not None:
        order.append(seg.seq)
        sb.on_transmit(seg.seq, seg.end - seg.seq, tdn=1, now_ns=5)
    assert order == [0, MSS, 2 * MSS, 3 * MSS]
    assert sb.oldest() is not None and sb.oldest().tdn == 1  # type: ignore[union-attr]


def test_acks_beyond_what_was_sent_are_ignored() -> None:
    sb = Scoreboard(total=10 * MSS, mss=MSS)
    send(sb, 1, tdn=0)
    assert not sb.on_ack(cum_ack=5 * MSS, sacks=[], echo_ts_ns=1, data_tdn=0, now_ns=2).advanced
    assert sb.summary()["ignored_acks"] == 1


def test_new_segments_must_start_at_snd_nxt() -> None:
    sb = Scoreboard(total=10 * MSS, mss=MSS)
    with pytest.raises(ValueError, match="snd_nxt 0"):
        sb.on_transmit(MSS, MSS, tdn=0, now_ns=0)


def test_interval_set_against_a_brute_force_model() -> None:
    rng = random.Random(5)
    s, model = IntervalSet(), set()
    for _ in range(300):
        a = rng.randrange(0, 200)
        b = a + rng.randrange(0, 20)
        new = s.add(a, b)
        assert sum(h - lo for lo, h in new) == len(set(range(a, b)) - model)
        model |= set(range(a, b))
        if rng.random() < 0.1:
            cut = rng.randrange(0, 200)
            s.trim_below(cut)
            model = {x for x in model if x >= cut}
        assert s.total == len(model)
        x = rng.randrange(0, 220)
        assert s.bytes_above(x) == len([y for y in model if y >= x])
        ivs = s.intervals()
        assert all(e1 < s2 for (_, e1), (s2, _) in itertools.pairwise(ivs))


def test_reassembly_delivers_every_byte_in_order_whatever_the_arrival_order() -> None:
    data = bytes(random.Random(1).randbytes(50 * 100))
    segs = [(k * 100, data[k * 100:(k + 1) * 100]) for k in range(50)]
    arrivals = segs + segs[::3]  # duplicates
    random.Random(2).shuffle(arrivals)
    r = Reassembly(window=1 << 20)
    out = []
    for seq, payload in arrivals:
        chunks, _ = r.on_data(seq, payload, fin=seq == 4900)
        out += chunks
        assert len(r.sack_blocks()) <= 4
        assert all(s > r.rcv_nxt for s, _ in r.sack_blocks())
    assert b"".join(out) == data and r.complete and r.held == 0


def test_reassembly_sack_blocks_put_the_latest_arrival_first() -> None:
    r = Reassembly(window=1 << 20)
    for seq in (200, 400, 600, 800, 1000):
        r.on_data(seq, bytes(100))
    r.on_data(300, bytes(100))
    assert r.sack_blocks() == ((200, 500), (1000, 1100), (800, 900), (600, 700))
    assert r.rwnd == 1 << 20 and r.held == 600
    assert r.on_data(10**9, bytes(100)) == ([], "beyond_window")
    assert r.on_data(0, bytes(50)) == ([bytes(50)], "in_order")
    assert r.on_data(0, bytes(50))[1] == "duplicate"
