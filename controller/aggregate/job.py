"""In-network aggregation jobs: which workers sum their gradients in the rail switches.

A job file (YAML), loaded strictly like a topology::

    name: digits-agg      # what `aggregate show|remove` call it; stored with the job's entries
    job: 7                # the job id the packets carry (1..255), unique per switch
    slots: 64             # the job's slot pool on each of its switches (1..1024)
    workers:              # one entry per GPU: its rank, server (a host) and rail (its NIC)
      - {rank: 0, host: s0, rail: 0}
      - {rank: 1, host: s1, rail: 0}
      ...

The workers of one rail form a group that aggregates on the switch their NICs of that rail
are cabled to (SwitchML: one switch sums, then multicasts the result back), so all of them
must be cabled to the same switch. Within a group a worker's index (its bit in the slot's
bitmap, its multicast rid - 1) is its place in rank order; a group has at most 32 workers.

Unknown keys and wrong types raise :class:`~controller.errors.ConfigError` naming the file,
the key path and the value; :func:`resolve_job` checks the job against a topology.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.errors import ConfigError
from controller.topology.model import Topology
from controller.yamlfile import int_field, str_field

__all__ = [
    "MAX_GROUP",
    "MAX_SLOTS",
    "AggregationJob",
    "RailGroup",
    "ResolvedAggregation",
    "ResolvedShadow",
    "ResolvedWorker",
    "ShadowSpec",
    "WorkerSpec",
    "job_to_dict",
    "load_job",
    "parse_job",
    "resolve_job",
]

#: workers per rail group: the slot's bitmap (and set_worker's worker_bit) has 32 bits
MAX_GROUP = 32
#: AGG_SLOTS of p4src/include/aggregate.p4: the slots of one switch
MAX_SLOTS = 1024
#: the longest job name (it is stored in the metadata of the job's table entries)
MAX_NAME = 64

_KEYS = ("name", "job", "slots", "workers", "shadows")
_SHADOW_KEYS = ("host", "rail")
_WORKER_KEYS = ("rank", "host", "rail")


@dataclass(frozen=True)
class WorkerSpec:
    rank: int
    host: str
    rail: int


@dataclass(frozen=True)
class ShadowSpec:
    """A Checkmate shadow's NIC on one rail: it receives one copy of every sum the rail's
    switch multicasts to the workers."""

    host: str
    rail: int


@dataclass(frozen=True, kw_only=True)
class AggregationJob:
    """A job as written in its file (not yet checked against a topology)."""

    name: str
    job: int
    workers: tuple[WorkerSpec, ...]  # as written in the file
    slots: int = 64
    source: str = "<job>"
    shadows: tuple[ShadowSpec, ...] = ()  # at most one per rail

    @property
    def rails(self) -> tuple[int, ...]:
        return tuple(sorted({w.rail for w in self.workers}))


@dataclass(frozen=True)
class ResolvedWorker:
    """A worker placed on the fabric: its NIC and the switch port that NIC is cabled to."""

    rank: int
    host: str
    rail: int
    index: int  # within its rail group, in rank order: bit ``1 << index``, rid ``index + 1``
    ip: str
    mac: str
    nic: str
    switch: str
    port: int


@dataclass(frozen=True)
class ResolvedShadow:
    """A shadow's NIC on the rail group's switch."""

    host: str
    ip: str
    mac: str
    port: int


@dataclass(frozen=True)
class RailGroup:
    """The workers of one rail, all cabled to ``switch``, which sums their chunks."""

    rail: int
    switch: str
    workers: tuple[ResolvedWorker, ...]  # by index
    shadow: ResolvedShadow | None = None


@dataclass(frozen=True)
class ResolvedAggregation:
    spec: AggregationJob
    topology: Topology
    groups: tuple[RailGroup, ...]  # by rail

    @property
    def switch_names(self) -> tuple[str, ...]:
        return tuple(g.switch for g in self.groups)


def _fail(source: str, key: str, value: Any, problem: str) -> ConfigError:
    return ConfigError(source, key, value, problem)


def _name(source: str, value: Any) -> str:
    name = str_field(source, "name", value)
    if len(name) > MAX_NAME or not name.isprintable() or name.strip() != name:
        raise _fail(source, "name", value, f"expected at most {MAX_NAME} printable characters, "
                                           "without leading or trailing spaces")
    if name.isdigit():
        raise _fail(source, "name", value, "a name, not a number: the job id is `job`")
    return name


def _workers(source: str, raw: Any) -> tuple[WorkerSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise _fail(source, "workers", raw, "expected a non-empty list of {rank, host, rail}")
    workers: list[WorkerSpec] = []
    ranks: dict[int, int] = {}
    nics: dict[tuple[str, int], int] = {}
    for i, w in enumerate(raw):
        where = f"workers[{i}]"
        if not isinstance(w, dict):
            raise _fail(source, where, w, "expected a mapping with rank, host, rail")
        for key in w:
            if key not in _WORKER_KEYS:
                raise _fail(source, f"{where}.{key}", w[key], "unknown key (allowed: host, rail, rank)")
        for key in _WORKER_KEYS:
            if key not in w:
                raise _fail(source, f"{where}.{key}", None, "required key is missing")
        spec = WorkerSpec(int_field(source, f"{where}.rank", w["rank"], 0, 65535),
                          str_field(source, f"{where}.host", w["host"]),
                          int_field(source, f"{where}.rail", w["rail"], 0, 511))
        if spec.rank in ranks:
            raise _fail(source, f"{where}.rank", spec.rank, f"rank already given to workers[{ranks[spec.rank]}]")
        if (spec.host, spec.rail) in nics:
            raise _fail(source, where, f"{spec.host} rail {spec.rail}",
                        f"that NIC is already workers[{nics[spec.host, spec.rail]}]: one worker per NIC")
        ranks[spec.rank], nics[spec.host, spec.rail] = i, i
        workers.append(spec)
    for rail in sorted({w.rail for w in workers}):
        n = sum(w.rail == rail for w in workers)
        if n > MAX_GROUP:
            raise _fail(source, "workers", f"{n} workers on rail {rail}",
                        f"at most {MAX_GROUP} workers per rail (the slot bitmap has {MAX_GROUP} bits)")
    return tuple(workers)


def _shadows(source: str, raw: Any, workers: tuple[WorkerSpec, ...]) -> tuple[ShadowSpec, ...]:
    if not isinstance(raw, list):
        raise _fail(source, "shadows", raw, "expected a list of {host, rail}")
    out: list[ShadowSpec] = []
    nics = {(w.host, w.rail) for w in workers}
    for i, sh in enumerate(raw):
        where = f"shadows[{i}]"
        if not isinstance(sh, dict):
            raise _fail(source, where, sh, "expected a mapping with host, rail")
        for key in sh:
            if key not in _SHADOW_KEYS:
                raise _fail(source, f"{where}.{key}", sh[key], "unknown key (allowed: host, rail)")
        for key in _SHADOW_KEYS:
            if key not in sh:
                raise _fail(source, f"{where}.{key}", None, "required key is missing")
        spec = ShadowSpec(str_field(source, f"{where}.host", sh["host"]), int_field(source, f"{where}.rail", sh["rail"], 0, 511))
        if any(o.rail == spec.rail for o in out):
            raise _fail(source, f"{where}.rail", spec.rail, "that rail already has a shadow: one per rail")
        if (spec.host, spec.rail) in nics:
            raise _fail(source, where, f"{spec.host} rail {spec.rail}", "that NIC is a worker's")
        if spec.rail not in {w.rail for w in workers}:
            raise _fail(source, f"{where}.rail", spec.rail, "no worker of the job is on that rail")
        out.append(spec)
    return tuple(out)


def parse_job(data: Any, source: str = "<job>") -> AggregationJob:
    """An :class:`AggregationJob` from parsed YAML; structure only (see :func:`resolve_job`).

    >>> two = [{"rank": 0, "host": "s0", "rail": 0}, {"rank": 1, "host": "s1", "rail": 0}]
    >>> parse_job({"name": "j", "job": 7, "workers": two}).slots
    64
    >>> parse_job({"name": "j", "job": 300, "workers": two})
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: <job>: job: must be in 1..255 (got 300)
    """
    if not isinstance(data, dict):
        raise _fail(source, "<top>", data, "expected a mapping")
    for key in data:
        if key not in _KEYS:
            raise _fail(source, str(key), data[key], f"unknown key (allowed: {', '.join(sorted(_KEYS))})")
    for key in ("name", "job", "workers"):
        if key not in data:
            raise _fail(source, key, None, "required key is missing")
    workers = _workers(source, data["workers"])
    return AggregationJob(name=_name(source, data["name"]), job=int_field(source, "job", data["job"], 1, 255),
                          slots=int_field(source, "slots", data.get("slots", 64), 1, MAX_SLOTS),
                          workers=workers, source=source, shadows=_shadows(source, data.get("shadows", []), workers))


def load_job(path: str | Path) -> AggregationJob:
    """Read and parse a job file; any problem is one ConfigError naming the file."""
    from controller.yamlfile import read_yaml

    return parse_job(read_yaml(path), str(path))


def job_to_dict(job: AggregationJob) -> dict[str, Any]:
    out: dict[str, Any] = {"name": job.name, "job": job.job, "slots": job.slots,
                           "workers": [{"rank": w.rank, "host": w.host, "rail": w.rail} for w in job.workers]}
    if job.shadows:
        out["shadows"] = [{"host": sh.host, "rail": sh.rail} for sh in job.shadows]
    return out


def _attachment(topo: Topology, host: str, nic: str) -> tuple[str, int] | None:
    """(switch, port) the NIC ``host:nic`` is cabled to, or None."""
    for lk in topo.links_of(host):
        if str(lk.end(host).port) == nic and topo.is_switch(lk.other(host).node):
            other = lk.other(host)
            return other.node, int(other.port)
    return None


def _place(spec: AggregationJob, topo: Topology) -> list[tuple[WorkerSpec, str, str, str, str, int]]:
    """(worker, nic, ip, mac, switch, port) of every worker, in rank order."""
    src = spec.source
    out = []
    for i, w in enumerate(spec.workers):
        try:
            host = topo.host(w.host)
        except KeyError:
            raise _fail(src, f"workers[{i}].host", w.host,
                        f"unknown worker host: no such host in topology {topo.name!r}") from None
        try:
            nic = host.rail_nic(w.rail)
        except KeyError:
            raise _fail(src, f"workers[{i}].rail", w.rail, f"host {w.host} has no NIC on that rail") from None
        attach = _attachment(topo, w.host, nic.name)
        if attach is None:
            raise _fail(src, f"workers[{i}]", f"{w.host}:{nic.name}", "that NIC is not cabled to a switch")
        out.append((w, nic.name, nic.address, nic.mac, *attach))
    return sorted(out, key=lambda p: p[0].rank)


def _span_message(rail: int, placed: list[tuple[WorkerSpec, str, str, str, str, int]]) -> str:
    first: dict[str, str] = {}
    for w, *_, switch, _port in placed:
        first.setdefault(switch, w.host)
    shown = [f"{host} attaches to {switch}" if i == 0 else f"{host} to {switch}"
             for i, (switch, host) in enumerate(list(first.items())[:4])]
    more = f" and {len(first) - 4} more switches" if len(first) > 4 else ""
    return f"in-network aggregation needs the workers of rail {rail} on one switch: {', '.join(shown)}{more}"


def _resolve_shadow(spec: AggregationJob, topo: Topology, rail: int, switch: str) -> ResolvedShadow | None:
    for i, sh in enumerate(spec.shadows):
        if sh.rail != rail:
            continue
        try:
            nic = topo.host(sh.host).rail_nic(rail)
        except KeyError:
            raise _fail(spec.source, f"shadows[{i}]", f"{sh.host} rail {rail}",
                        f"no such host or NIC in topology {topo.name!r}") from None
        attach = _attachment(topo, sh.host, nic.name)
        if attach is None or attach[0] != switch:
            raise _fail(spec.source, f"shadows[{i}]", f"{sh.host}:{nic.name}",
                        f"a shadow must be cabled to the switch that sums rail {rail} ({switch})")
        return ResolvedShadow(sh.host, nic.address, nic.mac, attach[1])
    return None


def resolve_job(spec: AggregationJob, topo: Topology) -> ResolvedAggregation:
    """Check ``spec`` against ``topo``: every worker's host and rail NIC exist and are cabled
    to a switch, the workers of each rail share one switch, and no switch serves two rails
    of the job (its pool, multicast group and result entries are per job and switch).

    >>> from controller.topology import rail_only
    >>> w = [{"rank": r, "host": f"s{r % 2}", "rail": r // 2} for r in range(4)]
    >>> job = resolve_job(parse_job({"name": "j", "job": 7, "workers": w}), rail_only(2, 2))
    >>> [(g.rail, g.switch, [(x.rank, x.index, x.port) for x in g.workers]) for g in job.groups]
    [(0, 'rail0', [(0, 0, 1), (1, 1, 2)]), (1, 'rail1', [(2, 0, 1), (3, 1, 2)])]
    """
    placed = _place(spec, topo)
    groups: list[RailGroup] = []
    owner: dict[str, int] = {}
    for rail in spec.rails:
        mine = [p for p in placed if p[0].rail == rail]
        switches = list(dict.fromkeys(p[4] for p in mine))
        if len(switches) > 1:
            raise _fail(spec.source, "workers", f"rail {rail} on {', '.join(switches)}",
                        _span_message(rail, mine))
        switch = switches[0]
        if switch in owner:
            raise _fail(spec.source, "workers", f"rails {owner[switch]} and {rail} on {switch}",
                        f"rails {owner[switch]} and {rail} both aggregate on switch {switch}: a job has one "
                        "group of workers per switch (its pool and multicast group are per switch)")
        owner[switch] = rail
        workers = tuple(ResolvedWorker(w.rank, w.host, w.rail, i, ip, mac, nic, sw, port)
                        for i, (w, nic, ip, mac, sw, port) in enumerate(mine))
        groups.append(RailGroup(rail, switch, workers, _resolve_shadow(spec, topo, rail, switch)))
    return ResolvedAggregation(spec, topo, tuple(groups))
