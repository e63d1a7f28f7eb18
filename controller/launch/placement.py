"""Where each rank of a user's job runs on an emulated fabric, and the environment it gets.

One rank per emulated GPU (``gpus``: a server's GPU ``g`` talks on rail ``g``, through the
NIC cabled to rail switch ``g``), or ``ranks_per_host`` ranks per host (local rank ``i`` on
the host's NIC ``i mod nics``). Ranks are numbered server by server (``server``: ranks
``0..G-1`` on the first server, as ``mpirun --map-by slot`` and torchrun number them) or rail
by rail (``rail``: consecutive ranks on the same rail of consecutive servers, so that a ring
in rank order stays on one rail as long as it can). Pure: the launcher does the I/O.

The environment is torchrun's (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``NODE_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``), gloo's interface (``GLOO_SOCKET_IFNAME``)
and the project's own: ``MLFABRIC_HOST``, ``MLFABRIC_RAIL``, ``MLFABRIC_NIC`` (the host-side
interface name) and ``MLFABRIC_NIC_ADDR`` (its address, which a rank binds to to stay on its
rail).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from controller.errors import ConfigError
from controller.topology.model import Host, Nic, Topology

__all__ = ["ORDERS", "Placement", "RankSlot", "environment", "place"]

#: how ranks are numbered
ORDERS = ("server", "rail")
_SOURCE = "<launch>"
DEFAULT_MASTER_PORT = 29500


@dataclass(frozen=True)
class RankSlot:
    """One rank: its host, its local rank there, the GPU and rail it stands for, its NIC."""

    rank: int
    host: str
    node_rank: int
    local_rank: int
    local_world: int
    gpu: int | None
    rail: int | None
    nic: str
    address: str
    subnet: str

    @property
    def ifname(self) -> str:
        """The NIC's interface name inside the host (Mininet's ``host-nic``)."""
        return f"{self.host}-{self.nic}"


@dataclass(frozen=True)
class Placement:
    """Every rank of a job, in rank order."""

    ranks: tuple[RankSlot, ...]
    master_port: int = DEFAULT_MASTER_PORT

    @property
    def world(self) -> int:
        return len(self.ranks)

    @property
    def hosts(self) -> list[str]:
        """The hosts the job uses, in node-rank order."""
        seen: dict[str, None] = {}
        for r in sorted(self.ranks, key=lambda r: r.node_rank):
            seen.setdefault(r.host, None)
        return list(seen)

    @property
    def master_addr(self) -> str:
        return self.ranks[0].address


def _subnet(nic: Nic) -> str:
    """The NIC's network in CIDR, e.g. ``10.1.0.0/16``."""
    import ipaddress

    return str(ipaddress.ip_interface(nic.ip).network)


def _gpus(host: Host) -> int:
    railed = sum(1 for n in host.nics if n.rail is not None)
    return host.gpus or railed


def _nic_for(host: Host, local: int) -> tuple[Nic, int | None]:
    railed = sorted((n for n in host.nics if n.rail is not None), key=lambda n: n.rail or 0)
    if railed:
        nic = railed[local % len(railed)]
        return nic, nic.rail
    if not host.nics:
        raise ConfigError(_SOURCE, "host", host.name, "has no NIC to put a rank on")
    return host.nics[local % len(host.nics)], None


