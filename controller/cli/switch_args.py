"""How CLI commands name a switch: by name in a topology, or by its gRPC address.

A switch name is looked up in ``--topology FILE``, else in ``$MLFABRIC_TOPOLOGY``, else in
the topology the running emulation published (``<state dir>/current-fabric.yaml``); a file
without gRPC addresses takes them from the running fabric brought up from it. A
``HOST:PORT`` is used as is, with ``--device-id`` (default 1).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from controller.cli.running_fabric import current_fabric_path, running_fabric, with_fabric_addresses
from controller.errors import MlfabricError
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.schema import P4Schema
from controller.topology import load_topology

__all__ = ["add_switch_arguments", "connect", "current_fabric_path", "remote_schema", "topology_path"]


def add_switch_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("switch", help="switch name (looked up in the topology) or HOST:PORT")
    p.add_argument("--topology", type=Path, default=None,
                   help="topology file naming the switch (default: $MLFABRIC_TOPOLOGY or the running emulation's); "
                        "without gRPC addresses, those of the fabric running from it")
    p.add_argument("--device-id", type=int, default=None, help="device id when SWITCH is HOST:PORT (default 1)")
    p.add_argument("--election-id", type=int, default=1, help="this controller's election id (default 1)")
    p.add_argument("--json", action="store_true", help="JSON output")


def topology_path(explicit: Path | None, what: str, hint: str = "--topology FILE") -> Path:
    """The topology file a command works on: ``explicit`` (``--topology``), else
    ``$MLFABRIC_TOPOLOGY``, else the running emulation's; a one-line error naming ``what``
    needed it when there is none."""
    if explicit is not None:
        return explicit
    env = os.environ.get("MLFABRIC_TOPOLOGY")
    if env:
        return Path(env)
    path = current_fabric_path()
    if not path.exists():
        raise MlfabricError(f"{what}: no --topology given and no emulation is running "
                            f"({path} does not exist); use {hint}")
    return path


def _topology_file(args: argparse.Namespace) -> Path:
    return topology_path(args.topology, f"switch {args.switch!r}", "HOST:PORT or --topology FILE")


def resolve(args: argparse.Namespace) -> tuple[str, int]:
    """(gRPC address, device id) of the switch the command names."""
    name = args.switch
    host, sep, port = name.rpartition(":")
    if sep and port.isdigit() and host:
        return name, args.device_id if args.device_id is not None else 1
    path = _topology_file(args)
    topo = load_topology(path)
    try:
        sw = topo.switch(name)
    except KeyError as exc:
        raise MlfabricError(f"unknown switch {name!r} in {path}; switches: {', '.join(s.name for s in topo.switches[:20])}") from exc
    if not sw.grpc:
        sw = with_fabric_addresses(topo, path, running_fabric()).switch(name)
    assert sw.grpc
    return sw.grpc, sw.device_id


def connect(args: argparse.Namespace) -> P4RuntimeClient:
    address, device_id = resolve(args)
    return P4RuntimeClient(address, device_id=device_id, election_id=args.election_id, timeout=10).connect(wait=5)


def remote_schema(client: P4RuntimeClient) -> P4Schema:
    """The P4Info of the pipeline the switch runs (so names work for any program)."""
    return P4Schema(client.get_pipeline("P4INFO_AND_COOKIE").p4info)
