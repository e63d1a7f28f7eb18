"""What a link between machines costs: TCP through one link of a 2-server fabric (the Python
target's switch between them), on one machine (a veth) and across two stand-in machines (a
VXLAN tunnel; mininet/standin_machines.py), measured in turns in the same run: the CPU the
whole machine spent per GB carried, unshaped and at a shaped rate, and each fabric's bring-up.

The stand-ins share this machine's cores, so this is the tunnel's cost alone (encapsulation,
the extra device, SSH and the machine parts), not what real machines add.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from controller.emulation import load_emulation_module
from controller.topology.generators import rail_only

__all__ = ["compare"]

#: each measurement: iperf3's seconds (after one unrecorded second)
SECONDS = 3


def _machine_busy_s() -> float:
    cpu = load_emulation_module("cpu_sampler")
    return float(cpu.machine_times_s()[0])


def _iperf(fab: Any, topo: Any, seconds: float) -> dict[str, float]:
    """TCP from s0 to s1 for ``seconds``: Mbit/s received and machine CPU-s per GB."""
    server = topo.host("s1").rail_nic(0).address
    fab.host("s1").cmd("iperf3 -s -1 -D -p 5302")
    time.sleep(0.3)
    busy = _machine_busy_s()
    out = fab.host("s0").cmd(f"iperf3 -c {server} -p 5302 -t {seconds:g} -O 1 -J")
    used = _machine_busy_s() - busy
    end = json.loads(out[out.index("{"):])["end"]
    received = end["sum_received"]["bytes"]
    return {"mbps": end["sum_received"]["bits_per_second"] / 1e6, "cpu_s_per_gb": used / (received / 1e9)}


def compare(*, quick: bool = False) -> dict[str, Any]:
    """One machine and two stand-ins, in turns (best of the turns: the figure least disturbed)."""
    fabric_net = load_emulation_module("fabric_net")
    cluster_fabric = load_emulation_module("cluster_fabric")
    standin = load_emulation_module("standin_machines")
    from controller.cluster import load_machines

    seconds = 1 if quick else SECONDS
    turns = 1 if quick else 2
    out: dict[str, Any] = {"one machine": {}, "two stand-ins": {}}
    with tempfile.TemporaryDirectory(prefix="mlfabric-bench-cluster-") as tmp, \
            standin.StandIns(2, Path(tmp) / "machines", prefix="bench") as stand_ins:
        machines = load_machines(stand_ins.machines_file)
        for rate in (None, 400.0):
            topo = rail_only(2, 1, rate_mbps=rate)
            key = "unshaped" if rate is None else f"{rate:g} Mbit/s"
            for _ in range(turns):
                for where in ("one machine", "two stand-ins"):
                    t0 = time.monotonic()
                    if where == "one machine":
                        fab = fabric_net.EmulatedFabric(topo, publish=False, log_dir=Path(tmp) / "logs")
                    else:
                        fab = cluster_fabric.ClusterFabric(topo, machines, publish=False, run_dir=Path(tmp) / "run")
                    with fab:
                        up = time.monotonic() - t0
                        got = _iperf(fab, topo, seconds)
                    runs = out[where].setdefault(key, [])
                    runs.append({**got, "bring_up_s": up})
    return {where: {key: {"mbps": max(r["mbps"] for r in runs),
                          "cpu_s_per_gb": min(r["cpu_s_per_gb"] for r in runs),
                          "bring_up_s": statistics.median(r["bring_up_s"] for r in runs)}
                    for key, runs in by.items()} for where, by in out.items()}


def section_rows(result: dict[str, Any], row: Any) -> list[dict]:
    rows: list[dict] = []
    one, two = result["one machine"], result["two stand-ins"]
    for key in one:
        rows.append(row(f"a link between machines (VXLAN, 2 stand-ins), {key}: machine CPU per GB carried",
                        "CPU-s/GB", two[key]["cpu_s_per_gb"], None, "report"))
        rows.append(row(f"... the same link on one machine (veth), {key}", "CPU-s/GB", one[key]["cpu_s_per_gb"], None,
                        "report"))
        rows.append(row(f"... tunnel / veth, {key}", "x", two[key]["cpu_s_per_gb"] / one[key]["cpu_s_per_gb"], None,
                        "<= 1.5x"))
        rows.append(row(f"... TCP through the tunnel, {key}", "Mbit/s", two[key]["mbps"], None,
                        "report" if key == "unshaped" else ">= 95% of the rate"))
    rows.append(row("2-server fabric across 2 stand-ins: nothing to rules installed", "s",
                    two["unshaped"]["bring_up_s"], None, "report"))
    rows.append(row("... on one machine", "s", one["unshaped"]["bring_up_s"], None, "report"))
    return rows


def main(argv: list[str]) -> int:
    """``python -m bench.cluster_bench``: this section alone, as JSON."""
    print(json.dumps(compare(quick="--quick" in argv), indent=2))
    return 0


if __name__ == "__main__":
    from controller.experiments.results import interrupt_on_signals

    with interrupt_on_signals():  # SIGTERM/SIGHUP unwind the fabrics and the stand-ins too
        sys.exit(main(sys.argv[1:]))
