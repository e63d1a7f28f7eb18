"""The dashboard's readings of a fabric across machines: one SSH session per machine running
:mod:`controller.dashboard.machine_counters` in its checkout, asked once per interval for its
switches' ports and processes, all machines at once; the answers merged as one machine's
readings would be."""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from controller.cluster.machines import Machines
from controller.cluster.ssh import ssh_argv
from controller.dashboard.switches import PortQueue

__all__ = ["MachineReaders", "Readings"]

#: counters, drops, CPU seconds and queues, as :class:`~controller.dashboard.live.LiveSampler` reads them
Readings = tuple[dict[str, tuple[int, int]], dict[str, int], dict[str, float], dict[str, PortQueue]]


class MachineReaders:
    """A reader per machine (started on first use; a machine that stops answering is left out)."""

    def __init__(self, machines: Machines, machine_of: Mapping[str, str]) -> None:
        self.machines = machines
        self.machine_of = dict(machine_of)
        self._procs: dict[str, subprocess.Popen[str]] = {}
        self._dead: set[str] = set()

    def _proc(self, name: str) -> subprocess.Popen[str] | None:
        if name in self._dead:
            return None
        proc = self._procs.get(name)
        if proc is None:
            m = self.machines.get(name)
            script = f"cd {shlex.quote(m.project)} && exec {shlex.quote(m.python)} -m controller.dashboard.machine_counters"
            proc = subprocess.Popen(ssh_argv(m, self.machines, ["sh", "-c", script]), stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
            self._procs[name] = proc
        return proc

    def _ask(self, name: str, request: dict[str, Any]) -> dict[str, Any]:
        proc = self._proc(name)
        if proc is None or proc.stdin is None or proc.stdout is None:
            return {}
        try:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            return json.loads(line) if line else self._lost(name)
        except (OSError, ValueError):
            return self._lost(name)

    def _lost(self, name: str) -> dict[str, Any]:
        self._dead.add(name)
        proc = self._procs.pop(name, None)
        if proc is not None:
            with contextlib.suppress(OSError):
                proc.kill()
            proc.wait()
        return {}

    def read(self, interfaces: Sequence[str], pids: Mapping[str, int], owner_of: Mapping[str, str]) -> Readings:
        """Every machine's readings of its own ``interfaces`` (``owner_of``: interface -> its
        node) and ``pids`` (switch name -> pid), merged."""
        asks: dict[str, dict[str, Any]] = {}
        for ifname in interfaces:
            machine = self.machine_of.get(owner_of.get(ifname, ""))
            if machine:
                asks.setdefault(machine, {"interfaces": [], "pids": {}})["interfaces"].append(ifname)
        for switch, pid in pids.items():
            machine = self.machine_of.get(switch)
            if machine:
                asks.setdefault(machine, {"interfaces": [], "pids": {}})["pids"][switch] = pid
        counters: dict[str, tuple[int, int]] = {}
        drops: dict[str, int] = {}
        cpu: dict[str, float] = {}
        queues: dict[str, PortQueue] = {}
        if not asks:
            return counters, drops, cpu, queues
        with ThreadPoolExecutor(max_workers=len(asks)) as pool:
            answers = list(pool.map(lambda item: self._ask(*item), asks.items()))
        for a in answers:
            counters.update({k: (int(v[0]), int(v[1])) for k, v in a.get("counters", {}).items()})
            drops.update({k: int(v) for k, v in a.get("drops", {}).items()})
            cpu.update({k: float(v) for k, v in a.get("cpu", {}).items()})
            queues.update({k: PortQueue(**v) for k, v in a.get("queues", {}).items()})
        return counters, drops, cpu, queues

    def close(self) -> None:
        for proc in self._procs.values():
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
        for proc in self._procs.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
