"""Which ports of the switch are up: what PI's watch ports follow (pure).

simple_switch_grpc reports a port's status from its interface (BMv2 polls
``/sys/class/net/IFACE/operstate`` every 200 ms, up when it begins with ``u``), and PI's
``WatchPortEnforcer`` deactivates a group member whose watch port goes down and activates it
when the port comes back. A watch port the switch does not have cannot report a status; PI
counts that as down. The device holds one :class:`PortStatus`; the switch process's port
monitor (or a test) sets it.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["PortStatus", "operstate_up"]


def operstate_up(text: str) -> bool:
    """BMv2's reading of an interface's ``operstate``: up when it begins with ``u``.

    >>> operstate_up("up\\n"), operstate_up("unknown"), operstate_up("down"), operstate_up("")
    (True, True, False, False)
    """
    return text.startswith("u")


class PortStatus:
    """Each known port's status; a port the switch does not have is down.

    >>> s = PortStatus([1, 2])
    >>> s.up(1), s.up(9), s.set(2, False), s.set(2, False), s.up(2)
    (True, False, True, False, False)
    """

    def __init__(self, ports: Iterable[int] = ()) -> None:
        self._up: dict[int, bool] = {p: True for p in ports}

    def up(self, port: int) -> bool:
        return self._up.get(port, False)

    def set(self, port: int, up: bool) -> bool:
        """Record ``port``'s status; True if it changed (a new port counts as a change)."""
        changed = self._up.get(port) != up
        self._up[port] = up
        return changed

    def ports(self) -> dict[int, bool]:
        return dict(self._up)
