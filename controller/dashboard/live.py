"""The dashboard's samples of the fabric that runs now: it follows the journal (the fabric that
came up, the experiment's progress and verdicts, the schedule, reconfigurations) and, once per
interval, reads the switch ports' byte and drop counters, their egress queues and each switch
process's CPU time, all from the kernel: it never asks a switch, so it adds no work to one.

A fabric across machines (its topology names them: :mod:`controller.cluster`) is read on its
machines, the same readings over one SSH session each (:mod:`cluster_readings`).

With ``record``, each experiment run's samples, events and drawings are kept in its results
folder (:mod:`recorder`) from the journal's ``run`` event to its ``run-end``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from controller.cluster.ssh import cluster_of
from controller.dashboard.cluster_readings import MachineReaders
from controller.dashboard.journal import JournalReader
from controller.dashboard.rates import link_rates, watched_interface
from controller.dashboard.recorder import FILE_NAME, Recorder
from controller.dashboard.switches import (
    PortQueue,
    QueueReader,
    read_cpu_seconds,
    read_port_drops,
    switch_rows,
)
from controller.dashboard.view import FabricView
from controller.errors import MlfabricError
from controller.topology.draw import positions
from controller.topology.loader import parse_topology
from controller.topology.model import Topology
from controller.topology.naming import switch_intf_name

__all__ = ["EMPTY_DRAWING", "SYS_NET", "LiveSampler", "read_counters", "topology_json"]

SYS_NET = Path("/sys/class/net")

EMPTY_DRAWING: dict[str, Any] = {"name": None, "nodes": [], "links": []}


def read_counters(interfaces: Iterable[str], root: Path = SYS_NET) -> dict[str, tuple[int, int]]:
    """``(tx_bytes, rx_bytes)`` of each interface that exists now."""
    out = {}
    for name in interfaces:
        stats = root / name / "statistics"
        try:
            out[name] = (int((stats / "tx_bytes").read_text()), int((stats / "rx_bytes").read_text()))
        except (OSError, ValueError):
            continue
    return out


def topology_json(topo: Topology) -> dict[str, Any]:
    """What the page draws: nodes with their place (x in [0, 1], tier 0 = servers) and links."""
    from controller.dashboard.rates import link_name

    pos = positions(topo)
    nodes = [{"name": h.name, "kind": "host", "x": pos[h.name][0], "y": pos[h.name][1]} for h in topo.hosts]
    nodes += [{"name": s.name, "kind": "switch", "role": s.role, "x": pos[s.name][0], "y": pos[s.name][1]}
              for s in topo.switches]
    links = [{"link": link_name(lk), "a": lk.a.node, "b": lk.b.node, "interface": watched_interface(topo, lk),
              "rate_mbps": lk.rate_mbps} for lk in topo.links]
    return {"name": topo.name, "nodes": nodes, "links": links}


def switch_ports(topo: Topology) -> dict[str, dict[int, str]]:
    """Each switch's ports and their interfaces."""
    out: dict[str, dict[int, str]] = {s.name: {} for s in topo.switches}
    for lk in topo.links:
        for ep in (lk.a, lk.b):
            if topo.is_switch(ep.node):
                out[ep.node][int(ep.port)] = switch_intf_name(ep.node, ep.port)
    return out


def port_rates(topo: Topology) -> dict[str, float | None]:
    """The configured rate (Mbit/s) of each switch port's link (None: unshaped)."""
    out: dict[str, float | None] = {}
    for lk in topo.links:
        for ep in (lk.a, lk.b):
            if topo.is_switch(ep.node):
                out[switch_intf_name(ep.node, ep.port)] = lk.rate_mbps
    return out


def pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


