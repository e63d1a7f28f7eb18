"""Checkmate job descriptions: which workers train, in which ring, and where their shadow is.

A job file (YAML), loaded strictly like a topology::

    name: digits-a
    session: 1            # Checkmate's 5-bit storage session id (0..31), unique per fabric
    shadow: s4            # the host that holds the replica; it needs a NIC on each rail used
    ring: pxn             # ring kind of the data-parallel all-reduce (pxn | aligned | direct)
    port: 7000            # workers listen on port+rank; mirrored legs on port+world+rank
    workers:              # one entry per GPU: its rank, server (a host) and rail (its NIC)
      - {rank: 0, host: s0, rail: 0}
      - {rank: 1, host: s0, rail: 1}
      ...

Unknown keys and wrong types raise :class:`~controller.errors.ConfigError` naming the file,
the key path and the value. :func:`resolve_job` then checks the job against a topology
(hosts, NICs, a full servers x rails grid) and yields the workers' :class:`Layout`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.errors import ConfigError
from controller.topology.model import Topology
from controller.yamlfile import int_field, str_field
from workloads.checkmate.tagging import MAX_SESSION
from workloads.errors import PlanError
from workloads.plan import RING_KINDS, Layout, Rank, RingPlan, ring_plan

__all__ = ["JobSpec", "ResolvedJob", "WorkerSpec", "job_to_dict", "load_job", "parse_job",
           "resolve_job"]

_KEYS = {"name", "session", "shadow", "ring", "port", "workers"}
_WORKER_KEYS = {"rank", "host", "rail"}


@dataclass(frozen=True)
class WorkerSpec:
    rank: int
    host: str
    rail: int


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """A job as written in its file (not yet checked against a topology)."""

    name: str
    session: int
    shadow: str
    workers: tuple[WorkerSpec, ...]
    ring: str = "pxn"
    port: int = 7000
    source: str = "<job>"

    @property
    def world(self) -> int:
        return len(self.workers)

    def mirror_port(self, rank: int) -> int:
        """The TCP port on which ``rank`` accepts its mirrored legs."""
        return self.port + self.world + rank


@dataclass(frozen=True)
class ResolvedJob:
    """A job checked against a topology: its rank layout, ring and server hosts."""

    spec: JobSpec
    topology: Topology
    layout: Layout
    servers: tuple[str, ...]  # host name of server index d

    @property
    def ring(self) -> RingPlan:
        return ring_plan(self.layout, self.spec.ring)


def _fail(source: str, key: str, value: Any, problem: str) -> ConfigError:
    return ConfigError(source, key, value, problem)


def parse_job(data: Any, source: str = "<job>") -> JobSpec:
    """A :class:`JobSpec` from parsed YAML; structure only (see :func:`resolve_job`).

    >>> two = [{"rank": 0, "host": "s0", "rail": 0}, {"rank": 1, "host": "s1", "rail": 0}]
    >>> parse_job({"name": "j", "session": 1, "shadow": "s2", "workers": two}).world
    2
    >>> parse_job({"name": "j", "session": 40, "shadow": "s2", "workers": two})
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: <job>: session: must be in 0..31 (got 40)
    """
    if not isinstance(data, dict):
        raise _fail(source, "<top>", data, "expected a mapping")
    for key in data:
        if key not in _KEYS:
            raise _fail(source, str(key), data[key], f"unknown key (allowed: {', '.join(sorted(_KEYS))})")
    for key in ("name", "session", "shadow", "workers"):
        if key not in data:
            raise _fail(source, key, None, "required key is missing")
    ring = data.get("ring", "pxn")
    if ring not in RING_KINDS:
        raise _fail(source, "ring", ring, f"must be one of {', '.join(RING_KINDS)}")
    if not isinstance(data["workers"], list):
        raise _fail(source, "workers", data["workers"], "expected a list")
    workers = []
    for i, w in enumerate(data["workers"]):
        where = f"workers[{i}]"
        if not isinstance(w, dict):
            raise _fail(source, where, w, "expected a mapping with rank, host, rail")
        for key in w:
            if key not in _WORKER_KEYS:
                raise _fail(source, f"{where}.{key}", w[key], "unknown key (allowed: host, rail, rank)")
        for key in sorted(_WORKER_KEYS):
            if key not in w:
                raise _fail(source, f"{where}.{key}", None, "required key is missing")
        workers.append(WorkerSpec(int_field(source, f"{where}.rank", w["rank"], 0, 4095),
                                  str_field(source, f"{where}.host", w["host"]),
                                  int_field(source, f"{where}.rail", w["rail"], 0, 511)))
    ranks = sorted(w.rank for w in workers)
    if ranks != list(range(len(workers))):
        raise _fail(source, "workers", ranks, f"ranks must be 0..{len(workers) - 1}, each once")
    if len(workers) < 2:
        raise _fail(source, "workers", len(workers), "a data-parallel job needs at least 2 workers")
    port = int_field(source, "port", data.get("port", 7000), 1024, 65535)
    if port + 2 * len(workers) - 1 > 65535:
        raise _fail(source, "port", port, f"port + {2 * len(workers) - 1} exceeds 65535")
    return JobSpec(name=str_field(source, "name", data["name"]),
                   session=int_field(source, "session", data["session"], 0, MAX_SESSION),
                   shadow=str_field(source, "shadow", data["shadow"]), ring=ring, port=port,
                   workers=tuple(sorted(workers, key=lambda w: w.rank)), source=source)


def load_job(path: str | Path) -> JobSpec:
    """Read and parse a job file; any problem is one ConfigError naming the file."""
    from controller.yamlfile import read_yaml

    return parse_job(read_yaml(path), str(path))


def job_to_dict(job: JobSpec) -> dict[str, Any]:
    return {"name": job.name, "session": job.session, "shadow": job.shadow, "ring": job.ring,
            "port": job.port,
            "workers": [{"rank": w.rank, "host": w.host, "rail": w.rail} for w in job.workers]}


def resolve_job(job: JobSpec, topo: Topology) -> ResolvedJob:
    """Check ``job`` against ``topo``: every worker's host and rail NIC exist, the workers
    form a full servers x rails grid, and the shadow is a host that is not a worker.
    """
    src = job.source
    servers: list[str] = []
    for i, w in enumerate(job.workers):
        try:
            host = topo.host(w.host)
        except KeyError:
            raise _fail(src, f"workers[{i}].host", w.host,
                        f"unknown worker host: no such host in topology {topo.name!r}") from None
        try:
            host.rail_nic(w.rail)
        except KeyError:
            raise _fail(src, f"workers[{i}].rail", w.rail, f"host {w.host} has no NIC on that rail") from None
        if w.host not in servers:
            servers.append(w.host)
    try:
        shadow = topo.host(job.shadow)
    except KeyError:
        raise _fail(src, "shadow", job.shadow, f"no such host in topology {topo.name!r}") from None
    if shadow.name in servers:
        raise _fail(src, "shadow", job.shadow, "the shadow must not be one of the job's workers")
    rails = sorted({w.rail for w in job.workers})
    try:
        ranks = tuple(Rank(w.rank, servers.index(w.host), rails.index(w.rail),
                           topo.host(w.host).rail_nic(w.rail).address) for w in job.workers)
        layout = Layout(len(servers), len(rails), ranks)
    except PlanError as exc:
        raise _fail(src, "workers", f"{len(servers)} hosts x {len(rails)} rails",
                    f"not a full servers x rails grid: {exc}") from None
    return ResolvedJob(job, topo, layout, tuple(servers))
