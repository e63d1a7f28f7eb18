"""A checkpoint store on a fabric host: a worker's checkpoint crosses the emulated network to
it (over the shaped links, at their rate) and arrives whole, as Checkmate's baselines will
persist theirs."""

from __future__ import annotations

import sys
from pathlib import Path

from controller.emulation import load_emulation_module
from controller.topology import rail_only

fabric_net = load_emulation_module("fabric_net")

RATE_MBPS = 20
SIZE = 2_000_000


def test_a_checkpoint_crosses_the_fabric_to_the_store_at_the_links_rate(target_name: str, tmp_path: Path) -> None:
    topo = rail_only(2, 1, rate_mbps=RATE_MBPS)
    address = topo.hosts[1].nics[0].address
    client = (
        "import os, time, numpy as np\n"
        "from workloads.checkmate import storage\n"
        "from workloads.checkmate.checkpoint import checkpoint_bytes\n"
        f"data = checkpoint_bytes(iteration=0, params=np.ones({SIZE // 4}, dtype=np.float32), optimizer_state={{}}, meta={{}})\n"
        "t0 = time.perf_counter()\n"
        f"answer = storage.put('http://{address}:7600/ck.npz', data)\n"
        "print(answer['bytes'], round(time.perf_counter() - t0, 3))\n")
    with fabric_net.EmulatedFabric(topo, target=target_name, publish=False, log_dir=tmp_path / "logs") as fab:
        store = fab.host("s1").popen([sys.executable, "-m", "workloads.checkmate.storage", "--dir", str(tmp_path / "store"),
                                      "--port", "7600"], stdout=-1, stderr=-1)
        try:
            assert store.stdout is not None and store.stdout.readline().split()[0] == b"READY"
            out = fab.host("s0").cmd(f"{sys.executable} -c \"{client}\"").split()
        finally:
            store.terminate()
            store.wait(timeout=10)
    sent, seconds = int(out[-2]), float(out[-1])
    assert (tmp_path / "store" / "ck.npz").stat().st_size == sent > SIZE
    # it went over the 20 Mbit/s links, not around them
    assert seconds >= 0.8 * sent * 8 / (RATE_MBPS * 1e6), seconds
