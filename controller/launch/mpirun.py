"""Running ``mpirun`` for a placement on an emulated fabric: the rsh agent, the host map and
the hostfile in a temporary folder, ``mpirun`` inside the first rank's host, its tagged
output re-prefixed as the launcher prefixes ranks, and the rank that failed found in
Open MPI's report."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from controller.errors import EmulationError
from controller.launch.idle import idle_library
from controller.launch.mpi import hostfile, mpirun_argv
from controller.launch.placement import Placement
from controller.launch.rsh import SESSION_ENV
from controller.launch.runner import TAG, LaunchResult, in_host

__all__ = ["DEFAULT_IDLE_US", "failed_rank", "relabel", "run_mpirun"]

#: how long a waiting rank sleeps between polls, microseconds (:mod:`controller.launch.idle`)
DEFAULT_IDLE_US = 500

_INNER = re.compile(r"\[\d+,(\d+)\]<std(?:out|err)>:")
_FAILED = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]")


def relabel(line: str, width: int) -> str:
    """Open MPI's ``--tag-output`` prefixes as the launcher's rank prefix; a line that holds
    several ranks' output (Open MPI joins them when they arrive together) becomes one line
    per rank.

    >>> relabel("[1,3]<stdout>:sum 28\\n", 2)
    '[ 3] sum 28\\n'
    >>> relabel("mpirun: a note\\n", 2)
    'mpirun: a note\\n'
    >>> relabel("[1,4]<stdout>:4 [1,6]<stdout>:6 28\\n", 1)
    '[4] 4 \\n[6] 6 28\\n'
    """
    tags = list(_INNER.finditer(line))
    if not tags or tags[0].start() != 0:
        return line
    out = []
    for i, m in enumerate(tags):
        text = line[m.end():tags[i + 1].start() if i + 1 < len(tags) else len(line)].rstrip("\n")
        if not text.strip() and len(tags) > 1:  # the tag of a piece that carried nothing
            continue
        out.append(f"[{int(m.group(1)):>{width}}] {text.lstrip(' ') if i == 0 else text}\n")
    return "".join(out)


def failed_rank(text: str) -> int | None:
    """The first rank Open MPI reports as failed.

    >>> failed_rank("Process name: [[4242,1],3]\\n  Exit code:    2")
    3
    """
    m = _FAILED.search(text)
    return int(m.group(1)) if m else None


def run_mpirun(placement: Placement, command: Sequence[str], host_pids: Mapping[str, int], *, launch_id: str,
               mca: Mapping[str, str] | None = None, out: IO[str] | None = None,
               idle_us: int = DEFAULT_IDLE_US) -> LaunchResult:
    """Run ``command`` once per rank with Open MPI; returns when ``mpirun`` does. A waiting
    rank sleeps ``idle_us`` between polls (0: it spins, as Open MPI's ranks do by default;
    :mod:`controller.launch.idle`)."""
    out = out or sys.stdout
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise EmulationError("mpirun is not installed: Debian's openmpi-bin (make setup installs it)")
    width = len(str(placement.world - 1))
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="mlfabric-mpi-") as tmp, \
            tempfile.TemporaryDirectory(prefix="mlfabric-mpi-shm-", dir=shm) as shm_dir:
        work = Path(tmp)
        for host in placement.hosts:
            (Path(shm_dir) / host).mkdir()
        (work / "hostfile").write_text(hostfile(placement))
        (work / "hosts.json").write_text(json.dumps({h: int(p) for h, p in host_pids.items()}))
        agent = work / "rsh-agent"
        agent.write_text(f"#!/bin/sh\nexec {sys.executable} -m controller.launch.rsh \"$@\"\n")
        agent.chmod(0o755)
        argv = mpirun_argv(placement, command, agent=str(agent), hostfile_path=str(work / "hostfile"),
                           shm_dir=shm_dir, mca=mca, mpirun=mpirun, idle_us=idle_us,
                           idle_library=str(idle_library()) if idle_us > 0 else None)
        (work / "s" / "mpirun").mkdir(parents=True)  # short: Open MPI puts sockets under it
        env = {**os.environ, "MLFABRIC_LAUNCH_HOSTS": str(work / "hosts.json"), TAG: launch_id,
               SESSION_ENV: str(work / "s"), "TMPDIR": str(work / "s" / "mpirun"),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                             os.environ.get("PYTHONPATH", "")]))}
        proc = subprocess.Popen(in_host(host_pids[placement.ranks[0].host], argv), env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, bufsize=1, errors="replace")
        seen: list[str] = []
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                seen.append(line)
                out.write(relabel(line, width))
                out.flush()
            code = proc.wait()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    if code == 0:
        return LaunchResult(tuple(0 for _ in placement.ranks), None)
    rank = failed_rank("".join(seen[-200:]))
    codes: list[int | None] = [None] * placement.world
    if rank is not None and rank < placement.world:
        codes[rank] = code
        return LaunchResult(tuple(codes), rank)
    return LaunchResult(tuple(codes), None, launcher_code=code if code > 0 else 1)
