"""Veth pairs that connect a switch process to the test: one pair per switch port.

The switch attaches to the ``s`` end, the test sends and receives on the ``t`` end through
an AF_PACKET socket. IPv6 is disabled on both ends so that the kernel stays silent.

Every frame the test sends leaves from one CPU. A veth hands a sent frame to its peer through
the backlog of the CPU that sent it (``netif_rx``), and each CPU's backlog is drained by its
own softirq: on a loaded machine that softirq is deferred to ``ksoftirqd``, and a frame sent
after the thread moved to the other CPU reaches the switch first. Sent from one CPU, the
frames queue in one backlog and arrive in the order they were sent, whatever the load.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from controller.errors import EmulationError
from controller.netstate import NetRecord
from pybmv2.ports import Port, PortSpec

__all__ = ["VethPorts"]


def _run(*cmd: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise EmulationError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")


def _wait_up(iface: str, timeout: float = 5.0) -> None:
    """Wait until the kernel reports ``iface`` up: until then (linkwatch runs up to a second
    after ``ip link set up``) its queueing discipline is noop and drops what is sent."""
    path = f"/sys/class/net/{iface}/operstate"
    deadline = time.monotonic() + timeout
    while True:
        with open(path) as f:
            if f.read().strip() == "up":
                return
        if time.monotonic() > deadline:
            raise EmulationError(f"{iface} is not up after {timeout:.0f} s")
        time.sleep(0.01)


@contextmanager
def on_one_cpu(cpu: int) -> Iterator[None]:
    """The calling thread runs on ``cpu`` only, then goes back to the CPUs it had."""
    allowed = os.sched_getaffinity(0)
    if allowed == {cpu}:
        yield
        return
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


class VethPorts:
    """Create veth pairs for ``ports``; :meth:`close` deletes them (so does the record)."""

    def __init__(self, ports: Iterable[int], record: NetRecord, prefix: str | None = None, *,
                 super_packets: bool = False) -> None:
        tag = prefix or f"pt{os.getpid() % 10000}"
        self.switch_ifaces: dict[int, str] = {}
        self._test_ports: dict[int, Port] = {}
        #: the CPU every frame is sent from (see the module's docstring)
        self.send_cpu = min(os.sched_getaffinity(0))
        try:
            for port in ports:
                s, t = f"{tag}s{port}", f"{tag}t{port}"
                record.add_link(s)
                _run("ip", "link", "add", s, "type", "veth", "peer", "name", t)
                for iface in (s, t):
                    subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{iface}.disable_ipv6=1"],
                                   capture_output=True, check=False)
                    _run("ip", "link", "set", iface, "up")
                self.switch_ifaces[port] = s
                self._test_ports[port] = Port(PortSpec(port, t), super_packets=super_packets)
            for s, t in ((s, f"{tag}t{port}") for port, s in self.switch_ifaces.items()):
                _wait_up(s)
                _wait_up(t)
        except BaseException:
            self.close()
            raise

    def test_iface(self, port: int) -> str:
        """The test's end of ``port``'s pair (where frames for the switch are sent)."""
        return self._test_ports[port].spec.iface

    def send(self, port: int, frame: bytes) -> None:
        """Send ``frame`` into the switch's ``port``, after every frame sent before it."""
        with on_one_cpu(self.send_cpu):
            self._test_ports[port].send(frame)

    def receive(self, port: int, timeout: float) -> bytes | None:
        """The next frame arriving on ``port`` within ``timeout`` seconds."""
        p = self._test_ports[port]
        deadline = time.monotonic() + timeout
        while True:
            frame = p.receive()
            if frame is not None:
                return frame
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            select.select([p.fileno()], [], [], left)

    def send_raw(self, port: int, data: bytes) -> None:
        """Send ``data`` as it is on ``port``'s socket (a ``virtio_net_hdr`` and a
        super-packet, on ports opened with ``super_packets``)."""
        with on_one_cpu(self.send_cpu):
            self._test_ports[port].sock.send(data)

    def receive_raw(self, port: int, timeout: float) -> bytes | None:
        """What ``port``'s socket hands over next, as it is (with its ``virtio_net_hdr`` on
        ports opened with ``super_packets``), within ``timeout`` seconds."""
        sock = self._test_ports[port].sock
        ready, _, _ = select.select([sock], [], [], timeout)
        return sock.recv(1 << 17) if ready else None

    def drain(self) -> None:
        for p in self._test_ports.values():
            while p.receive() is not None:
                pass

    def collect(self, *, quiet: float = 0.15, limit: float = 2.0, expect: int | None = None) -> list[tuple[int, bytes]]:
        """Frames arriving on any port until ``quiet`` seconds pass with none, or, when
        ``expect`` is given, until that many arrive (waiting up to ``limit`` for them: on a
        loaded machine a frame can take longer than ``quiet``, and a test that stopped
        listening then would fail by chance)."""
        out: list[tuple[int, bytes]] = []
        by_fd = {p.fileno(): (n, p) for n, p in self._test_ports.items()}
        deadline = time.monotonic() + limit
        last = time.monotonic()
        while time.monotonic() < deadline:
            if expect is not None and len(out) >= expect:
                break
            if expect is not None and len(out) < expect:
                wait = deadline - time.monotonic()
            else:
                wait = min(quiet - (time.monotonic() - last), deadline - time.monotonic())
            if wait <= 0:
                break
            ready, _, _ = select.select(list(by_fd), [], [], wait)
            for fd in ready:
                number, port = by_fd[fd]
                while (frame := port.receive()) is not None:
                    out.append((number, frame))
                    last = time.monotonic()
        return out

    def remove(self, port: int) -> None:
        """Delete ``port``'s pair now (as Mininet deletes a link under a running switch)."""
        self._test_ports.pop(port).close()
        _run("ip", "link", "del", self.switch_ifaces.pop(port))

    def close(self) -> None:
        for p in self._test_ports.values():
            p.close()
        self._test_ports.clear()
        for s in self.switch_ifaces.values():
            subprocess.run(["ip", "link", "del", s], capture_output=True, check=False)
        self.switch_ifaces.clear()
