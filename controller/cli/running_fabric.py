"""The fabric ``mlfabric fabric up`` runs, and the gRPC addresses a topology file takes from it.

``fabric up`` publishes its live topology (every switch with its gRPC address, and the pid
of the run) as ``<state dir>/current-fabric.yaml``. A topology file without addresses,
the very file the fabric was brought up from, takes them from there: fabric-wide commands
(``rules install|diff|sync``) then work on the file as they work on a switch name.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from controller.errors import MlfabricError
from controller.netstate import state_dir
from controller.topology import load_topology
from controller.topology.model import Topology

__all__ = ["current_fabric_path", "owner_running", "running_fabric", "same_switches", "with_fabric_addresses"]


def current_fabric_path() -> Path:
    """Where a running ``fabric up`` publishes its live topology."""
    return state_dir() / "current-fabric.yaml"


def owner_running(published: Path) -> bool:
    """Whether the process that published the fabric (``params.owner_pid``) still runs."""
    try:
        pid = int(load_topology(published).params.get("owner_pid") or 0)  # type: ignore[call-overload]
    except MlfabricError:
        return False
    return pid > 0 and pid != os.getpid() and Path(f"/proc/{pid}").exists()


def running_fabric() -> Topology | None:
    """The live topology of the fabric that runs now, or None (none published, or its run is gone)."""
    path = current_fabric_path()
    if not path.exists() or not owner_running(path):
        return None
    try:
        return load_topology(path)
    except MlfabricError:
        return None


def _switch_keys(topo: Topology) -> list[tuple[str, str, str, int]]:
    return sorted((s.name, str(s.role), s.program, s.device_id) for s in topo.switches)


def same_switches(a: Topology, b: Topology) -> bool:
    """Whether two topologies have the same switches (name, role, program, device id),
    whatever their gRPC addresses."""
    return _switch_keys(a) == _switch_keys(b)


def with_fabric_addresses(topo: Topology, path: Path | str, running: Topology | None) -> Topology:
    """``topo`` with every switch's gRPC address: its own, else the running fabric's.

    The running fabric lends its addresses only if it has the same switches (it was
    brought up from this topology); otherwise a one-line error says what is missing and
    how to fix it.
    """
    missing = [s.name for s in topo.switches if not s.grpc]
    if not missing:
        return topo
    if running is not None and same_switches(topo, running):
        live = {s.name: s.grpc for s in running.switches}
        return dataclasses.replace(topo, switches=tuple(
            s if s.grpc else dataclasses.replace(s, grpc=live[s.name]) for s in topo.switches))
    which = missing[0] + (f" and {len(missing) - 1} more switches" if len(missing) > 1 else "")
    why = ("no fabric is running" if running is None
           else f"the running fabric ({running.name}) has other switches")
    raise MlfabricError(f"{path} gives no gRPC address for {which} and {why}: run `mlfabric fabric up {path}` "
                        "first, or give every switch a grpc: HOST:PORT in the file")
