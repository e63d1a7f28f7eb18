"""A fabric spread over several machines, on Mininet's cluster edition.

:class:`ClusterFabric` places the topology's nodes on the machines of a machines file
(:func:`controller.cluster.placement.place`), reaches each machine over SSH through a node of
Mininet's cluster edition (:class:`MachineShell`: ``mininet.examples.cluster.RemoteMixin``,
its SSH command and persistent shell in the machine's root namespace) and starts there, over
that SSH, the machine's part (:mod:`machine_part`): its hosts, switch processes and links,
built by the same code as a fabric on one machine, and its ends of the links to other
machines as GRETAP tunnels (the cluster edition's RemoteGRELink, batched per machine, keyed by
link, with MTUs that carry the fabric's frames). The controller here installs every switch
over gRPC at its machine's address and publishes the live topology, with each host's machine,
for the CLI.

One SSH session runs each machine's part, and one its shell, whatever the number of nodes: the
cluster edition's one session per node is what stops it past about ten nodes
(mininet/mininet#1078). Leaving the ``with`` block (an error, a signal) closes each part's
input: the part tears its machine's share down and exits.

It offers what experiments use of :class:`~fabric_net.EmulatedFabric`: ``host(name).cmd``,
``host(name).pid``, ``switch_process(name).stop()``, ``live``, ``timings``, ``log_dir``;
:meth:`cpu_sampler` measures every machine (an interval is the busiest machine's) and
:func:`cluster_workers` starts the workers of each machine's GPUs there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import os
import select
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from mininet.examples.cluster import RemoteMixin
from mininet.log import setLogLevel
from mininet.node import Node
from mlfabric_emulation.fabric_net import FabricTimings

from controller.cli.switch_args import current_fabric_path
from controller.cluster.machines import Machine, Machines, machines_to_dict
from controller.cluster.placement import Placement, place
from controller.cluster.ssh import CLUSTER_PARAM, ssh_options
from controller.cluster.tunnels import tunnel_ends
from controller.dashboard import journal
from controller.errors import EmulationError
from controller.experiments.cpu_use import CpuUse, cpu_use_from_dict, merge_machines
from controller.install import InstallOptions, install_fabric
from controller.live_fabric import PARAM, FabricAccess
from controller.topology import dump_topology, require_valid
from controller.topology.loader import topology_to_dict
from controller.topology.model import Topology

__all__ = ["ClusterFabric", "ClusterSampler", "ClusterWorkers", "MachineShell", "WorkersShare",
           "cluster_workers"]

log = logging.getLogger("mlfabric.cluster")

#: what a machine's part log holds that says nothing of a failure (Mininet's limits, inside a
#: namespace whose sysctls it may not set)
BENIGN_LOG_LINES = frozenset({"*** Error setting resource limits. Mininet's performance may be affected."})
#: how long a machine may take to build its part (a 1,024-GPU fabric's took 9.5 s on one machine)
READY_TIMEOUT_S = 600.0


class MachineShell(RemoteMixin, Node):
    """A machine's root namespace, reached over SSH as the cluster edition reaches a server
    (its ``sshcmd``, ``rpopen``: ``sudo -E -u USER ssh ... USER@ADDRESS sudo -E CMD``), without
    the cluster edition's persistent shell: nothing here needs it, and a shell on a terminal
    outlived a coordinator killed outright (its local ssh kept the remote session open)."""

    def __init__(self, machine: Machine, machines: Machines) -> None:
        self.sshbase = [*RemoteMixin.sshbase, *ssh_options(machines)]
        self.machine = machine
        super().__init__(f"machine-{machine.name}", server=machine.address, user=machine.user,
                         serverIP=machine.address, inNamespace=False)

    def startShell(self, *args: Any, **kwargs: Any) -> None:
        self.shell, self.pid = None, None

    def finishInit(self) -> None:
        pass


def machine_state_dir(machine: Machine) -> str:
    """Where a machine's part records what it made (controller.netstate): its own folder, so
    that `mlfabric clean-net` there finds what a killed part left, and nothing else's (stand-ins
    share one file system)."""
    return f"/run/mlfabric/machine-{machine.name}"


def machine_command(machine: Machine, module: str, *args: str) -> str:
    """The shell command running ``python -m module`` in the machine's checkout, with its state folder."""
    return (f"cd {shlex.quote(machine.project)} && MLFABRIC_STATE_DIR={shlex.quote(machine_state_dir(machine))} "
            f"exec {shlex.quote(machine.python)} -m {module}" + "".join(f" {shlex.quote(a)}" for a in args))


