"""``mlfabric fabric up TOPOLOGY``: run an emulated fabric until interrupted.

While it runs, the controller CLI works against it by switch name (``mlfabric rules show
rail0``, ``mlfabric counters spine0``...): the live topology, with every switch's gRPC
address, is published where the CLI looks by default. ``--cli`` opens Mininet's CLI
instead of waiting (``s0 ping 10.1.1.1``, ``xterm``...). Everything is torn down on exit,
also after Ctrl-C, SIGTERM or SIGHUP (a closed terminal).

Each run has a folder (``--run-dir``, default ``results/fabric-<topology>-<time>/``), as the
p4lang tutorials have: ``logs/SWITCH.log`` for every switch (quiet at the default level
``info``; ``--log-level debug`` logs every packet) and, with ``--pcap``,
``pcaps/SWITCH-ethN_in.pcap`` and ``_out.pcap`` for every switch port (BMv2's ``--pcap``).
On BMv2 every switch gets its own Thrift port for simple_switch_CLI (``mlfabric bmv2-cli``);
on both targets ``mlfabric shell SWITCH`` opens p4runtime-shell on it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from pathlib import Path

from mlfabric_emulation.cluster_fabric import ClusterFabric
from mlfabric_emulation.fabric_net import EmulatedFabric, check_free
from mlfabric_emulation.stoppable_stdin import StoppableStdin

from controller.cli.output import format_table
from controller.cli.switch_args import current_fabric_path
from controller.cluster import load_machines
from controller.cluster.placement import placement_text
from controller.dashboard.beside import add_dashboard_options
from controller.errors import MlfabricError
from controller.experiments.results import new_results_dir
from controller.schedule import load_schedule
from controller.switch_process import LOG_LEVELS
from controller.topology import load_topology
from mlfabric_base.numbers import positive_float


class FabricStopped(SystemExit):
    """A signal asked the fabric to stop while Mininet's CLI had control. A SystemExit,
    because Mininet's bare ``except:`` clauses (its log handler's, for one) re-raise only
    that and KeyboardInterrupt, which its CLI takes to mean "cancel the command"."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mlfabric fabric up", description="Run an emulated fabric until interrupted.",
                                epilog="examples: mlfabric fabric up topologies/rail-only-4x4.yaml --pcap\n"
                                       "          mlfabric fabric up topologies/rail-fat-tree-4x4.yaml --target bmv2 --cli",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topology", type=Path, help="the topology file (YAML) to build")
    p.add_argument("--target", choices=("python", "bmv2"), default="python",
                   help="switch target: the project's Python switch or BMv2 simple_switch_grpc (default: python)")
    p.add_argument("--engine", choices=("auto", "native", "python"), default=None,
                   help="the Python target's packet engine (mlfabric-switch --engine; default: auto, "
                        "native where it can run the program)")
    p.add_argument("--no-rules", action="store_true", help="load pipelines but install no rules")
    p.add_argument("--no-shaping", action="store_true", help="do not shape links to their rates")
    p.add_argument("--source-routing", action="store_true",
                   help="traffic from NIC r leaves through NIC r (a fat-tree's direct cross-rail path)")
    p.add_argument("--cli", action="store_true", help="open Mininet's CLI instead of waiting")
    p.add_argument("--for", dest="duration", type=positive_float, default=None, help="stop after this many seconds")
    p.add_argument("--run-dir", type=Path, default=None,
                   help="this run's folder, for logs/ and pcaps/ (default: results/fabric-TOPOLOGY-TIME)")
    p.add_argument("--pcap", action="store_true",
                   help="every switch writes RUN_DIR/pcaps/SWITCH-ethN_in.pcap and _out.pcap per port")
    p.add_argument("--log-level", choices=LOG_LEVELS, default="info",
                   help="of RUN_DIR/logs/SWITCH.log (default info: no packet is logged; debug and trace log "
                        "every packet, and the logs grow with the traffic)")
    p.add_argument("--schedule", type=Path, default=None,
                   help="optical fabrics: install this schedule on the circuit switches (else they stay dark)")
    p.add_argument("--routing", choices=("direct", "vlb"), default="direct",
                   help="optical fabrics: the ToRs' time-flow routing")
    p.add_argument("--margin-us", type=int, default=0,
                   help="optical fabrics: the ToRs send nothing in the first and last MARGIN us of a day")
    p.add_argument("--calendar-queues", action="store_true",
                   help="optical fabrics, Python target: ToRs hold a packet until its slot (an extension)")
    p.add_argument("--cluster", type=Path, default=None, metavar="MACHINES",
                   help="spread the fabric over the machines of this file, reached over SSH (docs/cluster.md)")
    add_dashboard_options(p)
    return p


