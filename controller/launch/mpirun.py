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

from controller.cluster.ssh import ssh_argv
from controller.errors import EmulationError
from controller.launch.hosts import HostAccess
from controller.launch.idle import idle_library
from controller.launch.mpi import hostfile, mpirun_argv
from controller.launch.placement import Placement
from controller.launch.rsh import SESSION_ENV
from controller.launch.runner import TAG, LaunchResult

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


#: run on another machine, it writes the launch's files there (JSON on its standard input)
_WRITER = ("import json, os, sys\n"
           "d = json.load(sys.stdin)\n"
           "for x in d['dirs']: os.makedirs(x, exist_ok=True)\n"
           "for p, (text, mode) in d['files'].items():\n"
           "    open(p, 'w').write(text); os.chmod(p, mode)\n")


def _write_on(access: HostAccess, host: str, files: Mapping[str, tuple[str, int]], dirs: Sequence[str]) -> None:
    """Make ``dirs`` and write ``files`` (path: (text, mode)) on ``host``'s machine."""
    assert access.machines is not None
    machine = access.machine(host)
    argv = ssh_argv(machine, access.machines, [machine.python, "-c", _WRITER])
    done = subprocess.run(argv, input=json.dumps({"files": files, "dirs": list(dirs)}), capture_output=True,
                          text=True, timeout=60)
    if done.returncode:
        raise EmulationError(f"cannot write the launch's files on {machine.name} ({machine.ssh_target}): "
                             f"{done.stderr.strip() or f'exit {done.returncode}'}")


def _remove_on(access: HostAccess, hosts: Sequence[str], paths: Sequence[str]) -> None:
    """Remove the launch's folders on every machine of ``hosts`` (what the agent made there)."""
    assert access.machines is not None
    for name in sorted({access.machine(h).name for h in hosts}):
        machine = access.machines.get(name)
        subprocess.run(ssh_argv(machine, access.machines, ["rm", "-rf", *paths]), capture_output=True, timeout=60)


def run_mpirun(placement: Placement, command: Sequence[str], host_pids: Mapping[str, int] | HostAccess, *,
               launch_id: str, mca: Mapping[str, str] | None = None, out: IO[str] | None = None,
               idle_us: int = DEFAULT_IDLE_US) -> LaunchResult:
    """Run ``command`` once per rank with Open MPI; returns when ``mpirun`` does. A waiting
    rank sleeps ``idle_us`` between polls (0: it spins, as Open MPI's ranks do by default;
    :mod:`controller.launch.idle`). On a fabric across machines ``mpirun`` runs in the first
    rank's host on its machine, over SSH, and its agent reaches the other machines' hosts."""
    out = out or sys.stdout
    access = host_pids if isinstance(host_pids, HostAccess) else HostAccess(dict(host_pids))
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise EmulationError("mpirun is not installed: Debian's openmpi-bin (make setup installs it)")
    width = len(str(placement.world - 1))
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    first = placement.ranks[0].host
    with tempfile.TemporaryDirectory(prefix="mlfabric-mpi-", ignore_cleanup_errors=True) as tmp, \
            tempfile.TemporaryDirectory(prefix="mlfabric-mpi-shm-", dir=shm, ignore_cleanup_errors=True) as shm_dir:
        work = Path(tmp)
        for host in placement.hosts:
            (Path(shm_dir) / host).mkdir()
        (work / "s" / "mpirun").mkdir(parents=True)  # short: Open MPI puts sockets under it
        if access.across_machines:
            there = access.machine(first)
            python, project = there.python, there.project
            hosts_doc: dict[str, object] = access.agent_map(there.name, sessions=str(work / "s"), shm=shm_dir)
        else:
            python, project = sys.executable, str(Path(__file__).resolve().parents[2])
            hosts_doc = {h: int(p) for h, p in access.pids.items()}
        files = {str(work / "hostfile"): (hostfile(placement), 0o644),
                 str(work / "hosts.json"): (json.dumps(hosts_doc), 0o644),
                 str(work / "rsh-agent"): (f"#!/bin/sh\nexec {python} -m controller.launch.rsh \"$@\"\n", 0o755)}
        for path, (text, mode) in files.items():
            Path(path).write_text(text)
            Path(path).chmod(mode)
        argv = mpirun_argv(placement, command, agent=str(work / "rsh-agent"), hostfile_path=str(work / "hostfile"),
                           shm_dir=shm_dir, mca=mca, mpirun="mpirun" if access.across_machines else mpirun,
                           idle_us=idle_us, idle_library=str(idle_library()) if idle_us > 0 else None)
        variables = {"MLFABRIC_LAUNCH_HOSTS": str(work / "hosts.json"), TAG: launch_id,
                     SESSION_ENV: str(work / "s"), "TMPDIR": str(work / "s" / "mpirun"),
                     "PYTHONPATH": os.pathsep.join(filter(None, [project, os.environ.get("PYTHONPATH", "")]))}
        if access.across_machines:  # the files on mpirun's machine too (the same paths), then mpirun over SSH
            _write_on(access, first, files, [str(work / "s" / "mpirun"),
                                             *(f"{shm_dir}/{h}" for h in placement.hosts)])
            popen_argv, env = access.argv(first, argv, variables, cwd=os.getcwd()), dict(os.environ)
        else:
            popen_argv, env = access.argv(first, argv), {**os.environ, **variables}
        proc = subprocess.Popen(popen_argv, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, bufsize=1, errors="replace")
        seen: list[str] = []
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                line = line.replace("\r\n", "\n")  # mpirun on another machine writes to a terminal (ssh -tt)
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
            if access.across_machines:
                _remove_on(access, placement.hosts, [str(work), shm_dir])
    if code == 0:
        return LaunchResult(tuple(0 for _ in placement.ranks), None)
    rank = failed_rank("".join(seen[-200:]))
    codes: list[int | None] = [None] * placement.world
    if rank is not None and rank < placement.world:
        codes[rank] = code
        return LaunchResult(tuple(codes), rank)
    return LaunchResult(tuple(codes), None, launcher_code=code if code > 0 else 1)
