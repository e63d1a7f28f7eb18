"""``mlfabric-switch``: the Python target as a process, with simple_switch_grpc's flags.

    mlfabric-switch [--no-p4 | PROGRAM.json] -i 1@veth1 -i 2@veth2 \\
        [--device-id N] [--grpc-server-addr ADDR] [--cpu-port N] [--pcap DIR] [--log-console] [-L LEVEL]
        [--engine auto|native|python]

As with simple_switch_grpc, target options may follow a ``--``.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from mlfabric_base.grpc_transport import tune_grpc
from mlfabric_base.numbers import nonnegative_int, parse_finite, positive_float

tune_grpc()  # before pybmv2.daemon imports grpc

from pybmv2.daemon import ENGINES  # noqa: E402
from pybmv2.errors import TargetError  # noqa: E402

__all__ = ["main"]

log = logging.getLogger("mlfabric-switch")

#: BMv2's log levels, and the Python logging level each stands for
LOG_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
              "error": logging.ERROR, "off": logging.CRITICAL + 10}


def log_level(args: argparse.Namespace) -> str:
    """The level asked for: ``-L``, else BMv2's default ``trace`` with ``--log-console``, else
    ``info``. Packets are traced at ``trace`` and ``debug``, as BMv2 logs them.

    >>> p = build_parser()
    >>> [log_level(p.parse_args(a)) for a in (["--no-p4"], ["--log-console"], ["--log-console", "-L", "info"])]
    ['info', 'trace', 'info']
    """
    return str(args.log_level or ("trace" if args.log_console else "info"))


def _port_rate(text: str) -> tuple[int, float]:
    port, sep, rate = text.partition(":")
    try:
        pps = parse_finite(rate) if sep and port.isdigit() else -1.0
    except ValueError:
        pps = -1.0
    if pps <= 0:
        raise argparse.ArgumentTypeError(f"bad --queue-rate-port {text!r}: expected PORT:PPS, PPS a finite number > 0")
    return int(port), pps


def _port_delay(text: str) -> tuple[int, int]:
    port, sep, delay = text.partition(":")
    if not sep or not port.isdigit() or not delay.isdigit():
        raise argparse.ArgumentTypeError(f"bad port delay {text!r}: expected PORT:US")
    return int(port), int(delay)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mlfabric-switch",
        description="A Python v1model switch running p4c's BMv2 JSON, serving P4Runtime.",
        epilog="example: mlfabric-switch --no-p4 -i 1@s1-eth1 -i 2@s1-eth2 "
        "--grpc-server-addr 127.0.0.1:50001 --device-id 1 --cpu-port 510",
    )
    p.add_argument("json", nargs="?", type=Path, help="BMv2 JSON to load at start")
    p.add_argument("--no-p4", action="store_true", help="start without a program (set it over P4Runtime)")
    p.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@IFACE",
                   help="attach port number PORT to interface IFACE (repeatable)")
    p.add_argument("--device-id", type=int, default=0)
    p.add_argument("--grpc-server-addr", default="0.0.0.0:9559")
    p.add_argument("--cpu-port", type=int, default=None)
    p.add_argument("--pcap", type=Path, default=None, metavar="DIR",
                   help="write <iface>_in.pcap and <iface>_out.pcap per port into DIR")
    p.add_argument("--log-console", action="store_true",
                   help="log every packet's path to stderr (level trace unless -L says otherwise)")
    p.add_argument("-L", "--log-level", default=None, choices=list(LOG_LEVELS),
                   help="trace and debug log every packet's path; info (the default without --log-console) "
                        "only start-up and control-plane events")
    p.add_argument("--thrift-port", type=int, default=None, help="ignored: this target has no Thrift server")
    p.add_argument("--queue-depth", type=int, default=None, help="egress queue depth in packets (default 64)")
    p.add_argument("--queue-rate", type=positive_float, default=None, help="egress rate of every port, packets/s")
    p.add_argument("--queue-rate-port", type=_port_rate, action="append", default=[], metavar="PORT:PPS")
    p.add_argument("--port-delay", type=_port_delay, action="append", default=[], metavar="PORT:US",
                   help="extension (not in BMv2): delay every frame this port transmits by US microseconds, "
                        "a link's propagation delay where the kernel has no netem")
    p.add_argument("--port-ingress-delay", type=_port_delay, action="append", default=[], metavar="PORT:US",
                   help="extension (not in BMv2): delay every frame this port receives by US microseconds (the "
                        "other direction of a link to a host)")
    p.add_argument("--engine", choices=ENGINES, default=None,
                   help="packet engine: native runs the program compiled to C, with its own I/O "
                        "thread; python the interpreter; auto native where it can run the program "
                        "and the options, else python, logging why (default: $MLFABRIC_ENGINE, else auto)")
    p.add_argument("--calendar-queue", default=None, metavar="FIELD",
                   help="extension (not in BMv2): hold each packet until the switch-clock time (us) in "
                        "this metadata field, e.g. release_us (OpenOptics' calendar queues)")
    p.add_argument("--clone-truncation", action="store_true",
                   help="extension (not in BMv2, which refuses such sessions): a clone session's "
                        "packet_length_bytes truncates its clones")
    p.add_argument("--super-packets", action="store_true",
                   help="extension (not in BMv2): the ports carry virtio_net_hdr (PACKET_VNET_HDR), so that a "
                        "TCP segment the hosts' offloads left whole (up to 64 KB) goes through the pipeline once "
                        "on the native engine and is cut into frames by the kernel only where a device needs it; "
                        "the Python engine cuts it first. Counters and meters count super-packets")
    p.add_argument("--busy-poll-us", type=nonnegative_int, default=0, metavar="US",
                   help="extension (not in BMv2), native engine: after each frame received, poll the ports this "
                        "long without sleeping (default 0: sleep at once). Lower latency per hop where waking "
                        "a sleeping CPU is slow (virtual machines), at the CPU of the polling")
    return p


def default_engine(environ: Mapping[str, str] = os.environ) -> str:
    """The engine when ``--engine`` is not given: ``$MLFABRIC_ENGINE``, else ``auto``.

    >>> default_engine({}), default_engine({"MLFABRIC_ENGINE": "python"})
    ('auto', 'python')
    """
    value = environ.get("MLFABRIC_ENGINE") or "auto"
    if value not in ENGINES:
        raise TargetError(f"MLFABRIC_ENGINE={value!r}: choose one of {', '.join(ENGINES)}")
    return value


def _options(args: argparse.Namespace):
    from pybmv2.daemon import DaemonOptions
    from pybmv2.ports import parse_port_spec
    from pybmv2.queues import DEFAULT_QUEUE_DEPTH

    if args.json is None and not args.no_p4:
        raise TargetError("give a BMv2 JSON file or --no-p4")
    if args.json is not None and args.no_p4:
        raise TargetError("--no-p4 and a JSON file are mutually exclusive")
    if args.pcap is not None:
        args.pcap.mkdir(parents=True, exist_ok=True)
    return DaemonOptions(
        ports=tuple(parse_port_spec(s) for s in args.interface),
        device_id=args.device_id,
        grpc_addr=args.grpc_server_addr,
        cpu_port=args.cpu_port,
        pcap_dir=args.pcap,
        json_path=args.json,
        queue_depth=args.queue_depth or DEFAULT_QUEUE_DEPTH,
        queue_rate_pps=args.queue_rate,
        port_rates=dict(args.queue_rate_port),
        calendar_field=args.calendar_queue,
        port_delays=dict(args.port_delay),
        port_ingress_delays=dict(args.port_ingress_delay),
        clone_truncation=args.clone_truncation,
        super_packets=args.super_packets,
        busy_poll_us=args.busy_poll_us,
        log_console=log_level(args) in ("trace", "debug"),
        engine=args.engine or default_engine(),
    )


def main(argv: Sequence[str] | None = None) -> int:
    from pybmv2.startup import StartupPhases

    startup = StartupPhases()
    startup.lap("interpreter and pybmv2 imports")
    raw = list(sys.argv[1:] if argv is None else argv)
    raw = [a for a in raw if a != "--"]
    args = build_parser().parse_args(raw)
    logging.basicConfig(level=LOG_LEVELS[log_level(args)], format="[%(asctime)s] %(name)s %(levelname)s: %(message)s")
    if args.thrift_port is not None:
        log.warning("--thrift-port %d ignored: this target serves P4Runtime only", args.thrift_port)
    try:
        from pybmv2.daemon import SwitchDaemon

        startup.lap("switch daemon imports")
        daemon = SwitchDaemon(_options(args), startup=startup)
    except TargetError as exc:
        print(f"mlfabric-switch: error: {exc}", file=sys.stderr)
        return 1

    def _stop(signum: int, frame: object) -> None:
        daemon.stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        daemon.serve_forever()
    except TargetError as exc:
        print(f"mlfabric-switch: error: {exc}", file=sys.stderr)
        return 1
    finally:
        daemon.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
