"""An optical fabric in Mininet: circuit switches follow a round-robin schedule installed on a
common epoch. A host pair's packets cross only in the slices whose matching connects their
racks, and nothing crosses at night.

The ToRs' static routes send every other rack up (tor_routes), so a packet that reaches the
wrong rack goes up again, along the same slice's matching: rack 0 reaches rack 1 in day 0
directly, in day 2 through racks 3 and 2, and never in day 1 (0 -> 2 -> 0 loops until its
TTL runs out). The test checks exactly that."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from controller.emulation import load_emulation_module
from controller.schedule import round_robin
from controller.topology import optical

fabric_net = load_emulation_module("fabric_net")

SENDER = """
import json, socket, struct, sys, time
dst, seconds = sys.argv[1], float(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end = time.monotonic() + seconds
n = 0
while time.monotonic() < end:
    s.sendto(struct.pack("!dI", time.monotonic(), n), (dst, 9000))
    n += 1
    time.sleep(0.002)
print(n)
"""
RECEIVER = """
import json, socket, struct, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 9000))
s.settimeout(float(sys.argv[2]))
out = []
try:
    while True:
        data = s.recv(64)
        out.append((struct.unpack("!dI", data)[0], time.monotonic()))
except socket.timeout:
    pass
print(json.dumps(out))
"""
MARGIN_US = 15_000


def _reaches(matching, src: int, dst: int) -> bool:
    """Following one slice's circuits from ``src`` (each ToR sends it up again) reaches ``dst``."""
    seen, rack = set(), src
    while rack not in seen:
        seen.add(rack)
        rack = matching[rack]
        if rack == dst:
            return True
    return False  # a packet this close to a slice boundary may be counted on either side


def test_traffic_crosses_only_in_the_slices_that_connect_the_racks(target_name: str, tmp_path: Path) -> None:
    schedule = round_robin(4, slice_us=200_000, night_us=50_000)
    (tmp_path / "send.py").write_text(SENDER)
    (tmp_path / "recv.py").write_text(RECEIVER)
    topo = optical(4, 1, uplinks=1, rate_mbps=None)
    with fabric_net.EmulatedFabric(topo, target=target_name, shape=False, publish=False,
                                   schedule=schedule) as fab:
        (report,) = fab.clock_reports
        assert report.skew_bound_us < 1000, "schedule skew goal: under 1 ms"
        epoch = fab.schedule_epoch_us
        recv = fab.host("h1_0").popen([sys.executable, str(tmp_path / "recv.py"), "10.200.1.1", "1.5"],
                                      stdout=subprocess.PIPE, text=True)
        time.sleep(0.3)
        sent = fab.host("h0_0").cmd(f"{sys.executable} {tmp_path / 'send.py'} 10.200.1.1 1.6")
        out, _ = recv.communicate(timeout=30)
    assert int(sent.strip().splitlines()[-1]) > 200
    got = json.loads(out)
    assert got, "nothing crossed in a whole cycle"
    reach = [_reaches(m, 0, 1) for m in schedule.circuits[0].slices]
    assert reach == [True, False, True]
    arrivals: dict[object, int] = {}
    for _, arrived in got:
        t = int(arrived * 1e6 - epoch)
        at = schedule.at(0, t)
        into = t % schedule.period_us
        if min(into, abs(into - schedule.slice_us), schedule.period_us - into) < MARGIN_US:
            continue  # too close to a boundary to say which side
        key = "night" if at.index is None else at.index
        arrivals[key] = arrivals.get(key, 0) + 1
    assert "night" not in arrivals, f"packets crossed at night: {arrivals}"
    assert arrivals.get(1, 0) == 0, f"packets crossed in day 1, which connects rack 0 to rack 2: {arrivals}"
    assert arrivals.get(0, 0) > 20 and arrivals.get(2, 0) > 20, arrivals
