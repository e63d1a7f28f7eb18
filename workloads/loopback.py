"""Jobs on this machine's loopback: for tests and benchmarks that need no switch.

Linux treats all of 127.0.0.0/8 as local, so every rank can have its own address:
GPU ``r`` of server ``d`` is ``127.0.<d+1>.<r+1>``. Workers are plain subprocesses.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workloads.config import WorkloadConfig
from workloads.driver import PopenFactory
from workloads.errors import WorkloadError
from workloads.forked import ServerPopen
from workloads.plan import Layout, Rank

__all__ = ["free_base_port", "loopback_config", "loopback_layout", "subprocess_factory", "subprocess_server_popen"]

_ROOT = Path(__file__).resolve().parent.parent


def loopback_layout(servers: int, rails: int) -> Layout:
    """``servers`` x ``rails`` ranks on ``127.0.<server+1>.<rail+1>``.

    >>> loopback_layout(2, 2).at(1, 0).ip
    '127.0.2.1'
    """
    if servers > 254 or rails > 254:
        raise WorkloadError(f"loopback layouts stop at 254 x 254 (got {servers} x {rails})")
    return Layout.grid(servers, rails, lambda d, r: f"127.0.{d + 1}.{r + 1}")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_base_port(layout: Layout, attempts: int = 200) -> int:
    """A base port such that rank ``k`` can listen on ``(ip_k, base + k)`` right now.

    Chosen below the kernel's ephemeral range, so that no outgoing connection takes it first.
    """
    high = min(_ephemeral_low(), 32768) - layout.world
    for _ in range(attempts):
        base = random.randrange(20000, high)
        socks = []
        try:
            for r in layout.ranks:
                s = socket.socket()
                socks.append(s)
                s.bind((r.ip, base + r.rank))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise WorkloadError(f"no free port range for {layout.world} ranks after {attempts} attempts")


def loopback_config(servers: int, rails: int, **options: Any) -> WorkloadConfig:
    """A job on loopback addresses with a free base port; ``options`` as WorkloadConfig's."""
    layout = loopback_layout(servers, rails)
    options.setdefault("port", free_base_port(layout))
    return WorkloadConfig(layout=layout, **options)


def subprocess_factory(env: Mapping[str, str] | None = None) -> PopenFactory:
    """Start workers as local subprocesses, with this checkout on ``PYTHONPATH``."""
    full = dict(os.environ if env is None else env)
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), full.get("PYTHONPATH", "")) if p)

    def factory(rank: Rank, argv: list[str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=full)

    return factory


def subprocess_server_popen(env: Mapping[str, str] | None = None) -> ServerPopen:
    """Start a server's zygote (:mod:`workloads.forked`) as a local subprocess, with this
    checkout on ``PYTHONPATH`` and the workers' pipes inherited."""
    full = dict(os.environ if env is None else env)
    full["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), full.get("PYTHONPATH", "")) if p)

    def server_popen(server: int, argv: list[str], pass_fds: Sequence[int]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=full, pass_fds=tuple(pass_fds))

    return server_popen
