"""The machines file of a fabric spread over several machines (``--cluster FILE``).

Strict, like every input file: unknown keys, wrong types, duplicate names or addresses are
one :class:`~controller.errors.ConfigError` naming the file, the key and the value::

    ssh_config: ssh_config        # optional: passed to ssh -F (keys, ports, known hosts)
    tunnel: vxlan                 # optional: vxlan (default) or gretap, the links between machines
    machines:
      - name: m0
        ssh: root@192.168.1.10    # USER@ADDRESS, as Mininet's cluster edition reaches a server
        cores: 8
        tunnel_address: 10.0.0.10 # optional: the address tunnels use (default: ssh's)
        project: /opt/mlfabric    # optional: the checkout there (default: this one's path)
        python: /opt/venv/bin/python  # optional: its environment's (default: PROJECT/.venv/bin/python)

Relative paths are the file's folder's. The first machine is the one the experiment's own
bookkeeping runs beside (its coordinator reaches every machine, itself too, over SSH).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.errors import ConfigError
from controller.yamlfile import int_field, read_yaml, str_field

__all__ = ["Machine", "Machines", "load_machines", "machines_from_dict", "machines_to_dict"]

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,14}$")
_USER = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")
MACHINE_KEYS = {"name", "ssh", "cores", "tunnel_address", "project", "python"}
TOP_KEYS = {"machines", "ssh_config", "tunnel"}
TUNNELS = ("vxlan", "gretap")


@dataclass(frozen=True)
class Machine:
    """One machine: how SSH reaches it, the address tunnels use and its cores."""

    name: str
    user: str
    address: str
    cores: int
    tunnel_address: str
    project: str
    #: the interpreter of the project's environment there
    python: str = ""

    def __post_init__(self) -> None:
        if not self.python:
            object.__setattr__(self, "python", f"{self.project}/.venv/bin/python")

    @property
    def ssh_target(self) -> str:
        return f"{self.user}@{self.address}"


@dataclass(frozen=True)
class Machines:
    """The machines of a cluster fabric, in the file's order."""

    machines: tuple[Machine, ...]
    ssh_config: str | None = None
    source: str = "<machines>"
    #: the kernel tunnel of the links between machines
    tunnel: str = "vxlan"

    def __post_init__(self) -> None:
        if not self.machines:
            raise ConfigError(self.source, "machines", [], "lists no machine")

    def get(self, name: str) -> Machine:
        for m in self.machines:
            if m.name == name:
                return m
        raise ConfigError(self.source, "machines", name, f"no such machine (have {', '.join(self.names)})")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.machines)

    @property
    def cores(self) -> int:
        return sum(m.cores for m in self.machines)


def _address(source: str, key: str, value: str) -> str:
    try:
        return str(ipaddress.IPv4Address(value))
    except ValueError:
        raise ConfigError(source, key, value, "expected an IPv4 address (tunnels are made between addresses)") \
            from None


def _machine(source: str, i: int, raw: Any, here: Path, default_project: str) -> Machine:
    where = f"machines[{i}]"
    if not isinstance(raw, dict):
        raise ConfigError(source, where, raw, "expected a mapping with name, ssh and cores")
    for key in raw:
        if key not in MACHINE_KEYS:
            raise ConfigError(source, f"{where}.{key}", raw[key], f"unknown key (known: {', '.join(sorted(MACHINE_KEYS))})")
    for key in ("name", "ssh", "cores"):
        if key not in raw:
            raise ConfigError(source, f"{where}.{key}", None, "is required")
    name = str_field(source, f"{where}.name", raw["name"])
    if not _NAME.match(name):
        raise ConfigError(source, f"{where}.name", name, "expected 1-15 lower-case letters, digits or '-', "
                                                         "starting with a letter")
    ssh = str_field(source, f"{where}.ssh", raw["ssh"])
    user, sep, address = ssh.rpartition("@")
    if not sep or not _USER.match(user):
        raise ConfigError(source, f"{where}.ssh", ssh, "expected USER@ADDRESS (for example root@192.168.1.10)")
    address = _address(source, f"{where}.ssh", address)
    cores = int_field(source, f"{where}.cores", raw["cores"], 1, 4096)
    tunnel = _address(source, f"{where}.tunnel_address", str_field(source, f"{where}.tunnel_address",
                                                                   raw.get("tunnel_address", address)))
    project = str_field(source, f"{where}.project", raw.get("project", default_project))
    if not Path(project).is_absolute():
        project = str((here / project).resolve())
    python = str_field(source, f"{where}.python", raw.get("python", f"{project}/.venv/bin/python"))
    if not Path(python).is_absolute():
        raise ConfigError(source, f"{where}.python", python, "expected an absolute path (on that machine)")
    return Machine(name=name, user=user, address=address, cores=cores, tunnel_address=tunnel, project=project,
                   python=python)


def machines_from_dict(raw: Any, *, source: str = "<machines>", here: Path = Path("."),
                       default_project: str | None = None) -> Machines:
    """Machines from a parsed file (see the module docstring)."""
    if default_project is None:
        default_project = str(Path(__file__).resolve().parents[2])
    if not isinstance(raw, dict):
        raise ConfigError(source, "file", type(raw).__name__, "expected a mapping with a machines list")
    for key in raw:
        if key not in TOP_KEYS:
            raise ConfigError(source, key, raw[key], f"unknown key (known: {', '.join(sorted(TOP_KEYS))})")
    items = raw.get("machines")
    if not isinstance(items, list) or not items:
        raise ConfigError(source, "machines", items, "expected a non-empty list of machines")
    machines = tuple(_machine(source, i, m, here, default_project) for i, m in enumerate(items))
    for key, values in (("name", [m.name for m in machines]), ("ssh", [m.address for m in machines]),
                        ("tunnel_address", [m.tunnel_address for m in machines])):
        seen: set[str] = set()
        for i, v in enumerate(values):
            if v in seen:
                raise ConfigError(source, f"machines[{i}].{key}", v, "appears twice: every machine needs its own")
            seen.add(v)
    ssh_config = raw.get("ssh_config")
    if ssh_config is not None:
        ssh_config = str_field(source, "ssh_config", ssh_config)
        if not Path(ssh_config).is_absolute():
            ssh_config = str((here / ssh_config).resolve())
    tunnel = raw.get("tunnel", "vxlan")
    if tunnel not in TUNNELS:
        raise ConfigError(source, "tunnel", tunnel, f"expected one of {', '.join(TUNNELS)}")
    return Machines(machines=machines, ssh_config=ssh_config, source=source, tunnel=tunnel)


def load_machines(path: str | Path) -> Machines:
    """The machines file at ``path``, checked strictly."""
    p = Path(path)
    machines = machines_from_dict(read_yaml(p), source=str(p), here=p.resolve().parent)
    if machines.ssh_config and not Path(machines.ssh_config).is_file():
        raise ConfigError(str(p), "ssh_config", machines.ssh_config, "no such file (relative paths are the machines "
                                                                      "file's folder's)")
    return machines


def machines_to_dict(m: Machines) -> dict[str, Any]:
    """The file's form of ``m`` (every default spelled out)."""
    out: dict[str, Any] = {"machines": [{"name": x.name, "ssh": x.ssh_target, "cores": x.cores,
                                         "tunnel_address": x.tunnel_address, "project": x.project,
                                         "python": x.python}
                                        for x in m.machines]}
    if m.ssh_config:
        out["ssh_config"] = m.ssh_config
    out["tunnel"] = m.tunnel
    return out
