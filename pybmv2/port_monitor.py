"""The switch process's port monitor: each port's interface up or down, as
simple_switch_grpc sees it (BMv2's ``PortMonitor`` reads ``/sys/class/net/IFACE/operstate``
every 200 ms), reported to the P4Runtime device so that PI's watch ports follow."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from pybmv2.runtime.port_status import operstate_up

__all__ = ["PERIOD_S", "PortMonitor", "interface_up"]

log = logging.getLogger(__name__)

#: BMv2's polling period
PERIOD_S = 0.2


def interface_up(iface: str, root: Path = Path("/sys/class/net")) -> bool:
    """Whether ``iface`` is up; an interface that is gone is down."""
    try:
        return operstate_up((root / iface / "operstate").read_text())
    except OSError:
        return False


class PortMonitor:
    """Polls the interfaces behind ``ports`` (port -> interface) and calls
    ``on_change(port, up)`` once for each at start and again whenever one changes."""

    def __init__(self, ports: Mapping[int, str], on_change: Callable[[int, bool], None], *,
                 period_s: float = PERIOD_S, probe: Callable[[str], bool] = interface_up) -> None:
        self.ports = dict(ports)
        self.on_change = on_change
        self.period_s = period_s
        self.probe = probe
        self._seen: dict[int, bool] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> None:
        """One round: report every port whose status is new or changed."""
        for port, iface in self.ports.items():
            up = self.probe(iface)
            if self._seen.get(port) != up:
                self._seen[port] = up
                log.info("port %d (%s) is %s", port, iface, "up" if up else "down")
                self.on_change(port, up)

    def start(self) -> None:
        self.poll()
        self._thread = threading.Thread(target=self._run, name="port-monitor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.poll()
            except Exception:  # never let the monitor die silently
                log.exception("port monitor")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
