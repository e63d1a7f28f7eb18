"""Open MPI's rsh agent on an emulated fabric: ``rsh.py [OPTIONS] HOST COMMAND...`` runs
COMMAND (a shell command line, as ssh would) inside HOST's network namespace, found in the
JSON map of host to shell pid that ``$MLFABRIC_LAUNCH_HOSTS`` names. No sshd: the hosts are
namespaces of this machine."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

__all__ = ["main", "parse"]

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
    os.execvp("nsenter", ["nsenter", "--target", str(pids[host]), "--net", "--", "/bin/sh", "-c", command])


if __name__ == "__main__":
    sys.exit(main())