class LiveSampler:
    """Produces a sample per interval for :class:`~controller.dashboard.server.Dashboard`."""

    def __init__(self, interval_s: float = 1.0, *, journal: Path | None = None, counters_root: Path = SYS_NET,
                 record: bool = False, alive: Callable[[int], bool] = pid_alive, queues: bool = True) -> None:
        self.interval_s = interval_s
        self.record = record
        self.view = FabricView()
        self.topo: Topology | None = None
        #: CPU seconds this sampler's thread has used, and over how long
        self.cpu_seconds = 0.0
        self.wall_seconds = 0.0
        self._reader = JournalReader(journal)
        self._root = counters_root
        self._alive = alive
        self._queues = QueueReader() if queues else None
        self._drawn_seq = -1
        self._drawing: dict[str, Any] = EMPTY_DRAWING
        self._interfaces: list[str] = []
        self._ports: dict[str, dict[int, str]] = {}
        self._rates: dict[str, float | None] = {}
        self._pids: dict[str, int] = {}
        self._recorder: Recorder | None = None
        #: a fabric across machines: each machine's readings over SSH (cluster_readings)
        self._remote: MachineReaders | None = None
        self._owner_of: dict[str, str] = {}
        self._remote_extra: tuple[dict[str, int], dict[str, PortQueue]] = ({}, {})
        self._lock = threading.Lock()
        self._created = time.time()  # runs that started before are not recorded

    def drawing(self) -> dict[str, Any]:
        with self._lock:
            return {**self._drawing, "fabric_seq": self._drawn_seq}

    def switch(self, name: str) -> Mapping[str, Any] | None:
        """The running fabric's switch ``name`` (its gRPC address, device id and program)."""
        topo = self.topo
        if topo is None or not topo.is_switch(name):
            return None
        sw = topo.switch(name)
        return {"name": sw.name, "grpc": sw.grpc, "device_id": sw.device_id, "program": sw.program}

    # -- following the journal -----------------------------------------------------------

    def follow(self) -> None:
        for event in self._reader.read():
            self.view.apply(event)
            kind = event.get("kind")
            if kind == "run" and self.record and float(event.get("t", 0)) >= self._created:
                self._start_recording(Path(str(event.get("folder"))))
            if self._recorder is not None:
                self._recorder.event(event)
        owner = self.view.fabric_owner()
        if owner is not None and not self._alive(int(owner)):
            self.view.drop_fabric()
        if self.view.fabric_seq != self._drawn_seq:
            self._redraw()

    def _start_recording(self, folder: Path) -> None:
        self._stop_recording()
        try:
            self._recorder = Recorder(folder / FILE_NAME)
        except Exception:
            self._recorder = None
            return
        self._recorder.topology(self._drawn_seq, self._drawing)

    def _stop_recording(self) -> None:
        if self._recorder is not None:
            self._recorder.close()
            self._recorder = None

    def _redraw(self) -> None:
        fabric = self.view.fabric
        topo = None
        if fabric is not None:
            try:
                topo = parse_topology(fabric.get("topology"), "<journal>")
            except MlfabricError:
                topo = None
        with self._lock:
            self.topo = topo
            self._drawing = EMPTY_DRAWING if topo is None else topology_json(topo)
            self._drawn_seq = self.view.fabric_seq
            self._interfaces = [] if topo is None else sorted({watched_interface(topo, lk) for lk in topo.links})
            self._ports = {} if topo is None else switch_ports(topo)
            self._rates = {} if topo is None else port_rates(topo)
            self._pids = {} if fabric is None else {str(k): int(v) for k, v in (fabric.get("switch_pids") or {}).items()}
        if self._queues is not None:
            self._queues.close()  # a new fabric's interfaces: read their names afresh
        self._follow_machines(topo)
        if self._recorder is not None:
            self._recorder.topology(self._drawn_seq, self._drawing)

    def _follow_machines(self, topo: Topology | None) -> None:
        """A fabric across machines is read on its machines (and one machine's here)."""
        if self._remote is not None:
            self._remote.close()
            self._remote = None
        cluster = cluster_of(topo.params, "<journal>") if topo is not None else None
        if cluster is None or topo is None:
            return
        self._remote = MachineReaders(*cluster)
        self._owner_of = {ifname: switch for switch, by_port in self._ports.items() for ifname in by_port.values()}

    # -- sampling --------------------------------------------------------------------------

    def _readings(self) -> tuple[int, float, dict[str, tuple[int, int]], dict[str, float]]:
        if self._remote is not None:
            ports = sorted({*self._interfaces, *(i for p in self._ports.values() for i in p.values())})
            counters, drops, cpu, queues = self._remote.read(ports, self._pids, self._owner_of)
            self._remote_extra = (drops, queues)
            return self._drawn_seq, time.monotonic(), counters, cpu
        return (self._drawn_seq, time.monotonic(), read_counters(self._interfaces, self._root),
                read_cpu_seconds(self._pids))

    def run(self, publish: Callable[[dict[str, Any]], None], stop: threading.Event) -> None:
        cpu0, wall0 = time.thread_time(), time.monotonic()
        self.follow()
        before = self._readings()
        seq = 0
        while True:
            last = stop.wait(self.interval_s)  # when stopped: one last sample, what the run ended with
            self.follow()
            after = self._readings()
            seq += 1
            sample = self.sample(seq, before, after)
            self.cpu_seconds, self.wall_seconds = time.thread_time() - cpu0, time.monotonic() - wall0
            sample["dashboard_cpu"] = round(self.cpu_seconds / max(self.wall_seconds, 1e-9), 4)
            publish(sample)
            if self._recorder is not None:
                self._recorder.sample(sample)
                if self.view.run is not None and self.view.run.get("status") != "running":
                    self._stop_recording()  # the run ended: its last sample is kept
            before = after
            if last:
                break
        self._stop_recording()
        if self._queues is not None:
            self._queues.close()
        if self._remote is not None:
            self._remote.close()
            self._remote = None

    def sample(self, seq: int, before: tuple[int, float, dict[str, tuple[int, int]], dict[str, float]],
               after: tuple[int, float, dict[str, tuple[int, int]], dict[str, float]]) -> dict[str, Any]:
        (seq0, t0, counters0, cpu0), (seq1, t1, counters1, cpu1) = before, after
        links: list[dict[str, Any]] = []
        switches: list[dict[str, Any]] = []
        topo = self.topo
        if topo is not None and seq0 == seq1 and t1 > t0:  # rates only across one fabric
            links = [r.as_json() for r in link_rates(topo, counters0, counters1, t1 - t0)]
            if self._remote is not None:  # read on the machines, with the counters
                drops, queues = self._remote_extra
            else:
                queues = self._queues.read() if self._queues is not None else {}
                drops = read_port_drops({i for p in self._ports.values() for i in p.values()}, self._root)
            switches = switch_rows(self._ports, cpu0, cpu1, t1 - t0, queues, drops, self._rates)
        now = time.time()
        return {"seq": seq, "t": now, "fabric_seq": seq1, "links": links, "switches": switches,
                **self.view.snapshot(now)}
