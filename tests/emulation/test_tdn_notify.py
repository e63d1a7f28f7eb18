"""TDTCP notifications on an emulated optical fabric, both targets: with only the controller's
ticks as triggers, every host a ToR is told about gets exactly one ICMP type 7 per TDN change
with the right id, soon after it; a host it is not told about gets none. Frames are
dissected with scapy from each host's capture."""

from __future__ import annotations

import subprocess
import time

import pytest

from controller.emulation import load_emulation_module
from controller.schedule import round_robin
from controller.schedule.clock import controller_now_us
from controller.tdtcp.install import install_notifications
from controller.tdtcp.ticker import Ticker
from controller.topology import optical

#: make test runs this module on both engines: the ToRs' notifications
pytestmark = pytest.mark.both_engines

fabric_net = load_emulation_module("fabric_net")

#: 3 racks: day 0 and day 1 of the strobe are the two TDNs, each followed by a night
SCHEDULE = round_robin(3, slice_us=100_000, night_us=20_000)
HOSTS = ("h0_0", "h0_1", "h1_0", "h1_1", "h2_0", "h2_1")


def _notifications(pcap: str) -> list[tuple[float, int, str]]:
    from scapy.layers.inet import ICMP, IP
    from scapy.utils import rdpcap

    out = []
    for frame in rdpcap(pcap):
        if ICMP in frame and frame[ICMP].type == 7:
            assert frame[ICMP].code == 0, frame.summary()
            out.append((float(frame.time), bytes(frame[ICMP])[4], frame[IP].src))
    return out


def test_told_hosts_get_one_notification_per_change_and_others_none(target_name: str, tmp_path) -> None:
    topo = optical(3, 2, uplinks=1, rate_mbps=None)
    with fabric_net.EmulatedFabric(topo, target=target_name, shape=False, publish=False, schedule=SCHEDULE) as fab:
        install_notifications(fab.live, {"tor0": "all", "tor1": "h1_1", "tor2": "none"})
        caps = {h: fab.host(h).popen(["tcpdump", "-n", "-U", "--immediate-mode", "-i", f"{h}-eth0", "-w", str(tmp_path / f"{h}.pcap"),
                                      "icmp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for h in HOSTS}
        time.sleep(1.0)  # tcpdump is listening
        offset = time.time() - controller_now_us() / 1e6  # capture clock minus controller clock
        assert fab.schedule_epoch_us is not None
        tors = [fab.live.switch(f"tor{r}") for r in range(3)]
        with Ticker(tors, SCHEDULE, fab.schedule_epoch_us) as ticker:
            time.sleep(1.3)  # about 5 changes
        time.sleep(0.3)
        for p in caps.values():
            p.terminate()
            p.wait(timeout=10)
    ticked = ticker.sent
    assert len(ticked) >= 4
    got = {h: _notifications(str(tmp_path / f"{h}.pcap")) for h in HOSTS}
    for h in ("h1_0", "h2_0", "h2_1"):
        assert got[h] == [], f"{h} is not to be told, got {got[h]}"
    for h in ("h0_0", "h0_1", "h1_1"):
        seen = got[h]
        # one notification per change (the first announces the TDN the fabric is in)
        assert [tdn for _, tdn, _ in seen] == [tdn for _, tdn in ticked], (
            h, str([round((w - offset) * 1e6 - ticked[0][0]) for w, _, _ in seen]),
            str([round(t - ticked[0][0]) for t, _ in ticked]))
        for (when, _, src), (instant, _) in zip(seen, ticked, strict=True):
            latency_us = (when - offset) * 1e6 - instant
            assert 0 < latency_us < SCHEDULE.slice_us, f"{h}: notified {latency_us:.0f} us after the change"
            assert src.endswith(".254")
