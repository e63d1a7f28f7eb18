"""Packet-by-packet tests of P4 programs on BMv2 or the Python target.

Open a target with a compiled program, install entries through P4Runtime, send frames and
get back every frame the switch emits::

    with open_target("python", pipeline_files("rail_switch")) as sw:
        sw.client.write(...)
        outputs = sw.send(1, frame)   # [(port, bytes), ...]

The same test runs on ``simple_switch_grpc`` with ``open_target("bmv2", ...)``.
"""

from packettest.targets import Outputs, PacketTarget, open_target

__all__ = ["Outputs", "PacketTarget", "open_target"]
