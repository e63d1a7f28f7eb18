"""Network interface names of a fabric's switch ports, as the emulation creates them."""

from __future__ import annotations

import zlib

__all__ = ["MAX_IFNAME", "switch_intf_name"]

#: Linux's limit on an interface name (IFNAMSIZ - 1)
MAX_IFNAME = 15


def switch_intf_name(switch: str, port: int | str) -> str:
    """A switch port's interface: Mininet's ``SWITCH-ethPORT`` where it fits in 15
    characters; else the same without the switch name's punctuation (a Clos leaf
    ``rail0-leaf0`` has ``rail0leaf0-eth1``), else a short hash of the name.

    >>> switch_intf_name("spine0", 3), switch_intf_name("rail0-leaf0", 1)
    ('spine0-eth3', 'rail0leaf0-eth1')
    >>> switch_intf_name("rail12-leaf10", 12)
    'swd7011c52-e12'
    """
    name = f"{switch}-eth{port}"
    if len(name) <= MAX_IFNAME:
        return name
    name = "".join(c for c in switch if c.isalnum()) + f"-eth{port}"
    if len(name) <= MAX_IFNAME:
        return name
    return f"sw{zlib.crc32(switch.encode()):08x}-e{port}"
