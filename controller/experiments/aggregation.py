"""The in-network aggregation experiment, pure side: the job each fabric installs, the rows'
summary, the wire bytes and the verdicts.

On both fabrics (rail-only and its rail-optimized fat-tree), the same GPUs all-reduce the
same buffers three ways: the flat ring (``allreduce``), the hierarchical all-reduce
(``hier_allreduce``: a ring along each rail) and the in-network one (``innet_allreduce``:
each rail's step summed in the rail's switch). Each row is one all-reduce of one size; its
``nic_bytes`` and ``busiest_nic_bytes`` are the mean and the largest of what each GPU's NIC
sent into its switch during it, read from the switches' per-port counters.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.aggregate.job import AggregationJob, WorkerSpec
from controller.errors import ConfigError
from controller.experiments.comparisons import Side, judge_ratio
from controller.experiments.fidelity import Verdict
from controller.topology.model import Topology
from mlfabric_base.errors import refuse_nonfinite
from workloads.aggregation.wire import FRAME_BYTES, LANES

__all__ = ["LOSSY", "OPS", "AggregationSettings", "aggregation_job", "innet_wire_bytes", "shadow_verdicts", "summarize",
           "verdicts"]

OPS = ("allreduce", "hier_allreduce", "innet_allreduce", "innet_allreduce_lossy")
#: the in-network all-reduce with loss injected at the workers' NICs (a row label, not an op)
LOSSY = "innet_allreduce_lossy"
LABELS = {"allreduce": "ring", "hier_allreduce": "hierarchical", "innet_allreduce": "in-network",
          LOSSY: "in-network, lossy"}
#: what each comparison divides: (numerator op, denominator op)
COMPARISONS = {"in-network / ring": ("innet_allreduce", "allreduce"),
               "in-network / hierarchical": ("innet_allreduce", "hier_allreduce")}


@dataclass(frozen=True, kw_only=True)
class AggregationSettings:
    """What the aggregation run adds to the rail-only experiment's configuration."""

    sizes_kb: tuple[int, ...] = (256, 1024)
    slots: int = 64
    job: int = 1
    #: also run the in-network all-reduce losing every Nth aggregation packet (0: not)
    loss_every: int = 0

    @property
    def ops(self) -> tuple[str, ...]:
        return OPS if self.loss_every else OPS[:3]

    def validate(self) -> AggregationSettings:
        refuse_nonfinite("aggregation", self)
        if not self.sizes_kb or any(k < 1 for k in self.sizes_kb):
            raise ConfigError("aggregation", "sizes_kb", self.sizes_kb, "give one or more sizes of at least 1 KiB")
        if not 1 <= self.slots <= 1024:
            raise ConfigError("aggregation", "slots", self.slots, "must be 1..1024 (the switch holds 1024)")
        if not 1 <= self.job <= 255:
            raise ConfigError("aggregation", "job", self.job, "must be 1..255")
        if self.loss_every < 0 or self.loss_every == 1:
            raise ConfigError("aggregation", "loss_every", self.loss_every, "must be 0 (no loss) or at least 2")
        return self


def aggregation_job(topo: Topology, settings: AggregationSettings) -> AggregationJob:
    """Every GPU of ``topo`` as a worker, ranked as the workers number them (server by
    server, GPU g on rail g): one group per rail, summed in the switch of that rail."""
    workers, rank = [], 0
    for host in topo.hosts:
        for nic in sorted(host.nics, key=lambda n: n.rail or 0):
            workers.append(WorkerSpec(rank=rank, host=host.name, rail=int(nic.rail or 0)))
            rank += 1
    return AggregationJob(name=f"experiment-{topo.name}", job=settings.job, workers=tuple(workers),
                          slots=settings.slots, source=topo.name)


def innet_wire_bytes(shard_bytes: int) -> int:
    """The bytes one GPU sends to its switch for a shard of ``shard_bytes``: 64 values a
    packet, each packet a whole frame, plus the round trip that agrees on the exponent.

    >>> innet_wire_bytes(256)  # one chunk and the exponent round
    628
    """
    return (math.ceil(shard_bytes / (4 * LANES)) + 1) * FRAME_BYTES


def summarize(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per (fabric, op, size): the median, min and max time of the runs that succeeded, the
    failures, and the median bytes a GPU's NIC sent (the mean over NICs and the busiest)."""
    groups: dict[tuple[str, str, int], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["fabric"], r["op"], int(r["kb"])), []).append(r)
    out = []
    for (fabric, op, kb), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2], OPS.index(kv[0][1]))):
        ok = [r for r in rs if r["ok"]]
        times = [float(r["seconds"]) for r in ok]
        nic = [float(r["nic_bytes"]) for r in ok if r.get("nic_bytes") is not None]
        busiest = [float(r["busiest_nic_bytes"]) for r in ok if r.get("busiest_nic_bytes") is not None]
        retrans = sum(int((r.get("aggregation") or {}).get("retransmitted", 0)) for r in ok)
        out.append({"fabric": fabric, "op": op, "kb": kb, "ok": len(ok), "failed": len(rs) - len(ok),
                    "median_s": statistics.median(times) if times else float("nan"),
                    "min_s": min(times) if times else float("nan"), "max_s": max(times) if times else float("nan"),
                    "nic_bytes": statistics.median(nic) if nic else None,
                    "busiest_nic_bytes": statistics.median(busiest) if busiest else None, "retransmitted": retrans})
    return out


def verdicts(rows: Sequence[Mapping[str, Any]]) -> tuple[dict[str, dict[str, float]], list[Verdict]]:
    """Each (fabric, size, comparison): its ratio's spread over repetitions, and the verdict
    by the one rule (:func:`controller.experiments.comparisons.judge_ratio`): decided only if
    both all-reduces have successful runs, every run held the limits and the interval calls."""
    spreads: dict[str, dict[str, float]] = {}
    out = []
    for fabric in dict.fromkeys(r["fabric"] for r in rows):
        for kb in sorted({int(r["kb"]) for r in rows}):
            def side(op: str, fabric: str = fabric, kb: int = kb) -> Side:
                return Side(f"{fabric} {LABELS[op]} {kb} KiB",
                            [r for r in rows if r["fabric"] == fabric and int(r["kb"]) == kb and r["op"] == op])

            for name, (num, den) in COMPARISONS.items():
                label = f"{fabric}, {kb} KiB, {name}"
                verdict, spreads[label] = judge_ratio(label, "in-network is", side(num), side(den))
                out.append(verdict)
    return spreads, out


def shadow_verdicts(streams: Any, calls: list[tuple[dict | None, int, set[str]]], rails: int) -> dict[str, int | str]:
    """Rebuild every in-network all-reduce from the shadow's recorded sums (``streams``, per
    rail) and mark each call's row ``bit-identical`` when its digest is every worker's
    (``calls``: the row, the values all-reduced and the workers' digests); the counts."""
    from workloads.aggregation.shadow import digest, rebuild
    from workloads.errors import WorkloadError

    try:
        rebuilt = rebuild(streams, [n for _, n, _ in calls], rails)
    except WorkloadError as exc:
        for row, _, _ in calls:
            if row is not None:
                row["shadow"] = f"missing: {exc}"
        return {"calls": len(calls), "identical": 0, "error": str(exc)}
    identical = 0
    for (row, _, worker_digests), buf in zip(calls, rebuilt, strict=True):
        same = len(worker_digests) == 1 and digest(buf) in worker_digests
        identical += same
        if row is not None:
            row["shadow"] = "bit-identical" if same else "differs"
    return {"calls": len(calls), "identical": identical}
