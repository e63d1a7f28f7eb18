"""``mlfabric dashboard``: the fabric that runs on this machine live in the browser, following
fabrics and experiments as they come and go; ``--replay FOLDER``: a kept run again."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from controller.dashboard.beside import DEFAULT_PORT
from controller.errors import ConfigError
from mlfabric_base.numbers import positive_float

__all__ = ["register"]

WHAT = "mlfabric dashboard"


def _dashboard(args: argparse.Namespace) -> int:
    from controller.dashboard.live import LiveSampler
    from controller.dashboard.recorder import FILE_NAME
    from controller.dashboard.server import Dashboard, Sampler, replay
    from controller.experiments.results import interrupt_on_signals

    if not 0 <= args.port <= 65535:
        raise ConfigError(WHAT, "--port", args.port, "a TCP port, 0-65535 (0: any free one)")
    if not 0.1 <= args.interval <= 60:
        raise ConfigError(WHAT, "--interval", args.interval, "seconds between samples, 0.1-60")
    if not 0.1 <= args.speed <= 1000:
        raise ConfigError(WHAT, "--speed", args.speed, "how many times faster than recorded, 0.1-1000")
    sampler: Sampler
    if args.replay is not None:
        if not (args.replay / FILE_NAME).is_file():
            raise ConfigError(WHAT, "--replay", str(args.replay),
                              f"holds no {FILE_NAME}: run the experiment with --dashboard to keep one")
        sampler = replay(args.replay, speed=args.speed)
        what = f"replay of {args.replay}"
    else:
        sampler = LiveSampler(args.interval)
        what = "the fabric on this machine"
    try:
        board = Dashboard(sampler, host=args.listen, port=args.port)
    except OSError as exc:
        raise ConfigError(WHAT, "--listen/--port", f"{args.listen}:{args.port}",
                          f"cannot listen there: {exc.strerror or exc}") from None
    with interrupt_on_signals(), board:
        print(f"dashboard of {what}: {board.url} (Ctrl-C stops it)", flush=True)
        if args.listen not in ("127.0.0.1", "localhost", "::1"):
            print(f"listening on {args.listen}: anyone who reaches this port sees the fabric's names and rates",
                  flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt as stop:
            print(f"dashboard stopped ({stop or 'SIGINT'})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dashboard", help="the fabric live in the browser: its topology with each link's measured rate, each "
                          "switch's CPU, queues and drops, an experiment's progress and verdicts, the optical "
                          "schedule and reconfigurations; --replay shows a kept run again",
        epilog="examples: mlfabric dashboard --port 8765 (then open http://127.0.0.1:8765/)\n"
               "          mlfabric dashboard --replay results/rail-only-20261129-0600 --speed 10",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--listen", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; another address shows "
                        "the fabric's names and rates to whoever reaches it)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT}; 0: any free one)")
    p.add_argument("--interval", type=positive_float, default=1.0, help="seconds between samples (default 1)")
    p.add_argument("--replay", type=Path, default=None, metavar="FOLDER",
                   help="show a results folder's kept dashboard (an experiment run with --dashboard) again")
    p.add_argument("--speed", type=positive_float, default=1.0, help="replay this many times faster (default 1)")
    p.set_defaults(func=_dashboard)
