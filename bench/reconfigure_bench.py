"""Consistent reconfiguration of a 16-switch optical fabric (12 ToRs, 4 circuit switches):
how long from the ``reconfigure`` call until the last switch acknowledges its commit, and
how many packets of a stream whose path moves to another circuit switch are lost."""

from __future__ import annotations

import statistics

from controller.emulation import load_emulation_module
from controller.reconfigure.apply import reconfigure
from controller.reconfigure.session import FabricSession
from controller.schedule import one_shot, strobe_matching
from controller.topology import optical

__all__ = ["reconfigure_timing"]

RACKS, UPLINKS = 12, 4
#: circuit switch k pinned to strobe day k; then every day moves to the next circuit switch,
#: so every circuit of the fabric changes and rack 0 -> rack 1 moves from ocs0 to ocs1
PINNED = one_shot([strobe_matching(RACKS, d) for d in range(UPLINKS)], name="pinned")
MOVED = one_shot([strobe_matching(RACKS, (d - 1) % UPLINKS) for d in range(UPLINKS)], name="moved")


def reconfigure_timing(target: str, runs: int = 5) -> dict[str, float]:
    """``runs`` reconfigurations back and forth under a 1,000 packets/s stream from rack 0
    to rack 1 (calendar queues on the Python target; BMv2 drops what must wait), by a
    controller that keeps its session (connections, clock estimates) open: median and
    worst time from the call to the last commit acknowledgement, and packets lost. Also
    what one call costs that must first connect and probe (as ``mlfabric reconfigure``)."""
    fabric_net = load_emulation_module("fabric_net")
    udp_probe_run = load_emulation_module("udp_probe_run")
    python = target == "python"
    done = []
    lost = []
    with fabric_net.EmulatedFabric(optical(RACKS, 1, uplinks=UPLINKS, rate_mbps=None), target=target, shape=False,
                                   publish=False, schedule=PINNED, calendar_queues=python,
                                   switch_args=("--queue-depth", "4000") if python else ()) as fab:
        with FabricSession(fab.live) as session:
            for k in range(runs):
                target_schedule = MOVED if k % 2 == 0 else PINNED

                def change(schedule=target_schedule) -> None:
                    done.append(reconfigure(fab.live, schedule, session=session))

                sent, got = udp_probe_run.probe(fab, "h0_0", "h1_0", "10.200.1.1", seconds=1.2, gap=0.001,
                                                idle=1.0, during=change, during_at=0.4)
                lost.append(len(sent) - len({n for n, _ in got}))
        cold = reconfigure(fab.live, MOVED if runs % 2 == 0 else PINNED)
    acks = [r.committed_ms for r in done]
    return {"switches": len(done[0].switches), "committed_ms_median": statistics.median(acks),
            "committed_ms_worst": max(acks),
            "cold_committed_ms": cold.committed_ms, "cold_surveyed_ms": cold.probed_ms,
            "guard_us_median": statistics.median(r.times.guard_us for r in done),
            "lost_total": sum(lost), "lost_worst": max(lost), "runs": runs,
            "late": sum(len(r.late) for r in done)}


if __name__ == "__main__":
    print(reconfigure_timing("python"))
