"""The worker configuration: the rank layout and the transport's settings, read strictly.

The JSON file that every worker reads::

    {"ranks": [{"rank": 0, "server": 0, "rail": 0, "ip": "10.0.1.0"}, ...],
     "servers": 2, "rails": 2,
     "port": 7000,            # base: rank k listens on (its ip, port + k)
     "timeout_s": 30,         # a peer making no progress for this long is an error
     "start_timeout_s": 30,   # connecting the mesh at start-up (default: timeout_s)
     "mesh": "rail",          # "rail": connect to peers on my server or rail; "full": all
     "sock_buf_bytes": 0,     # SO_SNDBUF/SO_RCVBUF; 0 keeps the kernel's autotuning
     "tcp_congestion": "",    # every connection's TCP_CONGESTION (cubic, ...); "" keeps the machine's
     "local": "unix",         # GPUs of one server: "unix" (the NVLink, workloads.nvlink) or "tcp"
     "nvlink_bytes_per_s": 0} # each GPU's NVLink egress and ingress ("unix"); 0: unpaced

Unknown keys and wrong types raise :class:`~controller.errors.ConfigError` naming the file,
the key and the value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlfabric_base.errors import refuse_nonfinite
from workloads.errors import ConfigError, PlanError
from workloads.plan import MESH_KINDS, Layout, Rank

__all__ = ["CLUSTER_TCP_CONGESTION", "LOCAL_KINDS", "WorkloadConfig"]

#: how GPUs of one server talk: over Unix sockets paced to the NVLink model, or TCP over the
#: host's loopback (the emulated server's own stack, as before)
LOCAL_KINDS = ("unix", "tcp")

#: the congestion control the emulated experiments give every worker connection, whatever
#: the machine's default (a network namespace inherits it, BBR on some machines, and may not
#: change it): CUBIC, Linux's default and what a cluster's TCP collectives run
CLUSTER_TCP_CONGESTION = "cubic"

_RANK_KEYS = ("rank", "server", "rail", "ip")


def _int(source: str, key: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(source, key, value, "must be an integer")
    if value < minimum:
        raise ConfigError(source, key, value, f"must be >= {minimum}")
    return value


def _seconds(source: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(source, key, value, "must be a number of seconds > 0")
    return float(value)


@dataclass(frozen=True, kw_only=True)
class WorkloadConfig:
    """Everything a worker needs to join the mesh.

    >>> cfg = WorkloadConfig.from_dict({"servers": 1, "rails": 2, "port": 7100, "ranks": [
    ...     {"rank": 0, "server": 0, "rail": 0, "ip": "127.0.1.1"},
    ...     {"rank": 1, "server": 0, "rail": 1, "ip": "127.0.1.2"}]})
    >>> cfg.listen_port(1), cfg.timeout_s, cfg.start_timeout_s, cfg.mesh
    (7101, 30.0, 30.0, 'rail')
    >>> WorkloadConfig.from_dict({**cfg.to_dict(), "colour": 1})
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: <dict>: colour: unknown key (got 1)
    """

    layout: Layout
    port: int = 7000
    timeout_s: float = 30.0
    start_timeout_s: float = field(default=0.0)
    mesh: str = "rail"
    sock_buf_bytes: int = 0
    #: every mesh connection's congestion control (``TCP_CONGESTION``), whatever the machine's
    #: default, which network namespaces inherit (BBR on some machines); "" keeps that default
    tcp_congestion: str = ""
    #: how the GPUs of one server talk (:data:`LOCAL_KINDS`)
    local: str = "unix"
    #: each GPU's NVLink egress and ingress, bytes/s, with ``local: unix`` (0: unpaced)
    nvlink_bytes_per_s: float = 0.0

    def __post_init__(self) -> None:
        refuse_nonfinite("<config>", self)
        if self.local not in LOCAL_KINDS:
            raise ConfigError("<config>", "local", self.local, f"must be one of {', '.join(LOCAL_KINDS)}")
        if self.nvlink_bytes_per_s < 0:
            raise ConfigError("<config>", "nvlink_bytes_per_s", self.nvlink_bytes_per_s, "must be >= 0 (0: unpaced)")
        if self.start_timeout_s <= 0:
            object.__setattr__(self, "start_timeout_s", self.timeout_s)
        if self.mesh not in MESH_KINDS:
            raise ConfigError("<config>", "mesh", self.mesh, f"must be one of {', '.join(MESH_KINDS)}")
        if not 1 <= self.port <= 65535 - self.layout.world + 1:
            raise ConfigError("<config>", "port", self.port,
                              f"ports port..port+{self.layout.world - 1} must be valid TCP ports")

    def listen_port(self, rank: int) -> int:
        """Rank ``rank`` listens on ``(its ip, port + rank)``: unique even when ranks share an IP."""
        return self.port + rank

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<dict>") -> WorkloadConfig:
        if not isinstance(data, Mapping):
            raise ConfigError(source, "<top>", data, "must be a JSON object")
        known = {"ranks", "servers", "rails", "port", "timeout_s", "start_timeout_s", "mesh",
                 "sock_buf_bytes", "tcp_congestion", "local", "nvlink_bytes_per_s"}
        for key in data:
            if key not in known:
                raise ConfigError(source, key, data[key], "unknown key")
        for key in ("ranks", "servers", "rails"):
            if key not in data:
                raise ConfigError(source, key, None, "missing")
        servers = _int(source, "servers", data["servers"], 1)
        rails = _int(source, "rails", data["rails"], 1)
        if not isinstance(data["ranks"], list):
            raise ConfigError(source, "ranks", data["ranks"], "must be a list")
        ranks = []
        for i, entry in enumerate(data["ranks"]):
            where = f"ranks[{i}]"
            if not isinstance(entry, Mapping) or set(entry) != set(_RANK_KEYS):
                raise ConfigError(source, where, entry, f"must be an object with keys {', '.join(_RANK_KEYS)}")
            if not isinstance(entry["ip"], str):
                raise ConfigError(source, f"{where}.ip", entry["ip"], "must be a string")
            ranks.append(Rank(rank=_int(source, f"{where}.rank", entry["rank"], 0),
                              server=_int(source, f"{where}.server", entry["server"], 0),
                              rail=_int(source, f"{where}.rail", entry["rail"], 0), ip=entry["ip"]))
        try:
            layout = Layout(servers, rails, tuple(sorted(ranks, key=lambda r: r.rank)))
        except PlanError as exc:
            raise ConfigError(source, "ranks", f"{len(ranks)} ranks", str(exc)) from exc
        mesh = data.get("mesh", "rail")
        if mesh not in MESH_KINDS:
            raise ConfigError(source, "mesh", mesh, f"must be one of {', '.join(MESH_KINDS)}")
        timeout = _seconds(source, "timeout_s", data.get("timeout_s", 30.0))
        start = _seconds(source, "start_timeout_s", data.get("start_timeout_s", timeout))
        port = _int(source, "port", data.get("port", 7000), 1)
        if port + len(ranks) - 1 > 65535:
            raise ConfigError(source, "port", port, f"port + {len(ranks) - 1} exceeds 65535")
        congestion = data.get("tcp_congestion", "")
        if not isinstance(congestion, str) or not re.fullmatch(r"[a-z0-9_]{0,15}", congestion):
            raise ConfigError(source, "tcp_congestion", congestion,
                              "must be a congestion control's name (cubic, reno, bbr, ...) or \"\"")
        local = data.get("local", "unix")
        if local not in LOCAL_KINDS:
            raise ConfigError(source, "local", local, f"must be one of {', '.join(LOCAL_KINDS)}")
        nvlink = data.get("nvlink_bytes_per_s", 0.0)
        if isinstance(nvlink, bool) or not isinstance(nvlink, int | float) or not 0 <= nvlink < float("inf"):
            raise ConfigError(source, "nvlink_bytes_per_s", nvlink, "must be a finite number >= 0 (0: unpaced)")
        return cls(layout=layout, port=port, timeout_s=timeout, start_timeout_s=start, mesh=mesh,
                   sock_buf_bytes=_int(source, "sock_buf_bytes", data.get("sock_buf_bytes", 0), 0),
                   tcp_congestion=congestion, local=local, nvlink_bytes_per_s=float(nvlink))

    @classmethod
    def load(cls, path: str | Path) -> WorkloadConfig:
        """Read a JSON file; any problem is a ConfigError naming the file."""
        try:
            data = json.loads(Path(path).read_text())
        except OSError as exc:
            raise ConfigError(str(path), "<file>", str(path), f"cannot read: {exc.strerror}") from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(str(path), "<file>", exc.doc[max(0, exc.pos - 20):exc.pos + 20],
                              f"not JSON: {exc.msg} at line {exc.lineno}") from exc
        return cls.from_dict(data, str(path))

    def to_dict(self) -> dict[str, Any]:
        return {
            "ranks": [{"rank": r.rank, "server": r.server, "rail": r.rail, "ip": r.ip}
                      for r in self.layout.ranks],
            "servers": self.layout.servers, "rails": self.layout.rails, "port": self.port,
            "timeout_s": self.timeout_s, "start_timeout_s": self.start_timeout_s,
            "mesh": self.mesh, "sock_buf_bytes": self.sock_buf_bytes, "tcp_congestion": self.tcp_congestion,
            "local": self.local, "nvlink_bytes_per_s": self.nvlink_bytes_per_s,
        }

    def dump(self, path: str | Path) -> Path:
        """Write the JSON file the workers read; returns its path."""
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path