def place(topo: Topology, *, gpus: bool = False, ranks_per_host: int | None = None,
          hosts: Sequence[str] | None = None, order: str = "server",
          master_port: int = DEFAULT_MASTER_PORT) -> Placement:
    """The ranks of a job on ``topo``: one per GPU (``gpus``; the default where the hosts have
    GPUs or rails), else ``ranks_per_host`` per host (default 1), on ``hosts`` (default all).

    >>> from controller.topology import rail_only
    >>> p = place(rail_only(2, 2), gpus=True)
    >>> [(r.rank, r.host, r.local_rank, r.rail, r.ifname, r.address) for r in p.ranks]
    [(0, 's0', 0, 0, 's0-eth0', '10.0.1.0'), (1, 's0', 1, 1, 's0-eth1', '10.1.1.0'), (2, 's1', 0, 0, 's1-eth0', '10.0.1.1'), (3, 's1', 1, 1, 's1-eth1', '10.1.1.1')]
    >>> [(r.rank, r.host, r.rail) for r in place(rail_only(2, 2), gpus=True, order="rail").ranks]
    [(0, 's0', 0), (1, 's1', 0), (2, 's0', 1), (3, 's1', 1)]
    >>> place(rail_only(2, 2), ranks_per_host=0)
    Traceback (most recent call last):
    ...
    mlfabric_base.errors.ConfigError: <launch>: --ranks-per-host: must be an integer >= 1 (got 0)
    """
    if order not in ORDERS:
        raise ConfigError(_SOURCE, "--rank-order", order, f"one of {', '.join(ORDERS)}")
    if gpus and ranks_per_host is not None:
        raise ConfigError(_SOURCE, "--gpus", True, "give --gpus or --ranks-per-host, not both")
    if ranks_per_host is not None and (isinstance(ranks_per_host, bool) or ranks_per_host < 1):
        raise ConfigError(_SOURCE, "--ranks-per-host", ranks_per_host, "must be an integer >= 1")
    if not 1 <= master_port <= 65535:
        raise ConfigError(_SOURCE, "--master-port", master_port, "a TCP port, 1..65535")
    names = [h.name for h in topo.hosts]
    chosen = list(hosts) if hosts else names
    unknown = [h for h in chosen if h not in names]
    if unknown:
        raise ConfigError(_SOURCE, "--hosts", ",".join(unknown), f"not hosts of {topo.name} ({', '.join(names)})")
    if len(set(chosen)) != len(chosen):
        raise ConfigError(_SOURCE, "--hosts", ",".join(chosen), "a host named twice")
    selected = [topo.host(h) for h in chosen]
    if ranks_per_host is None and not gpus:
        gpus = all(_gpus(h) for h in selected)
    if gpus:
        counts = [_gpus(h) for h in selected]
        bare = [h.name for h, c in zip(selected, counts, strict=True) if not c]
        if bare:
            raise ConfigError(_SOURCE, "--gpus", ",".join(bare), "these hosts have no GPUs or rails: use --ranks-per-host")
    else:
        counts = [ranks_per_host or 1] * len(selected)
    slots: list[tuple[int, int, Host, int]] = []  # (node rank, local rank, host, local world)
    for node, (h, n) in enumerate(zip(selected, counts, strict=True)):
        slots += [(node, i, h, n) for i in range(n)]
    if order == "rail":
        slots.sort(key=lambda s: (s[1], s[0]))
    ranks = []
    for rank, (node, local, h, n) in enumerate(slots):
        nic, rail = _nic_for(h, local)
        ranks.append(RankSlot(rank=rank, host=h.name, node_rank=node, local_rank=local, local_world=n,
                              gpu=local if gpus else None, rail=rail, nic=nic.name, address=nic.address,
                              subnet=_subnet(nic)))
    return Placement(tuple(ranks), master_port)


def environment(placement: Placement, slot: RankSlot) -> dict[str, str]:
    """The variables rank ``slot`` starts with (on top of the launcher's own environment).

    >>> from controller.topology import rail_only
    >>> p = place(rail_only(2, 2), gpus=True)
    >>> env = environment(p, p.ranks[3])
    >>> [env[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MLFABRIC_RAIL", "GLOO_SOCKET_IFNAME")]
    ['3', '4', '1', '10.0.1.0', '1', 's1-eth1']
    """
    env = {"RANK": str(slot.rank), "WORLD_SIZE": str(placement.world), "LOCAL_RANK": str(slot.local_rank),
           "LOCAL_WORLD_SIZE": str(slot.local_world), "NODE_RANK": str(slot.node_rank),
           "MASTER_ADDR": placement.master_addr, "MASTER_PORT": str(placement.master_port),
           "GLOO_SOCKET_IFNAME": slot.ifname,
           "MLFABRIC_HOST": slot.host, "MLFABRIC_NIC": slot.ifname, "MLFABRIC_NIC_ADDR": slot.address,
           "MLFABRIC_SUBNET": slot.subnet}
    if slot.rail is not None:
        env["MLFABRIC_RAIL"] = str(slot.rail)
    if slot.gpu is not None:
        env["MLFABRIC_GPU"] = str(slot.gpu)
    return env
