"""Compile an aggregation job into switch state: pure, a resolved job and its pools in, entries out.

For the rail group of each switch (``p4src/include/aggregate.p4``) the switch gets

- one ``agg_workers`` entry per worker: (job, worker IP) -> ``set_worker(1 << index, group
  size, pool base, pool size, mgid, epoch)``;
- the job's multicast group ``MGID_BASE + job``, one replica per worker: (its port, rid
  index + 1);
- one ``agg_result`` entry per worker: (job, rid) -> ``to_worker(its MAC, its IP)``, which
  addresses each multicast copy of a result to its worker.

Where a job's pool goes on a switch (:func:`allocate_pool`) and its epoch
(:func:`fresh_epoch`) are the caller's: the install reads them off the switches.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.aggregate.job import MAX_SLOTS, ResolvedAggregation
from controller.errors import MlfabricError
from controller.p4runtime.entities import Exact, TableRule

__all__ = ["AGG_EVENTS", "AGG_RESULT", "AGG_SLOTS", "AGG_WORKERS", "EVENT_NAMES", "MGID_BASE", "SET_WORKER", "SHADOW_RID",
           "TO_WORKER", "AggregationError", "AggregationProgram", "PoolExhausted", "SwitchAggregation",
           "allocate_pool", "compile_aggregation", "fresh_epoch", "job_mgid"]

AGG_WORKERS = "RailIngress.aggregate.agg_workers"
SET_WORKER = "RailIngress.aggregate.set_worker"
AGG_RESULT = "RailEgress.aggregate_result.agg_result"
TO_WORKER = "RailEgress.aggregate_result.to_worker"
AGG_EVENTS = "RailIngress.aggregate.agg_events"
#: the slots of one switch (AGG_SLOTS of aggregate.p4)
AGG_SLOTS = MAX_SLOTS
#: a job's multicast group is MGID_BASE + its job id, on every switch of the job
MGID_BASE = 0x4000
#: what each index of the agg_events counter counts
EVENT_NAMES = ("contributions", "completions", "duplicates answered", "duplicates dropped",
               "unknown job or worker", "slot outside the pool")
_EPOCH_MASK = 0xFFFFFFFF


class AggregationError(MlfabricError):
    """An aggregation job cannot be compiled, installed or removed as asked."""


class PoolExhausted(AggregationError):
    """No free range of a switch's aggregation slots is large enough for a job's pool."""


@dataclass(frozen=True)
class SwitchAggregation:
    """Everything one switch needs for one job (its rail group)."""

    switch: str
    rail: int
    mgid: int
    replicas: tuple[tuple[int, int], ...]  # (egress port, rid = worker index + 1; SHADOW_RID: the shadow)
    pool_base: int
    pool_size: int
    worker_rules: tuple[TableRule, ...]  # agg_workers, by worker index
    result_rules: tuple[TableRule, ...]  # agg_result, by rid

    @property
    def rules(self) -> tuple[TableRule, ...]:
        return self.worker_rules + self.result_rules

    @property
    def pool(self) -> tuple[int, int]:
        """The pool's slots as a half-open range [base, end)."""
        return self.pool_base, self.pool_base + self.pool_size


@dataclass(frozen=True)
class AggregationProgram:
    job: ResolvedAggregation
    epoch: int
    switches: tuple[SwitchAggregation, ...]  # by rail

    @property
    def switch_names(self) -> tuple[str, ...]:
        return tuple(s.switch for s in self.switches)

    def switch(self, name: str) -> SwitchAggregation:
        for s in self.switches:
            if s.switch == name:
                return s
        raise KeyError(f"job {self.job.spec.name!r} has nothing on switch {name!r}")


#: the multicast instance (egress rid) of a rail's shadow: above every worker's index + 1
SHADOW_RID = 255


def job_mgid(job: int) -> int:
    """The multicast group of job id ``job`` on each of its switches.

    >>> hex(job_mgid(7))
    '0x4007'
    """
    return MGID_BASE + job


def fresh_epoch(now_ms: int, avoid: Iterable[int] = ()) -> int:
    """A 32-bit epoch from the time in ms: never 0 (the registers' initial value), never one
    of ``avoid`` (the epochs installed on the switches now).

    >>> fresh_epoch(1 << 32), fresh_epoch(5, avoid=[5, 6])
    (1, 7)
    """
    taken = set(avoid) | {0}
    epoch = now_ms & _EPOCH_MASK
    while epoch in taken:
        epoch = (epoch + 1) & _EPOCH_MASK
    return epoch


