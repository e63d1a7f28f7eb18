"""How a launch starts a process inside an emulated host: ``nsenter`` into the host's network
namespace on this machine, or, on a fabric across machines, the same over SSH on the host's
machine (``ssh -tt``: when the launcher stops the local ssh, the remote side hangs up and the
process goes with it). Pure: command lines."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.cluster.machines import Machine, Machines
from controller.cluster.ssh import cluster_of, ssh_argv
from controller.errors import EmulationError
from controller.topology.model import Topology

__all__ = ["HostAccess", "in_host"]


def in_host(pid: int, argv: Sequence[str]) -> list[str]:
    """``argv`` run inside the network namespace of the host whose shell is ``pid``.

    >>> in_host(42, ["python", "job.py"])
    ['nsenter', '--target', '42', '--net', '--', 'python', 'job.py']
    """
    return ["nsenter", "--target", str(pid), "--net", "--", *argv]


@dataclass(frozen=True)
class HostAccess:
    """Each host's shell pid and, on a fabric across machines, its machine."""

    pids: Mapping[str, int]
    machines: Machines | None = None
    machine_of: Mapping[str, str] = field(default_factory=dict)
    #: per machine, a process in its root network namespace (its part of the fabric)
    machine_pids: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, live: Topology, where: str = "<live topology>") -> HostAccess:
        raw = live.params.get("host_pids")
        pids = {str(h): int(p) for h, p in raw.items()} if isinstance(raw, dict) else {}
        cluster = cluster_of(live.params, where)
        if cluster is None:
            return cls(pids)
        mp = live.params.get("machine_pids")
        return cls(pids, cluster[0], cluster[1], {str(k): int(v) for k, v in mp.items()} if isinstance(mp, dict) else {})

    @property
    def across_machines(self) -> bool:
        return self.machines is not None

    def machine(self, host: str) -> Machine:
        assert self.machines is not None
        try:
            return self.machines.get(self.machine_of[host])
        except KeyError:
            raise EmulationError(f"{host}: no machine recorded for it in the running fabric") from None

    def argv(self, host: str, command: Sequence[str], env: Mapping[str, str] | None = None,
             cwd: str | None = None) -> list[str]:
        """``command`` inside ``host``; across machines, ``env`` and ``cwd`` go with it (a local
        caller passes them to Popen instead).

        >>> from controller.cluster.machines import machines_from_dict
        >>> ms = machines_from_dict({"machines": [{"name": "a", "ssh": "root@10.0.0.1", "cores": 1}]})
        >>> HostAccess({"s0": 7}).argv("s0", ["hostname"])
        ['nsenter', '--target', '7', '--net', '--', 'hostname']
        >>> HostAccess({"s0": 7}, ms, {"s0": "a"}).argv("s0", ["hostname"], {"RANK": "0"}, "/w")[-1]
        "sh -c 'cd /w 2>/dev/null; exec env RANK=0 nsenter --target 7 --net -- hostname'"
        """
        if host not in self.pids:
            raise EmulationError(f"no running host process for {host}: is the fabric up?")
        if self.machines is None:
            return in_host(self.pids[host], command)
        setting = " ".join(shlex.quote(f"{k}={v}") for k, v in (env or {}).items())
        script = (f"cd {shlex.quote(cwd)} 2>/dev/null; " if cwd else "") + \
            f"exec env {setting + ' ' if setting else ''}{shlex.join(in_host(self.pids[host], command))}"
        return ssh_argv(self.machine(host), self.machines, ["sh", "-c", script], tty=True)

    def agent_map(self, here: str, *, sessions: str, shm: str) -> dict[str, Any]:
        """What the rsh agent (:mod:`controller.launch.rsh`) on machine ``here`` reads: each host's
        machine and pid, how to reach each machine (from its root network namespace)."""
        assert self.machines is not None
        machines: dict[str, Any] = {}
        for m in self.machines.machines:
            full = ssh_argv(m, self.machines, ["true"])
            machines[m.name] = {"ssh": full[:-1], "root": m.user == "root", "via": self.machine_pids.get(m.name)}
        return {"here": here, "sessions": sessions, "shm": shm, "machines": machines,
                "hosts": {h: [self.machine_of[h], pid] for h, pid in self.pids.items() if h in self.machine_of}}
