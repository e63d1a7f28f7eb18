"""Run :mod:`workloads.udp_probe` between two hosts of a running emulation."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

__all__ = ["probe"]


def probe(fab: Any, src: str, dst: str, dst_ip: str, *, seconds: float, gap: float = 0.002,
          idle: float = 1.0) -> tuple[list[float], list[tuple[int, float]]]:
    """Host ``src`` sends to ``dst_ip`` (on host ``dst``) for ``seconds``: the send times, and
    ``(sequence, arrival time)`` of what arrived. The receiver is always reaped."""
    recv = fab.host(dst).popen([sys.executable, "-m", "workloads.udp_probe", "recv", dst_ip, "--idle", str(idle)],
                               stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)  # the receiver binds before the first datagram
        out = fab.host(src).cmd(f"{sys.executable} -m workloads.udp_probe send {dst_ip} "
                                f"--seconds {seconds} --gap {gap}")
        sent = json.loads(out.strip().splitlines()[-1])
        got, _ = recv.communicate(timeout=30 + idle)
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    return sent, [(int(n), float(t)) for n, t in json.loads(got)]
