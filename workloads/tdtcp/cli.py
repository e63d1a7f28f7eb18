"""Run a TDTCP receiver or sender in a host, printing one JSON document of statistics.

Run in the hosts' namespaces::

    python -m workloads.tdtcp recv BIND_IP [--port P] [--idle S] [--wait S] [--ack-every 1|2]
    python -m workloads.tdtcp send DST_IP --bytes N [--seconds S] [--mode tdtcp|single] [--port P]
                                   [--listen-icmp] [--stats-ms 10] [--start-at T] ...
    python -m workloads.tdtcp listen --seconds S      # only record TDN notifications

Times are ``time.monotonic()`` seconds (one clock for every namespace of the machine, the
one a schedule's epoch is given on). The sender's document::

    {"role": "send", "mode", "dst", "port", "conn", "bytes", "mss", "complete", "acked", "time_limited",
     "start", "end", "duration_s", "goodput_bps", "sha256",
     "segments_sent", "retransmissions", "timeouts", "dropped_injected", "acks", "dupacks",
     "malformed", "refused", "lost_by_ack", "lost_by_timeout", "ignored_acks",
     "active_tdn", "tdn_switches",
     "sent_by_tdn": {"0": bytes, ...},
     "per_tdn": {"0": {"cwnd", "ssthresh", "state", "in_flight", "srtt_ms", "rttvar_ms",
                       "rto_ms", "bytes_sent", "bytes_retransmitted", "bytes_delivered",
                       "recoveries", "timeouts", "rtt_samples"}, ...},     # "shared" in single
     "notifications": [[t, tdn, source], ...],
     "switches": [{"t", "applied", "from", "to", "source", "cwnd_before", "cwnd_after"}, ...],
     "timeline": {"t": [...], "acked": [...], "active_tdn": [...],
                  "tdn": {"0": {"cwnd": [...], "ssthresh", "state", "in_flight", "srtt_ms",
                                "rto_ms"}, ...}},
     "icmp": {"received": [[t, tdn, src], ...], "ignored": {...}, "error"},  # --listen-icmp
     "error": "..."}                                                           # on failure

The receiver's: ``{"role": "recv", "port", "window", "start", "end", "malformed",
"connections": [{"conn", "peer", "bytes", "complete", "sha256", "start", "end",
"duration_s", "goodput_bps", "segments", "in_order", "out_of_order", "duplicate",
"beyond_window", "acks", "tdn_segments": {"0": n, ...}, "delivered": {"t": [...],
"bytes": [...]}}]}``. Once bound, the receiver writes ``tdtcp recv: listening on IP:PORT`` on
stderr: start the sender after that line (a segment sent before it is refused, and the
first retransmission waits the initial RTO, 1 s). Exit status: 0, 1 when the transfer
failed (the document says why), 2 for bad options.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

from mlfabric_base.numbers import finite_float, nonnegative_float, positive_float
from workloads.tdtcp.config import PORT, ReceiverConfig, SenderConfig
from workloads.tdtcp.congestion import MODES, CongestionConfig
from workloads.tdtcp.errors import ConfigError, ListenerError, PeerTimeout
from workloads.tdtcp.loss import LossPlan
from workloads.tdtcp.notify import TdnListener
from workloads.tdtcp.receiver import Receiver
from workloads.tdtcp.sender import Sender

__all__ = ["main", "parser"]


def _ints(text: str) -> frozenset[int]:
    try:
        return frozenset(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m workloads.tdtcp", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    sub = p.add_subparsers(dest="role", required=True)
    r = sub.add_parser("recv", help="receive streams until idle")
    r.add_argument("bind", metavar="BIND_IP")
    r.add_argument("--port", type=int, default=PORT)
    r.add_argument("--idle", type=nonnegative_float, default=1.0, help="stop this long after the last datagram (s)")
    r.add_argument("--wait", type=positive_float, default=30.0, help="stop if nothing arrives this long (s)")
    r.add_argument("--ack-every", type=int, default=1, choices=(1, 2))
    r.add_argument("--window", type=int, default=16 << 20, help="largest advertised window (bytes)")
    r.add_argument("--stats-ms", type=positive_float, default=10.0, help="delivered-bytes sampling period (ms)")
    r.add_argument("--sock-buf", type=int, default=4 << 20, help="socket buffers (bytes)")
    s = sub.add_parser("send", help="send one stream")
    s.add_argument("dst", metavar="DST_IP")
    s.add_argument("--bytes", type=int, required=True, dest="total")
    s.add_argument("--mode", choices=MODES, default="tdtcp")
    s.add_argument("--port", type=int, default=PORT)
    s.add_argument("--listen-icmp", action="store_true", help="switch TDN on ICMP type 7 (needs root)")
    s.add_argument("--icmp-accept-bad-checksum", action="store_true")
    s.add_argument("--stats-ms", type=positive_float, default=10.0, help="timeline sampling period (ms)")
    s.add_argument("--start-at", type=finite_float, help="start at this time.monotonic() value")
    s.add_argument("--initial-tdn", type=int, default=0)
    s.add_argument("--mss", type=int, default=CongestionConfig().mss, help="payload bytes per segment")
    s.add_argument("--initial-window", type=int, default=10, help="segments")
    s.add_argument("--min-rto-ms", type=positive_float, default=200.0)
    s.add_argument("--initial-rto-ms", type=positive_float, default=1000.0)
    s.add_argument("--conn", type=int, help="connection id (default: random)")
    s.add_argument("--timeout", type=positive_float, default=30.0, help="give up after this long without progress (s)")
    s.add_argument("--seconds", type=positive_float, default=None,
                   help="stop after this long, done or not (a transfer of fixed length, as iperf3 -t)")
    s.add_argument("--sock-buf", type=int, default=4 << 20, help="socket buffers (bytes)")
    s.add_argument("--no-timestamps", action="store_true", help="RTT samples by Karn's rule only")
    s.add_argument("--drop-segments", type=_ints, default=frozenset(), help="drop these segments' first sending")
    s.add_argument("--loss-rate", type=finite_float, default=0.0, help="drop each transmission with this probability")
    s.add_argument("--seed", type=int, default=0, help="seed of --loss-rate")
    n = sub.add_parser("listen", help="record TDN notifications (ICMP type 7) for a while; needs root")
    n.add_argument("--seconds", type=positive_float, required=True, help="how long to listen")
    return p


def _listen(a: argparse.Namespace) -> tuple[dict[str, Any], int]:
    with TdnListener(lambda tdn, t: None) as listener:
        sys.stderr.write("tdtcp listen: listening\n")
        sys.stderr.flush()
        time.sleep(a.seconds)
    return {"role": "listen", **listener.stats()}, 0


def _send(a: argparse.Namespace) -> tuple[dict[str, Any], int]:
    cfg = SenderConfig(
        mode=a.mode, port=a.port, conn=a.conn, initial_tdn=a.initial_tdn, stats_interval=a.stats_ms / 1e3,
        timeout=a.timeout, max_seconds=a.seconds, sock_buf=a.sock_buf, use_timestamps=not a.no_timestamps,
        congestion=CongestionConfig(mss=a.mss, initial_window=a.initial_window, min_rto=a.min_rto_ms / 1e3,
                                    initial_rto=a.initial_rto_ms / 1e3),
        loss=LossPlan(segments=a.drop_segments, rate=a.loss_rate, seed=a.seed))
    sender = Sender(a.dst, a.total, cfg)
    listener = None
    if a.listen_icmp:
        listener = TdnListener(lambda tdn, t: sender.set_tdn(tdn, source="icmp", received=t),
                               accept_bad_checksum=a.icmp_accept_bad_checksum)
        listener.start()
    status = 0
    try:
        if a.start_at is not None:
            time.sleep(max(0.0, a.start_at - time.monotonic()))
        out = sender.run()
    except PeerTimeout as exc:
        out, status = {**sender.stats(), "error": str(exc)}, 1
    finally:
        if listener is not None:
            listener.stop()
    if listener is not None:
        out["icmp"] = listener.stats()
    return out, status


def main(argv: Sequence[str] | None = None) -> int:
    """The entry point; the exit status."""
    a = parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=a.log_level, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    try:
        if a.role == "recv":
            rcfg = ReceiverConfig(port=a.port, idle=a.idle, wait=a.wait, ack_every=a.ack_every, window=a.window,
                                  stats_interval=a.stats_ms / 1e3, sock_buf=a.sock_buf)
            with Receiver(a.bind, rcfg) as rx:
                sys.stderr.write(f"tdtcp recv: listening on {a.bind}:{rx.port}\n")
                sys.stderr.flush()
                out, status = rx.run(), 0
        elif a.role == "listen":
            out, status = _listen(a)
        else:
            out, status = _send(a)
    except ConfigError as exc:
        sys.stderr.write(f"tdtcp {a.role}: {exc}\n")
        return 2
    except (ListenerError, OSError) as exc:
        sys.stderr.write(f"tdtcp {a.role}: {exc}\n")
        return 1
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return status
