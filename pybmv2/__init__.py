"""A pure-Python v1model switch that runs p4c BMv2 JSON and serves P4Runtime."""

from pybmv2.program import Program
from pybmv2.switch import V1Switch

__all__ = ["Program", "V1Switch"]
