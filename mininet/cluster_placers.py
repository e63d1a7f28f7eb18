"""Mininet's cluster edition's own placers (``mininet.examples.cluster``) run on a topology, so
that ``mlfabric cluster plan`` can show what they would do beside the project's placement.

``SwitchBinPlacer`` (its default) bins the switches evenly and puts each host with the last
switch it is cabled to; ``RoundRobinPlacer`` deals the nodes out in turn. Its
``HostSwitchBinPlacer`` is left out: it indexes its servers with a float under Python 3
(``self.hind / self.hbin``) and fails on any topology.
"""

from __future__ import annotations

from mininet.examples.cluster import RoundRobinPlacer, SwitchBinPlacer

from controller.cluster.machines import Machines
from controller.topology.model import Topology

__all__ = ["PLACERS", "edition_placement"]

PLACERS = {"SwitchBinPlacer": SwitchBinPlacer, "RoundRobinPlacer": RoundRobinPlacer}


def edition_placement(name: str, topo: Topology, machines: Machines) -> dict[str, str]:
    """Each node's machine as the cluster edition's placer ``name`` puts it."""
    hosts = [h.name for h in topo.hosts]
    switches = [s.name for s in topo.switches]
    links = [(lk.a.node, lk.b.node) for lk in topo.links]
    placer = PLACERS[name](servers=list(machines.names), nodes=[*hosts, *switches], hosts=hosts, switches=switches,
                           links=links)
    # in MininetCluster.placeNodes' order: the topology's nodes as Mininet lists them
    return {node: placer.place(node) for node in [*hosts, *switches]}
