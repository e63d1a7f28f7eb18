"""Topology model, strict loading, validation and generators."""

from controller.topology.generators import rail_fat_tree, rail_only, topoopt, topoopt_wired
from controller.topology.loader import dump_topology, load_topology, parse_topology
from controller.topology.model import Endpoint, Host, Link, Nic, Switch, Topology
from controller.topology.optical import optical
from controller.topology.validate import check_topology, require_valid

__all__ = [
    "Endpoint",
    "Host",
    "Link",
    "Nic",
    "Switch",
    "Topology",
    "check_topology",
    "dump_topology",
    "load_topology",
    "optical",
    "parse_topology",
    "rail_fat_tree",
    "rail_only",
    "require_valid",
    "topoopt",
    "topoopt_wired",
]
