"""The ranks of a launched job as processes: each started inside its host's network namespace
(``nsenter --net`` into the host's shell), its output streamed line by line with a rank
prefix, the first failure stopping the others, and every process group gone when the
launcher returns, whatever stopped it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from controller.errors import EmulationError
from controller.launch.hosts import HostAccess, in_host
from controller.launch.placement import Placement, RankSlot, environment

__all__ = ["TAG", "LaunchResult", "RankProcesses", "in_host", "kill_tagged"]

#: every process a launch starts carries ``TAG=<launch id>`` in its environment, so that
#: what escaped its process group (an MPI daemon, a rank's own children) is found and stopped
TAG = "MLFABRIC_LAUNCH_ID"


@dataclass(frozen=True)
class LaunchResult:
    """How a job ended: every rank's exit code (None: stopped by the launcher) and the first
    rank that failed, if one did."""

    codes: tuple[int | None, ...]
    failed_rank: int | None
    #: a launcher's own exit code when it names no rank (mpirun's)
    launcher_code: int = 0

    @property
    def exit_code(self) -> int:
        """0, the failed rank's code (1 if it died of a signal), or the launcher's own.

        >>> LaunchResult((0, 3), 1).exit_code, LaunchResult((0, -9), 1).exit_code, LaunchResult((0, 0), None).exit_code
        (3, 1, 0)
        """
        if self.failed_rank is None:
            return self.launcher_code
        code = self.codes[self.failed_rank]
        return code if code and code > 0 else 1


class RankProcesses:
    """Starts every rank of ``placement`` running ``command`` in its host, streams their
    output, and stops them all (SIGTERM to each process group, SIGKILL after ``grace_s``)."""

    def __init__(self, placement: Placement, command: Sequence[str], host_pids: Mapping[str, int] | HostAccess, *,
                 out: IO[str] | None = None, extra_env: Mapping[str, str] | None = None,
                 env_for: Callable[[RankSlot], Mapping[str, str]] | None = None, grace_s: float = 5.0) -> None:
        self.access = host_pids if isinstance(host_pids, HostAccess) else HostAccess(dict(host_pids))
        missing = sorted({r.host for r in placement.ranks} - set(self.access.pids))
        if missing:
            raise EmulationError(f"no running host process for {', '.join(missing)}: is the fabric up?")
        self.placement, self.command = placement, list(command)
        self.out = out or sys.stdout
        self.extra_env = dict(extra_env or {})
        self.env_for = env_for or (lambda slot: environment(placement, slot))
        self.grace_s = grace_s
        self.procs: list[subprocess.Popen[str]] = []
        self._readers: list[threading.Thread] = []
        self._lock = threading.Lock()
        width = len(str(placement.world - 1))
        self._prefix = [f"[{r.rank:>{width}}] " for r in placement.ranks]

    def start(self) -> RankProcesses:
        for slot in self.placement.ranks:
            if self.access.across_machines:  # its variables go over SSH with it
                env = dict(os.environ)
                argv = self.access.argv(slot.host, self.command, {**self.extra_env, **self.env_for(slot)},
                                        cwd=os.getcwd())
            else:
                env = {**os.environ, **self.extra_env, **self.env_for(slot)}
                argv = self.access.argv(slot.host, self.command)
            try:
                proc = subprocess.Popen(argv, env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True, bufsize=1, errors="replace")
            except OSError as exc:
                self.stop()
                raise EmulationError(f"rank {slot.rank} on {slot.host}: cannot start {self.command[0]}: "
                                     f"{exc.strerror or exc}") from exc
            self.procs.append(proc)
            reader = threading.Thread(target=self._stream, args=(slot.rank, proc), daemon=True)
            reader.start()
            self._readers.append(reader)
        return self

    def _stream(self, rank: int, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.replace("\r\n", "\n")  # a rank on another machine writes to a terminal (ssh -tt)
            with self._lock:
                self.out.write(self._prefix[rank] + line if line.endswith("\n") else self._prefix[rank] + line + "\n")
                self.out.flush()

    def wait(self, poll_s: float = 0.05) -> LaunchResult:
        """Until every rank exits, or one fails: then the others are stopped."""
        failed = None
        while True:
            codes = [p.poll() for p in self.procs]
            bad = [i for i, c in enumerate(codes) if c not in (None, 0)]
            if bad and failed is None:
                failed = bad[0]
                self.stop()
                codes = [p.poll() for p in self.procs]
                break
            if all(c is not None for c in codes):
                break
            time.sleep(poll_s)
        for r in self._readers:
            r.join(timeout=2)
        return LaunchResult(tuple(codes), failed)

    def stop(self) -> None:
        """SIGTERM to every rank's process group still running, SIGKILL after the grace."""
        live = [p for p in self.procs if p.poll() is None]
        for p in live:
            _signal_group(p, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        for p in live:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(p, signal.SIGKILL)
                p.wait()
        for p in self.procs:  # what a rank left in its group (its own children)
            _signal_group(p, signal.SIGKILL)

    def __enter__(self) -> RankProcesses:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(proc: subprocess.Popen[str], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def kill_tagged(launch_id: str, sig: signal.Signals = signal.SIGKILL) -> list[int]:
    """Signal every process whose environment carries ``TAG=launch_id``; their pids."""
    needle = f"{TAG}={launch_id}".encode()
    hit = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            os.kill(int(entry), sig)
            hit.append(int(entry))
        except (OSError, ProcessLookupError):
            continue
    return hit
