"""A fat-tree spine fails: cross-rail flows hashed onto it break; the controller compiles
the fabric without it and syncs the survivors, and every flow works again."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from controller.emulation import load_emulation_module
from controller.install import sync_fabric
from controller.readiness import wait_for
from controller.topology import rail_fat_tree

#: make test runs this module on both engines: selector groups when a spine fails
pytestmark = pytest.mark.both_engines

FLOWS = 12  # UDP source ports per pair, so that ECMP spreads them over both spines
ECHO = ("import socket,sys; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind((sys.argv[1],9999))\n"
        "while True:\n d,a=s.recvfrom(64); s.sendto(d,a)")
PROBE = (f"import socket,sys\nok=0\nfor i in range({FLOWS}):\n"
         " s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind((sys.argv[1],0)); s.settimeout(0.25)\n"
         " s.sendto(b'x',(sys.argv[2],9999))\n try:\n  s.recvfrom(64); ok+=1\n except OSError: pass\n s.close()\n"
         "print(ok)")


def _cross_rail_pairs(topo):
    s0, s1 = topo.hosts
    return [(a.name, na.address, b.name, nb.address) for a, b in ((s0, s1), (s1, s0))
            for na in a.nics for nb in b.nics if na.rail != nb.rail]


def _answered(fab, pairs, probe: Path) -> list[int]:
    """Replies out of FLOWS datagrams (each from a new source port) per pair."""
    return [int(fab.host(h).cmd(f"{sys.executable} {probe} {src} {dst}").strip().splitlines()[-1])
            for h, src, _, dst in pairs]


def test_sync_without_a_dead_spine_restores_every_cross_rail_flow(target_name: str, tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    fabric_net = load_emulation_module("fabric_net")
    topo = rail_fat_tree(2, 2, spines=2, rate_mbps=None)
    with fabric_net.EmulatedFabric(topo, target=target_name, shape=False, source_routing=True, publish=False) as fab:
        pairs = _cross_rail_pairs(topo)
        echoes = [fab.host(h.name).popen([sys.executable, "-c", ECHO, n.address])
                  for h in topo.hosts for n in h.nics]
        try:
            # the echo servers start in the background: wait until every flow is answered
            wait_for(lambda: _answered(fab, pairs, probe) == [FLOWS] * len(pairs), timeout=20,
                     what="cross-rail UDP echo through both spines", interval=0.2)
            fab.switch_process("spine0").stop()
            lost = _answered(fab, pairs, probe)
            assert sum(lost) < FLOWS * len(pairs), "no flow was hashed onto spine0"
            reports = sync_fabric(fab.live.without({"spine0"}))
            assert all(r.error is None for r in reports), reports
            assert _answered(fab, pairs, probe) == [FLOWS] * len(pairs)
        finally:
            for e in echoes:
                e.kill()
                e.wait()
