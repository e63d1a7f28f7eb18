"""The topology model: hosts with NICs, switches with roles, links between ports.

One model describes every fabric the project emulates. The controller compiles rules from
it and the Mininet builder creates the same network from it. Everything here is immutable
and free of I/O; :mod:`controller.topology.loader` reads and writes the YAML form.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["ETHERNET_MTU", "JUMBO_MTU", "MTU_RANGE", "ROLES", "Endpoint", "Host", "Link", "Nic", "Switch", "Topology"]

#: Ethernet's MTU, Linux's default and a topology file's when it names none
ETHERNET_MTU = 1500
#: the jumbo MTU of ML training fabrics, the generators' default for them: 9,000-byte
#: frames are the norm on training clusters (RoCE runs 4,096), and each frame costs the
#: emulation the same per-packet work in hosts, veths and switches whatever its size
JUMBO_MTU = 9000
#: the MTUs a topology may ask for (IPv4's minimum to the common jumbo maximum)
MTU_RANGE = (576, 9216)

ROLES = ("rail", "spine", "leaf", "hb-domain", "ocs", "tor")
Role = Literal["rail", "spine", "leaf", "hb-domain", "ocs", "tor"]


@dataclass(frozen=True, slots=True)
class Nic:
    """A host interface; ``rail`` is the GPU index it serves (None for a plain NIC)."""

    name: str
    ip: str  # with prefix length, e.g. "10.1.0.3/16"
    mac: str
    rail: int | None = None

    @property
    def address(self) -> str:
        return self.ip.split("/")[0]

    @property
    def prefix_len(self) -> int:
        return int(self.ip.split("/")[1]) if "/" in self.ip else 32


@dataclass(frozen=True, slots=True)
class Host:
    """A server (an HB domain of ``gpus`` GPUs for ML fabrics) and its NICs."""

    name: str
    nics: tuple[Nic, ...]
    gpus: int = 0

    def nic(self, name: str) -> Nic:
        for n in self.nics:
            if n.name == name:
                return n
        raise KeyError(f"host {self.name} has no NIC {name!r}")

    def rail_nic(self, rail: int) -> Nic:
        for n in self.nics:
            if n.rail == rail:
                return n
        raise KeyError(f"host {self.name} has no NIC on rail {rail}")


@dataclass(frozen=True, slots=True)
class Switch:
    name: str
    role: Role
    program: str
    device_id: int
    grpc: str | None = None  # host:port; assigned at emulation time when None
    rail: int | None = None  # the rail a rail/leaf switch serves


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One end of a link: a host NIC (``port`` is the NIC name) or a switch port number."""

    node: str
    port: str | int

    def __str__(self) -> str:
        return f"{self.node}:{self.port}"


@dataclass(frozen=True, slots=True)
class Link:
    a: Endpoint
    b: Endpoint
    rate_mbps: float | None = None
    delay_us: float = 0.0
    #: this link's MTU where it differs from the fabric's (:meth:`Topology.link_mtu`)
    mtu: int | None = None

    def other(self, node: str) -> Endpoint:
        return self.b if self.a.node == node else self.a

    def end(self, node: str) -> Endpoint:
        return self.a if self.a.node == node else self.b


@dataclass(frozen=True)
class Topology:
    """A whole fabric. ``kind`` names the generator that made it (or ``custom``)."""

    name: str
    kind: str
    hosts: tuple[Host, ...]
    switches: tuple[Switch, ...]
    links: tuple[Link, ...]
    params: dict[str, object] = field(default_factory=dict)
    schedules: dict[str, object] = field(default_factory=dict)
    #: the fabric's MTU (IP bytes per frame), that of every link that names none
    mtu: int = ETHERNET_MTU

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hosts", {h.name: h for h in self.hosts})
        object.__setattr__(self, "_switches", {s.name: s for s in self.switches})
        adjacency: dict[str, list[Link]] = {}
        for lk in self.links:
            adjacency.setdefault(lk.a.node, []).append(lk)
            if lk.b.node != lk.a.node:
                adjacency.setdefault(lk.b.node, []).append(lk)
        object.__setattr__(self, "_adjacency", adjacency)

    def host(self, name: str) -> Host:
        try:
            return self._hosts[name]  # type: ignore[attr-defined]
        except KeyError:
            raise KeyError(f"no host {name!r} in topology {self.name!r}") from None

    def switch(self, name: str) -> Switch:
        try:
            return self._switches[name]  # type: ignore[attr-defined]
        except KeyError:
            known = ", ".join(s.name for s in self.switches[:8])
            raise KeyError(f"no switch {name!r} in topology {self.name!r} (switches: {known}...)") from None

    def is_switch(self, name: str) -> bool:
        return name in self._switches  # type: ignore[attr-defined]

    def links_of(self, node: str) -> Iterator[Link]:
        return iter(self._adjacency.get(node, ()))  # type: ignore[attr-defined]

    def link_mtu(self, link: Link) -> int:
        """The MTU of ``link``: its own, else the fabric's.

        >>> t = Topology("t", "custom", (), (), (), mtu=9000)
        >>> t.link_mtu(Link(Endpoint("a", 1), Endpoint("b", 1))), t.link_mtu(Link(Endpoint("a", 1), Endpoint("b", 1), mtu=1500))
        (9000, 1500)
        """
        return link.mtu if link.mtu is not None else self.mtu

    def switch_ports(self, switch: str) -> dict[int, Endpoint]:
        """Port number -> the endpoint on the other side of the link."""
        ports: dict[int, Endpoint] = {}
        for lk in self.links_of(switch):
            ports[int(lk.end(switch).port)] = lk.other(switch)
        return ports

    def without(self, switches: set[str] | frozenset[str]) -> Topology:
        """The fabric with ``switches`` (and their links) removed: what survives a failure.

        >>> from controller.topology import rail_fat_tree
        >>> t = rail_fat_tree(2, 2, spines=2).without({"spine0"})
        >>> [s.name for s in t.switches], len(t.links)
        (['rail0', 'rail1', 'spine1'], 6)
        """
        unknown = set(switches) - {s.name for s in self.switches}
        if unknown:
            raise KeyError(f"no switch {sorted(unknown)} in topology {self.name!r}")
        keep = tuple(s for s in self.switches if s.name not in switches)
        links = tuple(lk for lk in self.links if lk.a.node not in switches and lk.b.node not in switches)
        return Topology(self.name, self.kind, self.hosts, keep, links, dict(self.params), dict(self.schedules),
                        self.mtu)

    @property
    def rails(self) -> int:
        rails = self.params.get("rails")
        return rails if isinstance(rails, int) else 0
