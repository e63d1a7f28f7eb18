"""A link's ``delay_us`` is honoured (the Python target's port delays, both directions, on
each of its packet engines) or refused by name (BMv2, with no netem here); it is never
ignored."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from controller.emulation import load_emulation_module
from controller.errors import EmulationError
from controller.topology import rail_only

# the test runs on both engines through the switch_engine fixture (port delays), so make test's second
# pass on the Python engine leaves the module out

fabric_net = load_emulation_module("fabric_net")
switch_engines = load_emulation_module("switch_engines")

DELAY_US = 5_000


def _delayed():
    topo = rail_only(2, 1, rate_mbps=None)
    links = tuple(dataclasses.replace(lk, delay_us=DELAY_US) if "s0" in (lk.a.node, lk.b.node) else lk
                  for lk in topo.links)
    return dataclasses.replace(topo, links=links)


def test_a_link_delay_is_felt_both_ways_or_refused(target_name: str, switch_engine: str | None,
                                                   tmp_path: Path) -> None:
    topo = _delayed()
    if target_name != "python":
        with pytest.raises(EmulationError, match=r"links\[\d\].*delay_us 5000.*BMv2 has no per-port delay"):
            fabric_net.EmulatedFabric(topo, target=target_name, shape=False, publish=False).start()
        return
    with fabric_net.EmulatedFabric(topo, target="python", shape=False, publish=False, engine=switch_engine,
                                   log_dir=tmp_path) as fab:
        out = fab.host("s0").cmd(f"ping -c3 -i0.2 -W2 {topo.hosts[1].nics[0].address}")
        engines = switch_engines.fabric_engines("python", tmp_path, [s.name for s in topo.switches])
    assert set(engines.values()) == {switch_engine}, engines
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]
    assert len(rtts) == 3, out
    # s0's link is crossed once each way: at least twice its delay, however fast the machine
    assert min(rtts) >= 2 * DELAY_US / 1000, rtts
