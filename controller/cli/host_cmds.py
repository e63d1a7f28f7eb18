"""``mlfabric host list|exec``: the hosts of the running emulated fabric, and a command run
inside one of them (its network namespace), as p4-utils' ``mx HOST`` does."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from controller.cli.output import add_json_flag, emit, format_table
from controller.cluster.ssh import cluster_of, ssh_argv
from controller.errors import ConfigError, EmulationError
from controller.topology.model import Topology

__all__ = ["register"]


def _running(args: argparse.Namespace) -> Topology:
    from controller.cli.switch_args import topology_path
    from controller.topology import load_topology

    return load_topology(topology_path(args.topology, f"host {args.host_command}"))


def _pid(topo: Topology, host: str) -> int:
    pids = topo.params.get("host_pids") or {}
    if not isinstance(pids, dict) or not pids:
        raise EmulationError(f"{topo.name} records no host processes: is it a running emulation (mlfabric fabric up)?")
    if host not in pids:
        raise ConfigError(topo.name, "host", host, f"is not a host of this fabric ({', '.join(sorted(pids))})")
    pid = int(pids[host])
    if not Path(f"/proc/{pid}").exists():
        raise EmulationError(f"host {host}'s shell (pid {pid}) is gone: the fabric is not running any more")
    return pid


def _list(args: argparse.Namespace) -> int:
    topo = _running(args)
    pids = topo.params.get("host_pids") or {}
    cluster = cluster_of(topo.params, topo.name)
    machine_of = cluster[1] if cluster else {}
    rows = [{"host": h.name, **({"machine": machine_of.get(h.name, "-")} if cluster else {}),
             "pid": pids.get(h.name, "-") if isinstance(pids, dict) else "-",
             "nics": " ".join(f"{n.name}={n.ip}" + (f" (rail {n.rail})" if n.rail is not None else "")
                              for n in h.nics)} for h in topo.hosts]
    emit({"topology": topo.name, "hosts": rows}, as_json=args.json,
         text=f"{topo.name}: {len(rows)} hosts\n" + format_table(rows)
         + "\nrun a command in one: mlfabric host exec HOST -- CMD...")
    return 0


def _exec(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise ConfigError("<host exec>", "CMD", None, "give the command to run after --, e.g. -- ping -c1 10.0.1.0")
    topo = _running(args)
    cluster = cluster_of(topo.params, topo.name)
    if cluster is not None:  # a fabric across machines: the host's machine, over SSH
        machines, machine_of = cluster
        raw = topo.params.get("host_pids")
        pids: dict[str, int] = raw if isinstance(raw, dict) else {}
        if args.host not in pids or args.host not in machine_of:
            raise ConfigError(topo.name, "host", args.host, f"is not a host of this fabric ({', '.join(sorted(pids))})")
        machine = machines.get(machine_of[args.host])
        sys.stdout.flush()
        return subprocess.call(ssh_argv(machine, machines, ["nsenter", "--target", str(pids[args.host]), "--net",
                                                            "--", *command], tty=sys.stdin.isatty()))
    if os.geteuid() != 0:
        raise EmulationError("entering a host's network namespace needs root")
    pid = _pid(topo, args.host)
    sys.stdout.flush()
    return subprocess.call(["nsenter", "--target", str(pid), "--net", "--", *command])


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("host", help="the running fabric's hosts: list them, run a command in one")
    hsub = p.add_subparsers(dest="host_command", metavar="ACTION", required=True)
    ls = hsub.add_parser("list", help="hosts with their NICs, addresses, rails and shell pids",
                         epilog="example: mlfabric host list")
    ls.add_argument("--topology", type=Path, default=None, help="topology with host pids (default: the running one)")
    add_json_flag(ls)
    ls.set_defaults(func=_list)
    ex = hsub.add_parser("exec", help="run a command inside a host (its network namespace)",
                         epilog="examples: mlfabric host exec s0 -- ping -c1 10.0.1.1\n"
                                "          mlfabric host exec h0_0 -- ip route",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    ex.add_argument("host", help="host name, as in mlfabric host list")
    ex.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command and its arguments")
    ex.add_argument("--topology", type=Path, default=None, help="topology with host pids (default: the running one)")
    ex.set_defaults(func=_exec)
