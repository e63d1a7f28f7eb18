"""Per switch, what the dashboard shows: its process's CPU share, and per port the queue its
egress holds and the packets dropped, from two readings (pure); the readers of those readings
(``/proc``, the ports' root qdiscs over rtnetlink); and, asked for one switch at a time, its
tables' entry counts over P4Runtime.

>>> rows = switch_rows({"rail0": {1: "rail0-eth1"}}, {"rail0": 100.0}, {"rail0": 100.5}, 1.0,
...                    {"rail0-eth1": PortQueue(3000, 2, 5)}, {"rail0-eth1": 1})
>>> rows[0]["cpu"], rows[0]["backlog_bytes"], rows[0]["drops"], rows[0]["ports"][0]["qlen"]
(0.5, 3000, 6, 2)
>>> switch_rows({"rail0": {1: "rail0-eth1"}}, {}, {}, 1.0, {"rail0-eth1": PortQueue(125_000, 9, 0)}, {},
...             {"rail0-eth1": 100.0})[0]["queue_ms"]
10.0
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PortQueue", "QueueReader", "read_cpu_seconds", "read_port_drops", "switch_rows", "table_sizes"]


@dataclass(frozen=True, slots=True)
class PortQueue:
    """A switch port's egress queue (its root qdisc): bytes and packets held now, and the
    packets it dropped so far."""

    backlog_bytes: int
    qlen: int
    drops: int


def switch_rows(ports: Mapping[str, Mapping[int, str]], cpu_before: Mapping[str, float],
                cpu_after: Mapping[str, float], seconds: float, queues: Mapping[str, PortQueue],
                nic_drops: Mapping[str, int], rates_mbps: Mapping[str, float | None] | None = None
                ) -> list[dict[str, Any]]:
    """One row per switch: ``cpu`` (cores, None when its process was not read twice), the
    backlog summed over its ports, drops (queue and interface) summed, and each port. A
    port whose link has a rate also gets ``queue_ms``: how long its backlog takes to drain at
    that rate (the wait of a packet joining the queue now), and the switch its worst."""
    rows = []
    for name, by_port in ports.items():
        cpu = None
        if name in cpu_before and name in cpu_after and seconds > 0:
            cpu = round(max(0.0, cpu_after[name] - cpu_before[name]) / seconds, 4)
        port_rows = []
        waits: list[float] = []
        backlog = drops = 0
        for port, ifname in sorted(by_port.items()):
            q = queues.get(ifname)
            dropped = (q.drops if q else 0) + nic_drops.get(ifname, 0)
            backlog += q.backlog_bytes if q else 0
            drops += dropped
            rate = (rates_mbps or {}).get(ifname)
            wait = round(q.backlog_bytes * 8 / (rate * 1e3), 3) if q and rate else None
            if wait is not None:
                waits.append(wait)
            port_rows.append({"port": port, "interface": ifname, "backlog_bytes": q.backlog_bytes if q else None,
                              "qlen": q.qlen if q else None, "drops": dropped, "queue_ms": wait})
        rows.append({"switch": name, "cpu": cpu, "backlog_bytes": backlog, "drops": drops,
                     "queue_ms": max(waits) if waits else None, "ports": port_rows})
    return rows


_TICKS = os.sysconf("SC_CLK_TCK")


def read_cpu_seconds(pids: Mapping[str, int], proc: Path = Path("/proc")) -> dict[str, float]:
    """CPU seconds (user and system, its threads included) of each process that runs now."""
    out = {}
    for name, pid in pids.items():
        try:
            stat = (proc / str(pid) / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after the command, which may hold spaces
        out[name] = (int(fields[11]) + int(fields[12])) / _TICKS
    return out


def read_port_drops(interfaces: Iterable[str], root: Path = Path("/sys/class/net")) -> dict[str, int]:
    """Packets each interface dropped (tx and rx) as the kernel counts them."""
    out = {}
    for name in interfaces:
        stats = root / name / "statistics"
        try:
            out[name] = int((stats / "tx_dropped").read_text()) + int((stats / "rx_dropped").read_text())
        except (OSError, ValueError):
            continue
    return out


class QueueReader:
    """The root qdisc of every interface in this namespace, over one rtnetlink socket (opened
    on first use; a new fabric's interfaces need a new reader: names are read once)."""

    def __init__(self) -> None:
        self._reader: Any = None

    def read(self) -> dict[str, PortQueue]:
        from controller.qdisc_stats import QdiscReader

        try:
            if self._reader is None:
                self._reader = QdiscReader()
            return {name: PortQueue(c.backlog_bytes, c.qlen, c.drops) for name, c in self._reader.read().items()}
        except OSError:
            return {}

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def table_sizes(grpc_address: str, device_id: int, program: str, *, timeout: float = 5.0) -> dict[str, int]:
    """Entries in each of a switch's tables, read over P4Runtime without taking part in
    arbitration (a reader never competes with the controller): one wildcard read."""
    from p4.v1 import p4runtime_pb2

    from controller.install import pipeline_schema
    from controller.p4runtime.client import P4RuntimeClient

    schema = pipeline_schema(program)[0]
    counts = {t.name: 0 for t in schema.tables}
    client = P4RuntimeClient(grpc_address, device_id=device_id, timeout=timeout).connect(wait=timeout,
                                                                                         arbitrate=False)
    try:
        ent = p4runtime_pb2.Entity()
        ent.table_entry.table_id = 0
        for e in client.read([ent]):
            name = schema.table(e.table_entry.table_id).name
            counts[name] = counts.get(name, 0) + 1
    finally:
        client.close()
    return counts
