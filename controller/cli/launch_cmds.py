"""``mlfabric launch``: a user's job, one process per emulated GPU, on an emulated fabric.

On the fabric ``mlfabric fabric up`` runs (no TOPOLOGY, or the TOPOLOGY it was brought up
from), or on one it brings up itself for the job's duration. Plain (every rank started with
torchrun's variables), ``--mpi`` (Open MPI's ``mpirun`` across the hosts) or ``--torch``
(plain, after checking that torch is importable; ``torch.distributed`` with gloo then
reads ``MASTER_ADDR``/``MASTER_PORT`` and ``GLOO_SOCKET_IFNAME``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from controller.errors import ConfigError, EmulationError
from controller.launch.command import MAX_RANKS_PER_HOST, resolve_command
from controller.launch.hosts import HostAccess
from controller.launch.mpirun import DEFAULT_IDLE_US
from controller.launch.placement import DEFAULT_MASTER_PORT, ORDERS, Placement, place
from controller.launch.rails import RailDown, RailWatch, down_rails
from controller.launch.runner import TAG, LaunchResult, RankProcesses, kill_tagged
from controller.topology.model import Topology

__all__ = ["register"]


def _say(msg: str) -> None:
    print(f"[launch] {msg}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _fabric(args: argparse.Namespace) -> Iterator[Topology]:
    """The live topology (with host pids) the job runs on, for the ``with`` body."""
    from controller.cli.running_fabric import running_fabric, same_switches
    from controller.topology import load_topology

    running = running_fabric()
    if args.topology is None:
        if running is None:
            raise EmulationError("no fabric is running: give a TOPOLOGY to bring one up for the job, "
                                 "or start one with mlfabric fabric up")
        _say(f"on the running fabric {running.name}")
        yield running
        return
    topo = load_topology(args.topology)
    if running is not None and same_switches(topo, running):
        _say(f"on the running fabric {running.name}")
        yield running
        return
    import tempfile

    from controller.emulation import load_emulation_module

    with tempfile.TemporaryDirectory(prefix="mlfabric-launch-") as tmp:
        if args.cluster is not None:
            from controller.cluster import load_machines

            cluster_fabric = load_emulation_module("cluster_fabric")
            fab = cluster_fabric.ClusterFabric(topo, load_machines(args.cluster), target=args.target,
                                               engine=args.engine, publish=False, log_dir=Path(tmp) / "logs",
                                               run_dir=Path(tmp), say=_say)
            where = f", across {len(set(fab.placement.machine_of.values()))} machines"
        else:
            fabric_net = load_emulation_module("fabric_net")
            fabric_net.check_free(topo)
            fab = fabric_net.EmulatedFabric(topo, target=args.target, engine=args.engine, publish=False,
                                            log_dir=Path(tmp) / "logs")
            where = ""
        with fab:
            _say(f"brought up {topo.name} ({args.target} target{where}) in {fab.timings.bring_up_s:.1f} s; "
                 "it comes down when the job ends")
            yield fab.live


def _plan_first(args: argparse.Namespace, hosts: list[str] | None) -> None:
    """Place the job on the topology it will run on before any fabric comes up: a bad
    ``--hosts``, ``--master-port`` or ``--ranks-per-host`` is refused in one line, not after
    a bring-up."""
    from controller.cli.running_fabric import running_fabric
    from controller.topology import load_topology

    topo = load_topology(args.topology) if args.topology is not None else running_fabric()
    if topo is not None:
        place(topo, gpus=args.gpus, ranks_per_host=args.ranks_per_host, hosts=hosts, order=args.rank_order,
              master_port=args.master_port)


def _describe(p: Placement) -> str:
    by_host: dict[str, list[Any]] = {}
    for r in p.ranks:
        by_host.setdefault(r.host, []).append(r)
    parts = []
    for host, rs in by_host.items():
        rails = ",".join(str(r.rail) for r in rs if r.rail is not None)
        parts.append(f"{host}: ranks {','.join(str(r.rank) for r in rs)}" + (f" (rails {rails})" if rails else ""))
    return f"{p.world} ranks; " + "; ".join(parts)


def _launch(args: argparse.Namespace) -> int:
    args, command = _split(args)
    if not command:
        raise ConfigError("<launch>", "CMD", None, "give the job's command after --, e.g. -- python my_job.py")
    if args.mpi and args.torch:
        raise ConfigError("<launch>", "--mpi", True, "--mpi and --torch are two ways to start ranks: pick one")
    if args.mpi_idle_us < 0:
        raise ConfigError("<launch>", "--mpi-idle-us", args.mpi_idle_us, "must be >= 0 (0: spin)")
    if args.torch and importlib.util.find_spec("torch") is None:
        raise EmulationError("torch is not importable in this environment: install it into the venv "
                             "(.venv/bin/pip install torch; see docs/launch.md) or launch without --torch")
    if args.ranks_per_host is not None and args.ranks_per_host > MAX_RANKS_PER_HOST:
        raise ConfigError("<launch>", "--ranks-per-host", args.ranks_per_host,
                          f"at most {MAX_RANKS_PER_HOST} ranks per host (each is a process)")
    # the program made absolute before mpirun or a namespace sees it (Open MPI's daemons put
    # their own prefix first on PATH), python/python3 the interpreter mlfabric runs under
    command = resolve_command(command, mpi=args.mpi, torch=args.torch)
    hosts = [h for h in args.hosts.split(",") if h] if args.hosts else None
    _plan_first(args, hosts)
    if os.geteuid() != 0:
        raise EmulationError("entering the hosts' network namespaces needs root")
    launch_id = uuid.uuid4().hex
    from controller.experiments.results import interrupt_on_signals, stopped_by

    result: LaunchResult | None = None
    try:
        with interrupt_on_signals(), _fabric(args) as live:
            placement = place(live, gpus=args.gpus, ranks_per_host=args.ranks_per_host, hosts=hosts,
                              order=args.rank_order, master_port=args.master_port)
            pids = HostAccess.of(live)  # on a fabric across machines, each host's machine too
            _say(_describe(placement))
            down = down_rails(live, placement)
            if down:
                raise EmulationError(f"{'; '.join(d.text() for d in down)}: the job was not started")

            def rail_down(down: Sequence[RailDown]) -> None:
                _say(f"{'; '.join(d.text() for d in down)}: stopping the job")
                kill_tagged(launch_id)

            try:
                with RailWatch(live, placement, rail_down) as watch:
                    if args.mpi:
                        from controller.launch.mpirun import run_mpirun

                        result = run_mpirun(placement, command, pids, launch_id=launch_id, idle_us=args.mpi_idle_us)
                    else:
                        with RankProcesses(placement, command, pids, extra_env={TAG: launch_id}) as ranks:
                            result = ranks.wait()
            finally:
                left = kill_tagged(launch_id)
                if left:
                    _say(f"stopped {len(left)} process(es) the job left behind")
    except KeyboardInterrupt as exc:
        kill_tagged(launch_id)
        _say(f"stopped by {stopped_by(exc)}: every rank stopped, the hosts as they were")
        return 130
    assert result is not None
    if watch.down:
        _say(f"the job failed: {'; '.join(d.text() for d in watch.down)}")
        return result.exit_code or 1
    if result.failed_rank is not None:
        slot = placement.ranks[result.failed_rank]
        _say(f"rank {result.failed_rank} (on {slot.host}, {slot.ifname}) failed with exit code "
             f"{result.codes[result.failed_rank]}; the other ranks were stopped")
    elif result.exit_code:
        _say(f"the job failed (exit code {result.exit_code})")
    else:
        _say(f"all {placement.world} ranks exited 0")
    return result.exit_code


def _add_options(p: argparse.ArgumentParser) -> None:
    how = p.add_mutually_exclusive_group()
    how.add_argument("--gpus", action="store_true", default=None,
                     help="one rank per GPU, GPU g on rail g (the default where hosts have GPUs or rails)")
    how.add_argument("--ranks-per-host", type=int, default=None, help="N ranks per host instead")
    p.add_argument("--hosts", default=None, help="comma-separated hosts to use (default: all)")
    p.add_argument("--rank-order", choices=ORDERS, default=None,
                   help="number ranks server by server (default, as mpirun and torchrun do) or rail by rail")
    p.add_argument("--master-port", type=int, default=None, help=f"MASTER_PORT (default {DEFAULT_MASTER_PORT})")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--mpi", action="store_true", default=None, help="start the ranks with Open MPI's mpirun")
    mode.add_argument("--torch", action="store_true", default=None,
                      help="check torch is importable; gloo reads the variables")
    p.add_argument("--mpi-idle-us", type=int, default=None, metavar="US",
                   help=f"with --mpi, a waiting rank sleeps US microseconds between polls (default {DEFAULT_IDLE_US}); "
                        "0 spins as Open MPI does, which on a machine with fewer cores than ranks takes the cores "
                        "the switches and the busy ranks need")
    p.add_argument("--target", choices=("python", "bmv2"), default=None,
                   help="for a fabric launch brings up (default python)")
    p.add_argument("--engine", choices=("auto", "native", "python"), default=None,
                   help="the Python target's packet engine, for a fabric launch brings up")
    p.add_argument("--cluster", type=Path, default=None, metavar="MACHINES",
                   help="bring the fabric up across the machines of this file (docs/cluster.md); a running fabric "
                        "across machines needs nothing: its ranks start on their machines")


_DEFAULTS = {"gpus": False, "ranks_per_host": None, "hosts": "", "rank_order": "server",
             "master_port": DEFAULT_MASTER_PORT, "mpi": False, "torch": False, "mpi_idle_us": DEFAULT_IDLE_US, "target": "python", "engine": None, "cluster": None}


def _split(args: argparse.Namespace) -> tuple[argparse.Namespace, list[str]]:
    """``[OPTIONS] [TOPOLOGY] [OPTIONS] -- CMD...``: the options (wherever they stood before
    ``--``), the topology and the command.

    >>> a, cmd = _split(argparse.Namespace(rest=["t.yaml", "--mpi", "--", "python", "j.py"], **dict.fromkeys(_DEFAULTS)))
    >>> str(a.topology), a.mpi, a.rank_order, cmd
    ('t.yaml', True, 'server', ['python', 'j.py'])
    """
    rest = list(args.rest)
    if "--" not in rest:
        raise ConfigError("<launch>", "CMD", None, "give the job's command after --, e.g. -- python my_job.py")
    i = rest.index("--")
    head, command = rest[:i], rest[i + 1:]
    late = argparse.ArgumentParser(prog="mlfabric launch", add_help=False)
    _add_options(late)
    late.add_argument("topology", nargs="?", type=Path, default=None)
    parsed = late.parse_args(head)
    merged = {k: (getattr(parsed, k) if getattr(parsed, k) is not None else getattr(args, k, None)) for k in _DEFAULTS}
    merged = {k: (v if v is not None else _DEFAULTS[k]) for k, v in merged.items()}
    return argparse.Namespace(topology=parsed.topology, **merged), command


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "launch", help="run your own job on an emulated fabric: one process per GPU, rail-aligned (plain, Open MPI, torch)",
        usage="mlfabric launch [OPTIONS] [TOPOLOGY] -- CMD [ARGS...]",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="TOPOLOGY: a topology file (default: the running fabric; a file no fabric runs is brought up for the job)\n"
               "examples:\n"
               "  mlfabric launch topologies/rail-only-4x4.yaml -- python3 my_job.py\n"
               "  mlfabric launch --mpi topologies/rail-only-4x4.yaml -- python3 -m workloads.mpi_collectives\n"
               "  mlfabric launch --ranks-per-host 1 --hosts s0,s1 -- hostname   # on the running fabric\n"
               "every rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR, MASTER_PORT,\n"
               "GLOO_SOCKET_IFNAME and MLFABRIC_HOST, MLFABRIC_RAIL, MLFABRIC_GPU, MLFABRIC_NIC, MLFABRIC_NIC_ADDR",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_options(p)
    p.add_argument("rest", nargs=argparse.REMAINDER, help="[TOPOLOGY] -- the job's command and its arguments")
    p.set_defaults(func=_launch)
