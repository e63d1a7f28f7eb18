"""Install, remove and read aggregation jobs on live switches (the I/O side).

The switches hold all the state there is: a job's ``agg_workers`` entries carry its pool
(``pool_base``, ``pool_size``), its epoch and, in their P4Runtime ``metadata``, its name. So
``add`` learns the pools and job ids in use by reading them, and ``show`` and ``remove``
need no local state file.

Install is all or nothing: every switch of the job is checked first (the job id and name
must be free there, and a pool must fit), then each switch gets the job's multicast group,
its ``agg_result`` entries and last its ``agg_workers`` entries (which admit the workers'
packets); if any switch rejects its part, everything of the job already written is deleted
again. Remove deletes exactly the job's entries and multicast groups (workers first).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from p4.v1 import p4runtime_pb2

from controller.aggregate.compile import (
    AGG_EVENTS,
    AGG_RESULT,
    AGG_WORKERS,
    EVENT_NAMES,
    SHADOW_RID,
    AggregationError,
    AggregationProgram,
    allocate_pool,
    compile_aggregation,
    fresh_epoch,
    job_mgid,
)
from controller.aggregate.job import AggregationJob, resolve_job
from controller.errors import MlfabricError
from controller.install import pipeline_schema, switch_clients
from controller.p4runtime.client import P4ClientError, P4RuntimeClient
from controller.p4runtime.entities import (
    Exact,
    TableRule,
    decode_rule,
    encode_rule,
    multicast_group_entry,
    update,
)
from controller.p4runtime.schema import P4Schema
from controller.topology.model import Topology

__all__ = ["PROGRAM", "AggregationConflict", "InstalledJob", "InstalledWorker", "Removal",
           "SwitchAggregationState", "install_aggregation", "installed_jobs", "read_aggregation",
           "read_events", "remove_aggregation"]

#: the program whose switches aggregate
PROGRAM = "rail_switch"


class AggregationConflict(AggregationError):
    """The job's id or name is already installed on one of its switches."""


@dataclass(frozen=True)
class InstalledWorker:
    ip: str
    index: int
    packets: int  # hits of its agg_workers entry


@dataclass(frozen=True)
class InstalledJob:
    """One job as a switch holds it (read from its agg_workers entries)."""

    switch: str
    job: int
    name: str
    workers: tuple[InstalledWorker, ...]  # by index
    group_size: int  # set_worker's ``workers``: what the switch waits for
    pool_base: int
    pool_size: int
    epoch: int
    mgid: int
    shadow: str | None = None  # the Checkmate shadow's address (its agg_result entry), if any

    @property
    def pool(self) -> tuple[int, int]:
        return self.pool_base, self.pool_base + self.pool_size


@dataclass(frozen=True)
class SwitchAggregationState:
    """A switch's aggregation jobs and its agg_events counters (name -> (packets, bytes))."""

    switch: str
    jobs: tuple[InstalledJob, ...]
    events: Mapping[str, tuple[int, int]]


@dataclass(frozen=True)
class Removal:
    job: int
    name: str
    switches: tuple[str, ...]  # where something of the job was deleted
    deleted: int  # entries and multicast groups


def _schema() -> P4Schema:
    return pipeline_schema(PROGRAM)[0]


def _aggregating_switches(topo: Topology) -> tuple[str, ...]:
    return tuple(s.name for s in topo.switches if s.program == PROGRAM)


def _ip(value: int) -> str:
    return ".".join(str((value >> s) & 0xFF) for s in (24, 16, 8, 0))


def _exact(rule: TableRule, field: str) -> int:
    m = rule.match[field]
    if not isinstance(m, Exact):
        raise MlfabricError(f"{rule.table}: field {field} is not an exact match ({m})")
    return m.value


def _read_entries(client: P4RuntimeClient, schema: P4Schema, table: str,
                  counters: bool = False) -> list[p4runtime_pb2.TableEntry]:
    ent = p4runtime_pb2.Entity()
    ent.table_entry.table_id = schema.table(table).id
    if counters:
        ent.table_entry.counter_data.SetInParent()
    return [e.table_entry for e in client.read([ent])]


