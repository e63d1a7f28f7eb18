"""Run :mod:`workloads.udp_probe` between two hosts of a running emulation."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["probe"]


def _reap(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def probe(fab: Any, src: str, dst: str, dst_ip: str, *, seconds: float, gap: float = 0.002,
          idle: float = 1.0, during: Callable[[], object] | None = None,
          during_at: float = 0.0) -> tuple[list[float], list[tuple[int, float]]]:
    """Host ``src`` sends to ``dst_ip`` (on host ``dst``) for ``seconds``: the send times, and
    ``(sequence, arrival time)`` of what arrived. ``during`` is called ``during_at`` seconds
    after the first datagram (a reconfiguration under load); its errors propagate. Both
    ends are always reaped."""
    recv = fab.host(dst).popen([sys.executable, "-m", "workloads.udp_probe", "recv", dst_ip, "--idle", str(idle)],
                               stdout=subprocess.PIPE, text=True)
    send = None
    try:
        time.sleep(0.3)  # the receiver binds before the first datagram
        send = fab.host(src).popen([sys.executable, "-m", "workloads.udp_probe", "send", dst_ip,
                                    "--seconds", str(seconds), "--gap", str(gap)], stdout=subprocess.PIPE, text=True)
        if during is not None:
            time.sleep(during_at)
            during()
        out, _ = send.communicate(timeout=seconds + 30)
        sent = json.loads(out.strip().splitlines()[-1])
        got, _ = recv.communicate(timeout=30 + idle)
    finally:
        _reap(recv)
        if send is not None:
            _reap(send)
    return sent, [(int(n), float(t)) for n, t in json.loads(got)]
