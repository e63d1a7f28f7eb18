"""Strict YAML loading and dumping of topology files.

Unknown keys and wrong types are rejected with one :class:`~controller.errors.ConfigError`
naming the file, the key path (``hosts[2].nics[0].rail``) and the value.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from controller.errors import ConfigError
from controller.topology.model import (
    ETHERNET_MTU,
    MTU_RANGE,
    ROLES,
    Endpoint,
    Host,
    Link,
    Nic,
    Switch,
    Topology,
)
from mlfabric_base.numbers import is_finite_number, number_problem

__all__ = ["dump_topology", "load_topology", "parse_topology", "topology_to_dict"]


class _Reader:
    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, key: str, value: Any, problem: str) -> ConfigError:
        return ConfigError(self.file, key, value, problem)

    def mapping(self, value: Any, key: str, allowed: set[str], required: set[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, value, "expected a mapping")
        for k in value:
            if k not in allowed:
                raise self.fail(f"{key}.{k}" if key else str(k), value[k], f"unknown key (allowed: {', '.join(sorted(allowed))})")
        for k in sorted(required):
            if k not in value:
                raise self.fail(f"{key}.{k}" if key else k, None, "required key is missing")
        return value

    def seq(self, value: Any, key: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(key, value, "expected a list")
        return value

    def str_(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(key, value, "expected a non-empty string")
        return value

    def int_(self, value: Any, key: str, minimum: int | None = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, value, "expected an integer")
        if minimum is not None and value < minimum:
            raise self.fail(key, value, f"must be >= {minimum}")
        if value > MAX_INT:
            raise self.fail(key, value, f"must be <= {MAX_INT} (a 64-bit id)")
        return value

    def num(self, value: Any, key: str) -> float:
        if number_problem(value, minimum=0) is not None:
            raise self.fail(key, value, "expected a finite non-negative number")
        return float(value)

    def endpoint(self, value: Any, key: str) -> Endpoint:
        text = self.str_(value, key)
        node, sep, port = text.rpartition(":")
        if not sep or not node or not port:
            raise self.fail(key, value, "expected NODE:PORT (a switch port number or a host NIC name)")
        return Endpoint(node, int(port) if port.isdigit() else port)


#: the most hosts, switches or links a topology file may list (a 16,384-GPU rail-only fabric
#: has 2,048 servers and about 20,000 links)
MAX_ITEMS = 200_000


#: the largest integer a topology holds (a P4Runtime device id is 64 bits)
MAX_INT = (1 << 63) - 1


def _numbers(value: Any, key: str) -> Iterator[tuple[str, Any]]:
    """Every number under ``value`` (a generator's free-form parameters), with its key."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{key}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{key}[{i}]")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield key, value


def parse_topology(doc: Any, file: str = "<topology>") -> Topology:
    r = _Reader(file)
    top = r.mapping(doc, "", {"name", "kind", "params", "hosts", "switches", "links", "schedules", "mtu"},
                    {"name", "hosts", "switches", "links"})
    for key in ("hosts", "switches", "links"):  # refuse a monster before walking it
        items = top.get(key)
        if isinstance(items, list) and len(items) > MAX_ITEMS:
            raise r.fail(key, f"{len(items):,} entries", f"more than {MAX_ITEMS:,}: no fabric mlfabric compiles or "
                                                         "emulates is that large")
    hosts = []
    for i, h in enumerate(r.seq(top.get("hosts"), "hosts")):
        key = f"hosts[{i}]"
        h = r.mapping(h, key, {"name", "nics", "gpus"}, {"name", "nics"})
        nics = []
        for j, n in enumerate(r.seq(h["nics"], f"{key}.nics")):
            nk = f"{key}.nics[{j}]"
            n = r.mapping(n, nk, {"name", "ip", "mac", "rail"}, {"name", "ip", "mac"})
            rail = None if n.get("rail") is None else r.int_(n["rail"], f"{nk}.rail")
            nics.append(Nic(r.str_(n["name"], f"{nk}.name"), r.str_(n["ip"], f"{nk}.ip"),
                            r.str_(n["mac"], f"{nk}.mac"), rail))
        hosts.append(Host(r.str_(h["name"], f"{key}.name"), tuple(nics), r.int_(h.get("gpus", 0), f"{key}.gpus")))
    switches = []
    for i, s in enumerate(r.seq(top.get("switches"), "switches")):
        key = f"switches[{i}]"
        s = r.mapping(s, key, {"name", "role", "program", "device_id", "grpc", "rail"},
                      {"name", "role", "program", "device_id"})
        role = r.str_(s["role"], f"{key}.role")
        if role not in ROLES:
            raise r.fail(f"{key}.role", role, f"unknown role (one of {', '.join(ROLES)})")
        grpc = None if s.get("grpc") is None else r.str_(s["grpc"], f"{key}.grpc")
        rail = None if s.get("rail") is None else r.int_(s["rail"], f"{key}.rail")
        switches.append(Switch(r.str_(s["name"], f"{key}.name"), role,  # type: ignore[arg-type]
                               r.str_(s["program"], f"{key}.program"),
                               r.int_(s["device_id"], f"{key}.device_id"), grpc, rail))
    links = []
    for i, lk in enumerate(r.seq(top.get("links"), "links")):
        key = f"links[{i}]"
        lk = r.mapping(lk, key, {"a", "b", "rate_mbps", "delay_us", "mtu"}, {"a", "b"})
        rate = None if lk.get("rate_mbps") is None else r.num(lk["rate_mbps"], f"{key}.rate_mbps")
        mtu = None if lk.get("mtu") is None else _mtu(r, lk["mtu"], f"{key}.mtu")
        links.append(Link(r.endpoint(lk["a"], f"{key}.a"), r.endpoint(lk["b"], f"{key}.b"), rate,
                          r.num(lk.get("delay_us", 0), f"{key}.delay_us"), mtu))
    params = top.get("params") or {}
    if not isinstance(params, dict):
        raise r.fail("params", params, "expected a mapping")
    for key, value in _numbers(params, "params"):
        if not is_finite_number(value):
            raise r.fail(key, value, "expected a finite number")
    schedules = top.get("schedules") or {}
    if not isinstance(schedules, dict):
        raise r.fail("schedules", schedules, "expected a mapping")
    kind = top.get("kind", "custom")
    mtu = ETHERNET_MTU if top.get("mtu") is None else _mtu(r, top["mtu"], "mtu")
    return Topology(r.str_(top["name"], "name"), r.str_(kind, "kind"), tuple(hosts), tuple(switches),
                    tuple(links), dict(params), dict(schedules), mtu)


def _mtu(r: _Reader, value: Any, key: str) -> int:
    mtu = r.int_(value, key)
    low, high = MTU_RANGE
    if not low <= mtu <= high:
        raise r.fail(key, mtu, f"an MTU must be in {low}..{high} bytes")
    return mtu


def load_topology(path: str | Path) -> Topology:
    """Read and parse a topology file; every problem is a ConfigError naming the file."""
    from controller.yamlfile import read_yaml

    return parse_topology(read_yaml(path), str(path))


def topology_to_dict(topo: Topology) -> dict[str, Any]:
    def link(lk: Link) -> dict[str, Any]:
        d: dict[str, Any] = {"a": str(lk.a), "b": str(lk.b)}
        if lk.rate_mbps is not None:
            d["rate_mbps"] = lk.rate_mbps
        if lk.delay_us:
            d["delay_us"] = lk.delay_us
        if lk.mtu is not None:
            d["mtu"] = lk.mtu
        return d

    return {
        "name": topo.name,
        "kind": topo.kind,
        **({"mtu": topo.mtu} if topo.mtu != ETHERNET_MTU else {}),
        "params": dict(topo.params),
        "hosts": [
            {"name": h.name, "gpus": h.gpus,
             "nics": [{k: v for k, v in (("name", n.name), ("ip", n.ip), ("mac", n.mac), ("rail", n.rail)) if v is not None}
                      for n in h.nics]}
            for h in topo.hosts
        ],
        "switches": [
            {k: v for k, v in (("name", s.name), ("role", s.role), ("program", s.program),
                               ("device_id", s.device_id), ("grpc", s.grpc), ("rail", s.rail)) if v is not None}
            for s in topo.switches
        ],
        "links": [link(lk) for lk in topo.links],
        **({"schedules": dict(topo.schedules)} if topo.schedules else {}),
    }


def dump_topology(topo: Topology, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(topology_to_dict(topo), sort_keys=False, width=120))
