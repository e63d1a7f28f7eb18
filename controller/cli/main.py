"""The ``mlfabric`` command line: one subcommand per job, each in its own module.

Every subcommand prints a one-line reason and exits non-zero on bad input; ``--json``
switches the output to JSON where a subcommand has output worth scripting.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from controller.cli.help_text import ExperimentOptionsHelp, add_group_examples
from controller.cli.output import add_json_flag
from controller.errors import MlfabricError
from mlfabric_base.grpc_transport import tune_grpc
from pybmv2.errors import TargetError

__all__ = ["main"]

log = logging.getLogger("mlfabric")

Handler = Callable[[argparse.Namespace], int]


def _doctor(args: argparse.Namespace) -> int:
    from controller.doctor import collect, render

    report = collect()
    print(json.dumps(report.as_dict(), indent=2) if args.json else render(report))
    return 0 if report.python_target_usable else 1


def _p4_compile(args: argparse.Namespace) -> int:
    from controller.p4build import compile_all

    for art in compile_all():
        print(f"compiled {art.name}: {art.json} {art.p4info}")
    return 0


def _p4_check(args: argparse.Namespace) -> int:
    from controller.p4build import PROGRAM_DIRS, stale_sources

    stale = [s for d in PROGRAM_DIRS for s in stale_sources(d)]
    for item in stale:
        print(f"stale: {item}")
    if not stale:
        print("every compiled pipeline matches its sources")
    return 1 if stale else 0


def _report(args: argparse.Namespace) -> int:
    from controller.errors import ConfigError
    from controller.experiments.html_report import is_results_folder, write_index, write_listing

    for folder in args.folders:
        if not folder.is_dir():
            raise ConfigError("mlfabric report", "FOLDER", str(folder), "not a directory: give a results folder")
    for folder in args.folders:  # one run's folder gets its page; a folder of runs, a listing too
        print(write_index(folder) if is_results_folder(folder) else write_listing(folder))
    return 0


def _clean_net(args: argparse.Namespace) -> int:
    from controller.cli.running_fabric import current_fabric_path, owner_running
    from controller.netstate import clean_all, live_records

    kept = [] if args.force else live_records()
    removed = clean_all(only_dead_owners=not args.force)
    published = current_fabric_path()
    if published.exists() and (args.force or not owner_running(published)):
        published.unlink()
        removed.append(f"stale published fabric {published}")
    for item in removed:
        print(f"removed {item}")
    for name, pid in kept:
        print(f"kept {name}: its run (pid {pid}) is alive; stop it, or clean-net --force")
    if not removed and not kept:
        print("nothing to clean")
    return 0


def _smoke(args: argparse.Namespace) -> int:
    from controller.emulation import run_emulation_module

    return run_emulation_module("smoke_run", ["--target", args.target])


def _passed_on(rest: list[str]) -> list[str]:
    """The options a subcommand hands to an emulation module, without the first ``--``
    (``fabric up TOPOLOGY -- --help`` and ``fabric up -- TOPOLOGY`` both work).

    >>> _passed_on(["t.yaml", "--", "--help"])
    ['t.yaml', '--help']
    """
    if "--" in rest:
        i = rest.index("--")
        return rest[:i] + rest[i + 1:]
    return rest


EXPERIMENT_MODULES = {"rail-only": "rail_experiment", "checkmate": "checkmate_experiment",
                      "rotor": "rotor_experiment", "tdtcp": "tdtcp_experiment", "topoopt": "topoopt_experiment",
                      "collectives": "collectives_experiment", "aggregation": "aggregation_experiment"}


def _experiment(args: argparse.Namespace) -> int:
    from controller.dashboard.beside import dashboard_beside
    from controller.emulation import run_emulation_module

    argv = _passed_on(args.rest)
    with dashboard_beside(argv, f"mlfabric experiment run {args.name}"):
        return run_emulation_module(EXPERIMENT_MODULES[args.name], argv)


def _experiment_parser(name: str) -> Callable[[], argparse.ArgumentParser]:
    def build() -> argparse.ArgumentParser:
        from controller.emulation import load_emulation_module

        parser: argparse.ArgumentParser = load_emulation_module(EXPERIMENT_MODULES[name]).build_parser()
        return parser
    return build


def _fabric_up(args: argparse.Namespace) -> int:
    from controller.dashboard.beside import dashboard_beside
    from controller.emulation import run_emulation_module

    argv = _passed_on(args.rest)
    with dashboard_beside(argv, "mlfabric fabric up"):
        return run_emulation_module("fabric_up", argv)


def _fabric_status(args: argparse.Namespace) -> int:
    from controller.cli.output import emit, format_table
    from controller.cli.running_fabric import current_fabric_path, owner_running
    from controller.cluster.ssh import cluster_of
    from controller.live_fabric import FabricAccess
    from controller.readiness import tcp_open
    from controller.topology import load_topology

    path = current_fabric_path()
    if not path.exists():
        emit({"running": False}, as_json=args.json, text="no emulated fabric is running")
        return 1
    topo = load_topology(path)
    access = FabricAccess.from_params(topo.params, str(path))
    cluster = cluster_of(topo.params, str(path))
    rows = []
    for s in topo.switches:
        host, _, port = (s.grpc or ":0").rpartition(":")
        row: dict[str, object] = {"switch": s.name, "role": s.role,
                                  **({"machine": cluster[1].get(s.name, "-")} if cluster else {}), "grpc": s.grpc,
                                  "reachable": tcp_open(host or "127.0.0.1", int(port or 0))}
        if access.target == "bmv2":
            thrift = access.thrift_ports.get(s.name)
            row["thrift"] = thrift if thrift is not None else "-"
            row["thrift_answers"] = thrift is not None and tcp_open("127.0.0.1", thrift)
        rows.append(row)
    alive = owner_running(path)
    healthy = alive and all(r["reachable"] for r in rows)
    state = ("running" if healthy else "running, but switches do not answer" if alive
             else "stale: the run that published it is gone (mlfabric clean-net removes it)")
    lines = [f"{topo.name} ({topo.kind}, {access.target or 'unknown'} target), published in {path}: {state}",
             format_table(rows)]
    if access.run_dir is not None:
        lines.append(f"run folder: {access.run_dir}")
    if access.log_dir is not None:
        lines.append(f"logs: {access.log_dir}/SWITCH.log (level {access.log_level})")
    lines.append(f"pcaps: {access.pcap_dir}/SWITCH-ethN_in.pcap, _out.pcap" if access.pcap_dir
                 else "pcaps: none (fabric up --pcap writes them)")
    if access.target is not None:
        lines.append(f"thrift: {access.thrift_note() or 'mlfabric bmv2-cli SWITCH'}")
        lines.append("P4Runtime shell: mlfabric shell SWITCH")
    data = {"running": alive, "healthy": healthy, "topology": topo.name, "switches": rows,
            **access.to_params()}
    emit(data, as_json=args.json, text="\n".join(lines))
    return 0 if healthy else 1


def _model(args: argparse.Namespace) -> int:
    from controller.experiments.results import new_results_dir

    if args.name == "topoopt":
        from controller.models.topoopt_report import write_topoopt_report

        out = args.out or new_results_dir("topoopt-model")
        out.mkdir(parents=True, exist_ok=True)
        written = write_topoopt_report(out)
        for name, path in written.items():
            print(f"{name}: {path}")
        print()
        print(written["table"].read_text())
        return 0
    from controller.models.report import write_report

    out = args.out or new_results_dir("rail-only-model")
    out.mkdir(parents=True, exist_ok=True)
    paths = write_report(out)
    for name, path in paths.items():
        print(f"{name}: {path}")
    table = paths.get("cost_table")
    if table is not None and Path(table).suffix == ".txt":
        print()
        print(Path(table).read_text())
    return 0


QUICK_START = """\
quick start (root; each command's --help has examples):
  mlfabric doctor                                       what this machine can run
  mlfabric experiment run rail-only                     the main experiment: table, plots, CSV
  mlfabric fabric up topologies/rail-only-4x4.yaml      a fabric to work with, until Ctrl-C
  mlfabric host exec s0 -- ping -c1 10.0.1.1            (another shell) s0 pings s1 on rail 0
  mlfabric rules show rail0 ipv4_lpm                    a switch's table, by switch name
  mlfabric counters rail0                               its counters
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mlfabric",
        description="Workload-aware ML networking on P4 switches: control plane and emulation.",
        epilog=QUICK_START,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "doctor", help="report toolchain, Mininet and qdiscs",
        epilog="example: mlfabric doctor --json",
    )
    add_json_flag(p)
    p.set_defaults(func=_doctor)

    p4 = sub.add_parser("p4", help="compile the P4 programs or check their artifacts")
    p4sub = p4.add_subparsers(dest="p4_command", metavar="ACTION", required=True)
    pc = p4sub.add_parser("compile", help="compile every program with p4c-bm2-ss",
                          epilog="example: mlfabric p4 compile")
    pc.set_defaults(func=_p4_compile)
    pk = p4sub.add_parser("check", help="list sources that no longer match the manifest",
                          epilog="example: mlfabric p4 check")
    pk.set_defaults(func=_p4_check)

    p = sub.add_parser(
        "clean-net", help="remove the namespaces, links and switch processes crashed runs left "
                          "(a run still alive is left alone unless --force)",
        epilog="example: mlfabric clean-net",
    )
    p.add_argument("--force", action="store_true", help="also tear down runs that are still alive")
    p.set_defaults(func=_clean_net)

    p = sub.add_parser(
        "report", help="write a results folder's index.html: verdicts, regime, plots, table and raw files in "
                       "one self-contained page (every experiment writes it; this rebuilds it); given a folder "
                       "of runs (results/), a page listing them with their verdicts",
        epilog="example: mlfabric report results/rail-only-20261128-132801; mlfabric report results",
    )
    p.add_argument("folders", nargs="+", type=Path, metavar="FOLDER", help="a results folder, or a folder of them")
    p.set_defaults(func=_report)

    p = sub.add_parser(
        "smoke", help="Mininet smoke run: pipeline, rules and a ping between two hosts",
        epilog="example: mlfabric smoke --target python",
    )
    p.add_argument("--target", choices=("python", "bmv2"), default="python", help="switch target (default: python)")
    p.set_defaults(func=_smoke)

    e = sub.add_parser("experiment", help="run an emulated experiment or its analytical model")
    esub = e.add_subparsers(dest="experiment_command", metavar="ACTION", required=True)
    er = esub.add_parser(
        "run", help="run an experiment in Mininet (root); options after the name go to it", add_help=False,
        epilog="examples: mlfabric experiment run rail-only\n"
               "          mlfabric experiment run rail-only --gpus 32 --rails 8 --iterations 5\n"
               "          mlfabric experiment run checkmate --repetitions 5 --mirror-loss 0.01\n"
               "          mlfabric experiment run collectives --sizes-kb 256 4096 --mca btl_tcp_eager_limit=8388608\n"
               "          mlfabric experiment run rotor --target bmv2 --slices-ms 16,32,64 --duty-cycles 0.8,0.5\n"
               "          mlfabric experiment run tdtcp --day-ms 20 --fast 16/500 --slow 2/2500\n"
               "          mlfabric experiment run topoopt --degrees 2,3,4 --jobs topologies/jobs/topoopt-transformer.yaml\n"
               "          mlfabric experiment run rail-only --help",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    er.add_argument("-h", "--help", action=ExperimentOptionsHelp,
                    parsers={name: _experiment_parser(name) for name in EXPERIMENT_MODULES})
    er.add_argument("name", choices=tuple(EXPERIMENT_MODULES), help="the experiment")
    er.add_argument("rest", nargs=argparse.REMAINDER, help="the experiment's own options (listed below)")
    er.set_defaults(func=_experiment)
    em = esub.add_parser("model", help="the analytical cost/power and iteration-time model, tables and plots",
                         epilog="example: mlfabric experiment model rail-only --out results/model")
    em.add_argument("name", choices=("rail-only", "topoopt"), help="whose model")
    em.add_argument("--out", type=Path, default=None, help="folder for the tables and plots (default: results/NAME-model-<time>)")
    em.set_defaults(func=_model)

    f = sub.add_parser("fabric", help="run an emulated fabric to use the CLI against (root)")
    fsub = f.add_subparsers(dest="fabric_command", metavar="ACTION", required=True)
    # every argument, --help included, goes to the fabric_up module: prefix '+' keeps argparse off them
    fu = fsub.add_parser(
        "up", help="build a topology in Mininet, install its rules, run until Ctrl-C", add_help=False, prefix_chars="+",
        epilog="examples: mlfabric fabric up topologies/rail-only-4x4.yaml\n"
               "          mlfabric fabric up topologies/rail-fat-tree-4x4.yaml --target bmv2 --cli\n"
               "          mlfabric fabric up --help",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    fu.add_argument("rest", nargs=argparse.REMAINDER, help="TOPOLOGY and the options of fabric up")
    fu.set_defaults(func=_fabric_up)
    fs = fsub.add_parser("status", help="the running fabric's switches and whether they answer",
                         epilog="example: mlfabric fabric status --json")
    add_json_flag(fs)
    fs.set_defaults(func=_fabric_status)

    from controller.cli import (
        aggregate_cmds,
        cluster_cmds,
        dashboard_cmds,
        debug_cmds,
        device_cmds,
        host_cmds,
        launch_cmds,
        mirror_cmds,
        reconfigure_cmds,
        rules_cmds,
        schedule_cmds,
        topology_cmds,
    )

    topology_cmds.register(sub)
    dashboard_cmds.register(sub)
    rules_cmds.register(sub)
    device_cmds.register(sub)
    mirror_cmds.register(sub)
    aggregate_cmds.register(sub)
    schedule_cmds.register(sub)
    reconfigure_cmds.register(sub)
    host_cmds.register(sub)
    launch_cmds.register(sub)
    cluster_cmds.register(sub)
    debug_cmds.register(sub)
    add_group_examples(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    tune_grpc()  # before any command imports grpc (mlfabric_base.grpc_transport)
    parser = build_parser()
    args = parser.parse_args(argv)
    # `kill -USR1 PID` prints every thread's stack to stderr: what a run that seems stuck is doing
    # (not where stderr is no file, as when a test captures it)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(levelname)s %(name)s: %(message)s",
    )
    handler: Handler = args.func
    try:
        return handler(args)
    except (MlfabricError, TargetError) as exc:
        return _fail(args, str(exc))
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):  # the reader went away (| head): not an error of ours
            _silence_stdout()
            return 0
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(args, f"{where}{exc.strerror or exc}")
    except KeyboardInterrupt:
        print("mlfabric: interrupted", file=sys.stderr)
        return 130


def _fail(args: argparse.Namespace, message: str) -> int:
    """One line on stderr; with ``--json``, also a JSON document on stdout."""
    print(f"mlfabric: error: {message}", file=sys.stderr)
    if getattr(args, "json", False):
        with contextlib.suppress(BrokenPipeError):
            print(json.dumps({"ok": False, "error": message}))
    return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush raises nothing."""
    import os

    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
