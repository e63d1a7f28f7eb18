"""Host-side workloads: collectives over TCP between emulated GPUs, and their driver.

A worker process per GPU (:mod:`workloads.worker`) runs in its server's network namespace,
bound to its rail's NIC address; the experiment runner drives all of them through their
pipes with :class:`~workloads.driver.WorkerGroup`. Plans (:mod:`workloads.plan`) are pure;
the transport (:mod:`workloads.transport`) and the collectives
(:mod:`workloads.collectives`) execute them.
"""

from workloads.config import WorkloadConfig
from workloads.driver import WorkerGroup, worker_argv
from workloads.errors import (
    CommandError,
    PeerClosed,
    PeerTimeout,
    PlanError,
    ProtocolError,
    TransportError,
    VerificationError,
    WorkerStartError,
    WorkloadError,
)
from workloads.plan import Layout, Rank, alltoall_plan, mesh_peers, ring_plan

__all__ = [
    "CommandError",
    "Layout",
    "PeerClosed",
    "PeerTimeout",
    "PlanError",
    "ProtocolError",
    "Rank",
    "TransportError",
    "VerificationError",
    "WorkerGroup",
    "WorkerStartError",
    "WorkloadConfig",
    "WorkloadError",
    "alltoall_plan",
    "mesh_peers",
    "ring_plan",
    "worker_argv",
]
