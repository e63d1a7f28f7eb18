"""Open MPI's rsh agent on an emulated fabric: ``rsh.py [OPTIONS] HOST COMMAND...`` runs
COMMAND (a shell command line, as ssh would) inside HOST's network namespace, found in the
JSON map of host to shell pid that ``$MLFABRIC_LAUNCH_HOSTS`` names. No sshd: the hosts are
namespaces of this machine.

The hosts also share this machine's hostname and ``/tmp``, where every Open MPI daemon makes
its session directory (``/tmp/ompi.HOSTNAME.UID/jf.JOB/...``): daemons starting together
raced to create the same directories, and one in a few dozen starts failed with "mkdir: File
exists" in orte_init. The agent gives each host's daemon (and so its ranks) a session
directory of its own under ``$MLFABRIC_LAUNCH_SESSIONS`` (its ``TMPDIR``, which its ranks
inherit: a job's temporary files go there, and are removed with it)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

__all__ = ["SESSION_ENV", "main", "parse"]

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


def main(argv: Sequence[str] | None = None) -> int:
    host, command = parse(list(sys.argv[1:] if argv is None else argv))
    path = os.environ.get("MLFABRIC_LAUNCH_HOSTS", "")
    try:
        with open(path) as f:
            pids = json.load(f)
    except (OSError, ValueError) as exc:
        print(f"mlfabric rsh agent: no host map ($MLFABRIC_LAUNCH_HOSTS={path!r}): {exc}", file=sys.stderr)
        return 255
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
