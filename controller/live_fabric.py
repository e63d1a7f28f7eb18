"""What a running fabric publishes about reaching its switches, beside its topology.

``fabric up`` publishes the live topology (switches with their gRPC addresses); its
``params`` also carry a :class:`FabricAccess`: the target, the run folder with the switches'
logs and pcaps, and BMv2's Thrift ports. ``fabric status``, ``mlfabric shell`` and
``mlfabric bmv2-cli`` read it back from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from controller.errors import ConfigError

__all__ = ["PARAM", "FabricAccess"]

#: the key of ``Topology.params`` that holds it
PARAM = "access"


def _path(value: object, key: str, where: str) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(where, f"params.{PARAM}.{key}", value, "expected a path")
    return Path(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricAccess:
    """How to look into a running fabric's switches.

    Examples
    --------
    >>> a = FabricAccess(target="bmv2", run_dir=Path("r"), log_dir=Path("r/logs"), thrift_ports={"rail0": 9090},
    ...                  thrift_server=True)
    >>> FabricAccess.from_params({PARAM: a.to_params()}) == a
    True
    >>> FabricAccess.from_params({}).target is None
    True
    """

    #: python or bmv2; None for a topology that was not published by a running fabric
    target: str | None = None
    run_dir: Path | None = None
    log_dir: Path | None = None
    log_level: str = "info"
    pcap_dir: Path | None = None
    #: switch name -> the Thrift port its simple_switch_grpc was given (bmv2 only)
    thrift_ports: Mapping[str, int] = field(default_factory=dict)
    #: whether that simple_switch_grpc serves Thrift at all, and why not
    thrift_server: bool = False
    thrift_reason: str = ""

    def to_params(self) -> dict[str, object]:
        """A plain mapping for the published topology's ``params``."""
        return {"target": self.target, "run_dir": _text(self.run_dir), "log_dir": _text(self.log_dir),
                "log_level": self.log_level, "pcap_dir": _text(self.pcap_dir),
                "thrift_ports": dict(self.thrift_ports), "thrift_server": self.thrift_server,
                "thrift_reason": self.thrift_reason}

    @classmethod
    def from_params(cls, params: Mapping[str, object], where: str = "<published fabric>") -> FabricAccess:
        """Read it back (an empty one when ``params`` has none); a ConfigError names a bad value."""
        raw = params.get(PARAM)
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise ConfigError(where, f"params.{PARAM}", raw, "expected a mapping")
        ports = raw.get("thrift_ports") or {}
        if not isinstance(ports, Mapping) or not all(isinstance(p, int) for p in ports.values()):
            raise ConfigError(where, f"params.{PARAM}.thrift_ports", ports, "expected switch: port")
        target = raw.get("target")
        return cls(target=str(target) if target is not None else None,
                   run_dir=_path(raw.get("run_dir"), "run_dir", where),
                   log_dir=_path(raw.get("log_dir"), "log_dir", where),
                   log_level=str(raw.get("log_level") or "info"),
                   pcap_dir=_path(raw.get("pcap_dir"), "pcap_dir", where),
                   thrift_ports={str(k): int(v) for k, v in ports.items()},
                   thrift_server=bool(raw.get("thrift_server")),
                   thrift_reason=str(raw.get("thrift_reason") or ""))

    def thrift_note(self) -> str:
        """Why the switches' Thrift ports cannot be used, or "" when they can."""
        if self.target == "python":
            return ("the Python target has no Thrift server (simple_switch_CLI cannot reach it): "
                    "use `mlfabric shell SWITCH` (P4Runtime)")
        if self.target == "bmv2" and not self.thrift_server:
            return self.thrift_reason or "simple_switch_grpc serves no Thrift"
        return ""


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)