def main(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    try:
        topo = load_topology(a.topology)
        schedule = load_schedule(a.schedule) if a.schedule else None
        fabric: EmulatedFabric | ClusterFabric
        if a.cluster:
            for flag, given in (("--cli", a.cli), ("--schedule", a.schedule), ("--calendar-queues", a.calendar_queues)):
                if given:
                    raise MlfabricError(f"{flag} does not work with --cluster yet (docs/cluster.md, limits)")
            fabric = ClusterFabric(topo, load_machines(a.cluster), target=a.target, engine=a.engine,
                                   shape=not a.no_shaping, install=not a.no_rules, source_routing=a.source_routing,
                                   log_level=a.log_level, say=lambda msg: print(f"[fabric] {msg}", flush=True))
        else:
            fabric = EmulatedFabric(topo, target=a.target, engine=a.engine, shape=not a.no_shaping,
                                    install=not a.no_rules, source_routing=a.source_routing, schedule=schedule,
                                    routing=a.routing, calendar_queues=a.calendar_queues,
                                    margin_us=a.margin_us, log_level=a.log_level)
            check_free(topo)  # before the run folder is made
        run_dir = a.run_dir or new_results_dir(f"fabric-{topo.name}")
        run_dir.mkdir(parents=True, exist_ok=True)
    except (MlfabricError, OSError) as exc:
        print(f"mlfabric: error: {exc}", file=sys.stderr)
        return 2
    fabric.run_dir, fabric.log_dir = run_dir, run_dir / "logs"
    fabric.pcap_dir = run_dir / "pcaps" if a.pcap else None
    stop = threading.Event()
    in_cli = threading.Event()
    # Mininet's CLI catches KeyboardInterrupt to cancel a command, as a shell does; only a
    # person at a terminal wants that. Every other signal, and SIGINT without a terminal,
    # ends the CLI with an exception it does not catch, and the fabric comes down. Before
    # the CLI runs (bring-up), a signal only marks the fabric to stop once it is up.
    cli_owns_sigint = a.cli and sys.stdin.isatty()
    stopping = (signal.SIGTERM, signal.SIGHUP) + (() if cli_owns_sigint else (signal.SIGINT,))

    def on_signal(signum: int, frame: object) -> None:
        stop.set()
        if in_cli.is_set():
            raise FabricStopped(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, on_signal) for sig in stopping}
    code = 0
    # Without a terminal, the CLI reads through StoppableStdin: the C-level signal handler
    # writes to the wake pipe from whichever thread the kernel chose, and the CLI sees end
    # of input even when the main thread's read was never interrupted.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    previous_wakeup = signal.set_wakeup_fd(wake_w)
    try:
        with fabric:
            assert fabric.live is not None
            _print_ready(fabric, a)
            if a.cli:
                from mininet.cli import CLI
                from mininet.log import setLogLevel

                class PipedCLI(CLI):  # reads self.stdin.readline(), not input()
                    use_rawinput = False

                setLogLevel("info")  # the CLI's commands (nodes, net, pingall) print at info
                in_cli.set()
                with contextlib.suppress(FabricStopped):
                    if stop.is_set():
                        pass
                    elif cli_owns_sigint:
                        CLI(fabric.net)
                    else:
                        PipedCLI(fabric.net, stdin=StoppableStdin(sys.stdin, wake_r))
                in_cli.clear()
            else:
                print("[fabric] Ctrl-C stops it", flush=True)
                if isinstance(fabric, ClusterFabric):
                    code = _watch_machines(fabric, stop, a.duration)
                else:
                    stop.wait(a.duration)
        print(f"[fabric] torn down in {fabric.timings.teardown_s:.1f} s")
        if code:
            return code
    finally:
        signal.set_wakeup_fd(previous_wakeup)
        os.close(wake_r)
        os.close(wake_w)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def _watch_machines(fabric: ClusterFabric, stop: threading.Event, duration: float | None) -> int:
    """Wait as ``stop.wait(duration)`` does, and end (1) when a machine's part ends on its own:
    the rest of the fabric is no use without it, and comes down."""
    deadline = None if duration is None else time.monotonic() + duration
    while not stop.wait(1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))):
        lost = fabric.lost()
        if lost:
            print(f"[fabric] machine {', '.join(lost)} lost: its part ended; the fabric comes down", flush=True)
            return 1
        if deadline is not None and time.monotonic() >= deadline:
            break
    return 0


def _print_ready(fabric: EmulatedFabric | ClusterFabric, a: argparse.Namespace) -> None:
    """The switches and every way into them: CLI, hosts, shell, Thrift, logs and pcaps."""
    live = fabric.live
    assert live is not None
    access = fabric.access()
    rows = [{"switch": s.name, "role": s.role, "device_id": s.device_id, "grpc": s.grpc,
             **({"thrift": access.thrift_ports.get(s.name, "-")} if access.target == "bmv2" else {})}
            for s in live.switches]
    print(f"[fabric] {live.name} up in {fabric.timings.bring_up_s:.1f} s ({a.target} target, "
          f"{'no rules' if a.no_rules else 'rules installed'})")
    print(format_table(rows))
    for rep in fabric.clock_reports:
        print(f"[fabric] schedule on {rep.switch}: offset {rep.offset_us} us, skew bound "
              f"{rep.skew_bound_us:.0f} us, {rep.entries} entries")
    if not rows:
        print("[fabric] no switches")
    else:
        first = rows[0]["switch"]
        print(f"[fabric] published {current_fabric_path()}: try `mlfabric rules show {first}`")
        print(f"[fabric] P4Runtime shell on a switch: `mlfabric shell {first}`")
        note = access.thrift_note()
        if note:
            print(f"[fabric] thrift: {note}")
        else:
            print(f"[fabric] thrift: `mlfabric bmv2-cli {first}` (simple_switch_CLI --thrift-port "
                  f"{access.thrift_ports[first]})")
    if isinstance(fabric, ClusterFabric):
        print(f"[fabric] across {placement_text(fabric.placement, fabric.machines)}; each machine's log: "
              f"{fabric.run_dir}/machine-NAME.log")
    if live.hosts:
        print(f"[fabric] hosts: `mlfabric host list`; inside one: `mlfabric host exec {live.hosts[0].name} -- CMD`")
    print(f"[fabric] run folder {access.run_dir}: logs/SWITCH.log (level {access.log_level}"
          f"{'' if access.log_level in ('trace', 'debug') else '; --log-level debug logs every packet'}), "
          + ("pcaps/SWITCH-ethN_in.pcap and _out.pcap" if access.pcap_dir else "no pcaps (--pcap writes them)"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
