"""Bytes through chosen switch ports, from rail_switch's per-port counters (``port_rx``,
``port_tx``), read as a backup controller (an election id below the installer's), one
connection per switch: what each GPU's NIC sent, or how evenly a leaf spread a collective
over its uplinks."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from controller.p4build import pipeline_files
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.schema import P4Schema
from controller.topology.model import Endpoint, Switch, Topology

__all__ = ["PortCounterMeter", "busiest_share", "mean_and_max"]

Reading = dict[tuple[str, int], int]


class PortCounterMeter:
    """The byte counts of counter ``counter`` (``port_rx`` or ``port_tx``) at the ports of
    ``live``'s switches that ``chosen(switch, port, peer)`` picks."""

    def __init__(self, live: Topology, counter: str,
                 chosen: Callable[[Switch, int, Endpoint], bool]) -> None:
        schema = P4Schema.from_file(pipeline_files("rail_switch").p4info)
        self.counter_id = schema.counter(counter).id
        self.ports: dict[str, tuple[P4RuntimeClient, list[int]]] = {}
        try:
            for sw in live.switches:
                ports = sorted(p for p, peer in live.switch_ports(sw.name).items() if chosen(sw, p, peer))
                if ports and sw.grpc:
                    client = P4RuntimeClient(sw.grpc, device_id=sw.device_id, election_id=0).connect()
                    self.ports[sw.name] = (client, ports)
        except BaseException:
            self.close()
            raise

    def read(self) -> Reading:
        out: Reading = {}
        for name, (client, ports) in self.ports.items():
            cells = {e.index.index: e.data.byte_count for e in client.read_counter(self.counter_id)}
            out.update({(name, p): cells.get(p, 0) for p in ports})
        return out

    def close(self) -> None:
        for client, _ in self.ports.values():
            client.close()
        self.ports.clear()


def mean_and_max(before: Mapping[tuple[str, int], int], after: Mapping[tuple[str, int], int]) -> tuple[float, int]:
    """The mean and the largest bytes one port counted between two reads.

    >>> mean_and_max({("a", 1): 0, ("a", 2): 10}, {("a", 1): 30, ("a", 2): 20})
    (20.0, 30)
    """
    deltas = [after[k] - before[k] for k in after]
    return (sum(deltas) / len(deltas), max(deltas)) if deltas else (0.0, 0)


def busiest_share(before: Mapping[tuple[str, int], int], after: Mapping[tuple[str, int], int]) -> float | None:
    """The busiest port's bytes over its switch's fair share (1.0: perfectly even), the
    worst switch's; None when nothing was counted.

    >>> busiest_share({("l0", 1): 0, ("l0", 2): 0}, {("l0", 1): 30, ("l0", 2): 10})
    1.5
    """
    by_switch: dict[str, list[int]] = {}
    for (name, port), count in after.items():
        by_switch.setdefault(name, []).append(count - before[(name, port)])
    worst = None
    for sent in by_switch.values():
        if sum(sent):
            share = max(sent) / (sum(sent) / len(sent))
            worst = share if worst is None else max(worst, share)
    return worst
