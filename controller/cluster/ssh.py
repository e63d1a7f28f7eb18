"""How the controller reaches a cluster's machines: SSH as Mininet's cluster edition runs it
(``mininet.examples.cluster.RemoteMixin.sshbase``: quiet, no password prompt, the agent
forwarded), plus the machines file's ``ssh_config`` and keep-alives. Pure: argument lists."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from controller.cluster.machines import Machine, Machines, machines_from_dict
from controller.errors import ConfigError

__all__ = ["CLUSTER_PARAM", "SSH_BASE", "cluster_of", "ssh_argv", "ssh_options"]

#: the live topology's parameter holding the machines and each node's machine
CLUSTER_PARAM = "cluster"

#: the cluster edition's SSH options, without its ``-tt`` (a terminal would echo a protocol's input)
SSH_BASE = ("ssh", "-q", "-o", "BatchMode=yes", "-o", "ForwardAgent=yes")


def ssh_options(machines: Machines) -> list[str]:
    """What every SSH to the machines adds to the cluster edition's own options: the machines
    file's ``ssh_config``, and keep-alives (a machine that vanishes ends its session).

    >>> from controller.cluster.machines import machines_from_dict
    >>> ssh_options(machines_from_dict({"machines": [{"name": "a", "ssh": "root@10.0.0.1", "cores": 1}],
    ...                                 "ssh_config": "/etc/c"}))
    ['-F', '/etc/c', '-o', 'ServerAliveInterval=5', '-o', 'ServerAliveCountMax=3']
    """
    opts = ["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
    return (["-F", machines.ssh_config] if machines.ssh_config else []) + opts


def ssh_argv(machine: Machine, machines: Machines, command: Sequence[str], *, tty: bool = False,
             quiet: bool = True) -> list[str]:
    """The command line running ``command`` on ``machine`` (as root there, through sudo when
    the user is not root).

    >>> from controller.cluster.machines import machines_from_dict
    >>> ms = machines_from_dict({"machines": [{"name": "a", "ssh": "me@10.0.0.1", "cores": 1}]})
    >>> ssh_argv(ms.machines[0], ms, ["ip", "-br", "link"])[-2:]
    ['me@10.0.0.1', 'sudo -n -E ip -br link']
    """
    remote = shlex.join(command)
    if machine.user != "root":
        remote = "sudo -n -E " + remote
    base = SSH_BASE if quiet else tuple(x for x in SSH_BASE if x != "-q")  # -q hides why a connection failed
    return [*base, *(["-tt"] if tty else []), *ssh_options(machines), machine.ssh_target, remote]


def cluster_of(params: Mapping[str, Any], where: str) -> tuple[Machines, dict[str, str]] | None:
    """A live topology's machines and each node's machine (None: a fabric on one machine)."""
    raw = params.get(CLUSTER_PARAM)
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("machine_of"), dict):
        raise ConfigError(where, f"params.{CLUSTER_PARAM}", raw, "expected the machines and machine_of of a cluster fabric")
    machines = machines_from_dict({k: v for k, v in raw.items() if k != "machine_of"}, source=where)
    return machines, {str(k): str(v) for k, v in raw["machine_of"].items()}