def allocate_pool(used: Iterable[tuple[int, int]], size: int, capacity: int = AGG_SLOTS, *,
                  switch: str = "the switch", job: str = "?") -> int:
    """The first base where ``size`` slots are free: ``used`` are (base, size) pools.

    >>> allocate_pool([(0, 64), (128, 64)], 64), allocate_pool([(0, 64), (128, 64)], 65)
    (64, 192)
    >>> allocate_pool([(0, 1000)], 64, switch="rail1", job="x")
    Traceback (most recent call last):
    ...
    controller.aggregate.compile.PoolExhausted: pool exhausted on rail1: job 'x' wants 64 slots, the largest free range is 24
    """
    if not 1 <= size <= capacity:
        raise PoolExhausted(f"pool exhausted on {switch}: job {job!r} wants {size} slots, "
                            f"the switch has {capacity}")
    largest, at = 0, 0
    for base, n in sorted((b, n) for b, n in used if n > 0):
        gap = min(base, capacity) - at
        if gap >= size:
            return at
        largest = max(largest, gap)
        at = max(at, base + n)
    if capacity - at >= size:
        return at
    largest = max(largest, capacity - at)
    raise PoolExhausted(f"pool exhausted on {switch}: job {job!r} wants {size} slots, "
                        f"the largest free range is {largest}")


def _ip(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def compile_aggregation(resolved: ResolvedAggregation, *, pool_bases: Mapping[str, int],
                        epoch: int) -> AggregationProgram:
    """The switch state of ``resolved``, its pool at ``pool_bases[switch]`` on each switch.

    Raises AggregationError when a switch of the job has no pool base, a pool would end
    past the switch's slots, or ``epoch`` is not a non-zero 32-bit value.

    >>> from controller.aggregate.job import parse_job, resolve_job
    >>> from controller.topology import rail_only
    >>> w = [{"rank": r, "host": f"s{r}", "rail": 0} for r in range(3)]
    >>> job = resolve_job(parse_job({"name": "j", "job": 7, "slots": 8, "workers": w}), rail_only(3, 1))
    >>> (sw,) = compile_aggregation(job, pool_bases={"rail0": 16}, epoch=5).switches
    >>> sw.mgid, sw.replicas, sw.pool
    (16391, ((1, 1), (2, 2), (3, 3)), (16, 24))
    >>> sw.worker_rules[2].params["worker_bit"], sw.result_rules[2].match["standard_metadata.egress_rid"]
    (4, Exact(value=3))
    """
    spec = resolved.spec
    if not 0 < epoch <= _EPOCH_MASK:
        raise AggregationError(f"job {spec.name!r}: epoch {epoch} is not a non-zero 32-bit value")
    mgid = job_mgid(spec.job)
    switches = []
    for group in resolved.groups:
        if group.switch not in pool_bases:
            raise AggregationError(f"job {spec.name!r}: no pool base given for switch {group.switch}")
        base = pool_bases[group.switch]
        if base < 0 or base + spec.slots > AGG_SLOTS:
            raise AggregationError(f"job {spec.name!r}: pool [{base}, {base + spec.slots}) on {group.switch} "
                                   f"is outside the switch's {AGG_SLOTS} slots")
        job_key = Exact(spec.job)
        workers = tuple(
            TableRule(AGG_WORKERS, {"hdr.agg.job": job_key, "hdr.ipv4.src_addr": Exact(_ip(w.ip))}, SET_WORKER,
                      {"worker_bit": 1 << w.index, "workers": len(group.workers), "pool_base": base,
                       "pool_size": spec.slots, "mgid": mgid, "epoch": epoch})
            for w in group.workers)
        results = tuple(
            TableRule(AGG_RESULT, {"hdr.agg.job": job_key, "standard_metadata.egress_rid": Exact(w.index + 1)},
                      TO_WORKER, {"dmac": _mac(w.mac), "addr": _ip(w.ip)})
            for w in group.workers)
        replicas = tuple((w.port, w.index + 1) for w in group.workers)
        if group.shadow is not None:  # Checkmate: one more copy of every sum, to the shadow
            sh = group.shadow
            results += (TableRule(AGG_RESULT, {"hdr.agg.job": job_key, "standard_metadata.egress_rid": Exact(SHADOW_RID)},
                                  TO_WORKER, {"dmac": _mac(sh.mac), "addr": _ip(sh.ip)}),)
            replicas += ((sh.port, SHADOW_RID),)
        switches.append(SwitchAggregation(group.switch, group.rail, mgid, replicas, base, spec.slots,
                                          workers, results))
    return AggregationProgram(resolved, epoch, tuple(switches))