def installed_jobs(client: P4RuntimeClient, schema: P4Schema, switch: str) -> tuple[InstalledJob, ...]:
    """The aggregation jobs on one switch, by job id, read from its agg_workers entries (and
    the shadow's agg_result entry)."""
    by_job: dict[int, list[tuple[TableRule, p4runtime_pb2.TableEntry]]] = {}
    for te in _read_entries(client, schema, AGG_WORKERS, counters=True):
        rule = decode_rule(schema, te)
        by_job.setdefault(_exact(rule, "hdr.agg.job"), []).append((rule, te))
    shadows = {}
    for te in _read_entries(client, schema, AGG_RESULT):
        rule = decode_rule(schema, te)
        if _exact(rule, "standard_metadata.egress_rid") == SHADOW_RID:
            shadows[_exact(rule, "hdr.agg.job")] = _ip(int(rule.params.get("addr", 0)))
    jobs = []
    for job_id, entries in sorted(by_job.items()):
        first = entries[0][0].params
        name = next((te.metadata.decode("utf-8", "replace") for _, te in entries if te.metadata), "")
        workers = sorted((InstalledWorker(_ip(_exact(r, "hdr.ipv4.src_addr")),
                                          max(r.params.get("worker_bit", 0).bit_length() - 1, 0),
                                          te.counter_data.packet_count) for r, te in entries),
                         key=lambda w: (w.index, w.ip))
        jobs.append(InstalledJob(switch, job_id, name, tuple(workers),
                                 first.get("workers", 0), first.get("pool_base", 0), first.get("pool_size", 0),
                                 first.get("epoch", 0), first.get("mgid", 0), shadows.get(job_id)))
    return tuple(jobs)


def read_events(client: P4RuntimeClient, schema: P4Schema) -> dict[str, tuple[int, int]]:
    """The switch's agg_events counter: event name -> (packets, bytes)."""
    cells = {c.index.index: (c.data.packet_count, c.data.byte_count)
             for c in client.read_counter(schema.counter(AGG_EVENTS).id)}
    return {name: cells.get(i, (0, 0)) for i, name in enumerate(EVENT_NAMES)}


def _group_present(client: P4RuntimeClient, mgid: int) -> bool:
    ent = p4runtime_pb2.Entity()
    ent.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = mgid
    try:
        found = client.read([ent])
    except P4ClientError as exc:  # PI answers NOT_FOUND for a group that is not there
        if exc.code == "NOT_FOUND":
            return False
        raise  # any other failure is no answer about the group
    return any(e.packet_replication_engine_entry.multicast_group_entry.multicast_group_id == mgid for e in found)


def _job_deletes(client: P4RuntimeClient, schema: P4Schema, job: int) -> list[p4runtime_pb2.Update]:
    """Deletes of everything of job id ``job`` on the switch: its agg_workers entries first
    (no packet is admitted any more), then its agg_result entries and multicast group."""
    ups = []
    for table in (AGG_WORKERS, AGG_RESULT):
        for te in _read_entries(client, schema, table):
            rule = decode_rule(schema, te)
            if _exact(rule, "hdr.agg.job") == job:
                ups.append(update("delete", encode_rule(schema, rule)))
    if _group_present(client, job_mgid(job)):
        ups.append(update("delete", multicast_group_entry(job_mgid(job), [])))
    return ups


def _delete_job(client: P4RuntimeClient, schema: P4Schema, job: int) -> int:
    ups = _job_deletes(client, schema, job)
    if ups:
        client.write_checked(ups)
    return len(ups)


def _worker_entry(schema: P4Schema, rule: TableRule, name: str) -> p4runtime_pb2.TableEntry:
    entry = encode_rule(schema, rule)
    entry.metadata = name.encode()
    return entry


def _check_free(spec: AggregationJob, states: Mapping[str, tuple[InstalledJob, ...]]) -> None:
    for switch, jobs in states.items():
        for j in jobs:
            if j.job == spec.job:
                raise AggregationConflict(
                    f"job id {spec.job} is already installed on {switch} (job {j.name or '(unnamed)'!r}): "
                    f"remove it first (mlfabric aggregate remove {spec.job}) or give this job another id")
            if j.name == spec.name:
                raise AggregationConflict(
                    f"a job named {spec.name!r} is already installed on {switch} (job id {j.job}): "
                    "give this job another name")


