"""The intra-server "NVLink": GPUs of one server talk over Unix sockets, paced to a modelled
per-GPU rate, so that the emulated network carries only the network's bytes.

Before, they talked TCP over the host's loopback, shaped by htb to rails x the NVLink rate:
every byte crossed the whole TCP/IP stack twice, at 8x the NIC rate, and cost the machine
more than the bytes the fabric carried. A Unix socket is two copies and no protocol; the
rate comes from a model instead of a qdisc:

- each GPU has an NVLink **egress** and an **ingress** of ``bytes_per_s`` each (an NVSwitch
  crossbar: any GPU to any other, each port at its own rate; no shared bus);
- a sender, after handing a piece to the socket, waits until its egress clock has let that
  many bytes go (``egress = max(egress, now) + n / rate``);
- a receiver, after taking a piece, waits until its ingress clock has let them in, so two
  GPUs sending to one at once share its ingress, and a piece is seen no earlier than the
  model delivers it.

Both clocks are the process's (one process per GPU), shared by its threads. A rate of 0
paces nothing (the bytes move as fast as the machine copies them).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from workloads.framing import Connection
from workloads.plan import Rank

__all__ = ["NvlinkClock", "PacedConnection", "abstract_address"]


def abstract_address(port: int, rank: int) -> str:
    """The abstract Unix address rank ``rank`` of the job on ``port`` listens on for its
    server's GPUs (abstract names live in the host's network namespace and vanish with the
    socket: nothing to clean up).

    >>> abstract_address(7000, 3)
    '\\x00mlfabric-nvlink-7000-3'
    """
    return f"\0mlfabric-nvlink-{port}-{rank}"


class NvlinkClock:
    """One GPU's NVLink egress and ingress at ``bytes_per_s`` each (0: no pacing)."""

    def __init__(self, bytes_per_s: float) -> None:
        if bytes_per_s < 0:
            raise ValueError(f"an NVLink rate must be >= 0 bytes/s, got {bytes_per_s}")
        self.bytes_per_s = bytes_per_s
        self._lock = threading.Lock()
        self._egress = 0.0
        self._ingress = 0.0
        #: bytes paced so far, each way (the tests' and the reports' count)
        self.sent = 0
        self.received = 0

    def _reserve(self, which: str, n: int, now: float) -> float:
        """Advance one clock by ``n`` bytes from ``now``; when they are through."""
        with self._lock:
            if which == "egress":
                self.sent += n
                start = max(self._egress, now)
                self._egress = start + n / self.bytes_per_s if self.bytes_per_s else now
                return self._egress
            self.received += n
            start = max(self._ingress, now)
            self._ingress = start + n / self.bytes_per_s if self.bytes_per_s else now
            return self._ingress

    def reserve(self, which: str, n: int) -> float:
        """Advance the ``egress`` or ``ingress`` clock by ``n`` bytes from now; when they are
        through (for a caller that waits without sleeping)."""
        return self._reserve(which, n, time.monotonic())

    def sent_bytes(self, n: int) -> None:
        """``n`` bytes handed to a socket: return once the egress would have sent them."""
        self._wait(self._reserve("egress", n, time.monotonic()))

    def received_bytes(self, n: int) -> None:
        """``n`` bytes taken from a socket: return once the ingress would have let them in."""
        self._wait(self._reserve("ingress", n, time.monotonic()))

    @staticmethod
    def _wait(until: float) -> None:
        left = until - time.monotonic()
        if left > 0:
            time.sleep(left)


class PacedConnection(Connection):
    """A :class:`~workloads.framing.Connection` to a GPU of the same server over a Unix
    socket, every byte paced by this GPU's :class:`NvlinkClock`."""

    def __init__(self, sock: socket.socket, me: Rank, peer: Rank, timeout_s: float, clock: NvlinkClock) -> None:
        super().__init__(sock, me, peer, timeout_s)
        self.clock = clock

    def _who(self) -> str:
        return f"rank {self.peer.rank} ({self.peer.ip}) over NVLink"

    def send_all(self, data: memoryview) -> None:
        off, size = 0, len(data)
        while off < size:
            n = self._send_some(data[off:off + _PIECE])
            self.clock.sent_bytes(n)
            off += n

    def _send_some(self, piece: Any) -> int:
        try:
            return int(self.sock.send(piece))
        except OSError as exc:
            raise self._fail(exc, f"sending {len(piece)} bytes to") from exc

    def recv_some(self, view: memoryview, what: str) -> int:
        n = super().recv_some(view, what)
        self.clock.received_bytes(n)
        return n


#: the largest piece a paced send hands the socket at once: small enough that the egress
#: clock, not the socket's buffer, sets the pace (1 MiB at the 128 MB/s of 8 x 128 Mbit/s
#: NICs is 8 ms)
_PIECE = 256 << 10
