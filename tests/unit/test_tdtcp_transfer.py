"""The TDTCP transport end to end over 127.0.0.1: every byte in order under injected loss,
a TDN switch mid-transfer (programmatic and by ICMP), and the command line.

The assertions hold whatever the timing: losses are injected deterministically, the switch
happens at a byte count (from the sender's own ACK observer), and flow control keeps the
loopback from dropping anything else.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from workloads.tdtcp.config import ReceiverConfig, SenderConfig
from workloads.tdtcp.congestion import CongestionConfig
from workloads.tdtcp.icmp import build_notification
from workloads.tdtcp.loss import LossPlan
from workloads.tdtcp.notify import TdnListener
from workloads.tdtcp.receiver import Receiver
from workloads.tdtcp.sender import Sender, pattern

MSS = 1444
FAST = CongestionConfig(mss=MSS, min_rto=0.05, initial_rto=0.2)  # quick recovery of injected tail losses
PLAIN = CongestionConfig(mss=MSS)  # Linux's 200 ms minimum RTO: no spurious timeout on a busy machine
ROOT = Path(__file__).resolve().parents[2]


def transfer(total: int, cfg: SenderConfig, *, observer: Callable[[Sender], None] | None = None,
             sender_hook: Callable[[Sender], None] | None = None) -> tuple[dict[str, Any], dict[str, Any], bytes]:
    """Send ``total`` bytes to a receiver thread; both statistics and the bytes received."""
    chunks: list[bytes] = []
    out: dict[str, Any] = {}
    with Receiver("127.0.0.1", ReceiverConfig(port=0, idle=0.3, wait=10), sink=lambda _c, b: chunks.append(b)) as rx:
        thread = threading.Thread(target=lambda: out.update(rx.run()))
        thread.start()
        try:
            sender = Sender("127.0.0.1", total, SenderConfig(**{**cfg.__dict__, "port": rx.port, "timeout": 10.0}),
                            observer=observer)
            if sender_hook is not None:
                sender_hook(sender)
            stats = sender.run()
        finally:
            thread.join()
    return stats, out, b"".join(chunks)


def test_two_megabytes_arrive_in_order_despite_injected_loss() -> None:
    total = 2_000_000
    last = (total - 1) // MSS  # the tail segment: only the timer can recover it
    drops = frozenset({3, 50, 51, 52, 400, 1000, last})
    stats, rx, got = transfer(total, SenderConfig(congestion=FAST, loss=LossPlan(segments=drops)))
    assert got == pattern(total)
    conn = rx["connections"][0]
    assert conn["complete"] and conn["bytes"] == total and conn["sha256"] == stats["sha256"]
    assert conn["out_of_order"] > 0
    assert stats["complete"] and stats["dropped_injected"] == len(drops)
    assert stats["retransmissions"] >= len(drops) and stats["timeouts"] >= 1
    assert stats["per_tdn"]["0"]["recoveries"] >= 1
    assert sum(s["bytes_delivered"] for s in stats["per_tdn"].values()) == total
    assert all(s["in_flight"] == 0 for s in stats["per_tdn"].values())


def test_a_time_limited_transfer_stops_on_time_with_what_it_delivered_in_order() -> None:
    """``max_seconds`` (``--seconds``): a fixed-length transfer, as iperf3 -t."""
    total = 30_000_000  # far more than 0.05 s can carry (about 4 MB over loopback)
    stats, _rx, got = transfer(total, SenderConfig(congestion=PLAIN, max_seconds=0.05))
    assert stats["time_limited"] and not stats["complete"]
    assert 0.05 <= stats["duration_s"] < 5
    assert 0 < len(got) < total and got == pattern(total)[:len(got)]
    assert stats["acked"] <= len(got)


def test_seeded_random_loss_including_retransmissions_still_delivers_everything() -> None:
    total = 1_000_000
    loss = LossPlan(rate=0.03, seed=11)
    dropped = [k for k in range(-(-total // MSS)) if loss.drops(k, 0)]
    assert dropped  # the seed does drop first transmissions
    stats, rx, got = transfer(total, SenderConfig(congestion=FAST, loss=loss))
    assert got == pattern(total) and rx["connections"][0]["complete"]
    assert stats["retransmissions"] >= len(dropped) and stats["dropped_injected"] >= len(dropped)


def _switch_at(nbytes: int, tdn: int) -> Callable[[Sender], None]:
    done = []

    def observer(sender: Sender) -> None:
        if not done and sender.acked >= nbytes:
            done.append(True)
            sender.set_tdn(tdn)

    return observer


def test_a_tdn_switch_makes_the_sender_use_the_other_tdns_cwnd() -> None:
    total = 2_000_000
    stats, rx, got = transfer(total, SenderConfig(mode="tdtcp", congestion=PLAIN), observer=_switch_at(600_000, 1))
    assert got == pattern(total)
    [sw] = stats["switches"]
    assert (sw["from"], sw["to"], sw["source"]) == (0, 1, "api")
    assert sw["cwnd_after"] == 10 * MSS < sw["cwnd_before"]  # TDN 1 starts afresh; TDN 0 had grown
    assert set(stats["per_tdn"]) == {"0", "1"} and stats["tdn_switches"] == 1
    assert stats["sent_by_tdn"]["0"] > 0 and stats["sent_by_tdn"]["1"] > 0
    assert set(rx["connections"][0]["tdn_segments"]) == {"0", "1"}
    tl = stats["timeline"]
    assert tl["active_tdn"][0] == 0 and tl["active_tdn"][-1] == 1
    first = tl["active_tdn"].index(1)
    assert tl["tdn"]["1"]["cwnd"][:first] == [None] * first  # TDN 1 existed only from the switch
    assert sum(s["bytes_delivered"] for s in stats["per_tdn"].values()) == total


def test_single_mode_keeps_its_one_state_across_the_switch() -> None:
    stats, _, got = transfer(1_000_000, SenderConfig(mode="single", congestion=PLAIN), observer=_switch_at(300_000, 1))
    assert got == pattern(1_000_000)
    [sw] = stats["switches"]
    assert sw["cwnd_after"] == sw["cwnd_before"] and list(stats["per_tdn"]) == ["shared"]
    assert stats["sent_by_tdn"]["1"] > 0


@pytest.mark.skipif(os.geteuid() != 0, reason="a raw ICMP socket needs root")
def test_an_icmp_notification_switches_the_sender() -> None:
    """The sender's observer sends ICMP type 7 to 127.0.0.1 and waits until the listener
    has passed it on: the switch lands mid-transfer whatever the scheduling."""
    heard = threading.Event()
    box: dict[str, Any] = {}

    def hook(sender: Sender) -> None:
        def on_tdn(tdn: int, t: float) -> None:
            sender.set_tdn(tdn, source="icmp", received=t)
            heard.set()

        box["listener"] = TdnListener(on_tdn)
        box["listener"].start()

    def observer(sender: Sender) -> None:
        if "sent" not in box and sender.acked >= 300_000:
            box["sent"] = True
            with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as raw:
                raw.sendto(build_notification(2), ("127.0.0.1", 0))
            assert heard.wait(5)

    try:
        stats, _, got = transfer(1_000_000, SenderConfig(congestion=PLAIN), observer=observer, sender_hook=hook)
    finally:
        box["listener"].stop()
    assert got == pattern(1_000_000)
    [sw] = stats["switches"]
    assert (sw["to"], sw["source"]) == (2, "icmp") and sw["applied"] >= sw["t"]
    assert [n[1:] for n in stats["notifications"]] == [[2, "icmp"]]
    assert box["listener"].stats()["received"][0][1:] == [2, "127.0.0.1"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_command_line_prints_one_json_document_each() -> None:
    port = str(_free_port())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    mod = [sys.executable, "-m", "workloads.tdtcp"]
    recv = subprocess.Popen([*mod, "recv", "127.0.0.1", "--port", port, "--idle", "0.5", "--wait", "20"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert recv.stderr is not None
        assert "listening on 127.0.0.1:" in recv.stderr.readline()  # bound: the sender may start
        send = subprocess.run([*mod, "send", "127.0.0.1", "--port", port, "--bytes", "300000", "--mode", "single",
                               "--drop-segments", "2,9", "--min-rto-ms", "50", "--stats-ms", "5", "--timeout", "20"],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
        rout, _ = recv.communicate(timeout=60)
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    assert send.returncode == 0, send.stderr
    s, r = json.loads(send.stdout), json.loads(rout)
    assert s["role"] == "send" and s["complete"] and s["retransmissions"] >= 2 and s["mode"] == "single"
    [c] = r["connections"]
    assert c["complete"] and c["sha256"] == s["sha256"] and c["bytes"] == 300_000
    assert c["delivered"]["bytes"][-1] == 300_000


def test_bad_options_exit_2_with_one_line() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "workloads.tdtcp", "send", "127.0.0.1", "--bytes", "10",
                        "--loss-rate", "1.5"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().count("\n") == 0 and "rate" in p.stderr and "1.5" in p.stderr