def install_aggregation(topology: Topology, spec: AggregationJob, *, epoch: int | None = None,
                        addresses: Mapping[str, str] | None = None, election_id: int = 1,
                        now_ms: int | None = None) -> AggregationProgram:
    """Install ``spec`` on the live switches of ``topology``; all or nothing.

    Each switch's free slots and the job ids in use are read from the switch; the pool goes
    first fit. ``epoch`` defaults to a fresh one from the time in ms (``now_ms``, else the
    clock), different from every epoch installed on the job's switches. Switches are reached
    at ``addresses[name]``, else at the topology's gRPC address. Returns what was installed
    (pools, epoch, entries). Raises ConfigError (the job does not fit the topology),
    AggregationConflict (id or name in use), PoolExhausted, or AggregationError (a switch
    rejected its part; the message says what was rolled back).
    """
    resolved = resolve_job(spec, topology)
    schema = _schema()
    with switch_clients(topology, resolved.switch_names, addresses, election_id) as clients:
        states = {name: installed_jobs(clients[name], schema, name) for name in resolved.switch_names}
        _check_free(spec, states)
        bases = {name: allocate_pool([(j.pool_base, j.pool_size) for j in jobs], spec.slots,
                                     switch=name, job=spec.name) for name, jobs in states.items()}
        if epoch is None:
            now = int(time.time() * 1000) if now_ms is None else now_ms
            epoch = fresh_epoch(now, avoid=[j.epoch for jobs in states.values() for j in jobs])
        program = compile_aggregation(resolved, pool_bases=bases, epoch=epoch)
        _write(program, clients, schema)
    return program


def _write(program: AggregationProgram, clients: Mapping[str, P4RuntimeClient], schema: P4Schema) -> None:
    spec = program.job.spec
    touched: list[str] = []
    try:
        for sw in program.switches:
            client = clients[sw.switch]
            touched.append(sw.switch)
            _delete_job(client, schema, spec.job)  # what a crashed add or remove may have left
            client.write_checked([update("insert", multicast_group_entry(sw.mgid, sw.replicas))])
            client.write_checked([update("insert", encode_rule(schema, r)) for r in sw.result_rules])
            client.write_checked([update("insert", _worker_entry(schema, r, spec.name)) for r in sw.worker_rules])
    except P4ClientError as exc:
        rolled, failed = [], []
        for name in touched:
            try:
                _delete_job(clients[name], schema, spec.job)
                rolled.append(name)
            except P4ClientError as again:
                failed.append(f"{name} ({again})")
        left = f"; rollback failed on {', '.join(failed)}" if failed else ""
        raise AggregationError(f"installing aggregation job {spec.name!r} on {touched[-1]} failed ({exc}); "
                               f"rolled back on {', '.join(rolled) or 'no switch'}{left}") from exc


def _matches(job: InstalledJob, which: int | str) -> bool:
    return job.job == which if isinstance(which, int) else job.name == which


def _one_job(which: int | str, found: list[InstalledJob], switches: Iterable[str]) -> tuple[int, str]:
    if not found:
        what = f"id {which}" if isinstance(which, int) else repr(which)
        raise AggregationError(f"no aggregation job {what} is installed on {', '.join(switches) or 'any switch'}")
    ids = sorted({j.job for j in found})
    if len(ids) > 1:
        raise AggregationError(f"jobs {', '.join(map(str, ids))} are all named {which!r}: remove one by its job id")
    return ids[0], next((j.name for j in found if j.name), "")


def remove_aggregation(topology: Topology, job: int | str, *, addresses: Mapping[str, str] | None = None,
                       election_id: int = 1) -> Removal:
    """Delete the job (by job id, or by the name it was installed with) from every switch of
    ``topology`` that runs rail_switch: exactly its entries and multicast groups."""
    schema = _schema()
    names = _aggregating_switches(topology)
    with switch_clients(topology, names, addresses, election_id) as clients:
        found = [j for n in names for j in installed_jobs(clients[n], schema, n) if _matches(j, job)]
        job_id, name = _one_job(job, found, names)
        removed: dict[str, int] = {}
        for n in names:
            count = _delete_job(clients[n], schema, job_id)
            if count:
                removed[n] = count
    return Removal(job_id, name, tuple(removed), sum(removed.values()))


def read_aggregation(topology: Topology, job: int | str | None = None, *,
                     addresses: Mapping[str, str] | None = None,
                     election_id: int = 0) -> list[SwitchAggregationState]:
    """Every rail_switch switch's installed jobs and agg_events counters; with ``job`` (an id
    or a name) only that job, on the switches that hold it (an error where none does)."""
    schema = _schema()
    names = _aggregating_switches(topology)
    out = []
    with switch_clients(topology, names, addresses, election_id) as clients:
        for n in names:
            jobs = installed_jobs(clients[n], schema, n)
            if job is not None:
                jobs = tuple(j for j in jobs if _matches(j, job))
                if not jobs:
                    continue
            out.append(SwitchAggregationState(n, jobs, read_events(clients[n], schema)))
    if job is not None:
        _one_job(job, [j for s in out for j in s.jobs], names)
    return out
