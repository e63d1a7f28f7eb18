"""Open MPI's rsh agent on an emulated fabric: ``rsh.py [OPTIONS] HOST COMMAND...`` runs
COMMAND (a shell command line, as ssh would) inside HOST's network namespace, found in the
JSON map of host to shell pid that ``$MLFABRIC_LAUNCH_HOSTS`` names. No sshd: the hosts are
namespaces of this machine.

The hosts also share this machine's hostname and ``/tmp``, where every Open MPI daemon makes
its session directory (``/tmp/ompi.HOSTNAME.UID/jf.JOB/...``): daemons starting together
raced to create the same directories, and one in a few dozen starts failed with "mkdir: File
exists" in orte_init. The agent gives each host's daemon (and so its ranks) a session
directory of its own under ``$MLFABRIC_LAUNCH_SESSIONS`` (its ``TMPDIR``, which its ranks
inherit: a job's temporary files go there, and are removed with it).

On a fabric across machines the map says each host's machine (:meth:`HostAccess.agent_map
<controller.launch.hosts.HostAccess.agent_map>`): a host on another machine is reached over
SSH from this machine's root network namespace (the agent itself runs in mpirun's host),
and there its daemon gets the same session and shared-memory directories, made on the spot."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["SESSION_ENV", "main", "parse", "remote_argv"]

#: the folder under which each host's daemon gets its own Open MPI session directory
SESSION_ENV = "MLFABRIC_LAUNCH_SESSIONS"

#: ssh options that take a value, as Open MPI may pass them
_WITH_VALUE = {"-o", "-p", "-l", "-i", "-F"}


def parse(argv: Sequence[str]) -> tuple[str, str]:
    """The host and the command line of an ssh-style call.

    >>> parse(["-x", "s1", "orted", "-mca", "ess", "env"])
    ('s1', 'orted -mca ess env')
    >>> parse(["-o", "BatchMode=yes", "s2", "PATH=/usr/bin ; orted"])
    ('s2', 'PATH=/usr/bin ; orted')
    """
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in _WITH_VALUE else 1
    if i >= len(argv) - 1:
        raise SystemExit(f"mlfabric rsh agent: expected HOST COMMAND, got {' '.join(argv)!r}")
    return argv[i], " ".join(argv[i + 1:])


def remote_argv(doc: Mapping[str, Any], host: str, command: str) -> list[str]:
    """The command line reaching ``host`` on another machine (cluster map ``doc``).

    >>> doc = {"here": "a", "sessions": "/t/s", "shm": "/dev/shm/x", "hosts": {"s2": ["b", 77]},
    ...        "machines": {"a": {"ssh": ["ssh", "root@10.0.0.1"], "root": True, "via": 5},
    ...                     "b": {"ssh": ["ssh", "root@10.0.0.2"], "root": True, "via": 6}}}
    >>> argv = remote_argv(doc, "s2", "orted -mca x 1")
    >>> argv[:6]
    ['nsenter', '--target', '5', '--net', '--', 'ssh']
    >>> argv[-1]
    "mkdir -p /t/s/s2 /dev/shm/x/s2 && TMPDIR=/t/s/s2 exec nsenter --target 77 --net -- /bin/sh -c 'orted -mca x 1'"
    """
    machine, pid = doc["hosts"][host]
    there = doc["machines"][machine]
    session, shm = f"{doc['sessions']}/{host}", f"{doc['shm']}/{host}"
    script = (f"mkdir -p {shlex.quote(session)} {shlex.quote(shm)} && TMPDIR={shlex.quote(session)} exec "
              f"nsenter --target {int(pid)} --net -- /bin/sh -c {shlex.quote(command)}")
    if not there.get("root", True):
        script = f"sudo -n -E sh -c {shlex.quote(script)}"
    via = doc["machines"][doc["here"]]["via"]
    return ["nsenter", "--target", str(int(via)), "--net", "--", *there["ssh"], script]


def main(argv: Sequence[str] | None = None) -> int:
    host, command = parse(list(sys.argv[1:] if argv is None else argv))
    path = os.environ.get("MLFABRIC_LAUNCH_HOSTS", "")
    try:
        with open(path) as f:
            pids = json.load(f)
    except (OSError, ValueError) as exc:
        print(f"mlfabric rsh agent: no host map ($MLFABRIC_LAUNCH_HOSTS={path!r}): {exc}", file=sys.stderr)
        return 255
    if "hosts" in pids:  # a fabric across machines
        doc = pids
        if host not in doc["hosts"]:
            print(f"mlfabric rsh agent: {host} is not a host of this fabric ({', '.join(sorted(doc['hosts']))})",
                  file=sys.stderr)
            return 255
        machine, pid = doc["hosts"][host]
        if machine != doc["here"]:
            argv_ = remote_argv(doc, host, command)
            os.execvp(argv_[0], argv_)
        pids = {host: pid}
    if host not in pids:
        print(f"mlfabric rsh agent: {host} is not a host of this fabric ({', '.join(sorted(pids))})", file=sys.stderr)
        return 255
    env = dict(os.environ)
    session = os.environ.get(SESSION_ENV)
    if session:  # the host's own session directory: daemons sharing one raced to create it
        base = os.path.join(session, host)
        os.makedirs(base, exist_ok=True)
        # TMPDIR, not orte_tmpdir_base: mpirun passes its MCA parameters on the daemon's
        # command line, which would override the environment's
        env["TMPDIR"] = base
    os.execvpe("nsenter", ["nsenter", "--target", str(pids[host]), "--net", "--", "/bin/sh", "-c", command], env)


if __name__ == "__main__":
    sys.exit(main())
