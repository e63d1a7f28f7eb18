"""``mlfabric shell SWITCH`` and ``mlfabric bmv2-cli SWITCH``: an interactive way into one
switch of the running fabric, by name.

``shell`` opens p4runtime-shell on the switch's gRPC address and device id. It gives no
``--config``, so the shell reads the P4Info of the program the switch runs
(GetForwardingPipelineConfig) and never pushes a pipeline. Its election id defaults to
``0,0``: below the controller's (1), so it never takes mastership from a controller that is
connected (a reconfiguration in progress goes on); while none is, the shell is primary and
can write. ``bmv2-cli`` runs BMv2's simple_switch_CLI on the switch's Thrift port (see
:mod:`controller.bmv2_thrift`). Both pass what follows ``--`` to the tool, and replace this
process with it, so that Ctrl-C and the terminal belong to the tool.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from controller.errors import ConfigError, EmulationError, ToolchainMissing

__all__ = ["election_id", "register", "require_module", "shell_command"]

#: below the controller's election id 1: the shell never takes over from a connected controller
SHELL_ELECTION_ID = "0,0"


def election_id(text: str) -> str:
    """p4runtime-shell's ``HI,LO`` election id, checked.

    >>> election_id("0,0")
    '0,0'
    >>> election_id("7")
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: mlfabric shell: --election-id: expected HI,LO (two integers, e.g. 0,0) (got '7')
    """
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ConfigError("mlfabric shell", "--election-id", text, "expected HI,LO (two integers, e.g. 0,0)")
    return ",".join(p.strip() for p in parts)


def shell_command(address: str, device_id: int, election: str, extra: Sequence[str] = ()) -> list[str]:
    """The p4runtime-shell command line that attaches to a switch without pushing a pipeline.

    >>> shell_command("127.0.0.1:50001", 2, "0,0", ["-v"])[1:]
    ['-m', 'p4runtime_sh', '--grpc-addr', '127.0.0.1:50001', '--device-id', '2', '--election-id', '0,0', '-v']
    """
    return [sys.executable, "-m", "p4runtime_sh", "--grpc-addr", address, "--device-id", str(device_id),
            "--election-id", election, *extra]


def _program_on(address: str, device_id: int, name: str) -> str:
    """The switch answers and runs a program (whose P4Info the shell will read); a one-line
    error otherwise."""
    import grpc
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

    from controller.p4runtime.client import CHANNEL_OPTIONS
    from controller.readiness import tcp_open

    host, _, port = address.rpartition(":")
    if not (port.isdigit() and tcp_open(host or "127.0.0.1", int(port))):
        raise EmulationError(f"switch {name} at {address} does not answer: is its fabric still running? "
                             "(mlfabric fabric status)")
    channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    try:
        try:
            grpc.channel_ready_future(channel).result(timeout=3)
        except grpc.FutureTimeoutError:
            raise EmulationError(f"switch {name} at {address} does not answer: is its fabric still running? "
                                 "(mlfabric fabric status)") from None
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=device_id, response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        try:
            config = p4runtime_pb2_grpc.P4RuntimeStub(channel).GetForwardingPipelineConfig(req, timeout=5).config
        except grpc.RpcError as exc:
            raise EmulationError(f"switch {name} (device {device_id} at {address}) gives no pipeline: "
                                 f"{exc.code().name}: {exc.details()}") from None
    finally:
        channel.close()
    if not config.p4info.tables and not config.p4info.actions:
        raise EmulationError(f"switch {name} runs no P4 program yet: the shell reads the P4Info from the switch "
                             "(load one with mlfabric pipeline load)")
    return f"{len(config.p4info.tables)} tables"


def require_module(name: str, problem: str) -> None:
    """ToolchainMissing(``problem``) unless module ``name`` can be imported here."""
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent that fails to import, or a module without a spec
        found = False
    if not found:
        raise ToolchainMissing(problem)


def _exec(argv: Sequence[str], env: dict[str, str] | None = None) -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], list(argv), dict(os.environ) if env is None else env)
    return 0  # not reached


def _shell(args: argparse.Namespace) -> int:
    from controller.cli.switch_args import resolve

    extra = _own_options(args, _shell_options, "mlfabric shell SWITCH")
    election = election_id(args.election_id)
    require_module("p4runtime_sh", f"p4runtime-shell is not installed in {sys.prefix}: make setup installs it "
                                   "(pip install p4runtime-shell==0.0.6)")
    address, device_id = resolve(args)
    tables = _program_on(address, device_id, args.switch)
    print(f"mlfabric: p4runtime-shell on {args.switch} ({address}, device {device_id}, {tables}; P4Info read "
          f"from the switch, pipeline untouched), election id {election}"
          + (": reads always, writes while no controller is connected" if election == SHELL_ELECTION_ID else ""),
          file=sys.stderr)
    return _exec(shell_command(address, device_id, election, extra))


def _bmv2_cli(args: argparse.Namespace) -> int:
    from controller.bmv2_thrift import simple_switch_cli
    from controller.cli.switch_args import topology_path
    from controller.live_fabric import FabricAccess
    from controller.readiness import tcp_open
    from controller.topology import load_topology

    extra = _own_options(args, _bmv2_cli_options, "mlfabric bmv2-cli SWITCH")
    path = topology_path(args.topology, f"switch {args.switch!r}")
    topo = load_topology(path)
    names = [s.name for s in topo.switches]
    if args.switch not in names:
        raise ConfigError(str(path), "switch", args.switch, f"is not a switch of this fabric ({', '.join(names[:20])})")
    access = FabricAccess.from_params(topo.params, str(path))
    if access.target is None:
        raise EmulationError(f"{path} was not published by a running fabric (mlfabric fabric up): it has no Thrift ports")
    note = access.thrift_note()
    if note:
        raise EmulationError(f"switch {args.switch}: {note}")
    port = access.thrift_ports.get(args.switch)
    if port is None:
        raise EmulationError(f"switch {args.switch} was given no Thrift port")
    if not tcp_open("127.0.0.1", port):
        raise EmulationError(f"switch {args.switch}'s Thrift port {port} does not answer: is its fabric still "
                             "running? (mlfabric fabric status)")
    cmd = simple_switch_cli(port, extra)
    return _exec(cmd.argv, cmd.env())


def _shell_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topology", type=Path,
                   help="topology with gRPC addresses (default: $MLFABRIC_TOPOLOGY or the running fabric's)")
    p.add_argument("--device-id", type=int, help="device id when SWITCH is HOST:PORT (default 1)")
    p.add_argument("--election-id", metavar="HI,LO",
                   help="default 0,0: never takes over from the controller (whose id is 1); writes work while "
                        "no controller is connected. A higher id takes over writes while the shell is open")


def _bmv2_cli_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topology", type=Path, help="the published fabric (default: the running one)")


def _own_options(args: argparse.Namespace, add: Callable[[argparse.ArgumentParser], None], prog: str) -> list[str]:
    """What follows SWITCH: this command's own options (parsed into ``args``), and the tool's,
    returned: those after ``--`` and any this command does not know. (A REMAINDER positional
    takes them all, and argparse may or may not have kept the ``--``.)"""
    rest = list(args.rest)
    own, after = (rest[:rest.index("--")], rest[rest.index("--") + 1:]) if "--" in rest else (rest, [])
    mine = argparse.ArgumentParser(prog=prog, argument_default=argparse.SUPPRESS, allow_abbrev=False)
    add(mine)
    _, unknown = mine.parse_known_args(own, namespace=args)
    return [*unknown, *after]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "shell", help="p4runtime-shell on a switch of the running fabric, attached to the program it runs",
        epilog="examples: mlfabric shell rail0\n"
               "          echo 'print(len(list(table_entry[\"ipv4_lpm\"].read())))' | mlfabric shell rail0\n"
               "          mlfabric shell rail0 -- --verbose      # options after -- go to p4runtime-shell",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("switch", help="switch name (looked up in the topology) or HOST:PORT")
    _shell_options(p)
    p.add_argument("rest", nargs=argparse.REMAINDER, help="-- then p4runtime-shell's own options")
    p.set_defaults(func=_shell, topology=None, device_id=None, election_id=SHELL_ELECTION_ID)

    b = sub.add_parser(
        "bmv2-cli", help="BMv2's simple_switch_CLI (Thrift) on a switch of a running --target bmv2 fabric",
        epilog="examples: mlfabric bmv2-cli rail0\n"
               "          echo show_ports | mlfabric bmv2-cli rail0\n"
               "          mlfabric bmv2-cli rail0 -- --pre SimplePreLAG   # options after -- go to simple_switch_CLI",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("switch", help="switch name in the running fabric")
    _bmv2_cli_options(b)
    b.add_argument("rest", nargs=argparse.REMAINDER, help="-- then simple_switch_CLI's own options")
    b.set_defaults(func=_bmv2_cli, topology=None)
