"""The TDTCP transport's goodput on one uncongested path against kernel TCP's, as a ratio
measured in the same run: both over 127.0.0.1, each end in its own process.

The transport is ``python -m workloads.tdtcp`` (a receiver process, then a sender process);
its goodput is the sender's: the stream's bytes over the time from its first segment to the
last byte acknowledged. Kernel TCP (the machine's default congestion control) moves the
same number of bytes between two Python processes with ``sendall`` and ``recv_into``; its
goodput is the bytes over the time from ``connect`` to the receiver's last byte. Each is
the median of ``runs`` transfers.

Run alone with ``python -m bench.tdtcp_bench [--mb 20] [--runs 3]``: the default settings
(1444-byte segments, an ACK per segment), then an ACK per two segments, then 8948-byte
segments (a 9000-byte MTU); prints a table and writes ``bench/results/tdtcp-<time>.json``
with the machine's description.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import machine
from mlfabric_base.numbers import positive_float

__all__ = ["kernel_tcp_goodput", "notification_latency", "tdtcp_goodput", "transport_vs_kernel_tcp"]

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"

_TCP_RECV = """
import socket, sys, time
srv = socket.create_server(("127.0.0.1", 0))
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
buf = bytearray(1 << 20)
n = 0
while (k := conn.recv_into(buf)):
    n += k
print(n, time.monotonic(), flush=True)
"""

_TCP_SEND = """
import socket, sys, time
total, port = int(sys.argv[1]), int(sys.argv[2])
data = bytes(total)
start = time.monotonic()
with socket.create_connection(("127.0.0.1", port)) as s:
    s.sendall(data)
print(start, flush=True)
"""


def kernel_tcp_goodput(total: int) -> float:
    """Bits per second of one ``total``-byte kernel TCP transfer over loopback."""
    recv = subprocess.Popen([sys.executable, "-c", _TCP_RECV], stdout=subprocess.PIPE, text=True)
    try:
        assert recv.stdout is not None
        port = recv.stdout.readline().strip()
        send = subprocess.run([sys.executable, "-c", _TCP_SEND, str(total), port], capture_output=True,
                              text=True, check=True, timeout=120)
        got, end = recv.stdout.readline().split()
        recv.wait(timeout=30)
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    if int(got) != total:
        raise RuntimeError(f"kernel TCP delivered {got} of {total} bytes")
    return total * 8 / (float(end) - float(send.stdout.strip()))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tdtcp_goodput(total: int, *, mode: str = "tdtcp", mss: int = 1444, ack_every: int = 1) -> dict[str, Any]:
    """One ``total``-byte transfer of the TDTCP transport over loopback: the sender's
    statistics (``goodput_bps`` among them)."""
    port = str(_free_port())
    mod = [sys.executable, "-m", "workloads.tdtcp"]
    recv = subprocess.Popen([*mod, "recv", "127.0.0.1", "--port", port, "--idle", "0.5",
                             "--ack-every", str(ack_every)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert recv.stderr is not None
        recv.stderr.readline()  # "listening on ...": bound
        send = subprocess.run([*mod, "send", "127.0.0.1", "--port", port, "--bytes", str(total), "--mode", mode,
                               "--mss", str(mss), "--stats-ms", "100"], cwd=ROOT, capture_output=True, text=True, timeout=300)
        rout, _ = recv.communicate(timeout=60)
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    if send.returncode != 0:
        raise RuntimeError(f"tdtcp sender failed: {send.stderr.strip() or send.stdout[-300:]}")
    stats: dict[str, Any] = json.loads(send.stdout)
    [conn] = json.loads(rout)["connections"]
    if not (conn["complete"] and conn["sha256"] == stats["sha256"]):
        raise RuntimeError("tdtcp transfer incomplete or corrupted")
    return stats


def transport_vs_kernel_tcp(mb: float = 20.0, runs: int = 3, *, mss: int = 1444, ack_every: int = 1) -> dict[str, float]:
    """The TDTCP transport's goodput over kernel TCP's on loopback (``ratio``), with both
    medians in Mbit/s and the transport's retransmissions per run (median). The defaults
    are the transport's: 1444-byte segments (a 1500-byte MTU), an ACK per segment."""
    total = int(mb * 1e6)
    ours, theirs, retx = [], [], []
    for _ in range(runs):  # interleaved, so that a slow spell of the machine hits both
        st = tdtcp_goodput(total, mss=mss, ack_every=ack_every)
        ours.append(st["goodput_bps"])
        retx.append(st["retransmissions"])
        theirs.append(kernel_tcp_goodput(total))
    a, b = statistics.median(ours), statistics.median(theirs)
    return {"ratio": a / b, "tdtcp_mbps": a / 1e6, "kernel_tcp_mbps": b / 1e6, "mb": mb, "runs": runs,
            "mss": mss, "ack_every": ack_every, "tdtcp_retransmissions": statistics.median(retx)}


