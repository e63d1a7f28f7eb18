"""Mininet switch nodes running a P4 target process (the Python target or BMv2).

The node lives in the root namespace like Mininet's other switches; its ports are the
interfaces Mininet created for its links, passed to the switch process as ``-i PORT@IFACE``.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from mininet.node import Switch

from controller.netstate import NetRecord
from controller.switch_process import CPU_PORT, SwitchProcess, SwitchSpec

__all__ = ["P4TargetSwitch"]

log = logging.getLogger(__name__)


def _quiet(iface: str) -> None:
    """No IPv6 on a switch port: else the kernel's own router solicitations and multicast
    listener reports leave through it and cross the fabric as if a host had sent them."""
    with contextlib.suppress(OSError):  # OSError: IPv6 is disabled in the kernel altogether
        Path(f"/proc/sys/net/ipv6/conf/{iface}/disable_ipv6").write_text("1")


class P4TargetSwitch(Switch):
    """A Mininet switch backed by ``mlfabric-switch`` or ``simple_switch_grpc``.

    Extra parameters: ``target`` (python|bmv2), ``device_id``, ``grpc_address``,
    ``cpu_port``, ``record`` (a NetRecord the process is registered in), ``log_dir``,
    ``log_level``, ``pcap_dir``, ``thrift_port`` (BMv2), ``defer_ready``, ``engine`` (the
    Python target's packet engine: auto, native or python; None: its default).
    """

    def __init__(self, name: str, *, target: str = "python", device_id: int = 1,
                 grpc_address: str = "127.0.0.1:9559", cpu_port: int | None = CPU_PORT,
                 record: NetRecord | None = None, log_dir: Path | None = None, log_level: str = "info",
                 pcap_dir: Path | None = None, thrift_port: int | None = None, start_timeout: float = 15.0, defer_ready: bool = False,
                 extra_args: tuple[str, ...] = (), engine: str | None = None, **params) -> None:
        super().__init__(name, **params)
        self.target = target
        self.device_id = device_id
        self.grpc_address = grpc_address
        self.cpu_port = cpu_port
        self.record = record
        self.log_dir = log_dir
        self.log_level = log_level
        self.pcap_dir = pcap_dir
        self.thrift_port = thrift_port
        self.start_timeout = start_timeout
        #: when set, start() only launches the process; call wait_ready() later, so that
        #: a fabric's switches start in parallel
        self.defer_ready = defer_ready
        self.extra_args = tuple(extra_args)
        self.engine = engine
        self.process: SwitchProcess | None = None

    def port_map(self) -> dict[int, str]:
        return {port: intf.name for port, intf in self.intfs.items() if intf.name != "lo"}

    def start(self, controllers) -> None:
        for iface in self.port_map().values():
            _quiet(iface)
        spec = SwitchSpec(name=self.name, target=self.target, ports=self.port_map(),
                          device_id=self.device_id, grpc_address=self.grpc_address,
                          cpu_port=self.cpu_port, log_dir=self.log_dir, log_level=self.log_level,
                          pcap_dir=self.pcap_dir, thrift_port=self.thrift_port, extra_args=self.extra_args,
                          engine=self.engine)
        if self.record is not None:
            self.record.add_links(spec.ports.values())
        self.process = SwitchProcess(spec, self.record).launch()
        if not self.defer_ready:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Block until the switch answers on its P4Runtime port (see ``defer_ready``)."""
        assert self.process is not None, f"{self.name} was not started"
        self.process.wait_ready(timeout=self.start_timeout)
        log.info("%s: %s target up in %.2f s", self.name, self.target, self.process.startup_seconds or 0)

    def stop(self, deleteIntfs: bool = True) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None
        super().stop(deleteIntfs)
