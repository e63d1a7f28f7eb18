"""Samples the CPU time of a fabric's switch processes and of the whole machine from ``/proc``
(:mod:`controller.experiments.cpu_use` turns two samples into shares).

A switch's time is its process's user + system time, every thread included (the native
engine's I/O thread, the P4Runtime server). A switch that has stopped is left out. A
fabric's sampler also watches its shaped links (:mod:`link_monitor`) over each interval, so
every experiment's rows carry the link monitors beside the CPU ones.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from mlfabric_emulation.link_monitor import LinkMonitor

from controller.experiments.cpu_use import CpuSample, CpuUse, cpu_use

__all__ = ["CpuSampler", "fabric_cpu_sampler", "machine_times_s", "process_cpu_s", "process_times_s"]

_TICK = os.sysconf("SC_CLK_TCK")


def process_times_s(pid: int, proc: Path = Path("/proc")) -> tuple[float, float] | None:
    """User and system CPU seconds of process ``pid`` (all threads); None if it is gone."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces: count fields after its closing parenthesis
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[11]) / _TICK, int(fields[12]) / _TICK


def process_cpu_s(pid: int, proc: Path = Path("/proc")) -> float | None:
    """User + system CPU seconds of process ``pid`` (all threads); None if it is gone."""
    times = process_times_s(pid, proc)
    return None if times is None else times[0] + times[1]


def machine_cpu_s(proc: Path = Path("/proc")) -> tuple[float, float, int]:
    """Busy and total CPU seconds of the machine, summed over cores, and the core count."""
    busy, total, cores, _ = machine_times_s(proc)
    return busy, total, cores


def machine_times_s(proc: Path = Path("/proc")) -> tuple[float, float, int, float]:
    """Busy and total CPU seconds of the machine, summed over cores, the core count and the
    softirq seconds."""
    lines = (proc / "stat").read_text().splitlines()
    ticks = [int(v) for v in lines[0].split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    total = sum(ticks[:8])  # guest time is already inside user time
    cores = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    softirq = ticks[6] if len(ticks) > 6 else 0
    return (total - idle) / _TICK, total / _TICK, max(cores, 1), softirq / _TICK


class CpuSampler:
    """Samples the given switch processes (name -> pid) and the machine.

    Examples
    --------
    >>> s = CpuSampler({"me": os.getpid()})
    >>> sample = s.sample()
    >>> sorted(sample.switch_s), sample.cores >= 1
    (['me'], True)
    """

    def __init__(self, pids: Mapping[str, int] | Callable[[], Mapping[str, int]],
                 links: LinkMonitor | None = None) -> None:
        self._pids = pids
        self.links = links

    def sample(self) -> CpuSample:
        pids = self._pids() if callable(self._pids) else self._pids
        times = {name: t for name, pid in pids.items() if (t := process_times_s(pid)) is not None}
        busy, total, cores, softirq = machine_times_s()
        return CpuSample(time.monotonic(), {name: u + s for name, (u, s) in times.items()}, busy, total, cores,
                         user_s={name: u for name, (u, _) in times.items()}, softirq_s=softirq)

    @contextmanager
    def measure(self) -> Iterator[list[CpuUse]]:
        """Measures the CPU use of the ``with`` body: the yielded list holds it afterwards."""
        out: list[CpuUse] = []
        with (self.links.watch() if self.links is not None else _nothing()) as links:
            before = self.sample()
            yield out
            after = self.sample()
        out.append(dataclasses.replace(cpu_use(before, after), links=links[0] if links else None))


@contextmanager
def _nothing() -> Iterator[list]:
    yield []


def fabric_cpu_sampler(fabric: object, switches: list[str]) -> CpuSampler:
    """A sampler of a running :class:`~mininet.fabric_net.EmulatedFabric`'s switches (one
    stopped since, ``--fail-rail``, drops out of the samples) and of its shaped links."""
    def pids() -> dict[str, int]:
        out = {}
        for name in switches:
            proc = getattr(fabric.switch_process(name), "proc", None)  # type: ignore[attr-defined]
            if proc is not None and proc.poll() is None:
                out[name] = proc.pid
        return out
    return CpuSampler(pids, LinkMonitor.of_network(getattr(fabric, "net", None), getattr(fabric, "tunnel_intfs", ())))
