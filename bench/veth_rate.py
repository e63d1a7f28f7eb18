"""Forwarding over veth at the rates the native engine reaches: a C traffic source and sink
(bench/blast.c, compiled here) between the test ends of two veth pairs, with a switch
process, or a Linux bridge (the ceiling of this path), between the switch ends."""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench import forwarding
from bench.traffic import frames, route_updates
from controller.netstate import NetRecord
from controller.p4build import pipeline_files
from packettest.targets import ProcessTarget
from packettest.veth import VethPorts

SOURCE = Path(__file__).with_name("blast.c")
#: frames in flight: enough to keep every engine busy, few enough that no queue overflows
WINDOW = 64


def blast_binary() -> Path:
    """bench/blast.c compiled with the system's C compiler (cached by content)."""
    from pybmv2.native.build import cache_dir, compiler

    cc = compiler()
    if cc is None:
        raise RuntimeError("no C compiler for bench/blast.c")
    src = SOURCE.read_bytes()
    out = cache_dir() / f"blast-{hashlib.sha256(src).hexdigest()[:16]}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([cc, "-O2", "-o", str(out), str(SOURCE)], check=True)
    return out


def blast(tx: str, rx: str, batch: list[bytes], seconds: float, window: int = WINDOW) -> dict[str, float]:
    """Frames/s forwarded from interface ``tx`` to ``rx`` with ``window`` frames in flight."""
    with tempfile.NamedTemporaryFile(suffix=".frames") as f:
        f.write(b"".join(len(x).to_bytes(2, "little") + x for x in batch))
        f.flush()
        out = subprocess.run([str(blast_binary()), tx, rx, f.name, str(seconds), str(window)],
                             capture_output=True, text=True, check=True, timeout=seconds + 30)
    sent, received, lost, elapsed = out.stdout.split()
    return {"packets_per_s": int(received) / float(elapsed), "sent": int(sent),
            "received": int(received), "lost": int(lost)}


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def switch_rate(kind: str, engine: str | None, seconds: float, samples: int, *,
                extra_args: tuple[str, ...] = (), blast_too: bool = True) -> dict[str, float]:
    """rail_switch with 1,000 routes in a switch process of ``kind`` between two veths: the
    blast rate and the per-packet latency (Python harness; subtract the veth baseline), and
    the switch's CPU per second while the latency probes ran (one frame at a time)."""
    target = ProcessTarget(kind, pipeline_files("rail_switch"), (1, 2), engine=engine, extra_args=extra_args)
    try:
        target.client.write(route_updates(target.schema, forwarding.ROUTES, ports=(2,)))
        batch = frames(forwarding.ROUTES, 256)
        veth = target.veth
        veth.send(1, batch[0])
        if veth.receive(2, timeout=2.0) is None:
            raise RuntimeError(f"{kind}: the switch forwards nothing")
        pid = target.process.proc.pid
        cpu0, t0 = _cpu_seconds(pid), time.monotonic()
        lat = forwarding._latencies(veth, batch, samples, 2)
        probe_cpu = (_cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
        rate = (blast(veth.test_iface(1), veth.test_iface(2), batch, seconds) if blast_too
                else {"packets_per_s": math.nan})
    finally:
        target.close()
    return {**rate, "p50_us": forwarding._pct(lat, 50), "p99_us": forwarding._pct(lat, 99),
            "max_us": max(lat, default=math.nan), "probe_cpu_share": probe_cpu}


def bridge_rate(seconds: float) -> dict[str, float]:
    """The same traffic through a Linux bridge of the two switch ends (no switch process)."""
    with NetRecord("bench-bridge") as record:
        veth = VethPorts((1, 2), record, prefix="bbr")
        br = "bbrbr0"
        record.add_link(br)
        try:
            subprocess.run(["ip", "link", "add", br, "type", "bridge"], check=True)
            for iface in veth.switch_ifaces.values():
                subprocess.run(["ip", "link", "set", iface, "master", br], check=True)
            subprocess.run(["ip", "link", "set", br, "up"], check=True)
            batch = frames(forwarding.ROUTES, 256)
            veth.send(1, batch[0])
            if veth.receive(2, timeout=2.0) is None:
                raise RuntimeError("the bridge forwards nothing")
            return blast(veth.test_iface(1), veth.test_iface(2), batch, seconds)
        finally:
            subprocess.run(["ip", "link", "del", br], check=False, capture_output=True)
            veth.close()
