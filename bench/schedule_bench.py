"""Schedules on emulated optical fabrics: install time and clock skew on 16 switches, and
the shortest slice of which the emulation can still use at least 90%."""

from __future__ import annotations

import time

from controller.emulation import load_emulation_module
from controller.schedule import opera
from controller.schedule.install import install_schedule
from controller.topology import optical

__all__ = ["schedule_install", "shortest_slice", "usable_day"]


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


if __name__ == "__main__":
    print(schedule_install("python"))


_SENDER = """
import socket, struct, sys, time
dst, seconds, gap = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end = time.monotonic() + seconds
n = 0
while time.monotonic() < end:
    s.sendto(struct.pack("!dI", time.monotonic(), n), (dst, 9000))
    n += 1
    time.sleep(gap)
"""
_RECEIVER = """
import json, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 9000))
s.settimeout(1.0)
got = []
try:
    while True:
        got.append(struct.unpack("!dI", s.recv(64))[1])
except socket.timeout:
    pass
print(json.dumps(got))
"""


def usable_day(target: str, slice_us: int, seconds: float = 1.5) -> float:
    """The fraction of the packets rack 0 sends to rack 1 during their day that arrive
    (round-robin, 4 racks, nights a tenth of a day, no calendar queue): what skew and
    latency leave of a day."""
    import json
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from controller.schedule import round_robin

    fabric_net = load_emulation_module("fabric_net")
    schedule = round_robin(4, slice_us=slice_us, night_us=max(1, slice_us // 10))
    gap = min(0.0005, slice_us / 20 / 1e6)
    with tempfile.TemporaryDirectory() as tmp, \
            fabric_net.EmulatedFabric(optical(4, 1, uplinks=1, rate_mbps=None), target=target, shape=False,
                                      publish=False, schedule=schedule) as fab:
        send, recv_py = Path(tmp) / "send.py", Path(tmp) / "recv.py"
        send.write_text(_SENDER.replace("s.sendto(", "times.append(time.monotonic()); s.sendto(")
                        .replace("n = 0\n", "n = 0\ntimes = []\n") + "import json\nprint(json.dumps(times))\n")
        recv_py.write_text(_RECEIVER)
        recv = fab.host("h1_0").popen([sys.executable, str(recv_py), "10.200.1.1"], stdout=subprocess.PIPE,
                                      text=True)
        time.sleep(0.3)
        sent_times = json.loads(fab.host("h0_0").cmd(f"{sys.executable} {send} 10.200.1.1 {seconds} {gap}")
                                .strip().splitlines()[-1])
        got = set(json.loads(recv.communicate(timeout=30)[0]))
        epoch = fab.schedule_epoch_us
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
