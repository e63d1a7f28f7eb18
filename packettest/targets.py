"""Targets a packet test can run on, all driven through real P4Runtime.

- ``python``: the Python target in this process (fast, no root);
- ``python-process``: ``mlfabric-switch`` as a process on veth pairs (root);
- ``bmv2``: ``simple_switch_grpc`` on veth pairs (root, BMv2 installed).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from controller.netstate import NetRecord
from controller.p4build import Artifact
from controller.p4runtime.client import P4RuntimeClient
from controller.p4runtime.schema import P4Schema, load_p4info
from controller.readiness import free_tcp_port
from controller.switch_process import CPU_PORT, SwitchProcess, SwitchSpec

if TYPE_CHECKING:
    from pybmv2.runtime.server import ServerOptions

__all__ = ["KINDS", "Outputs", "PacketTarget", "open_target"]

KINDS = ("python", "python-process", "bmv2")
Outputs = list[tuple[int, bytes]]


class PacketTarget:
    """A switch with a program loaded and a primary P4Runtime client connected to it."""

    kind: str
    client: P4RuntimeClient
    schema: P4Schema

    def send(self, port: int, frame: bytes, *, expect: int | None = None) -> Outputs:
        """Inject ``frame`` on ``port``; return every (port, frame) the switch emits for it.

        Frames for the CPU port arrive as packet-ins on ``client.packet_ins`` instead.
        ``expect`` lets process targets stop waiting once that many frames arrived.
        """
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> PacketTarget:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _load_pipeline(client: P4RuntimeClient, artifact: Artifact) -> P4Schema:
    p4info = load_p4info(artifact.p4info)
    client.set_pipeline(p4info, artifact.json.read_bytes())
    return P4Schema(p4info)


class InProcessTarget(PacketTarget):
    kind = "python"

    def __init__(self, artifact: Artifact, *, device_id: int = 1, cpu_port: int = CPU_PORT,
                 engine: str = "python", server_options: ServerOptions | None = None,
                 ports: Sequence[int] = (1, 2, 3, 4)) -> None:
        from pybmv2.runtime.server import P4RuntimeServer
        from pybmv2.switch import V1Switch

        if engine == "python":
            self.switch = V1Switch(None, cpu_port=cpu_port)
        else:  # the native engine ("native"), or it where it can run the program ("auto")
            from pybmv2.native.switch import NativeSwitch

            self.switch = NativeSwitch(None, cpu_port=cpu_port, engine=engine)
        self.server = P4RuntimeServer(self.switch, device_id=device_id, address="127.0.0.1:0",
                                      options=server_options)
        self.server.device.set_ports(ports)  # in process the ports have no interface: all up
        self.server.start()
        try:
            self.client = P4RuntimeClient(self.server.address, device_id=device_id).connect()
            self.schema = _load_pipeline(self.client, artifact)
        except BaseException:
            self.server.stop()
            raise

    def send(self, port: int, frame: bytes, *, expect: int | None = None) -> Outputs:
        return list(self.server.deliver_outputs(self.switch.process(port, frame)))

    def close(self) -> None:
        self.client.close()
        self.server.stop()
        close_engine = getattr(self.switch, "close", None)
        if close_engine is not None:
            close_engine()


class ProcessTarget(PacketTarget):
    def __init__(self, kind: str, artifact: Artifact, ports: Sequence[int], *, device_id: int = 1,
                 cpu_port: int = CPU_PORT, engine: str | None = None,
                 extra_args: tuple[str, ...] = (), log_dir: Path | None = None,
                 super_packets: bool = False) -> None:
        from packettest.veth import VethPorts

        self.kind = kind
        self._stack = contextlib.ExitStack()
        try:
            record = self._stack.enter_context(NetRecord(f"packettest-{kind}"))
            #: the switch's output (info level): ``log_dir``, else a temporary folder
            self.log_dir = log_dir if log_dir is not None else Path(self._stack.enter_context(
                tempfile.TemporaryDirectory(prefix=f"packettest-{kind}-")))
            self.veth = VethPorts(ports, record, super_packets=super_packets)
            if super_packets:
                extra_args = (*extra_args, "--super-packets")
            self._stack.callback(self.veth.close)
            spec = SwitchSpec(name=f"pt-{kind}", target="python" if kind == "python-process" else "bmv2",
                              ports=self.veth.switch_ifaces, device_id=device_id,
                              grpc_address=f"127.0.0.1:{free_tcp_port()}", cpu_port=cpu_port,
                              engine=engine if kind == "python-process" else None,
                              log_dir=self.log_dir, extra_args=extra_args)
            self.process = self._stack.enter_context(SwitchProcess(spec, record))
            self.client = P4RuntimeClient(spec.grpc_address, device_id=device_id).connect()
            self._stack.callback(self.client.close)
            self.schema = _load_pipeline(self.client, artifact)
        except BaseException:
            self._stack.close()
            raise

    def log_text(self) -> str:
        """What the switch has logged so far."""
        return "".join(p.read_text(errors="replace") for p in self.log_dir.glob("*.log"))

    def send(self, port: int, frame: bytes, *, expect: int | None = None) -> Outputs:
        self.veth.drain()
        self.veth.send(port, frame)
        return self.veth.collect(expect=expect)

    def close(self) -> None:
        self._stack.close()


@contextlib.contextmanager
def open_target(kind: str, artifact: Artifact, ports: Sequence[int] = (1, 2, 3, 4), *,
                device_id: int = 1, cpu_port: int = CPU_PORT,
                engine: str = "python", extra_args: tuple[str, ...] = (),
                log_dir: Path | None = None,
                server_options: ServerOptions | None = None,
                super_packets: bool = False) -> Iterator[PacketTarget]:
    """Start a target of ``kind`` with ``artifact`` loaded; always torn down on exit.

    ``engine`` (``python``, ``native`` or ``auto``) selects the packet engine of the Python
    target, in process or as a process; ``bmv2`` ignores it. ``extra_args`` are more options
    for a switch process, which writes its output (and BMv2 its log) into ``log_dir`` when
    given (else into a temporary folder, for :meth:`ProcessTarget.log_text`). With
    ``super_packets`` (a switch process of the Python target) the switch and the test's ends
    of the veths carry ``virtio_net_hdr`` (``mlfabric-switch --super-packets``).
    ``server_options`` tune the in-process Python target's P4Runtime server.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown target kind {kind!r}: choose one of {KINDS}")
    target: PacketTarget
    if kind == "python":
        target = InProcessTarget(artifact, device_id=device_id, cpu_port=cpu_port, engine=engine,
                                 server_options=server_options, ports=ports)
    else:
        target = ProcessTarget(kind, artifact, ports, device_id=device_id, cpu_port=cpu_port,
                               engine=engine, extra_args=extra_args, log_dir=log_dir,
                               super_packets=super_packets)
    try:
        yield target
    finally:
        target.close()