def notification_latency(target: str, seconds: float = 3.0) -> dict[str, float]:
    """The TDTCP experiment's fabric with no traffic: the ToR's only triggers are the
    controller's ticks. Microseconds from each TDN change (20 ms days) to a host's receipt
    of its ICMP type 7, p50 and p99, and how many changes went unannounced."""
    from controller.emulation import load_emulation_module
    from controller.experiments.tdtcp import TdtcpConfig, fabric, percentile, schedule
    from controller.experiments.tdtcp_report import notification_latencies
    from controller.tdtcp.install import install_notifications
    from controller.tdtcp.ticker import Ticker

    fabric_net = load_emulation_module("fabric_net")
    cfg = TdtcpConfig(target=target)
    sched = schedule(cfg)
    with fabric_net.EmulatedFabric(fabric(cfg), target=target, shape=False, publish=False, schedule=sched) as fab:
        install_notifications(fab.live, {"tor0": "all", "tor1": "none"})
        listen = fab.host("h0_0").popen([sys.executable, "-m", "workloads.tdtcp", "listen", "--seconds", str(seconds + 1)],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert listen.stderr is not None and "listening" in listen.stderr.readline()
            with Ticker([fab.live.switch("tor0")], sched, fab.schedule_epoch_us or 0.0) as ticker:
                time.sleep(seconds)
            out, _ = listen.communicate(timeout=30)
        finally:
            if listen.poll() is None:
                listen.kill()
                listen.wait()
    received = json.loads(out)["received"]
    lat = notification_latencies([{"ticks": ticker.sent, "sender": {"icmp": {"received": received}}}])
    return {"p50_us": percentile(lat, 0.5), "p99_us": percentile(lat, 0.99), "changes": len(ticker.sent),
            "notified": len(lat)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.tdtcp_bench", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--mb", type=positive_float, default=20.0)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args(argv)
    results = [transport_vs_kernel_tcp(a.mb, a.runs, mss=mss, ack_every=every)
               for mss, every in ((1444, 1), (1444, 2), (8948, 2))]
    print(f"{'MSS':>5} {'ACK every':>9} {'TDTCP Mbit/s':>13} {'kernel TCP Mbit/s':>18} {'ratio':>8}")
    for r in results:
        print(f"{r['mss']:>5} {r['ack_every']:>9} {r['tdtcp_mbps']:>13.0f} {r['kernel_tcp_mbps']:>18.0f} {r['ratio']:>8.3f}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / time.strftime("tdtcp-%Y%m%d-%H%M%S.json")
    out.write_text(json.dumps({"machine": machine.describe(), "figures": results,
                               "units": {"tdtcp_mbps": "Mbit/s", "kernel_tcp_mbps": "Mbit/s", "mb": "MB (1e6 bytes)",
                                         "mss": "bytes", "ratio": "tdtcp goodput / kernel TCP goodput"}},
                              indent=2) + "\n")
    print(f"[bench] wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