class MachinePart:
    """The coordinator's end of one machine's part: its SSH process and requests to it."""

    def __init__(self, shell: MachineShell, log_path: Path) -> None:
        self.machine = shell.machine
        script = machine_command(self.machine, "mlfabric_emulation.machine_part")
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "wb") as err:  # this run's part alone
            self.proc = shell.rpopen(["sh", "-c", shlex.quote(script)], tt=False, sudo=True, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=err)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._closing = False
        self.ready: dict[str, Any] = {}

    def _fail(self, what: str) -> EmulationError:
        tail = ""
        with contextlib.suppress(OSError):
            lines = [x for x in self.log_path.read_text(errors="replace").splitlines()
                     if x.strip() and x not in BENIGN_LOG_LINES]
            tail = " | ".join(lines[-3:])
        if self.proc.returncode == 255 and not tail:  # ssh's own failure (the cluster edition's ssh -q says nothing)
            what = (f"SSH to {self.machine.ssh_target} failed (exit 255): `mlfabric cluster check MACHINES` says why "
                    "for every machine")
        return EmulationError(f"machine {self.machine.name} ({self.machine.ssh_target}): {what}"
                              + (f"; its log ({self.log_path}): {tail}" if tail else ""))

    def _read(self, timeout_s: float | None = None) -> dict[str, Any]:
        assert self.proc.stdout is not None
        if timeout_s is not None and not select.select([self.proc.stdout], [], [], timeout_s)[0]:
            raise self._fail(f"no answer within {timeout_s:g} s")
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=10)
            raise self._fail(f"its part ended (exit {self.proc.returncode})")
        return json.loads(line)

    def begin(self, plan: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(plan) + "\n").encode())
        self.proc.stdin.flush()

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> dict[str, Any]:
        msg = self._read(timeout_s)
        if "error" in msg:
            raise self._fail(msg["error"])
        self.ready = msg["ready"]
        return self.ready

    def call(self, op: str, **args: Any) -> Any:
        with self._lock:
            if self.proc.poll() is not None or self.proc.stdin is None:
                raise self._fail("its part is not running")
            rid = next(self._ids)
            try:
                self.proc.stdin.write((json.dumps({"id": rid, "op": op, "args": args}) + "\n").encode())
                self.proc.stdin.flush()
            except OSError as exc:
                raise self._fail(f"cannot reach its part: {exc}") from None
            msg = self._read()
            if "error" in msg:
                raise self._fail(f"{op}: {msg['error']}")
            return msg.get("result")

    @property
    def lost(self) -> bool:
        """Whether the part ended on its own (killed, crashed, its SSH connection dropped)."""
        return self.proc.poll() is not None and not self._closing

    @property
    def never_reached(self) -> bool:
        """Whether SSH never reached the machine (nothing can be left there, nor cleaned)."""
        return self.proc.poll() == 255 and not self.ready

    def clean_up_after(self, shell: MachineShell) -> str:
        """What a part that ended on its own left on its machine, removed there over SSH
        (``mlfabric clean-net`` with the part's state folder); its output."""
        done = shell.rpopen(["sh", "-c", shlex.quote(machine_command(self.machine, "controller.cli", "clean-net"))],
                            tt=False, sudo=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            out, _ = done.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            done.kill()
            out, _ = done.communicate()
        return (out or b"").decode(errors="replace").strip()

    def close(self, timeout_s: float = 60.0) -> None:
        """Close the part's input (it tears down and exits); then wait for it, or kill the SSH."""
        self._closing = True
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("machine %s: its part did not stop in %g s; closing its SSH", self.machine.name, timeout_s)
            self.proc.kill()
            self.proc.wait()


@dataclasses.dataclass
class PartHost:
    """A host on some machine, as experiments use a Mininet host: ``cmd`` and ``pid``."""

    name: str
    part: MachinePart
    pid: int

    def cmd(self, command: str) -> str:
        return str(self.part.call("host_cmd", host=self.name, cmd=command))


@dataclasses.dataclass
class PartSwitch:
    """A switch process on some machine: what experiments do with one (stop it)."""

    name: str
    part: MachinePart
    proc: None = None

    def stop(self) -> None:
        self.part.call("stop_switch", name=self.name)


class ClusterFabric:
    """A running emulation of ``topo`` over ``machines`` (see the module docstring)."""

    def __init__(self, topo: Topology, machines: Machines, *, target: str = "python", engine: str | None = None,
                 shape: bool = True, source_routing: bool = False, super_frames: int = 0, frame_skbs: bool = False,
                 log_dir: Path | None = None, log_level: str = "info", switch_args: tuple[str, ...] = (),
                 publish: bool = True, install: bool = True, gpu_bytes: float = 1.0, run_dir: Path | None = None,
                 say: Callable[[str], None] | None = None) -> None:
        self.topo = require_valid(topo, topo.name)
        self.machines = machines
        self.placement: Placement = place(self.topo, machines, gpu_bytes=gpu_bytes)
        self.target, self.engine = target, engine
        #: what every machine's part builds with (its folders are added at start: fabric up sets them after)
        self._build = {"target": target, "engine": engine, "shape": shape, "source_routing": source_routing,
                       "super_frames": super_frames, "frame_skbs": frame_skbs, "log_level": log_level,
                       "switch_args": list(switch_args)}
        self.log_dir, self.log_level, self.run_dir = log_dir, log_level, run_dir
        self.pcap_dir: Path | None = None
        #: an optical fabric's schedule reports (none: schedules are not installed across machines yet)
        self.clock_reports: list[Any] = []
        self.publish, self.install = publish, install
        self.timings = FabricTimings()
        self.live: Topology | None = None
        self.shells: dict[str, MachineShell] = {}
        self.parts: dict[str, MachinePart] = {}
        self._say = say or (lambda msg: log.warning("%s", msg))

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> ClusterFabric:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _log_path(self, machine: str) -> Path:
        folder = self.run_dir or self.log_dir or Path("/tmp")
        return Path(folder) / f"machine-{machine}.log"

    def start(self) -> ClusterFabric:
        setLogLevel("warning")
        t0 = time.monotonic()
        ends = tunnel_ends(self.topo, self.placement, self.machines)
        used = [m for m in self.machines.machines if self.placement.nodes_on(m.name)]
        with ThreadPoolExecutor(max_workers=len(used)) as pool:
            shells = list(pool.map(lambda m: MachineShell(m, self.machines), used))
        for shell in shells:
            self.shells[shell.machine.name] = shell
        topo_doc = topology_to_dict(self.topo)
        for m in used:
            part = MachinePart(self.shells[m.name], self._log_path(m.name))
            self.parts[m.name] = part
            part.begin({"topology": topo_doc, "nodes": self.placement.nodes_on(m.name),
                        "tunnels": [dataclasses.asdict(e) for e in ends[m.name]], "grpc_host": m.address,
                        "options": {**self._build, "log_dir": str(self.log_dir) if self.log_dir else None,
                                    "pcap_dir": str(self.pcap_dir) if self.pcap_dir else None}})
        with ThreadPoolExecutor(max_workers=len(used)) as pool:
            list(pool.map(lambda p: p.wait_ready(), self.parts.values()))
        self.timings.build_s = time.monotonic() - t0
        grpc: dict[str, str] = {}
        host_pids: dict[str, int] = {}
        for part in self.parts.values():
            grpc.update(part.ready["grpc"])
            host_pids.update({k: int(v) for k, v in part.ready["host_pids"].items()})
        access = self.access()
        self.live = dataclasses.replace(
            self.topo, switches=tuple(dataclasses.replace(s, grpc=grpc[s.name]) for s in self.topo.switches),
            params={**self.topo.params, "host_pids": host_pids, "owner_pid": os.getpid(), PARAM: access.to_params(),
                    # a process in each machine's root network namespace (its part): launch's way out of a host
                    "machine_pids": {m: int(p.ready["pid"]) for m, p in self.parts.items()},
                    CLUSTER_PARAM: {**machines_to_dict(self.machines), "machine_of": dict(self.placement.machine_of)}})
        if self.install:
            t0 = time.monotonic()
            reports = install_fabric(self.live, options=InstallOptions())
            failed = [r for r in reports if r.error]
            if failed:
                raise EmulationError("rule installation failed: " + "; ".join(f"{r.switch}: {r.error}" for r in failed))
            self.timings.rules_s = time.monotonic() - t0
        if self.publish:
            dump_topology(self.live, current_fabric_path())
        # each switch's process on its machine (the dashboard reads it there)
        journal.record("fabric-up", topology=topology_to_dict(self.live),
                       switch_pids={k: int(v) for p in self.parts.values()
                                    for k, v in (p.ready.get("switch_pids") or {}).items()})
        return self

    def stop(self) -> None:
        """Every machine's part torn down (in parallel), then its shell."""
        t0 = time.monotonic()
        try:
            lost = self.lost()
            if self.parts:
                with ThreadPoolExecutor(max_workers=len(self.parts)) as pool:
                    list(pool.map(lambda p: p.close(), self.parts.values()))
            for name in (m for m in lost if not self.parts[m].never_reached):  # it did not tear its share down
                out = self.parts[name].clean_up_after(self.shells[name])
                self._say(f"machine {name}: its part had ended; clean-net there: "
                          + ("; ".join(out.splitlines()) or "nothing left"))
        finally:
            self.parts.clear()
            for shell in self.shells.values():
                with contextlib.suppress(Exception):
                    shell.terminate()
            self.shells.clear()
            if self.publish and self.live is not None:
                current_fabric_path().unlink(missing_ok=True)
            if self.live is not None:
                journal.record("fabric-down", name=self.live.name)
            self.timings.teardown_s = time.monotonic() - t0

    # -- access ----------------------------------------------------------------------------

    def access(self) -> FabricAccess:
        """Where the switches' logs and pcaps are (each machine's own folders, at these paths)."""
        return FabricAccess(target=self.target, run_dir=self.run_dir, log_dir=self.log_dir, log_level=self.log_level,
                            pcap_dir=self.pcap_dir, thrift_ports={}, thrift_server=False,
                            thrift_reason="not across machines: use mlfabric shell SWITCH or the CLI")

    def lost(self) -> list[str]:
        """The machines whose part ended on its own (killed, crashed, unreachable)."""
        return [name for name, part in self.parts.items() if part.lost]

    def part_of(self, node: str) -> MachinePart:
        try:
            return self.parts[self.placement.machine_of[node]]
        except KeyError:
            raise EmulationError(f"{node}: not a node of the running fabric {self.topo.name}") from None

    def host(self, name: str) -> PartHost:
        part = self.part_of(name)
        return PartHost(name, part, int(part.ready["host_pids"][name]))

    def switch_process(self, name: str) -> PartSwitch:
        return PartSwitch(name, self.part_of(name))

    def each_part(self, op: str, **args: Any) -> dict[str, Any]:
        """``op`` on every machine's part at once: the answers by machine."""
        with ThreadPoolExecutor(max_workers=len(self.parts)) as pool:
            futures = {m: pool.submit(p.call, op, **args) for m, p in self.parts.items()}
            return {m: f.result() for m, f in futures.items()}

    def tunnel_bytes(self) -> int:
        """Bytes sent so far through every tunnel between machines, both directions."""
        return sum(int(v) for v in self.each_part("tunnel_bytes").values())

    def cpu_sampler(self) -> ClusterSampler:
        return ClusterSampler(self)


class ClusterSampler:
    """The CPU and link monitors of every machine over one interval: ``measure()`` yields the
    merged use (the busiest machine's share; :func:`merge_machines`), :meth:`workers_sampler`
    the workers' use over the same interval, ``machines`` each machine's share."""

    def __init__(self, fabric: ClusterFabric) -> None:
        self.fabric = fabric
        self._workers_out: list[list[CpuUse]] = []
        self.machines: dict[str, float] = {}
        self.busiest = ""

    @contextlib.contextmanager
    def measure(self) -> Iterator[list[CpuUse]]:
        out: list[CpuUse] = []
        self.fabric.each_part("measure_begin")
        try:
            yield out
        finally:
            answers = self.fabric.each_part("measure_end")
            uses = {m: cpu_use_from_dict(a["fabric"]) for m, a in answers.items()}
            merged, self.busiest = merge_machines(uses)
            self.machines = {m: round(u.machine, 4) for m, u in uses.items()}
            out.append(merged)
            workers = {m: cpu_use_from_dict(a["workers"]) for m, a in answers.items() if "workers" in a}
            for lst in self._workers_out:
                if workers:
                    lst.append(merge_machines(workers)[0])
                else:
                    lst.append(CpuUse({}, merged.machine, merged.cores))
            self._workers_out.clear()

    def row_fields(self) -> dict[str, Any]:
        """What a row measured over the last interval adds: the busiest machine (a breach names
        it) and each machine's share of its cores."""
        return {"busiest_machine": self.busiest, **{f"machine_cpu_{m}": share for m, share in self.machines.items()}}

    def workers_sampler(self) -> WorkersShare:
        """The workers' share, as a sampler of its own whose ``measure()`` runs inside this one's."""
        return WorkersShare(self)


class WorkersShare:
    """Every machine's workers over a :meth:`ClusterSampler.measure` interval (each machine
    measures its own with its fabric's): its list is filled when that interval ends."""

    def __init__(self, sampler: ClusterSampler) -> None:
        self._sampler = sampler

    @contextlib.contextmanager
    def measure(self) -> Iterator[list[CpuUse]]:
        out: list[CpuUse] = []
        self._sampler._workers_out.append(out)
        yield out


class ClusterWorkers:
    """The workers of every machine's GPUs, run as one group (``run``)."""

    def __init__(self, fabric: ClusterFabric) -> None:
        self.fabric = fabric

    def run(self, command: dict[str, Any], *, timeout: float | None = None) -> list[dict[str, Any]]:
        answers = self.fabric.each_part("workers_run", command=command, timeout=timeout)
        return sorted((r for rs in answers.values() for r in rs), key=lambda r: r.get("rank", 0))


@contextlib.contextmanager
def cluster_workers(fabric: ClusterFabric, config: dict[str, Any], ranks: Sequence[Any], config_path: Path,
                    nice: int) -> Iterator[ClusterWorkers]:
    """Each machine starts the workers of the GPUs of its hosts (forked there from one zygote,
    as on one machine), all with the same configuration; stopped after the ``with`` body."""
    topo = fabric.topo
    by_machine: dict[str, list[dict[str, Any]]] = {}
    for r in ranks:
        machine = fabric.placement.machine_of[topo.hosts[r.server].name]
        by_machine.setdefault(machine, []).append(dataclasses.asdict(r))
    with ThreadPoolExecutor(max_workers=len(by_machine)) as pool:
        # a file per machine: machines that share a file system (stand-ins) would write one at once
        futures = [pool.submit(fabric.parts[m].call, "workers_start", config=config, ranks=rs,
                               config_path=str(config_path.with_name(f"{config_path.stem}-{m}.json")), nice=nice)
                   for m, rs in by_machine.items()]
        errors = []
        for f in futures:
            try:
                f.result()
            except EmulationError as exc:
                errors.append(str(exc))
    try:
        if errors:
            raise EmulationError("; ".join(errors))
        yield ClusterWorkers(fabric)
    finally:
        with contextlib.suppress(EmulationError):
            fabric.each_part("workers_close")
